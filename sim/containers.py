"""Container jobs (Kubernetes Job semantics, issue 16): a trace job run as task runs.

A container job (`completions` given) never enters the queue itself. Once submitted
(and its dependencies done) it spawns task runs: sub-jobs with the job's own request
(`num_gpus`, CPUs, memory, disk per run) and `duration` per run, which the policy
schedules, preempts and places like any single-task job. At most `parallelism` runs are
live at once, and never more than the completions still needed.

- A run that finishes is a success; the job completes at its `completions`-th success.
- A run's attempt that fails (`fail_at`, the engine's `failure_rate`) is a failed task
  run: `Never` ends the run and a new one replaces it (queued, placed again, from zero
  work); `OnFailure` restarts it in place (same GPUs and node, after `retry_delay`, from
  its last checkpoint). More than `backoff_limit` failed runs fail the whole job
  (`BackoffLimitExceeded`), killing its live runs.
- `active_deadline` (and `max_lifetime`, whichever is sooner) s after the first run
  starts, the job is killed with its live runs (`DeadlineExceeded`).
- A preemption, suspension or node failure requeues a run (neither success nor
  failure); a run rejected by the policy, or left unschedulable when the run settles,
  rejects the job (`killed` once some run had started). A policy's Reject ends the job
  at the same instant but after the policy's pass, so its other decisions of the pass
  (about the job's other runs) stay valid.
- `fail_at` applies to every attempt of every run, as for any job; the pass-through
  column `failed_runs` (k) narrows it to runs 0..k-1, each failing once.

Task runs are `JobState`s appended to the run's job table (ids `<job>#<k>`) so that
decisions, the queue and policies' indexes see them as jobs; their events are recorded
under the container job's id with `run=<k>` in the detail, and only the container job
has a row in jobs.parquet. Its totals (run time, GPU time, preemptions, lost work) add
up its runs; its queueing delay is the time it had no run holding resources (from
submission to the first start, and any later gap with every live run waiting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from schedlab.sim.agenda import Due
from schedlab.sim.faces import ContainerHost
from schedlab.sim.jobstate import (
    COMPLETED,
    FAILED,
    KILLED,
    PENDING,
    REJECTED,
    RUNNING,
    JobState,
    transition,
)
from schedlab.sim.model import EventKind, JobSpec, RestartPolicy, is_missing
from schedlab.sim.registry import POLICIES

__all__ = ["FAILED_RUNS", "Containers", "failed_runs", "run_fail_at"]

FAILED_RUNS = "failed_runs"
"""Pass-through column of a container job: how many of its task runs fail at `fail_at`."""

_HOLD = frozenset({EventKind.START, EventKind.RESUME})
_DROP = frozenset({EventKind.PREEMPT, EventKind.SUSPEND, EventKind.FAIL, EventKind.FINISH,
                   EventKind.KILL, EventKind.REJECT})


def failed_runs(spec: JobSpec) -> int | None:
    """The job's `failed_runs` (None when not given: every attempt fails at `fail_at`)."""
    for name, value in spec.extra:
        if name == FAILED_RUNS:
            return None if is_missing(value) else int(float(value))
    return None


def run_fail_at(spec: JobSpec, k: int) -> float | None:
    """`fail_at` of the container job's task run `k` (see the module docstring)."""
    n = failed_runs(spec)
    return spec.fail_at if n is None or k < n else None


def _walk(job: JobState, *steps: Any) -> None:
    """Move a container job through the given statuses, each a legal transition."""
    for status in steps:
        transition(job, status)


@dataclass(slots=True)
class _Job:
    """Run state of one container job: its counters and live task runs."""

    parent: JobState
    succeeded: int = 0
    failed: int = 0  # failed task runs (attempts), against backoff_limit
    next_run: int = 0
    runs: list[int] = field(default_factory=list)  # every task run's index, in order
    live: dict[int, None] = field(default_factory=dict)  # task runs not yet final
    holding: set[int] = field(default_factory=set)  # task runs holding resources
    wait_since: float = math.nan  # when the job last had no run holding resources
    ending: bool = False
    doom: str = ""  # a run was rejected within the policy's pass: why the job ends after it


