"""Shortest job first and shortest remaining time first: oracle baselines that know durations.

Both read each job's `duration` (ideal seconds) from the trace, as an oracle would.
`sjf` never preempts: pending jobs start shortest first, and a job that does not fit is
skipped, not waited for (Tiresias' simulator schedules its `shortest` baselines the same
way). `srtf` preempts: a pending job whose remaining work is smaller than a running job's
takes that job's GPUs when it needs them (`stop`: suspend, i.e. checkpoint then stop, by
default; `preempt` loses the work since the job's last checkpoint). With `weight=gpus`
the size is GPU-seconds (duration x GPUs), as in Tiresias' `shortest-gpu`.

Helios' simulator (HeliosArtifact, `framework/QSSF Service/policies/sjf.py`, `srtf.py`)
runs both differently, and one parameter value each reproduces it: `blocked=stop` (sjf:
the walk stops at the first job that does not fit, head-of-line blocking) and
`admit=gpus` (srtf: every pass ranks the waiting and running jobs together by remaining
time, admits them greedily while their GPU count fits the cluster's GPUs, places the
admitted waiting ones and stops every running job it did not admit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from operator import attrgetter
from typing import Final

import numpy as np
from mypy_extensions import mypyc_attr

from schedlab.policies.priority import STOP_PARAM, Ctx, Key, PriorityPolicy
from schedlab.policies.victims import ArrayPool, Spans, VictimPool, gpu_spans
from schedlab.sim.agenda import drain_watch
from schedlab.sim.context import start_on
from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.jobstate import PENDING, RUNNING, JobState
from schedlab.sim.model import Decision, JobSpec, Preempt, Suspend, Unschedulable
from schedlab.sim.params import Param, as_choice

__all__ = ["BLOCKED_PARAM", "SjfPolicy", "SrtfPolicy", "blocking_pass"]


def _size(spec: JobSpec, work: float, weight: str) -> float:
    return work * spec.num_gpus * spec.gpu_share if weight == "gpus" else work


_STATE: Final = attrgetter("work", "rate", "seg_start")  # what a running key is computed from
_VERSION: Final = attrgetter("version")  # bumped whenever `_STATE` of a running job changes

WEIGHT_PARAM = Param("none", as_choice("none", "gpus"),
                     "job size: none = run time, gpus = GPU time (run time x GPUs)")

BLOCKED_PARAM = Param("skip", as_choice("skip", "stop"),
                      "a waiting job that does not fit: skip = later jobs may start, stop = "
                      "nobody behind it starts this pass (head-of-line blocking, as Helios' "
                      "simulator)")

ADMIT_PARAM = Param("victims", as_choice("victims", "gpus", "blox"),
                    "victims = a waiting job stops running jobs with more work left when it "
                    "needs their GPUs; gpus = Helios' simulator: waiting and running jobs "
                    "ranked together by remaining time are admitted while their GPUs fit the "
                    "cluster's count, and every running job not admitted is stopped; blox = "
                    "Blox's placement walk: a waiting job that does not fit stops running "
                    "jobs from the end of the order one at a time until it fits, and the "
                    "walk ends at a job that still does not fit")


def _start_cpu_only(policy: PriorityPolicy, ctx: Ctx) -> Iterator[Decision]:
    """Sync the policy's index with the events, then start the CPU-only jobs that fit."""
    for job in policy.feed.changed(ctx):
        policy._observe(ctx, job)
    policy.before_walk(ctx)
    left = []
    while policy.cpu_only:
        job = policy.cpu_only.popleft()
        if job.status != PENDING:
            continue
        got = ctx.place(job)
        if isinstance(got, Unschedulable):
            left.append(job)
            continue
        yield start_on(job.job_id, got)
        policy._observe(ctx, job)
    policy.cpu_only.extend(left)


def blocking_pass(policy: PriorityPolicy, ctx: Ctx) -> Iterator[Decision]:
    """A pass of `policy` that starts jobs in key order until the first that does not fit.

    Head-of-line blocking, as Helios' simulator walks its sorted queue (`else: break`):
    one placement attempt per job started, plus one for the job that blocks.
    """
    yield from _start_cpu_only(policy, ctx)
    # the queue as it is now, walked in order: under an owner that applies the decisions
    # later (hived's `order`) a started job is still queued while the walk goes on
    for _, idx in policy.queued():
        job = ctx.job_at(idx)
        if job.status != PENDING:
            continue
        got = ctx.place(job)
        if isinstance(got, Unschedulable):
            break
        yield start_on(job.job_id, got)
        policy._observe(ctx, job)  # leaves the queue
    policy.after_walk(ctx)


