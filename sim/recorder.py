"""Recording a run: the rows of events.parquet, timeline.parquet and nodes.parquet.

Rows are recorded column-wise as the run goes, with no object per row: an event appends
its six values to one flat list, a timeline row its nine numbers to a flat array of
doubles (72 bytes a row); `sim.results` slices them into columns and builds each
DataFrame once, at the end. A timeline row is added only when the cluster or the queue
changed (checked first by their version counters, so an unchanged instant costs three
comparisons).

At scale (`timeline`, `events` engine parameters): `events=off` keeps no event rows
(only their count, for nodes.parquet's `event_index`); `timeline=off` writes no
timeline rows and `timeline=coarse` one row every `timeline_interval` seconds of
simulated time (the state in effect then, plus the last row). Either way every change is
still kept in the flat array, because the summary's time integrals (utilization,
fragmentation, idle-while-blocked) are computed from it exactly as with the full
timeline: no summary number depends on these options.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

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
TIMELINE_INT_COLUMNS = frozenset({"gpus_total", "pending_jobs", "running_jobs"})
EVENT_COLUMNS = ("time", "job_id", "kind", "num_gpus", "cells", "detail")
NODE_COLUMNS = ("time", "node", "kind", "event_index")
"""nodes.parquet: failures and repairs; event_index = rows of events.parquet before it."""
TIMELINE_MODES = ("full", "coarse", "off")

_TL = len(TIMELINE_COLUMNS)
_EV = len(EVENT_COLUMNS)
_CELLS_CACHE = 50_000  # placements whose 'node:k;...' text is kept


class FgdMetric:
    """FGD fragmentation of one node against the run's job-size mix, memoised by state."""

    def __init__(self, jobs: tuple[JobSpec, ...]) -> None:
        self._dist = size_distribution(jobs)
        # (capacity, free whole, partial) -> value; callers may read it before calling
        self.memo: dict[tuple[int, int, tuple[int, ...]], float] = {}

    def __call__(self, capacity: int, free_whole: int, partial: tuple[int, ...]) -> float:
        """Fragmentation of a node with this capacity, whole free GPUs and shared GPUs."""
        key = (capacity, free_whole, partial)
        v = self.memo.get(key)
        if v is None:
            v = fgd_node(capacity, free_whole, partial, self._dist)
            if len(self.memo) < 100_000:
                self.memo[key] = v
        return v


class Recorder:
    """Event, timeline and node rows of one run, column-wise."""

    def __init__(self, topo: Topology, clock: Callable[[], float]) -> None:
        self.topo = topo
        self._clock = clock
        self._events: list[Any] = []  # flat: EVENT_COLUMNS values of each row in turn
        self.event_count = 0  # events recorded (kept or not)
        self._tl = array("d")  # flat: TIMELINE_COLUMNS values of each row in turn
        self.nodes: list[tuple[float, str, str, int]] = []  # rows of NODE_COLUMNS
        self._last: tuple[float, ...] | None = None
        # cluster version, queue version and running jobs at the last sample
        self._cv = self._qv = self._running = -1
        self._cells: dict[tuple[int, ...], str] = {}
        self.keep_events = True
        self.timeline_mode = "full"
        self.timeline_interval = 3600.0

    def configure(self, *, events: bool = True, timeline: str = "full",
                  interval: float = 3600.0) -> None:
        """What to keep: event rows or not; the timeline in full, coarse or off."""
        if timeline not in TIMELINE_MODES:
            raise ValueError(f"timeline {timeline!r}: expected one of {TIMELINE_MODES}")
        self.keep_events = events
        self.timeline_mode = timeline
        self.timeline_interval = interval

    def event(self, job: JobState, kind: EventKind, detail: str = "",
              job_id: str | None = None) -> None:
        """One row of events.parquet for `job` now (only counted with events off).

        `job_id` names another job for the row (a container job's, for its task runs).
        """
        self.event_count += 1
        if self.keep_events:
            s = job.spec
            gpus = job.gpus
            cells = self._cells.get(gpus) if gpus else ""
            self._events.extend((self._clock(), job_id or s.job_id, kind._value_, s.num_gpus,
                                 self.cells(gpus) if cells is None else cells, detail))

    def node(self, name: str, kind: str) -> None:
        """One row of nodes.parquet (a failure or a repair) now."""
        self.nodes.append((self._clock(), name, kind, self.event_count))

    def cells(self, gpus: tuple[int, ...]) -> str:
        """'node:k;node:k' of a placement, nodes in first-use order."""
        if not gpus:
            return ""
        text = self._cells.get(gpus)
        if text is not None:
            return text
        topo = self.topo
        counts: dict[int, int] = {}
        for g in gpus:
            n = topo.gpu_node[g]
            counts[n] = counts.get(n, 0) + 1
        text = ";".join(f"{topo.nodes[n].name}:{k}" for n, k in counts.items())
        if len(self._cells) >= _CELLS_CACHE:
            self._cells.clear()
        self._cells[gpus] = text
        return text

    def sample(self, c: ClusterState, queue: PendingQueue, running: int) -> None:
        """Add a timeline row if the cluster or queue changed since the last one."""
        cv = c.version
        qv = queue.version
        if cv == self._cv and qv == self._qv and running == self._running:
            return
        self._cv = cv
        self._qv = qv
        self._running = running
        busy = c.busy_milli / MILLI
        pending = len(queue.keys)
        healthy = c.healthy_gpus
        state = (busy, c.free_whole, c.free_in_free_nodes, pending, running, healthy,
                 c.fgd_sum)
        if state == self._last:
            return
        self._last = state
        now = self._clock()
        row = (now, healthy, busy, busy / healthy if healthy else 0.0, c.fragmentation,
               c.fragmentation_fgd, pending, running, queue.blocked_free(healthy - busy))
        tl = self._tl
        if tl and tl[-_TL] == now:
            tl[-_TL:] = array("d", row)
        else:
            tl.extend(row)

    # --- columns, read once at the end (sim.results) ---

    def event_columns(self) -> dict[str, list[Any]]:
        """The kept event rows as columns (empty lists with events off)."""
        ev = self._events
        return {name: ev[i::_EV] for i, name in enumerate(EVENT_COLUMNS)}

    def timeline_columns(self, mode: str | None = None) -> dict[str, np.ndarray]:
        """Every timeline row as columns (`mode` None), or the rows a mode writes.

        `coarse`: the state in effect every `timeline_interval` s from the first row, and
        the last row; `off`: none. Integer columns are int64, the others float64.
        """
        flat = np.frombuffer(self._tl, dtype=np.float64).reshape(-1, _TL) if self._tl \
            else np.empty((0, _TL))
        if mode == "off":
            flat = flat[:0]
        elif mode == "coarse" and len(flat):
            t = flat[:, 0]
            grid = np.arange(t[0], t[-1], self.timeline_interval)
            at = np.searchsorted(t, grid, side="right") - 1
            rows = flat[at].copy()
            rows[:, 0] = grid
            flat = np.vstack([rows, flat[-1:]]) if t[-1] > grid[-1] else rows
        cols: dict[str, np.ndarray] = {}
        for i, name in enumerate(TIMELINE_COLUMNS):
            col = flat[:, i]
            cols[name] = col.astype(np.int64) if name in TIMELINE_INT_COLUMNS else col.copy()
        return cols