class Containers:
    """Runs the container jobs of one run as task runs (see the module docstring)."""

    def __init__(self, run: ContainerHost) -> None:
        self.run = run
        self.jobs: dict[int, _Job] = {}  # container job index -> its state
        self.owner: dict[int, tuple[_Job, int]] = {}  # task run index -> (job, run number)

    def refuse(self, spec: JobSpec) -> str:
        """Why the run's policy cannot take this container job ('' when it can)."""
        pol = self.run.sim.policy
        name = repr(pol.name)
        ok = getattr(pol, "container_jobs", True)
        param = getattr(pol, "ordering_param", None)
        if ok and param:  # a policy ordering its queues by another (hived's `order`)
            inner = pol.settings[param]
            ok = getattr(POLICIES.get(inner), "container_jobs", True)
            name = f"{inner!r} (the {param} of {pol.name!r})"
        if ok:
            return ""
        return (f"policy {name} does not support container jobs (completions "
                f"{spec.completions}): its own per-job structures cannot take task runs")

    # --- the container job ---

    def begin(self, parent: JobState) -> None:
        """The job is submitted and free of dependencies: spawn its first task runs."""
        job = self.jobs[parent.idx] = _Job(parent)
        # running while active, though it holds nothing itself: never queued and never
        # among the running jobs, so policies that scan statuses for arrivals pass it by
        _walk(parent, PENDING, RUNNING)
        job.wait_since = self.run.now
        self._fill(job)

    def _fill(self, job: _Job) -> None:
        """Spawn task runs until `parallelism` (or the completions still needed) are live."""
        s = job.parent.spec
        assert s.completions is not None
        want = min(s.parallelism, s.completions - job.succeeded)
        while len(job.live) < want:
            self._spawn(job)

    def _spawn(self, job: _Job) -> None:
        run = self.run
        k = job.next_run
        job.next_run += 1
        p = job.parent.spec
        jid = f"{p.job_id}#{k}"
        while jid in run.by_id:  # a trace job already has that id
            jid += "#"
        spec = replace(p, job_id=jid, completions=None, parallelism=1, active_deadline=None,
                       restart_policy=RestartPolicy.NEVER, backoff_limit=6, depends_on=(),
                       max_lifetime=None, max_retries=0, fail_at=run_fail_at(p, k))
        child = JobState(len(run.jobs), spec)
        run.jobs.append(child)
        run.by_id[jid] = child
        self.owner[child.idx] = (job, k)
        job.runs.append(child.idx)
        job.live[child.idx] = None
        run.record(child, EventKind.SUBMIT)
        run.enqueue(child)

    def deadline(self, parent: JobState) -> None:
        """`active_deadline` (or `max_lifetime`) since the first start is up: kill the job."""
        job = self.jobs.get(parent.idx)
        if job is None or job.ending:
            return
        self.run.events_processed += 1
        if job.doom:
            self._reject(job, job.doom)
            return
        s = parent.spec
        ad, ml = s.active_deadline, s.max_lifetime
        if ad is not None and (ml is None or ad <= ml):
            why = f"DeadlineExceeded: active_deadline {ad:g}s since the first start"
        else:
            why = "max_lifetime"
        self._end(job, KILLED, EventKind.KILL, why)

    def _end(self, job: _Job, status: Any, kind: EventKind, why: str) -> None:
        """End the container job for good: its live task runs are killed first."""
        run = self.run
        job.ending = True
        for idx in list(job.live):
            child = run.jobs[idx]
            if child.status == RUNNING:
                run.progress.advance(child)
                run.release(child)
            elif child.status == PENDING:
                run.dequeue(child)
            else:  # waiting out its retry delay: queueing too
                child.queue_time += run.now - child.queued_since
            run.finalize(child, KILLED, EventKind.KILL, why)
        self._close_wait(job)
        run.finalize(job.parent, status, kind, why)

    # --- task runs (hooks of schedlab.sim.lifecycle) ---

    def record(self, child: JobState, kind: EventKind, detail: str = "", *,
               notify: bool = True) -> None:
        """A task run's event: under its container job's id with `run=k`; the policy hears it.

        Also keeps the job's waiting clock: it waits while no run holds resources.
        """
        run = self.run
        job, k = self.owner[child.idx]
        tag = f"run={k}"
        run.recorder.event(child, kind, f"{detail};{tag}" if detail else tag,
                           job_id=job.parent.spec.job_id)
        if kind in _HOLD:
            self._close_wait(job)
            job.holding.add(child.idx)
            if kind is EventKind.START and not job.parent.started_before:
                self._first_start(job, child)
        elif kind in _DROP and child.idx in job.holding:
            job.holding.discard(child.idx)
            if not job.holding:
                job.wait_since = run.now
        if notify and run.notify is not None:
            run.notify(run.ctx, child, kind)

    def _first_start(self, job: _Job, child: JobState) -> None:
        run = self.run
        p = job.parent
        p.first_start = run.now
        p.started_before = True
        p.locality_level = child.locality_level
        s = p.spec
        limits = [t for t in (s.active_deadline, s.max_lifetime) if t is not None]
        if limits:
            run.agenda.schedule(run.now + min(limits), Due.LIFETIME, p.idx, -1)

    def _close_wait(self, job: _Job) -> None:
        if not math.isnan(job.wait_since):
            job.parent.queue_time += self.run.now - job.wait_since
            job.wait_since = math.nan

    def run_failed(self, child: JobState) -> float:
        """A task run's attempt failed (`fail_at`, `failure_rate`); GPU-seconds of work lost.

        `OnFailure` restarts it in place (its own GPUs, after `retry_delay`, from its last
        checkpoint) while the failed runs stay within `backoff_limit`; otherwise the run
        ends failed, losing all its work (a replacement starts from zero), and `ended`
        counts it.
        """
        run = self.run
        job, _ = self.owner[child.idx]
        s = job.parent.spec
        run.progress.advance(child)
        gpus = len(child.gpus) * child.milli / 1000
        if s.restart_policy == RestartPolicy.ON_FAILURE and job.failed + 1 <= s.backoff_limit:
            job.failed += 1
            now = run.now
            lost = child.work - child.ckpt_work
            child.lost_work += lost
            child.work = child.ckpt_work
            self.record(child, EventKind.FAIL, f"attempt failed; lost_work={lost:g}",
                        notify=False)
            if failed_runs(s) is not None:  # the run has failed its once
                child.spec = replace(child.spec, fail_at=None)
            delay = run.engine_params["retry_delay"]
            child.attempt_start = now + delay
            run.progress.set_rate(child, resume_at=now + delay, reschedule=False)
            # the resume says what a start says: its share group, or a CPU-only run's node
            mode = run.colocation.mode(child)
            note = f"{mode} N={len(run.colocation.members(child))};" if mode else ""
            if child.node >= 0:
                note = f"node={run.topo.nodes[child.node].name};"
            self.record(child, EventKind.RESUME,
                        f"{note}in place" + (f";retry_delay={delay:g}" if delay else ""),
                        notify=False)
            run.progress.schedule_finish(child)
            run.schedule_failure(child)
            return lost * gpus
        lost = child.work
        child.lost_work += lost
        self.record(child, EventKind.FAIL, f"attempt failed; lost_work={lost:g}")
        run.release(child)
        run.finalize(child, FAILED, None, "attempt failed")
        return lost * gpus

    def ended(self, child: JobState) -> None:
        """A task run reached a final status: count it, refill, or end the container job."""
        job, k = self.owner[child.idx]
        del job.live[child.idx]
        job.holding.discard(child.idx)
        if job.ending or job.doom:
            return
        s = job.parent.spec
        assert s.completions is not None
        if child.status == COMPLETED:
            job.succeeded += 1
            if job.succeeded >= s.completions:
                self._end(job, COMPLETED, EventKind.FINISH, "")
                return
        elif child.status == FAILED:
            job.failed += 1
            if job.failed > s.backoff_limit:
                self._end(job, FAILED, EventKind.FAIL,
                          f"BackoffLimitExceeded: {job.failed} failed task runs, "
                          f"backoff_limit {s.backoff_limit}")
                return
        elif child.status == REJECTED:
            why = f"task run {k}: {child.reason}"
            if self.run.in_pass:  # the policy may still decide on its other runs: end
                job.doom = why  # the job at this instant, after the pass (as a lifetime)
                self.run.agenda.schedule(self.run.now, Due.LIFETIME, job.parent.idx, -1)
            else:
                self._reject(job, why)
            return
        if not job.holding and math.isnan(job.wait_since):
            job.wait_since = self.run.now
        self._fill(job)

    def _reject(self, job: _Job, why: str) -> None:
        """A task run was rejected: the job ends, `rejected` if no run ever started."""
        if job.parent.started_before:
            self._end(job, KILLED, EventKind.KILL, why)
        else:  # it never ran: rejected, by the legal way back through pending
            _walk(job.parent, PENDING)
            self._end(job, REJECTED, EventKind.REJECT, why)

    # --- results ---

    def totals(self, parent: JobState, end: float) -> tuple[float, float, float]:
        """Queueing delay, run time and GPU-seconds of a container job up to `end`.

        Run time and GPU time add up every task run (failed and killed ones too), a
        running one up to `end`; the queueing delay counts an open wait up to `end`.
        """
        job = self.jobs.get(parent.idx)
        if job is None:
            return parent.queue_time, 0.0, 0.0
        queue = parent.queue_time
        if not math.isnan(job.wait_since):
            queue += end - job.wait_since
        run_time = gpu_s = 0.0
        for idx in job.runs:
            c = self.run.jobs[idx]
            run_time += c.run_time
            gpu_s += c.gpu_seconds
            if c.status == RUNNING:
                held = end - c.held_since
                run_time += held
                gpu_s += held * len(c.gpus) * c.milli / 1000
        return queue, run_time, gpu_s

    def counts(self, parent: JobState) -> tuple[int, int, int, float]:
        """Preemptions, migrations, restarts and lost work of a container job's runs.

        Restarts are its failed task runs plus node-failure requeues of its runs.
        """
        job = self.jobs.get(parent.idx)
        if job is None:
            return 0, 0, 0, 0.0
        runs = [self.run.jobs[i] for i in job.runs]
        return (sum(c.preemptions for c in runs), sum(c.migrations for c in runs),
                job.failed + sum(c.restarts for c in runs), sum(c.lost_work for c in runs))
