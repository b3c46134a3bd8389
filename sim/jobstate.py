"""Mutable per-job run state, owned by the engine (policies read it, never write it)."""

from __future__ import annotations

import math
from typing import Any, Final

from mypy_extensions import mypyc_attr

from schedlab.sim.errors import SimError
from schedlab.sim.model import PLAIN_REST, JobSpec, JobStatus, request_class

# Final: compiled, each is a static of the module, not a lookup by name at each use
WAITING: Final = JobStatus.WAITING
HELD: Final = JobStatus.HELD
PENDING: Final = JobStatus.PENDING
RUNNING: Final = JobStatus.RUNNING
RETRYING: Final = JobStatus.RETRYING
COMPLETED: Final = JobStatus.COMPLETED
FAILED: Final = JobStatus.FAILED
KILLED: Final = JobStatus.KILLED
REJECTED: Final = JobStatus.REJECTED
FINAL: Final = (COMPLETED, FAILED, KILLED, REJECTED, JobStatus.UNFINISHED)

# the job state machine of the seeds: every other transition is an engine bug
TRANSITIONS: Final[dict[JobStatus, frozenset[JobStatus]]] = {
    WAITING: frozenset({HELD, PENDING, REJECTED, KILLED}),
    HELD: frozenset({PENDING, KILLED}),
    # pending -> failed: stopped by the policy once too often without progress
    # (`stop_retries`), failed at the end of that scheduling pass
    PENDING: frozenset({RUNNING, REJECTED, KILLED, FAILED}),
    RUNNING: frozenset({PENDING, RETRYING, COMPLETED, FAILED, KILLED}),
    RETRYING: frozenset({PENDING, KILLED}),
}


_PLAIN_REST: Final = PLAIN_REST  # a static of the compiled module: no lookup by name
_JOB_SPEC: Final = JobSpec  # likewise (plain_spec runs about ten times a job)


def plain_spec(spec: Any) -> bool:
    """Whether `spec` is a JobSpec whose rare fields are all at their defaults.

    One identity test where the engine's per-job checks would read a dozen Python
    properties (`schedlab.sim.model.PLAIN_REST`); a subclass of JobSpec, which may read its fields
    otherwise, is never plain.
    """
    return type(spec) is _JOB_SPEC and getattr(spec, "_rest", None) is _PLAIN_REST


_PLAIN_CLASSES: Final[dict[tuple[int, str], tuple[Any, ...]]] = {}
"""`request_class` of plain specs by (GPUs, GPU type): nothing else of theirs is in it."""


def _class_of(spec: JobSpec) -> tuple[Any, ...]:
    """`schedlab.sim.model.request_class`, looked up here (compiled) for a plain spec."""
    if not plain_spec(spec):
        return request_class(spec)
    key = (spec.num_gpus, spec.gpu_type)
    ck = _PLAIN_CLASSES.get(key)
    if ck is None:
        ck = request_class(spec)
        if len(_PLAIN_CLASSES) < 4096:
            _PLAIN_CLASSES[key] = ck
    return ck


@mypyc_attr(allow_interpreted_subclasses=True)
class _Rare:
    """The fields of a `JobState` few jobs ever change (its properties of these names).

    Every job shares one instance of the defaults (`_DEFAULTS`, never written) until it
    changes one: a million jobs do not each carry them (about 90 bytes a job, compiled).
    """

    __slots__ = ("preemptions", "migrations", "restarts", "lost_work", "deps_left",
                 "dependents", "doom", "futile_restarts", "futile_stops", "ckpt_at_restart",
                 "side", "node", "fit_gpus")

    def __init__(self) -> None:
        self.preemptions = 0
        self.migrations = 0
        self.restarts = 0
        self.lost_work = 0.0
        self.deps_left = 0
        self.dependents: list[int] | tuple[()] = ()
        self.doom = ""
        self.futile_restarts = 0
        self.futile_stops = 0
        self.ckpt_at_restart = 0.0
        self.side: dict[tuple[str, int], Any] | None = None
        self.node = -1
        self.fit_gpus = 0


