"""What a policy sees of a run (`SchedContext`): time, queue, jobs, cluster, placement.

Policies read through it and never write the run's state; they change the world only by
yielding decisions, which the engine validates and applies. What-ifs ("where would this
job go if those jobs stopped?") run on a scratch twin of the cluster (`what_if`), never
on the live state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from schedlab.sim.agenda import Due
from schedlab.sim.cluster import ClusterState
from schedlab.sim.interfaces import ClusterView, Placer
from schedlab.sim.jobstate import RUNNING, JobState
from schedlab.sim.model import (
    MILLI,
    JobSpec,
    Placement,
    Start,
    Unschedulable,
    request_class,
    resized,
)
from schedlab.sim.roles import free_tasks

if TYPE_CHECKING:
    from schedlab.sim.lifecycle import RunState
    from schedlab.topologies.tree import Topology


def live_keys(keys: SortedList) -> Iterator[Any]:
    """The keys of a sorted list in order, while it may change under the iteration.

    Each step resumes after the last key yielded, so keys added or removed meanwhile
    (a job started, requeued, dropped) are seen or skipped as their place says.
    """
    key = None
    while True:
        i = 0 if key is None else keys.bisect_right(key)
        if i >= len(keys):
            return
        key = keys[i]
        yield key


def _spec(job: JobState | JobSpec, num_gpus: int | None) -> JobSpec:
    """The request to place: `num_gpus` if given, else the job's size.

    An elastic job too large for any placement at num_gpus asks for the largest size
    that fits (`JobState.fit_gpus`).
    """
    spec = job.spec if isinstance(job, JobState) else job
    if num_gpus is None and isinstance(job, JobState) and job.fit_gpus:
        num_gpus = job.fit_gpus
    if num_gpus is not None and num_gpus != spec.num_gpus:
        spec = resized(spec, num_gpus)
    return spec


_NEW: Final = object.__new__
_START_CLASS: Final = Start  # a static, not a lookup by name per start
_SET: Final = object.__setattr__


def start_on(job_id: str, gpus: tuple[int, ...]) -> Start:
    """`Start(job_id, gpus)`, made without the dataclass's Python `__init__` for GPUs.

    A policy's pass makes one Start a job started (a million and more a large run), and
    a frozen dataclass's generated `__init__` and `__post_init__` are two Python frames
    and five `object.__setattr__` calls each. For a plain tuple of GPUs (nothing for
    `__post_init__` to do) the fields are set here, from compiled code, to the values
    `Start(job_id, gpus)` gives them; other placements (`HostPlacement`,
    `RolePlacement`) go through the dataclass.
    """
    if type(gpus) is not tuple:
        return Start(job_id, gpus)
    d = _NEW(_START_CLASS)
    _SET(d, "job_id", job_id)
    _SET(d, "gpus", gpus)
    _SET(d, "share", "")
    _SET(d, "node", -1)
    _SET(d, "tasks", ())
    return d


def _free(scratch: ClusterState, victims: Sequence[JobState]) -> None:
    """Release what the running `victims` hold on a scratch state (a what-if)."""
    for v in victims:
        if v.status != RUNNING:
            continue
        cpus, mem, disk = v.host  # unpacked: *v.host makes a generic call
        if v.tasks:  # a job with roles: task by task
            free_tasks(scratch, v)
        elif v.gpus:
            scratch.release(v.idx, v.gpus, v.milli, cpus, mem, disk)
        elif v.node >= 0:
            scratch.release_host(v.idx, v.node, cpus, mem, disk)


@mypyc_attr(allow_interpreted_subclasses=True)
class WhatIf:
    """A cluster as it would be after some changes: read it, place on it; it is scratch."""

    def __init__(self, cluster: ClusterState, placer: Placer) -> None:
        self._cluster = cluster
        self._placer = placer

    @property
    def cluster(self) -> ClusterView:
        """The hypothetical cluster state (read-only)."""
        return self._cluster

    def place(self, job: JobState | JobSpec, num_gpus: int | None = None) -> Placement:
        """Where the run's placer would put `job` in the hypothetical state."""
        return self._placer.place(_spec(job, num_gpus), self._cluster)


