"""The protocols extensions are written against: cluster view, placer, speed factor, context.

Policies, placers and speed factors see the run only through these; the engine's classes
implement them. The views are read-only by type (Sequence, Mapping): the one way to change
the world is a decision, and the one way to ask "what if" is a sandbox or `ctx.what_if`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from schedlab.sim.jobstate import JobState
from schedlab.sim.model import JobSpec, Level, Placement

if TYPE_CHECKING:
    import numpy as np

    from schedlab.topologies.tree import Topology


class ClusterView(Protocol):
    """Read-only cluster state: free capacity, health and the indexes placers query."""

    @property
    def topo(self) -> Topology:
        """The topology this state is of."""
        ...

    @property
    def version(self) -> int:
        """Grows on every change: equal versions mean an unchanged state."""
        ...

    @property
    def gpu_free(self) -> Sequence[int]:
        """Free milli-GPUs per GPU index (1000: whole; 0 on failed nodes)."""
        ...

    @property
    def gpu_holders(self) -> Sequence[Mapping[int, int]]:
        """Per GPU: job index -> milli-GPUs it holds there (-2 holds a failed node's)."""
        ...

    @property
    def cell_free(self) -> Sequence[int]:
        """Whole free GPUs under each topology cell (by cell id)."""
        ...

    @property
    def node_cpu_free(self) -> Sequence[float]:
        """Free CPUs per node (a capacity of 0: not modelled)."""
        ...

    @property
    def node_mem_free(self) -> Sequence[float]:
        """Free memory (GB) per node (a capacity of 0: not modelled)."""
        ...

    @property
    def node_disk_free(self) -> Sequence[float]:
        """Free local disk (GB) per node (a capacity of 0: not modelled)."""
        ...

    @property
    def node_up(self) -> Sequence[bool]:
        """Whether each node is healthy (False: failed, its GPUs unusable)."""
        ...

    @property
    def node_buckets(self) -> Mapping[str, Sequence[Sequence[int]]]:
        """GPU type -> k -> sorted indices of the nodes with exactly k whole free GPUs."""
        ...

    @property
    def partial(self) -> Mapping[str, Sequence[tuple[int, int]]]:
        """GPU type -> sorted (free milli, GPU) of the GPUs shared but not full."""
        ...

    @property
    def max_node_gpus(self) -> Mapping[str, int]:
        """GPU type -> GPUs of its largest node."""
        ...

    @property
    def gpu_parent_levels(self) -> Mapping[str, tuple[Level, ...]]:
        """GPU type -> the levels of the cells directly above its GPUs, sorted."""
        ...

    @property
    def free_by_type(self) -> Mapping[str, int]:
        """GPU type -> whole free GPUs of that type (on healthy nodes)."""
        ...

    @property
    def total_gpus(self) -> int:
        """GPUs in the topology, failed ones included."""
        ...

    @property
    def healthy_gpus(self) -> int:
        """GPUs on healthy nodes."""
        ...

    @property
    def free_whole(self) -> int:
        """Whole free GPUs on healthy nodes."""
        ...

    @property
    def busy_milli(self) -> int:
        """Milli-GPUs held by jobs (on healthy nodes)."""
        ...

    @property
    def fragmentation(self) -> float:
        """1 - free GPUs inside fully free nodes / free GPUs (0 when none is free)."""
        ...


    def sandbox(self) -> AbstractContextManager[Any]:
        """A scratch copy to change freely (allocate/release), undone on exit."""
        ...

    def watch(self) -> set[int]:
        """A set of the nodes that change from now on (for placers' own indexes)."""
        ...

    def cells_fitting(self, gpu_type: str, level: Level, n: int) -> Iterator[tuple[int, ...]]:
        """Keys of cells at `level` with >= n whole free GPUs, tightest first."""
        ...

    def free_gpus_in(self, cell: int) -> list[int]:
        """Whole free GPUs under `cell`, in index order."""
        ...

    def node_fits_host(self, node: int, cpus: float, mem: float, disk: float = 0.0) -> bool:
        """Whether `node` has `cpus`, `mem` and `disk` free."""
        ...

    def host_nodes(self, cpus: float) -> Iterator[int]:
        """Healthy nodes with `cpus` free, CPU-only nodes first, least free CPUs first."""
        ...

    def host_capacity_shortfall(self, cpus: float, mem: float, disk: float) -> str:
        """Why no node could ever hold these host resources ('' when one can)."""
        ...

    def jobs_on_node(self, node: int) -> list[int]:
        """Indices of the jobs holding GPUs of `node`, sorted."""
        ...


class Placer(Protocol):
    """Chooses GPUs for a job; reads the cluster view, never changes it."""

    name: str

    def place(self, job: JobSpec, cluster: ClusterView) -> Placement:
        """GPU indices for the whole gang (sorted), or Unschedulable."""
        ...


class SpeedFactor(Protocol):
    """One link of the engine's chain of speed factors: a job's rate is their product.

    `factor` is asked whenever a job's placement or co-location changes (start, resume,
    migrate, resize, a group member joining or leaving) and must be deterministic.
    """

    name: str

    def factor(self, job: JobState, gpus: tuple[int, ...], run: RunView) -> float:
        """Multiplier of the job's speed on `gpus` (1.0: no effect)."""
        ...


class RunView(Protocol):
    """What a speed factor may read of the run."""

    @property
    def now(self) -> float: ...
    @property
    def topology(self) -> Topology: ...
    @property
    def params(self) -> Mapping[str, Any]: ...


class WhatIfView(Protocol):
    """A cluster as it would be after some changes, to read and place on (`ctx.what_if`)."""

    @property
    def cluster(self) -> ClusterView:
        """The hypothetical cluster state (read-only; a scratch twin of the live one)."""
        ...

    def place(self, job: JobState | JobSpec, num_gpus: int | None = None) -> Placement:
        """Where the run's placer would put `job` in the hypothetical state."""
        ...


@runtime_checkable
class PolicyContext(Protocol):
    """What a policy sees of a run: the one type its hooks' `ctx` is annotated with.

    Implemented by `schedlab.sim.context.SchedContext` (the whole run) and by contexts
    narrowed to part of it (hived's per-VC queues, which answer for their queue only and
    also offer `owns(job)`; read it with `schedlab.policies.base.owner`). Runtime-checkable,
    so `isinstance(x, PolicyContext)` tells whether `x` offers every member (by name).
    """

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        ...

    @property
    def topology(self) -> Topology:
        """The run's topology (cells, levels, nodes, GPU types); never changes in a run."""
        ...

    @property
    def cluster(self) -> ClusterView:
        """The live cluster state, read-only; it changes only by applied decisions."""
        ...

    @property
    def rng(self) -> np.random.Generator:
        """The policy's own random generator, seeded from the run's seed."""
        ...

    @property
    def params(self) -> Mapping[str, Any]:
        """The engine's resolved parameters (read-only)."""
        ...

    @property
    def num_jobs(self) -> int:
        """Jobs in the run; `job_at` takes 0 .. num_jobs - 1 (grows with container task runs)."""
        ...

    @property
    def trace_jobs(self) -> int:
        """Jobs of the trace: indices 0 .. trace_jobs - 1, in submit order."""
        ...

    @property
    def pending_count(self) -> int:
        """Jobs waiting in the queue (this context's queue, for a narrowed one)."""
        ...

    def pending(self) -> Iterator[JobState]:
        """Pending jobs in the context's queue order (the run's: arrival order)."""
        ...

    def running(self) -> Mapping[int, JobState]:
        """Running jobs by index."""
        ...

    def job_at(self, idx: int) -> JobState:
        """A job by its index."""
        ...

    def watch_progress(self) -> set[int]:
        """A set of the indices of jobs whose `version` moved since it was last cleared."""
        ...

    def job(self, job_id: str) -> JobState:
        """A job by its trace id."""
        ...

    def pending_classes(self) -> Mapping[tuple[Any, ...], Any]:
        """Pending jobs by identical request (sorted lists of (submit, index) keys)."""
        ...

    def place(self, job: JobState | JobSpec, num_gpus: int | None = None) -> Placement:
        """The run's placer's answer for `job` now (`num_gpus`: another size)."""
        ...

    def what_if(self, victims: Sequence[JobState] = ()) -> AbstractContextManager[WhatIfView]:
        """A view of the cluster as if `victims` released their GPUs (`.place`, `.cluster`)."""
        ...

    def place_if_freed(self, job: JobState | JobSpec, victims: Sequence[JobState],
                       num_gpus: int | None = None) -> Placement:
        """Where `job` would go if `victims` released their GPUs."""
        ...

    def placement_speed(self, job: JobState | JobSpec, gpus: tuple[int, ...]) -> float:
        """Speed of `job` on `gpus` alone (type x locality)."""
        ...

    @property
    def perf(self) -> Any:
        """The run's performance models (`schedlab.sim.perf.speed.PerfView`; None: none)."""
        ...

    def run_time(self, job: JobState) -> float:
        """Seconds the job has held GPUs so far."""
        ...

    def attained_service(self, job: JobState) -> float:
        """GPU-seconds received so far."""
        ...

    def configure_sharing(self, *, time_slice: float | None = None,
                          switch_cost: float | None = None,
                          pack_penalty: float | None = None) -> None:
        """Set the co-location model."""
        ...

    def group_of(self, job: JobState) -> list[JobState]:
        """The jobs sharing `job`'s GPUs (itself included)."""
        ...

    def share_mode(self, job: JobState) -> str:
        """'timeshare', 'pack' or ''."""
        ...

    def wake_at(self, t: float) -> None:
        """Ask for a scheduling pass at time `t`."""
        ...

    def progress(self, job: JobState) -> float:
        """Work done by the job so far (ideal seconds)."""
        ...