_DEFAULTS: Final = _Rare()


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
        "held_since", "run_time", "locality_level", "reason", "started_before", "suspended",
        "attempt_start", "gpu_seconds", "host", "group", "tasks", "_rare", "_ck", "_ck_of",
    )

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
        self.ckpt_work = 0.0  # work saved at the last checkpoint (each advance, if it has any)
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
        self.suspended = False  # beside the other flag: one word for both, compiled
        self.attempt_start = 0.0
        self.host: tuple[float, float, float] = (0.0, 0.0, 0.0)  # CPUs, memory, disk held
        self.group: tuple[int, ...] | None = None  # GPUs of its co-location group, if any
        # a running job with roles: where each gang task runs (schedlab.sim.model.TaskPlacement)
        self.tasks: tuple[Any, ...] = ()
        self._rare = _DEFAULTS  # the fields few jobs change: shared until one is set
        # `request_class` of the spec `_ck_of` (None: not asked yet)
        self._ck: tuple[Any, ...] = ()
        self._ck_of: JobSpec | None = None

    # The rare fields, one property each: mypyc compiles properties (not descriptors
    # shared by all), and interpreted code reads and sets them as plain attributes.

    def _own(self) -> _Rare:
        """This job's own rare fields (a copy of the shared defaults on first change)."""
        rare = self._rare
        if rare is _DEFAULTS:
            rare = self._rare = _Rare()
        return rare

    @property
    def preemptions(self) -> int:
        """Times the policy stopped it."""
        return self._rare.preemptions

    @preemptions.setter
    def preemptions(self, value: int) -> None:
        self._own().preemptions = value

    @property
    def migrations(self) -> int:
        """Times it moved to other GPUs."""
        return self._rare.migrations

    @migrations.setter
    def migrations(self, value: int) -> None:
        self._own().migrations = value

    @property
    def restarts(self) -> int:
        """Restarts after a failure."""
        return self._rare.restarts

    @restarts.setter
    def restarts(self, value: int) -> None:
        self._own().restarts = value

    @property
    def lost_work(self) -> float:
        """Ideal-seconds of work lost to failures and preemptions."""
        return self._rare.lost_work

    @lost_work.setter
    def lost_work(self, value: float) -> None:
        self._own().lost_work = value

    @property
    def deps_left(self) -> int:
        """Dependencies not yet completed."""
        return self._rare.deps_left

    @deps_left.setter
    def deps_left(self, value: int) -> None:
        self._own().deps_left = value

    @property
    def dependents(self) -> list[int] | tuple[()]:
        """Indices of jobs that depend on this one (`add_dependent`)."""
        return self._rare.dependents

    @dependents.setter
    def dependents(self, value: list[int] | tuple[()]) -> None:
        self._own().dependents = value

    @property
    def doom(self) -> str:
        """Set when a dependency ended for good before this job arrived."""
        return self._rare.doom

    @doom.setter
    def doom(self, value: str) -> None:
        self._own().doom = value

    @property
    def futile_restarts(self) -> int:
        """Restarts in a row (node failures, policy stops) without checkpointed progress."""
        return self._rare.futile_restarts

    @futile_restarts.setter
    def futile_restarts(self, value: int) -> None:
        self._own().futile_restarts = value

    @property
    def futile_stops(self) -> int:
        """How many of `futile_restarts` were policy stops."""
        return self._rare.futile_stops

    @futile_stops.setter
    def futile_stops(self, value: int) -> None:
        self._own().futile_stops = value

    @property
    def ckpt_at_restart(self) -> float:
        """Checkpointed work at the last such restart."""
        return self._rare.ckpt_at_restart

    @ckpt_at_restart.setter
    def ckpt_at_restart(self, value: float) -> None:
        self._own().ckpt_at_restart = value

    @property
    def side(self) -> dict[tuple[str, int], Any] | None:
        """A running job with roles: its non-gang tasks, by (role, index).

        None (waiting), (placement, end, since) (running) or () (done for this attempt);
        None for every other job (schedlab.sim.roles).
        """
        return self._rare.side

    @side.setter
    def side(self, value: dict[tuple[str, int], Any] | None) -> None:
        self._own().side = value

    @property
    def node(self) -> int:
        """Host node of a running CPU-only job holding host resources, else -1."""
        return self._rare.node

    @node.setter
    def node(self, value: int) -> None:
        if self._rare is not _DEFAULTS or value != -1:  # each release resets it
            self._own().node = value

    @property
    def fit_gpus(self) -> int:
        """An elastic job too large at num_gpus: the size it is placed at (else 0)."""
        return self._rare.fit_gpus

    @fit_gpus.setter
    def fit_gpus(self, value: int) -> None:
        if self._rare is not _DEFAULTS or value != 0:
            self._own().fit_gpus = value

    def add_dependent(self, idx: int) -> None:
        """Note that job `idx` depends on this one."""
        if type(self.dependents) is tuple:
            self.dependents = []
        self.dependents.append(idx)  # type: ignore[union-attr]

    def request_class(self) -> tuple[Any, ...]:
        """`schedlab.sim.model.request_class` of the job's spec, computed once per spec.

        Asked at arrival, on queueing and by the walks of many policies while the job
        waits; the spec's fields behind it are read through Python properties, the cached
        tuple is not. Kept while the job is in the run, so a stopped job queued again
        reuses it, and dropped when it ends (`forget_class`): a tuple for every job ever
        run would be ~120 bytes a job at a million jobs.
        """
        spec = self.spec
        if self._ck_of is not spec:
            self._ck = _class_of(spec)
            self._ck_of = spec
        return self._ck

    def forget_class(self) -> None:
        """Drop the cached `request_class` (asked again, it is computed again)."""
        self._ck = ()
        self._ck_of = None

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
