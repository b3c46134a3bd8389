"""Mutable per-job run state, owned by the engine (policies read it, never write it)."""

from __future__ import annotations

import math
from typing import Any

from mypy_extensions import mypyc_attr

from sim.errors import SimError
from sim.model import JobSpec, JobStatus

WAITING = JobStatus.WAITING
HELD = JobStatus.HELD
PENDING = JobStatus.PENDING
RUNNING = JobStatus.RUNNING
RETRYING = JobStatus.RETRYING
COMPLETED = JobStatus.COMPLETED
FAILED = JobStatus.FAILED
KILLED = JobStatus.KILLED
REJECTED = JobStatus.REJECTED
FINAL = (COMPLETED, FAILED, KILLED, REJECTED, JobStatus.UNFINISHED)

# the job state machine of the seeds: every other transition is an engine bug
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    WAITING: frozenset({HELD, PENDING, REJECTED, KILLED}),
    HELD: frozenset({PENDING, KILLED}),
    # pending -> failed: stopped by the policy once too often without progress
    # (`stop_retries`), failed at the end of that scheduling pass
    PENDING: frozenset({RUNNING, REJECTED, KILLED, FAILED}),
    RUNNING: frozenset({PENDING, RETRYING, COMPLETED, FAILED, KILLED}),
    RETRYING: frozenset({PENDING, KILLED}),
}


@mypyc_attr(allow_interpreted_subclasses=True)
class JobState:
    """Run state of one job: placement, progress as work at a rate, and accounting.

    Progress is piecewise linear: `work` ideal-seconds were done at `seg_start`, and the
    job advances at `rate` from then on (a `seg_start` in the future is a restore pause).
    `version` grows on every change of rate or placement, so completion events scheduled
    for an older version are recognised as stale and dropped. It is also a promise to
    policies: `work`, `rate` and `seg_start` never change without a bump (`Progress`
    bumps in `set_rate` and `stop`, and every `advance` is followed by one of them in the
    same step), so a policy may keep a running job's progress fields until its version
    moves (srtf's and themis-ftf's kept columns do).
    """

    __slots__ = (
        "idx", "spec", "status", "gpus", "milli", "rate", "work", "seg_start", "run_start",
        "ckpt_work", "version", "first_start", "end_time", "queued_since", "queue_time",
        "held_since", "run_time", "locality_level", "reason", "started_before",
        "attempt_start", "gpu_seconds", "suspended", "host", "node", "__dict__",
    )

    # Fields few jobs ever change: class defaults, read from here until a job sets its
    # own value (kept in its instance dict, created then), so a million jobs do not each
    # carry them (about 100 bytes a job).
    preemptions: int = 0
    migrations: int = 0
    restarts: int = 0
    lost_work: float = 0.0
    retry_at: float = math.nan
    deps_left: int = 0  # dependencies not yet completed
    # indices of jobs that depend on this one (see `add_dependent`)
    dependents: list[int] | tuple[()] = ()
    doom: str = ""  # set when a dependency ended for good before this job arrived
    group: tuple[int, ...] | None = None  # GPUs of its co-location group, if any
    fit_gpus: int = 0  # an elastic job too large at num_gpus: the size it is placed at
    # restarts (node failures and policy stops) in a row without checkpointed progress
    # between them, and how many of those were policy stops (sim.lifecycle)
    futile_restarts: int = 0
    futile_stops: int = 0
    ckpt_at_restart: float = 0.0  # checkpointed work at the last such restart
    # a running job with roles: where each gang task runs (sim.model.TaskPlacement)
    tasks: tuple[Any, ...] = ()
    # and its non-gang tasks, (role, index) -> None (waiting), (placement, end, since)
    # (running) or () (done for this attempt); None for every other job (sim.roles)
    side: dict[tuple[str, int], Any] | None = None

    def __init__(self, idx: int, spec: JobSpec) -> None:
        self.idx = idx
        self.spec = spec
        self.status: JobStatus = WAITING
        self.gpus: tuple[int, ...] = ()
        self.milli = 0
        self.rate = 0.0
        self.work = 0.0
        self.seg_start = 0.0
        self.run_start = 0.0
        self.ckpt_work = 0.0
        self.version = 0
        self.first_start = math.nan
        self.end_time = math.nan
        self.queued_since = spec.submit_time
        self.queue_time = 0.0
        self.held_since = 0.0
        self.run_time = 0.0
        self.gpu_seconds = 0.0
        self.locality_level = 0
        self.reason = ""
        self.started_before = False
        self.attempt_start = 0.0
        self.suspended = False
        self.host: tuple[float, float, float] = (0.0, 0.0, 0.0)  # CPUs, memory, disk held
        self.node = -1  # host node of a running CPU-only job holding host resources, else -1

    def add_dependent(self, idx: int) -> None:
        """Note that job `idx` depends on this one."""
        if type(self.dependents) is tuple:
            self.dependents = []
        self.dependents.append(idx)  # type: ignore[union-attr]

    @property
    def job_id(self) -> str:
        """The trace's job id."""
        return self.spec.job_id

    @property
    def remaining_work(self) -> float:
        """Ideal-seconds of work left as of `seg_start`."""
        return max(0.0, self.spec.duration - self.work)

    def progress_at(self, now: float) -> float:
        """Work done by `now` (no side effects)."""
        if self.status != RUNNING or now <= self.seg_start:
            return self.work
        return min(self.spec.duration, self.work + self.rate * (now - self.seg_start))

    def __repr__(self) -> str:
        return f"JobState({self.job_id!r}, {self.status}, gpus={self.gpus}, work={self.work:g})"


def transition(job: JobState, new: JobStatus) -> None:
    """Move a job along the state machine; an impossible transition is an engine bug."""
    if new not in TRANSITIONS.get(job.status, ()):
        raise SimError(f"engine bug: job {job.job_id!r} cannot go from {job.status} to {new}")
    job.status = new
