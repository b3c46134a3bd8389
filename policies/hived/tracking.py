"""What changed in the engine since a policy's last pass, without scanning the queue.

The engine starts jobs only when the policy says so; between passes it only takes jobs
away from the running set (finish, failure, kill) and adds jobs to the queue (arrivals,
retries, held jobs whose dependencies completed, preempted jobs). `JobTracker` follows
both: `notify` lists the jobs events touched, arrivals are read by index (jobs arrive in
index order), a set difference catches unreported ends when the running set shrank, and
the queue is rescanned only when its size disagrees with the tracker's (pending jobs
killed, held jobs released). Under a context narrowed to part of the run (hived's per-VC
queues, which offer `owns(job)`), pending jobs it does not own are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from mypy_extensions import mypyc_attr

from schedlab.policies.base import Ctx, owner
from schedlab.sim.jobstate import HELD, PENDING, RETRYING, JobState
from schedlab.sim.model import Reject

LEFT: Final = frozenset({"finish", "fail", "kill", "retry"})  # events after which a job may move


@mypyc_attr(allow_interpreted_subclasses=True)
class JobTracker:
    """Running and pending jobs a policy knows of, each with the policy's own tag."""

    def __init__(self) -> None:
        # job index -> tag (e.g. its queue): the jobs the policy started (it adds them)
        # and has not yet seen end; a job that stopped leaves it at the next `sync`
        self.running: dict[int, Any] = {}
        # job index -> tag: the pending jobs the policy took in (`enqueue` adds them,
        # `drop` takes them out); `sync` keeps its size plus the refusals equal to the
        # context's pending count (rescanning the queue when they differ)
        self.pending: dict[int, Any] = {}
        # indices of jobs an event may have ended or requeued since the last `sync`
        # (finish, fail, kill, retry), repeats allowed; emptied by `sync`
        self.left: list[int] = []
        self.watch: set[int] = set()  # held or retrying jobs, pending later
        # jobs 0 .. next_arrival - 1 were seen arrive (trace order is submit order)
        self.next_arrival = 0
        self._owns: Callable[[JobState], bool] | None = None  # of the pass's context
        self._next_time = float("-inf")  # submit time of job `next_arrival` (-inf: look)

    def notify(self, job: JobState, kind: str) -> None:
        """Remember a job an event touched (checked at the next pass)."""
        if kind in LEFT:
            self.left.append(job.idx)

    def sync(self, ctx: Ctx, gone: Callable[[int, Any], None],
             enqueue: Callable[[JobState], str], drop: Callable[[JobState], None]
             ) -> Iterator[Reject]:
        """Report ended jobs to `gone`, new pending ones to `enqueue`; yield rejections.

        `gone(idx, tag)` is called after the job left `running`; `enqueue(job)` must put
        the job in `pending` (with its tag) or return why it is refused; `drop(job)` must
        take a job that is no longer pending out of `pending` (and the policy's queues).
        """
        yield from self.collect(ctx, gone, enqueue, drop)

    def collect(self, ctx: Ctx, gone: Callable[[int, Any], None],
                enqueue: Callable[[JobState], str], drop: Callable[[JobState], None]
                ) -> list[Reject]:
        """`sync` without the generator: does the same and returns the rejections."""
        rejects: list[Reject] = []
        # a context narrowed to part of the run (an ordering inside hived) owns some jobs
        # only: arrivals and released dependents of other queues are not ours
        self._owns = owner(ctx)
        running = ctx.running()
        if self.left:
            left = self.left
            self.left = []
            for idx in sorted(set(left)):
                if idx in self.running and idx not in running:
                    self._gone(ctx, idx, gone, enqueue, rejects)
                    continue
                job = ctx.job_at(idx)
                if idx in self.pending and job.status != PENDING:
                    drop(job)  # it left the queue for good (failed at the end of a pass)
                self._found(job, enqueue, rejects)
        if len(running) < len(self.running):  # ends the engine did not report
            for idx in sorted(self.running.keys() - running.keys()):
                self._gone(ctx, idx, gone, enqueue, rejects)
        now = ctx.now
        if now >= self._next_time:
            self._arrivals(ctx, now, enqueue, rejects)
        if len(self.pending) + len(rejects) != ctx.pending_count:
            for idx in sorted(self.watch):
                self._found(ctx.job_at(idx), enqueue, rejects)
            if len(self.pending) + len(rejects) != ctx.pending_count:
                self._resync(ctx, enqueue, drop, rejects)
        return rejects

    def _arrivals(self, ctx: Ctx, now: float, enqueue: Callable[[JobState], str],
                  rejects: list[Reject]) -> None:
        """Take the jobs submitted by `now`, in index order (jobs arrive in that order).

        Remembers the next job's submit time (a job at an index never changes), so a
        pass before it asks nothing; past the last job it looks again at every pass.
        """
        job_at = ctx.job_at
        while True:
            try:
                job = job_at(self.next_arrival)
            except IndexError:  # none yet (the run may add jobs later, e.g. task runs)
                self._next_time = float("-inf")
                return
            if job.spec.submit_time > now:
                self._next_time = job.spec.submit_time
                return
            self.next_arrival += 1
            self._found(job, enqueue, rejects)

    def requeued(self, job: JobState) -> None:
        """A job we stopped went back to the engine's queue (or waits to retry)."""
        if job.status in (HELD, RETRYING):
            self.watch.add(job.idx)

    def _gone(self, ctx: Ctx, idx: int, gone: Callable[[int, Any], None],
              enqueue: Callable[[JobState], str], rejects: list[Reject]) -> None:
        gone(idx, self.running.pop(idx))
        self._found(ctx.job_at(idx), enqueue, rejects)

    def _found(self, job: JobState, enqueue: Callable[[JobState], str],
               rejects: list[Reject]) -> None:
        if job.status == PENDING:
            self.watch.discard(job.idx)
            if self._owns is not None and not self._owns(job):
                return
            if job.idx not in self.pending:
                why = enqueue(job)
                if why:
                    rejects.append(Reject(job.job_id, why))
        elif job.status in (HELD, RETRYING):
            self.watch.add(job.idx)
        else:
            self.watch.discard(job.idx)

    def _resync(self, ctx: Ctx, enqueue: Callable[[JobState], str],
                drop: Callable[[JobState], None], rejects: list[Reject]) -> None:
        """Rebuild the pending index from the engine's queue (rare)."""
        pending = {j.idx: j for j in ctx.pending()}
        for idx in sorted(self.pending.keys() - pending.keys()):
            drop(ctx.job_at(idx))
        refused = {ctx.job(r.job_id).idx for r in rejects}
        for idx in sorted(pending.keys() - self.pending.keys() - refused):
            self._found(pending[idx], enqueue, rejects)
        self.watch = {i for i in self.watch if ctx.job_at(i).status in (HELD, RETRYING)}
