"""Data that crosses module boundaries: job specs, cell levels and policy decisions.

This module imports nothing of schedlab's own but `schedlab.sim.compact` (which imports nothing),
so traces, topologies, policies and the engine can all depend on it without cycles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import IntEnum, StrEnum
from typing import Any, Final

from schedlab.sim.compact import compact, exactly, layout, record

MILLI: Final = 1000  # inlined by the compiled modules
"""One whole GPU in milli-GPUs: capacity is counted in integers so shares never drift."""


class Level(IntEnum):
    """Cell levels of the cluster tree, bottom up (docs/contract.md#sec-3)."""

    GPU = 1
    SWITCH = 2
    SOCKET = 3
    NODE = 4
    RACK = 5
    CLUSTER = 6

    @classmethod
    def parse(cls, text: str) -> Level:
        """Level from its lowercase name ('switch') or number ('2')."""
        t = str(text).strip().lower()
        if t.isdigit() and int(t) in {lv.value for lv in cls}:
            return cls(int(t))
        try:
            return cls[t.upper()]
        except KeyError:
            names = ", ".join(lv.name.lower() for lv in cls)
            raise ValueError(f"unknown level {text!r}; known: {names}") from None

    @property
    def label(self) -> str:
        """Lowercase name used in files and tables."""
        return self.name.lower()


class RestartPolicy(StrEnum):
    """What a container job does with a failed task run (Kubernetes Job `restartPolicy`)."""

    NEVER = "Never"  # a new task run replaces the failed one
    ON_FAILURE = "OnFailure"  # the failed task run restarts in place


@dataclass(frozen=True, slots=True)
class TaskRole:
    """One role of a job whose tasks differ (docs/contract.md#sec-2 `tasks`): `count` tasks alike.

    Each task sits on one node and asks `gpus` GPUs, `cpus` CPUs, `mem_gb` memory and
    `disk_gb` local disk. Roles with `gang` true start and stop together; a non-gang role
    (an evaluator) starts when it can. `duration` (s) overrides the job's when given.
    """

    role: str
    count: int = 1
    gpus: int = 0
    cpus: float = 0.0
    mem_gb: float = 0.0
    disk_gb: float = 0.0
    gang: bool = True
    duration: float | None = None


@compact(hot=("job_id", "submit_time", "num_gpus", "duration", "user", "vc", "gpu_type",
              "extra"))
@dataclass(frozen=True)
class JobSpec:
    """One job of a trace, in the canonical schema of docs/contract.md#sec-2.

    `duration` is the run time at ideal placement on dedicated GPUs of speed 1. A job
    naming a `model` has it computed at run start when the trace gives work instead
    (`num_steps` or `samples`): its run time alone on `num_gpus` consolidated GPUs of its
    type at its initial batch size (`schedlab.sim.perf`).
    Optional columns carry their SPEC defaults; `extra` holds pass-through columns.
    Only the fields every trace gives are the spec's own slots; the rest are shared
    with the specs that leave them alike (`schedlab.sim.compact`: 88 bytes a spec, not 320).
    """

    job_id: str
    submit_time: float
    num_gpus: int
    duration: float
    user: str = ""
    vc: str = "default"
    priority: int = 0
    gpu_type: str = ""
    num_cpus: float = 0.0
    mem_gb: float = 0.0
    gpus_per_task: int = 0  # 0 means "= num_gpus"; see `task_gpus`
    checkpoint_interval: float | None = None
    max_retries: int = 0
    fail_at: float | None = None
    max_lifetime: float | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    target_util: float | None = None  # scale on utilization toward this (None: not driven)
    scale_interval: float = 60.0  # s at least from a start or resize to a scale-out
    depends_on: tuple[str, ...] = ()
    locality_sensitivity: float = 1.0
    gpu_speeds: tuple[tuple[str, float], ...] = ()
    gpu_share: float = 1.0
    gpu_util: float = 1.0
    gpu_mem_gb: float = 0.0
    max_wait_hours: float = 0.0
    deadline: float | None = None  # s from trace start by which it should finish (SLA)
    disk_gb: float = 0.0  # local disk per task
    lazy_preemption: bool | None = None  # HiveD: may be downgraded, not preempted (None: run's)
    # jobs whose tasks differ (issue 16): the roles; () means one gang of identical tasks
    tasks: tuple[TaskRole, ...] = ()
    # container jobs (Kubernetes Job semantics); completions None = not a container job
    completions: int | None = None
    parallelism: int = 1
    active_deadline: float | None = None  # s from first start, then the job is killed
    restart_policy: RestartPolicy = RestartPolicy.NEVER
    backoff_limit: int = 6
    # a job whose speed comes from the run's performance model (docs/contract.md#sec-2)
    model: str = ""  # key into the run's `perf_model`; "" = speed from the factors above
    num_steps: float | None = None  # work in training steps (with `model`; or `samples`)
    samples: float | None = None  # work in samples
    batch_size: int | None = None  # global batch size (all GPUs), initial for `adaptive`
    adaptive: bool = False  # the job re-tunes its batch size for goodput (Pollux)
    extra: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @property
    def is_container(self) -> bool:
        """A container job (Kubernetes Job): task runs until `completions` succeed."""
        return self.completions is not None

    @property
    def task_gpus(self) -> int:
        """GPUs per task of the gang (defaults to the whole job)."""
        return self.gpus_per_task or self.num_gpus

    @property
    def num_tasks(self) -> int:
        """Tasks in the gang: num_gpus / gpus_per_task (1 for CPU-only jobs)."""
        return max(1, self.num_gpus // self.task_gpus) if self.num_gpus else 1

    @property
    def gpu_time(self) -> float:
        """GPU-seconds of ideal work: duration x GPUs (x share for fractional jobs)."""
        return self.duration * self.num_gpus * self.gpu_share

    def speed_on(self, gpu_type: str) -> float:
        """Relative speed of this job on a GPU type (1 when the trace does not say)."""
        for name, speed in self.gpu_speeds:
            if name == gpu_type:
                return speed
        return 1.0


def spec_builder(given: tuple[str, ...]) -> Callable[..., JobSpec]:
    """A fast JobSpec constructor taking the fields `given` (in field order), positionally.

    Every other field takes its default. For readers of millions of rows: the frozen
    dataclass `__init__` sets each of its fields through `object.__setattr__`; this one
    fills a twin class of the same slots with plain (specialized) slot stores, defaults as
    constants, and then makes the object a JobSpec (`__class__` assignment between
    identical slot layouts), about three times faster. When no rare field is given
    (`schedlab.sim.compact`), every spec built shares the default record. The result is an
    ordinary JobSpec.
    """
    names = [f.name for f in fields(JobSpec)]
    unknown = [g for g in given if g not in names]
    if unknown:
        raise ValueError(f"not JobSpec fields: {unknown}")
    if list(given) != [n for n in names if n in given]:
        raise ValueError("fields must be given in JobSpec field order")
    lay = layout(JobSpec)
    defaults = {f.name: f.default for f in fields(JobSpec)}
    env: dict[str, Any] = {f"_d_{n}": defaults[n] for n in names if n not in given}
    env.update(_spec=JobSpec, _lay=lay, _rest_default=lay.default_record)
    body = [f"        self.{n} = {n if n in given else '_d_' + n}" for n in lay.hot]
    if any(n in given for n in lay.rare):
        # a record per distinct given values (and types), when the layout shares it (so
        # `_seen` holds at most the layout's shared records: it is bounded with them)
        vals = "".join(f"{n}, " for n in lay.rare if n in given)
        types = "".join(f"type({n}), " for n in lay.rare if n in given)
        rest = "".join(f"{n if n in given else '_d_' + n}, " for n in lay.rare)
        env.update(_seen={}, _exactly=exactly)
        body += [f"        v = ({vals})",
                 f"        k = (v, ({types}))",
                 "        try:",
                 "            r = _seen.get(k)",
                 "        except TypeError:",  # an unhashable value: an own record
                 "            r = None",
                 "        if r is None:",
                 f"            r = _lay.record_of(({rest}))",
                 "            if r in _lay.sharable and _exactly(v):",
                 "                _seen[k] = r",
                 "        self._rest = r"]
    else:
        body.append("        self._rest = _rest_default")
    body.append("        self.__class__ = _spec")
    src = (f"class _Twin:\n    __slots__ = {(*lay.hot, '_rest')!r}\n"
           f"    def __init__(self{''.join(', ' + g for g in given)}):\n"
           + "\n".join(body) + "\n")
    exec(src, env)  # noqa: S102 - generated from the dataclass fields, no outside text
    twin = env["_Twin"]

    return twin


PLAIN_REST = layout(JobSpec).default_record
"""The record of rare fields (`schedlab.sim.compact`) of every spec that leaves them all at their
defaults: such a spec has no roles, shares, host asks, speeds, elasticity, checkpoints,
retries, failures, lifetime, dependencies, deadline or container semantics. Compiled
modules test it by identity (`schedlab.sim.jobstate.plain_spec`) instead of reading each field."""


def job_milli(job: JobSpec) -> int:
    """Milli-GPUs the job takes of each of its GPUs."""
    return MILLI if job.gpu_share >= 1.0 else max(1, round(job.gpu_share * MILLI))


_CLASSES: dict[tuple[int, str, int], tuple[Any, tuple[Any, ...]]] = {}
"""`request_class` by (GPUs, GPU type, id of the record of rare fields), with the record:
held here, it stays alive, so its id is never another's. Bounded by `_CLASSES_MAX`."""
_CLASSES_MAX = 4096


def request_class(spec: JobSpec) -> tuple[Any, ...]:
    """Jobs with equal requests fit or fail to fit in exactly the same cluster state.

    Every field of it but the GPUs and their type is a rare field (`schedlab.sim.compact`), which
    the specs alike share one record of: the class is looked up by that record rather
    than read field by field through Python properties (asked for every job a run
    queues). A subclass of `JobSpec` may read its fields otherwise, and is not looked up.
    """
    if type(spec) is JobSpec:
        rest = record(spec)
        key = (spec.num_gpus, spec.gpu_type, id(rest))
        got = _CLASSES.get(key)
        if got is not None and got[0] is rest:
            return got[1]
        ck = _request_class(spec)
        if len(_CLASSES) < _CLASSES_MAX:
            _CLASSES[key] = (rest, ck)
        return ck
    return _request_class(spec)


def _request_class(spec: JobSpec) -> tuple[Any, ...]:
    return (spec.num_gpus, spec.task_gpus, spec.gpu_type, spec.gpu_share, spec.num_cpus,
            spec.mem_gb, spec.disk_gb, spec.tasks)


def class_over_free(ck: tuple[Any, ...], free_whole: int) -> bool:
    """Whether a request class (`request_class`) of whole GPUs asks more than are free.

    Then none of its jobs fits anywhere, whatever the placer (`SchedContext.place` answers
    such a request at once).
    """
    return ck[0] > free_whole and ck[3] >= 1.0


def resized(spec: JobSpec, num_gpus: int) -> JobSpec:
    """The same job asking for another number of GPUs (elastic jobs), as one task.

    Its host asks scale with its GPUs: at k of n GPUs it holds k/n of the CPUs, memory
    and disk (all its tasks' disk) it holds at n, so shrinking never needs more per node.
    """
    if spec.num_gpus <= 0 or num_gpus == spec.num_gpus:
        return replace(spec, num_gpus=num_gpus, gpus_per_task=0)
    f = num_gpus / spec.num_gpus
    return replace(spec, num_gpus=num_gpus, gpus_per_task=0, num_cpus=spec.num_cpus * f,
                   mem_gb=spec.mem_gb * f, disk_gb=spec.disk_gb * spec.num_tasks * f)


def format_speeds(speeds: tuple[tuple[str, float], ...]) -> str:
    """Render gpu_speeds in the trace's `V100=1;P100=0.6` form."""
    return ";".join(f"{k}={v:g}" for k, v in speeds)


def is_missing(value: Any) -> bool:
    """True for None, NaN and empty strings: a cell that takes the column's default."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


# --- Policy decisions: frozen data returned by policies, applied only by the engine ---


class HostPlacement(tuple[int, ...]):
    """Where a CPU-only job runs: no GPUs, on host node `node` (its CPUs, memory, disk).

    A placer's answer for a job with `num_gpus` 0 that asks for CPUs, memory or disk. It
    is an empty tuple of GPU indices, so code that handles placements as GPU tuples keeps
    working; `Start(job_id, placement)` takes the node from it.
    """

    node: int

    def __new__(cls, node: int) -> HostPlacement:
        """The placement on node index `node`."""
        self = super().__new__(cls, ())
        self.node = int(node)
        return self

    def __repr__(self) -> str:
        return f"HostPlacement(node={self.node})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (HostPlacement, (self.node,))


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    """Where one task of a job with roles runs: its role, index in the role, node, GPUs.

    A task sits on one node: its `gpus` (none for a CPU-only role such as TensorFlow's
    `ps`) are on `node`, and it holds its role's CPUs, memory and disk there.
    """

    role: str
    index: int
    node: int
    gpus: tuple[int, ...] = ()


class RolePlacement(tuple[int, ...]):
    """A placer's answer for a job with roles: the gang's GPUs (sorted), task by task.

    The tuple is every GPU of the gang's tasks, so code that handles placements as GPU
    tuples (counts, `Start(job_id, placement)`) keeps working; `tasks` says which task
    goes where, and `Start`/`Resume` take it from here.
    """

    tasks: tuple[TaskPlacement, ...]

    def __new__(cls, gpus: tuple[int, ...], tasks: tuple[TaskPlacement, ...]
                ) -> RolePlacement:
        """The placement of these tasks on these GPUs."""
        self = super().__new__(cls, gpus)
        self.tasks = tuple(tasks)
        return self

    def __repr__(self) -> str:
        return f"RolePlacement({tuple(self)}, tasks={self.tasks})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (RolePlacement, (tuple(self), self.tasks))


def _take_tasks(d: Any) -> None:
    """A Start/Resume given a RolePlacement as its GPUs: plain GPUs plus its tasks."""
    gpus = d.gpus
    if d.tasks and d.tasks != gpus.tasks:
        raise ValueError(f"{type(d).__name__} {d.job_id!r}: tasks given twice, and they "
                         "differ from the placement's")
    object.__setattr__(d, "tasks", gpus.tasks)
    object.__setattr__(d, "gpus", tuple(gpus))


def _take_node(d: Any) -> None:
    """A Start/Resume given a HostPlacement as its GPUs: no GPUs, on its node."""
    gpus = d.gpus
    if d.node not in (-1, gpus.node):
        raise ValueError(f"{type(d).__name__} {d.job_id!r}: node {d.node} given, the "
                         f"placement is on node {gpus.node}")
    object.__setattr__(d, "node", gpus.node)
    object.__setattr__(d, "gpus", ())


@dataclass(frozen=True, slots=True)
class Start:
    """Start (or restart) a pending job on exactly these GPU indices, all at once.

    `share` puts the job on GPUs that running jobs already hold, as a co-location group:
    "timeshare" (Gandiva time-slicing: members take turns, each about 1/N of the time)
    or "pack" (members run concurrently and interfere, by their `gpu_util`).
    `node` is the host node of a CPU-only job that asks for CPUs, memory or disk (-1:
    none; the placer's `HostPlacement` given as `gpus` sets it). `tasks` places each
    gang task of a job with roles (docs/contract.md#sec-2 `tasks`) on its node; the placer's
    `RolePlacement` given as `gpus` sets it, and `gpus` is then the gang's GPUs.
    """

    job_id: str
    gpus: tuple[int, ...]
    share: str = ""
    node: int = -1
    tasks: tuple[TaskPlacement, ...] = ()

    def __post_init__(self) -> None:
        t = type(self.gpus)
        if t is HostPlacement:
            _take_node(self)
        elif t is RolePlacement:
            _take_tasks(self)


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop a running job and requeue it; work since its last checkpoint is lost."""

    job_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Suspend:
    """Suspend a running job; it checkpoints first when `checkpoint_on_suspend` is set."""

    job_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Resume:
    """Resume a preempted or suspended job on these GPUs (same as Start for such a job)."""

    job_id: str
    gpus: tuple[int, ...]
    share: str = ""
    node: int = -1
    tasks: tuple[TaskPlacement, ...] = ()

    def __post_init__(self) -> None:
        t = type(self.gpus)
        if t is HostPlacement:
            _take_node(self)
        elif t is RolePlacement:
            _take_tasks(self)


@dataclass(frozen=True, slots=True)
class Migrate:
    """Move a running job to other GPUs, paying `pause` s (default: the restore overhead)."""

    job_id: str
    gpus: tuple[int, ...]
    pause: float | None = None


@dataclass(frozen=True, slots=True)
class Resize:
    """Change the GPUs of a running elastic job (within min_gpus..max_gpus).

    The job pays `pause` s (default: the restore overhead) to checkpoint and restore.
    """

    job_id: str
    gpus: tuple[int, ...]
    pause: float | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Refuse a pending job for good, with the reason recorded in its result row."""

    job_id: str
    reason: str


Decision = Start | Preempt | Suspend | Resume | Migrate | Resize | Reject


@dataclass(frozen=True, slots=True)
class Await:
    """Not a decision: the policy hands control out of the run, mid-pass, for an answer.

    A stepping driver (`schedlab.sim.engine.Run.advance`, e.g. the Gym environment) yields it
    back to its caller and resumes the pass when asked; `Simulation.run` has nobody to
    answer and refuses it. Nothing of the run changes while it waits.
    """

    reason: str = ""

# Priority level names accepted in the trace's `priority` column (the HAI platform's
# levels); AUTO (-1) takes the highest level at which the user still has quota room.
PRIORITY_NAMES: dict[str, int] = {
    "EXTREME_HIGH": 50, "VERY_HIGH": 40, "HIGH": 30, "ABOVE_NORMAL": 20, "NORMAL": 10,
    "UNDER_NORMAL": 8, "BELOW_NORMAL": 5, "LOW": 0, "AUTO": -1,
}



# --- Placement: what a placer answers ---


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """A "no" from a placer: why, and whether freeing GPUs (preemption) could help."""

    reason: str
    resolvable: bool


Placement = tuple[int, ...] | Unschedulable
"""GPU indices for the whole gang (sorted), a `HostPlacement` for a CPU-only job that asks
for host resources, a `RolePlacement` for a job with roles, or why not."""


# --- Statuses and event kinds (docs/contract.md#sec-5); StrEnums compare equal to their strings ---


class JobStatus(StrEnum):
    """Where a job is in its lifecycle; the last five are final (jobs.parquet `status`)."""

    WAITING = "waiting"  # not yet submitted
    HELD = "held"  # submitted, waiting for the jobs it depends on to complete
    PENDING = "pending"  # in the queue (never started, preempted or suspended)
    RUNNING = "running"
    RETRYING = "retrying"  # a failed attempt waiting `retry_delay` before it is queued again
    COMPLETED = "completed"
    FAILED = "failed"
    KILLED = "killed"
    REJECTED = "rejected"
    UNFINISHED = "unfinished"  # still open when the run stopped (`until`)


class EventKind(StrEnum):
    """Kinds of job events (events.parquet `kind`), also passed to `Policy.notify`."""

    SUBMIT = "submit"
    START = "start"
    PREEMPT = "preempt"
    SUSPEND = "suspend"
    RESUME = "resume"
    MIGRATE = "migrate"
    RESIZE = "resize"
    FAIL = "fail"
    RETRY = "retry"
    FINISH = "finish"
    KILL = "kill"
    REJECT = "reject"
    RATE = "rate"  # a job of a performance model runs at a new speed (not told to policies)


STATUSES = tuple(str(s) for s in list(JobStatus)[5:])
EVENT_KINDS = tuple(str(k) for k in EventKind)