def _class_of(own: JobState | None, spec: JobSpec) -> tuple[Any, ...]:
    """The request class a placement asks for: the job's own (kept while it waits).

    For another size, or a bare spec, the spec's.
    """
    return own.request_class() if own is not None else request_class(spec)


@mypyc_attr(allow_interpreted_subclasses=True)
class SchedContext:
    """What a policy sees of a run: time, queue, running jobs, cluster, placement."""

    def __init__(self, run: RunState) -> None:
        self._run = run
        self._cluster = run.cluster
        self._placer: Placer = run.placer
        self.topology: Topology = run.topo
        self.rng: np.random.Generator = run.policy_rng
        self.params: Mapping[str, Any] = run.engine_params
        self._failed: dict[Any, Unschedulable] = {}  # by request class, or GPUs asked
        self._failed_at = -1  # cluster version the failures were seen at
        self._perf_view: Any = None

    @property
    def cluster(self) -> ClusterView:
        """The live cluster state, read-only."""
        return self._cluster

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        return self._run.instant.t  # the run's clock (`schedlab.sim.instant`)

    @property
    def num_jobs(self) -> int:
        """Jobs in the run's trace; `job_at` takes indices 0 .. num_jobs - 1."""
        return len(self._run.jobs)

    @property
    def trace_jobs(self) -> int:
        """Jobs of the trace: indices 0 .. trace_jobs - 1, in submit order.

        A container job's task runs (`schedlab.sim.containers`) follow them, in the order they are
        spawned, so `num_jobs` grows during a run that has container jobs.
        """
        return self._run.num_trace

    @property
    def pending_count(self) -> int:
        """Jobs waiting in the queue."""
        return len(self._run.queue)

    def pending(self) -> Iterator[JobState]:
        """Pending jobs in arrival order (submit time, then trace order).

        Iterates a sorted index; decisions applied while iterating are safe because the
        iteration works on the keys present when each step is taken.
        """
        jobs = self._run.jobs
        for idx in self._run.queue.iter_jobs():
            yield jobs[idx]

    def pending_classes(self) -> Mapping[tuple[Any, ...], SortedList]:
        """Pending jobs grouped by identical resource request, each in arrival order.

        Two jobs of one class fit or fail to fit in exactly the same cluster state, so a
        backfilling policy tries only the head of each class.
        """
        return self._run.queue.classes

    def running(self) -> Mapping[int, JobState]:
        """Running jobs by index."""
        return self._run.running

    def job_at(self, idx: int) -> JobState:
        """A job's state by its index (the second element of queue keys)."""
        return self._run.jobs[idx]

    def watch_progress(self) -> set[int]:
        """A set the engine adds a job's index to whenever its `version` moves.

        Its work, rate, segment start and GPUs change only with a version bump. A policy
        that keeps them for the running jobs reads and clears the set each pass and
        re-reads only those jobs; `schedlab.sim.agenda.WATCH_ALL` in it means any job may have
        changed (the set overflowed `schedlab.sim.agenda.WATCH_MAX` unread).
        """
        return self._run.agenda.watch()

    def job(self, job_id: str) -> JobState:
        """A job's state by its trace id."""
        return self._run.by_id[job_id]

    def place(self, job: JobState | JobSpec, num_gpus: int | None = None) -> Placement:
        """Ask the run's placer for GPUs for `job` in the current state.

        `num_gpus` asks for another size (an elastic job within min_gpus..max_gpus).
        Answers at once, without asking the placer, when too few GPUs are free for the
        request or when an identical request already failed since the cluster last
        changed; so asking for every pending job on every pass stays cheap.
        """
        own: JobState | None = None  # the job itself, asked for at its own size
        if num_gpus is None and type(job) is JobState and not job.fit_gpus:
            own = job
            spec = job.spec  # the common case of `_spec`
        else:
            spec = _spec(job, num_gpus)
        c = self._cluster
        failed = self._failed
        if self._failed_at != c.version:  # the cluster changed: forget earlier answers
            failed.clear()
            self._failed_at = c.version
        n = spec.num_gpus
        if n > c.free_whole and spec.gpu_share >= 1.0:  # whole GPUs, too few free
            t = spec.gpu_type
            no = failed.get((n, t))
            if no is not None:
                return no
            if n <= (self.topology.gpu_types.get(t, 0) if t else c.total_gpus):
                no = failed[(n, t)] = Unschedulable(
                    f"needs {n} GPUs, {c.free_whole} are free now", True)
                return no
        ck: tuple[Any, ...] | None = None
        if failed:  # else no request failed in this state: nothing to look up
            ck = _class_of(own, spec)
            no = failed.get(ck)
            if no is not None:
                return no
        got = self._placer.place(spec, c)
        if isinstance(got, Unschedulable):
            if ck is None:
                ck = _class_of(own, spec)
            failed[ck] = got
        return got

    @contextmanager
    def what_if(self, victims: Sequence[JobState] = ()) -> Iterator[WhatIf]:
        """The cluster as if the running `victims` released their GPUs, to place on.

        `with ctx.what_if(victims) as view: gpus = view.place(job)`. Runs on a scratch
        twin of the cluster state: nothing is preempted and the live state never changes.
        """
        with self._cluster.sandbox() as scratch:
            _free(scratch, victims)
            yield WhatIf(scratch, self._placer)

    def place_if_freed(self, job: JobState | JobSpec, victims: Sequence[JobState],
                       num_gpus: int | None = None) -> Placement:
        """Where `job` would go if the running `victims` released their GPUs (what-if).

        `what_if`'s placement without its context managers (a preemptive policy asks
        this for each victim set it tries).
        """
        scratch, mark = self._cluster.open_sandbox()
        try:
            _free(scratch, victims)
            return WhatIf(scratch, self._placer).place(job, num_gpus)
        finally:
            scratch.close_sandbox(mark)

    def placement_speed(self, job: JobState | JobSpec, gpus: tuple[int, ...]) -> float:
        """Relative speed the job would run at on `gpus` alone (type speed x locality).

        What the engine's rate would be without sharing or elastic resizing, so a policy
        can compare candidate placements as a throughput profiler would.
        """
        spec = job.spec if isinstance(job, JobState) else job
        return self._run.progress.chain.placement_speed(spec, tuple(gpus))

    @property
    def perf(self) -> Any:
        """The run's performance models (`schedlab.sim.perf.speed.PerfView`).

        None when no job of the run names a `model`.
        """
        model = self._run.progress.chain.model
        if model is None:
            return None
        view = self._perf_view
        if view is None:
            from schedlab.sim.perf.speed import PerfView

            view = self._perf_view = PerfView(model, model.perf.per_node)
        return view

    def run_time(self, job: JobState) -> float:
        """Seconds the job has held GPUs so far (all attempts), up to now."""
        extra = self.now - job.held_since if job.status == RUNNING else 0.0
        return job.run_time + extra

    def attained_service(self, job: JobState) -> float:
        """GPU-seconds received so far (Tiresias' attained service)."""
        extra = 0.0
        if job.status == RUNNING:
            extra = (self.now - job.held_since) * len(job.gpus) * job.milli / MILLI
        return job.gpu_seconds + extra

    def configure_sharing(self, *, time_slice: float | None = None,
                          switch_cost: float | None = None,
                          pack_penalty: float | None = None) -> None:
        """Set the co-location model (time-slice length and switch cost, pack penalty)."""
        self._run.colocation.configure(time_slice, switch_cost, pack_penalty)

    def group_of(self, job: JobState) -> list[JobState]:
        """The jobs sharing `job`'s GPUs (itself included); [job] when not shared."""
        return self._run.colocation.members(job)

    def share_mode(self, job: JobState) -> str:
        """'timeshare', 'pack' or '' for a job running alone."""
        return self._run.colocation.mode(job)

    def wake_at(self, t: float) -> None:
        """Ask for a scheduling pass at time `t` (in the future)."""
        self._run.agenda.schedule(max(t, self.now), Due.TIMER)

    def progress(self, job: JobState) -> float:
        """Work done by the job so far (ideal seconds)."""
        return job.progress_at(self.now)