@mypyc_attr(allow_interpreted_subclasses=True)
class SjfPolicy(PriorityPolicy):
    """Shortest job first (oracle durations), non-preemptive, skipping jobs that do not fit."""

    name = "sjf"
    description = "shortest job first by trace duration (oracle); non-preemptive"
    params = {"weight": WEIGHT_PARAM, "blocked": BLOCKED_PARAM}

    def pending_key(self, ctx: Ctx, job: JobState) -> Key:
        """(size, submit time): ties go to the earlier arrival."""
        return (_size(job.spec, job.spec.duration, self.p["weight"]), job.spec.submit_time)

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """The priority walk (`blocked=skip`), or a walk that stops at the first misfit."""
        if self.p["blocked"] == "stop":
            yield from blocking_pass(self, ctx)
        else:
            yield from super().schedule(ctx)


@mypyc_attr(allow_interpreted_subclasses=True)
class SrtfPolicy(PriorityPolicy):
    """Shortest remaining time first (oracle), preempting jobs with more work left."""

    name = "srtf"
    description = "shortest remaining time first (oracle); preempts longer running jobs"
    params = {"weight": WEIGHT_PARAM, "stop": STOP_PARAM, "admit": ADMIT_PARAM}
    preemptive = True

    def pending_key(self, ctx: Ctx, job: JobState) -> Key:
        """(remaining size, 1, submit): a running job wins a tie (its 0 sorts first)."""
        rem = job.spec.duration - job.work
        return (_size(job.spec, rem, self.p["weight"]), 1, job.spec.submit_time)

    def running_key(self, ctx: Ctx, job: JobState) -> Key:
        """(remaining size now, 0, submit)."""
        s = job.spec
        rem = s.duration - job.progress_at(ctx.now)
        if self.p["weight"] == "gpus":
            rem *= s.num_gpus * s.gpu_share
        return (rem, 0, s.submit_time)

    def attach(self, ctx: Ctx) -> None:
        """The index of `PriorityPolicy`, and the running jobs' columns for their keys."""
        super().attach(ctx)
        self._cols = _Columns(ctx)
        self._spans: dict[int, tuple[tuple[int, ...], Spans]] = {}  # see VictimPool
        # admit=gpus: when each job last joined the waiting or running jobs (a counter)
        self._since: dict[int, int] = {}
        self._seq = 0

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """The priority walk (`admit=victims`), or Helios' admission (`admit=gpus`)."""
        if self.p["admit"] == "gpus":
            yield from self._admit_by_gpus(ctx)
        elif self.p["admit"] == "blox":
            yield from self._blox_walk(ctx)
        else:
            yield from super().schedule(ctx)

    def _admit_by_gpus(self, ctx: Ctx) -> Iterator[Decision]:
        """Helios' SRTF pass (`srtf.py`, `simulate` steps 3-5).

        The waiting and running GPU jobs sorted by remaining size (ties: waiting before
        running, then the one that joined its list first, as Helios' stable sort of
        `que_list + run_list`) are admitted while their GPUs fit what is left of the
        cluster's GPU count (placement is not asked); a job that does not fit is passed
        over and the count goes on. Every running job not admitted is stopped, then the
        admitted waiting jobs are placed in that order (one the placer cannot place
        waits). The whole set is ranked every pass: Helios' simulator does it every
        second.
        """
        yield from _start_cpu_only(self, ctx)
        since = self._since
        cands: list[tuple[float, int, int, JobState]] = []
        for key, idx in self.queued():
            cands.append((key[0], 0, since.get(idx, 0), ctx.job_at(idx)))
        for job in ctx.running().values():
            if job.spec.num_gpus > 0:
                cands.append((self.running_key(ctx, job)[0], 1, since.get(job.idx, 0), job))
        cands.sort(key=lambda c: c[:3])
        quota = float(ctx.cluster.total_gpus)
        admitted: list[JobState] = []
        stopped: list[JobState] = []
        for _, running, _, job in cands:
            need = job.spec.num_gpus * job.spec.gpu_share  # (a GPU share counts its part)
            if need <= quota:
                quota -= need
                if not running:
                    admitted.append(job)
            elif running:
                stopped.append(job)
        kind = Suspend if self.p["stop"] == "suspend" else Preempt
        for job in stopped:
            yield kind(job.job_id, "srtf: not admitted (admit=gpus)")
            self._observe(ctx, job)
        for job in admitted:
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                continue
            yield start_on(job.job_id, got)
            self._observe(ctx, job)
        self.after_walk(ctx)

    def _blox_walk(self, ctx: Ctx) -> Iterator[Decision]:
        """Blox's SRTF round: `schedulers/srtf.py`, then `JobPlacement.place`.

        (msr-fiddle/blox, `placement/placement.py`.) The waiting and running GPU jobs by
        remaining size (ties: earlier arrival) are walked in order: a running job keeps
        its GPUs; a waiting one is placed, and when it does not fit, the running jobs
        after it in the order are stopped one at a time from the end, placing it again
        after each (those stopped stay stopped and may start again later in the walk);
        a job that still does not fit ends the walk.
        """
        yield from _start_cpu_only(self, ctx)
        order: list[tuple[float, float, int, JobState]] = []
        for key, idx in self.queued():
            job = ctx.job_at(idx)
            order.append((key[0], job.spec.submit_time, idx, job))
        on: set[int] = set()
        for job in ctx.running().values():
            if job.spec.num_gpus > 0:
                order.append((self.running_key(ctx, job)[0], job.spec.submit_time, job.idx,
                              job))
                on.add(job.idx)
        order.sort(key=lambda c: c[:3])
        kind = Suspend if self.p["stop"] == "suspend" else Preempt
        for i, (_, _, _, job) in enumerate(order):
            if job.idx in on:
                continue
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                for _, _, _, victim in reversed(order[i + 1:]):
                    if victim.idx in on:
                        yield kind(victim.job_id, "srtf: after it in Blox's order (admit=blox)")
                        self._observe(ctx, victim)
                        on.discard(victim.idx)
                        got = ctx.place(job)
                        if not isinstance(got, Unschedulable):
                            break
            if isinstance(got, Unschedulable):
                break
            yield start_on(job.job_id, got)
            self._observe(ctx, job)
            on.add(job.idx)
        self.after_walk(ctx)

    def on_status(self, ctx: Ctx, job: JobState, old: str | None) -> None:
        """A job that starts or stops running is noted for the columns (`_Columns.note`).

        One that stopped leaves the spans cache (it holds running jobs only). With
        `admit=gpus` the job's place in the order it joined the waiting or running jobs
        is kept.
        """
        if job.status in (PENDING, RUNNING):
            self._seq += 1
            self._since[job.idx] = self._seq
        else:
            self._since.pop(job.idx, None)
        if old == RUNNING:
            self._cols.note(job)
            self._spans.pop(job.idx, None)
        elif job.status == RUNNING:
            self._cols.note(job)

    def _pool(self, ctx: Ctx) -> Callable[[], VictimPool] | None:
        """The running jobs keyed by `running_key`, computed for all of them at once.

        The same floats as `running_key` job by job (`JobState.progress_at` in numpy),
        from columns kept across passes (`_Columns`): a pass that needs victims reads one
        `version` per running job and re-reads only the jobs that changed, and the pool
        keeps the keys as columns (`ArrayPool`), so a victim search reads only the
        entries it visits.
        """
        def build() -> VictimPool:
            cols = self._cols
            n = cols.sync(ctx.running())
            if not n:
                return VictimPool([], self._spans)
            f = cols.floats[:n]
            work, rate, seg, dur = f[:, _WORK], f[:, _RATE], f[:, _SEG], f[:, _DUR]
            now = ctx.now
            done = np.where(now <= seg, work, np.minimum(dur, work + rate * (now - seg)))
            rem = dur - done
            if self.p["weight"] == "gpus":
                rem = rem * f[:, _WEIGHT]
            i = cols.ints[:n]
            return ArrayPool(rem, f[:, _SUB], i[:, _IDX], self._spans, cols.entries[:n],
                             None if cols.unranked else i[:, _RANK])
        return build


