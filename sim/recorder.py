"""Recording a run: the rows of events.parquet, timeline.parquet and nodes.parquet.

Rows are plain tuples appended as the run goes; pandas sees them once, at the end
(`sim.results`). A timeline row is added only when the cluster or the queue changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sim.cluster import ClusterState
from sim.fragmentation import fgd_node, size_distribution
from sim.jobstate import JobState
from sim.model import MILLI, EventKind, JobSpec

if TYPE_CHECKING:
    from sim.queue import PendingQueue
    from topologies.tree import Topology

TIMELINE_COLUMNS = (
    "time", "gpus_total", "gpus_busy", "utilization", "fragmentation", "fragmentation_fgd",
    "pending_jobs", "running_jobs", "blocked_free_gpus",
)
EVENT_COLUMNS = ("time", "job_id", "kind", "num_gpus", "cells", "detail")
NODE_COLUMNS = ("time", "node", "kind", "event_index")
"""nodes.parquet: failures and repairs; event_index = rows of events.parquet before it."""


class FgdMetric:
    """FGD fragmentation of one node against the run's job-size mix, memoised by state."""

    def __init__(self, jobs: tuple[JobSpec, ...]) -> None:
        self._dist = size_distribution(jobs)
        self._cache: dict[tuple[int, int, tuple[int, ...]], float] = {}

    def __call__(self, capacity: int, free_whole: int, partial: tuple[int, ...]) -> float:
        """Fragmentation of a node with this capacity, whole free GPUs and shared GPUs."""
        key = (capacity, free_whole, partial)
        v = self._cache.get(key)
        if v is None:
            v = fgd_node(capacity, free_whole, partial, self._dist)
            if len(self._cache) < 100_000:
                self._cache[key] = v
        return v


class Recorder:
    """Event, timeline and node rows of one run."""

    def __init__(self, topo: Topology, clock: Callable[[], float]) -> None:
        self.topo = topo
        self._clock = clock
        self.events: list[tuple[float, str, str, int, str, str]] = []
        self.timeline: list[tuple[float, ...]] = []  # rows of TIMELINE_COLUMNS
        self.nodes: list[tuple[float, str, str, int]] = []  # rows of NODE_COLUMNS
        self._last: tuple[float, ...] | None = None

    def event(self, job: JobState, kind: EventKind, detail: str = "") -> None:
        """One row of events.parquet for `job` now."""
        self.events.append((self._clock(), job.spec.job_id, kind.value, job.spec.num_gpus,
                            self.cells(job.gpus), detail))

    def node(self, name: str, kind: str) -> None:
        """One row of nodes.parquet (a failure or a repair) now."""
        self.nodes.append((self._clock(), name, kind, len(self.events)))

    def cells(self, gpus: tuple[int, ...]) -> str:
        """'node:k;node:k' of a placement, nodes in first-use order."""
        if not gpus:
            return ""
        topo = self.topo
        counts: dict[int, int] = {}
        for g in gpus:
            n = topo.gpu_node[g]
            counts[n] = counts.get(n, 0) + 1
        return ";".join(f"{topo.nodes[n].name}:{k}" for n, k in counts.items())

    def sample(self, c: ClusterState, queue: PendingQueue, running: int) -> None:
        """Add a timeline row if the cluster or queue changed since the last one."""
        busy = c.busy_milli / MILLI
        state = (busy, c.free_whole, c.free_in_free_nodes, len(queue), running,
                 c.healthy_gpus, c.fgd_sum)
        if state == self._last:
            return
        self._last = state
        now = self._clock()
        healthy = c.healthy_gpus
        row = (now, healthy, busy, busy / healthy if healthy else 0.0, c.fragmentation,
               c.fragmentation_fgd, len(queue), running, queue.blocked_free(healthy - busy))
        tl = self.timeline
        if tl and tl[-1][0] == now:
            tl[-1] = row
        else:
            tl.append(row)