# the float columns of `_Columns`, then its int columns (Final: compiled, inlined)
_WORK: Final = 0
_RATE: Final = 1
_SEG: Final = 2
_DUR: Final = 3
_SUB: Final = 4
_WEIGHT: Final = 5
_IDX: Final = 0
_RANK: Final = 1
_VER: Final = 2


class _Columns:
    """The running GPU jobs of a run, one slot (row) each, with what their keys read.

    A slot holds the job with its spans (`gpu_spans` of its GPUs), its trace constants
    (duration, submit time, GPUs x share, and its rank in the order of (submit time,
    idx) of the jobs there were at the start: the pool's tie-break) and its `_STATE` as
    last read, with the `version` it was read at.
    The jobs the policy observed starting or stopping (`SrtfPolicy.on_status`) are
    noted, and join or leave at the next `sync` as they then run or not (a job that
    started and stopped in between costs a note); the last slot fills a freed one. A
    running job's work, rate, segment start and GPUs change only together with a bump
    of its `version` (`Progress.set_rate` and `stop`, which every change of placement
    goes through; an in-place restart of a container job's task run is one, without an
    event), so `sync` re-reads only the slots of the jobs the run's progress watch
    (`ctx.watch_progress`) saw bumped since the last sync. Should the watch overflow,
    versions only grow: when the slots' versions sum to what they summed when read,
    every slot still holds what its job holds, so a pass then reads one `version` per
    running job and re-reads only the jobs that changed.
    """

    def __init__(self, ctx: PolicyContext) -> None:
        self.n = 0
        self.slot: dict[int, int] = {}  # job idx -> slot
        self.members: list[JobState] = []  # the job of each slot
        self.others: set[int] = set()  # running jobs that ask for no GPU
        self.noted: dict[int, JobState] = {}  # jobs that started or stopped since `sync`
        self.vsum = 0  # sum of the `_VER` column
        n = ctx.num_jobs
        sub = np.fromiter((ctx.job_at(i).spec.submit_time for i in range(n)), dtype=float,
                          count=n)
        self.ranks = np.empty(n, dtype=np.int64)  # by job idx
        self.ranks[np.lexsort((np.arange(n), sub))] = np.arange(n)
        self.unranked = 0  # members spawned later (a container job's task runs): no rank
        cap = 64
        self.floats = np.zeros((cap, 6))
        self.ints = np.zeros((cap, 3), dtype=np.int64)
        self.gpu_node = ctx.topology.gpu_node
        self.entries = np.empty(cap, dtype=object)  # (job, spans) of each slot, for the pool
        # the jobs whose version moved since the last sync (`watch_progress`)
        self.moved: set[int] = ctx.watch_progress()

    def _grow(self) -> None:
        """Twice the room (the first `n` slots kept)."""
        n = self.n
        floats, ints = np.zeros((2 * n, 6)), np.zeros((2 * n, 3), dtype=np.int64)
        entries = np.empty(2 * n, dtype=object)
        floats[:n], ints[:n], entries[:n] = self.floats[:n], self.ints[:n], self.entries[:n]
        self.floats, self.ints, self.entries = floats, ints, entries

    def note(self, job: JobState) -> None:
        """A job started or stopped running (it joins or leaves at the next `sync`)."""
        self.noted[job.idx] = job

    def join(self, job: JobState) -> None:
        """A job runs (a job asking for no GPU is only counted)."""
        s = job.spec
        if s.num_gpus <= 0:
            self.others.add(job.idx)
            return
        if job.idx in self.slot:
            return
        p = self.n
        if p == len(self.ints):
            self._grow()
        self.n = p + 1
        self.slot[job.idx] = p
        self.members.append(job)
        rank = -1
        if job.idx < len(self.ranks):
            rank = int(self.ranks[job.idx])
        else:
            self.unranked += 1
        self.ints[p] = (job.idx, rank, 0)
        self.floats[p, _DUR:] = (s.duration, s.submit_time, s.num_gpus * s.gpu_share)
        self._read(p)

    def leave(self, job: JobState) -> None:
        """A job does not run any more; the last slot moves into its place."""
        self.others.discard(job.idx)
        p = self.slot.pop(job.idx, None)
        if p is None:
            return
        ints = self.ints
        self.vsum -= int(ints[p, _VER])
        if ints[p, _RANK] < 0:
            self.unranked -= 1
        last = self.n - 1
        if p != last:
            moved = self.members[last]
            self.slot[moved.idx] = p
            self.members[p] = moved
            ints[p] = ints[last]
            self.floats[p] = self.floats[last]
            self.entries[p] = self.entries[last]
        self.members.pop()
        self.entries[last] = None
        self.n = last

    def _read(self, p: int) -> None:
        """Re-read slot `p`'s progress fields, spans and version."""
        job = self.members[p]
        self.floats[p, :_DUR] = _STATE(job)
        self.entries[p] = (job, gpu_spans(self.gpu_node, job.gpus))
        v = job.version
        self.vsum += v - int(self.ints[p, _VER])
        self.ints[p, _VER] = v

    def sync(self, run: Mapping[int, JobState]) -> int:
        """Bring the slots up to date with the running jobs `run`; their number.

        The noted jobs join or leave; the slots then follow the statuses the policy
        observed. Should the engine's count of running jobs differ, they are rebuilt from
        `run` (a safety net: every start and stop is observed before a pass builds its
        pool).
        """
        if self.noted:
            for job in self.noted.values():
                if job.status == RUNNING:
                    self.join(job)
                else:
                    self.leave(job)
            self.noted.clear()
        if len(run) != self.n + len(self.others):
            for job in [j for j in self.members if j.idx not in run]:
                self.leave(job)
            self.others = set()
            for job in run.values():
                self.join(job)
        n = self.n
        moved = drain_watch(self.moved, n)
        if moved is None:  # every slot's version, then the slots that moved
            if n and sum(map(_VERSION, self.members)) != self.vsum:
                ver = np.fromiter(map(_VERSION, self.members), dtype=np.int64, count=n)
                for p in np.flatnonzero(self.ints[:n, _VER] != ver).tolist():
                    self._read(p)
            return n
        slot, ints, members = self.slot, self.ints, self.members
        for idx in moved:
            p = slot.get(idx, -1)
            if p >= 0 and members[p].version != ints[p, _VER]:
                self._read(p)
        return n
