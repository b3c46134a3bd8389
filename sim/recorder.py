"""Recording a run: the rows of events.parquet, timeline.parquet and nodes.parquet.

Rows are recorded column-wise as the run goes, with no object per row: an event appends
its six values to a short flat list, a timeline row its nine numbers to a short flat
array of doubles. Every `_CHUNK` rows the flat buffer is packed into compact columns:
event times and GPU counts in arrays of 8-byte numbers, kinds, cells and details as
4-byte codes into a table of their distinct texts, job ids as references to the jobs'
own strings (about 30 bytes an event row instead of ~100); timeline rows into one array
a column (72 bytes a row). `schedlab.sim.results` takes the columns over once, at the end
(`take_events`, `take_timeline`): the recorder forgets them as it hands them over, and
the DataFrames are built on the same arrays, so a run's rows are never held twice. A
timeline row is added only when the cluster or the queue changed (checked first by their
version counters, so an unchanged instant costs three comparisons).

At scale (`timeline`, `events` engine parameters): `events=off` keeps no event rows
(only their count, for nodes.parquet's `event_index`); `timeline=off` writes no
timeline rows and `timeline=coarse` one row every `timeline_interval` seconds of
simulated time (the state in effect then, plus the last row). Either way every change is
still kept, because the summary's time integrals (utilization, fragmentation,
idle-while-blocked) are computed from it exactly as with the full timeline: no summary
number depends on these options.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from mypy_extensions import mypyc_attr

from schedlab.sim.cluster import ClusterState
from schedlab.sim.fragmentation import fgd_node, size_distribution
from schedlab.sim.instant import Instant
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import MILLI, EventKind, JobSpec
from schedlab.sim.queue import PendingQueue

if TYPE_CHECKING:
    from schedlab.topologies.tree import Topology

TIMELINE_COLUMNS = (
    "time", "gpus_total", "gpus_busy", "utilization", "fragmentation", "fragmentation_fgd",
    "pending_jobs", "running_jobs", "blocked_free_gpus",
)
TIMELINE_INT_COLUMNS = frozenset({"gpus_total", "pending_jobs", "running_jobs"})
EVENT_COLUMNS = ("time", "job_id", "kind", "num_gpus", "cells", "detail", "gpus")
"""events.parquet: `gpus` names the GPUs the job holds after the event ('node0/gpu3;...',
the topology's GPU cell names, in placement order; '' when it holds none); `num_gpus` is
the GPUs a placement (start, resume, migrate, resize) gave, the job's request otherwise."""
NODE_COLUMNS = ("time", "node", "kind", "event_index")
"""nodes.parquet: failures and repairs; event_index = rows of events.parquet before it."""
TIMELINE_MODES = ("full", "coarse", "off")

_PLACING: Final = frozenset({EventKind.START, EventKind.RESUME, EventKind.MIGRATE,
                             EventKind.RESIZE})
_SIZED: Final = _PLACING | {EventKind.RATE}  # rows whose num_gpus is what the job holds
_TL: Final = len(TIMELINE_COLUMNS)
_EV: Final = len(EVENT_COLUMNS)
_CELLS_CACHE: Final = 50_000  # placements whose 'node:k;...' text is kept
_CHUNK: Final = 8192  # rows kept flat (event or timeline) before they are packed into columns
_EV_FLAT: Final = _CHUNK * _EV
_TL_FLAT: Final = _CHUNK * _TL


@mypyc_attr(allow_interpreted_subclasses=True)
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


@dataclass(frozen=True)
@mypyc_attr(allow_interpreted_subclasses=True)
class Coded:
    """A column of texts as codes into its distinct values (`texts[codes[i]]` is row i)."""

    codes: np.ndarray  # uint32
    texts: list[str]

    def __len__(self) -> int:
        return len(self.codes)


Column = np.ndarray | Coded | list[Any]
"""A recorded column: numbers (float64 or int64), coded texts, or the values as given
(job ids; any column whose values were not all of its usual type)."""


@mypyc_attr(allow_interpreted_subclasses=True)
class _Numbers:
    """A column of numbers in an 8-byte array; its values as given if one is not a number.

    In a float column, `ints` tells whether every value was a Python int: pandas types
    such a column int64 (float64 when any value is a float), so it is given as int64.
    """

    __slots__ = ("data", "ints", "plain")

    def __init__(self, typecode: str) -> None:
        self.data = array(typecode)
        self.ints = typecode == "d"  # an integer array holds ints only
        self.plain: list[Any] | None = None

    def add(self, values: list[Any]) -> None:
        """Append values (the next rows)."""
        if self.plain is None:
            if self.ints:
                self.ints = all(type(v) is int for v in values)
            n = len(self.data)
            try:
                self.data.extend(values)
                return
            except (TypeError, OverflowError):  # not an 8-byte number: keep them as given
                del self.data[n:]
                self.plain = self.data.tolist()
                self.data = array(self.data.typecode)
        self.plain.extend(values)

    def column(self, *, copy: bool) -> Column:
        """The values: an array on this column's memory (`copy` False) or on a copy."""
        if self.plain is not None:
            return list(self.plain) if copy else self.plain
        if self.data.typecode == "q":
            return np.array(self.data, dtype=np.int64) if copy \
                else np.frombuffer(self.data, dtype=np.int64)
        values = np.array(self.data, dtype=np.float64) if copy \
            else np.frombuffer(self.data, dtype=np.float64)
        return values.astype(np.int64) if self.ints and len(values) else values


@mypyc_attr(allow_interpreted_subclasses=True)
class _Texts:
    """A column of (mostly repeating) texts as 4-byte codes into its distinct values."""

    __slots__ = ("codes", "texts", "index", "plain")

    def __init__(self) -> None:
        self.codes = array("I")
        self.texts: list[str] = []
        self.index: dict[str, int] = {}
        self.plain: list[Any] | None = None  # the values as given, once one is not a text

    def add(self, values: list[Any]) -> None:
        """Append values (the next rows)."""
        if self.plain is not None:
            self.plain.extend(values)
            return
        index = self.index
        try:
            codes = list(map(index.get, values))
        except TypeError:  # unhashable: not a text
            codes = []
        if len(codes) != len(values) or None in codes:
            texts = self.texts
            for i, v in enumerate(values):
                c = index.get(v) if isinstance(v, str) else None
                if c is None:
                    if not isinstance(v, str):  # from now on, the values as given
                        plain = [texts[k] for k in self.codes] + values
                        self.codes, self.texts, self.index = array("I"), [], {}
                        self.plain = plain
                        return
                    c = index[v] = len(texts)
                    texts.append(v)
                codes[i] = c
        self.codes.extend(codes)  # type: ignore[arg-type]  # no None left

    def column(self, *, copy: bool) -> Column:
        """The values: coded (on this column's memory unless `copy`), or as given."""
        if self.plain is not None:
            return list(self.plain) if copy else self.plain
        codes = np.array(self.codes, dtype=np.uint32) if copy \
            else np.frombuffer(self.codes, dtype=np.uint32)
        return Coded(codes, list(self.texts) if copy else self.texts)


@mypyc_attr(allow_interpreted_subclasses=True)
class _EventColumns:
    """The packed event rows: one column store per EVENT_COLUMNS entry."""

    __slots__ = ("time", "job_id", "kind", "num_gpus", "cells", "detail", "gpus")

    def __init__(self) -> None:
        self.time = _Numbers("d")
        self.job_id: list[Any] = []  # the jobs' own id strings: a reference a row
        self.kind = _Texts()
        self.num_gpus = _Numbers("q")
        self.cells = _Texts()
        self.detail = _Texts()
        self.gpus = _Texts()

    def add(self, flat: list[Any]) -> None:
        """Pack rows given flat (EVENT_COLUMNS values of each row in turn)."""
        self.time.add(flat[0::_EV])
        self.job_id.extend(flat[1::_EV])
        self.kind.add(flat[2::_EV])
        self.num_gpus.add(flat[3::_EV])
        self.cells.add(flat[4::_EV])
        self.detail.add(flat[5::_EV])
        self.gpus.add(flat[6::_EV])

    def columns(self, *, copy: bool) -> dict[str, Column]:
        """Every column by name (see `Recorder.take_events`)."""
        return {"time": self.time.column(copy=copy),
                "job_id": list(self.job_id) if copy else self.job_id,
                "kind": self.kind.column(copy=copy),
                "num_gpus": self.num_gpus.column(copy=copy),
                "cells": self.cells.column(copy=copy),
                "detail": self.detail.column(copy=copy),
                "gpus": self.gpus.column(copy=copy)}


def _timeline_store() -> list[array]:
    """Empty timeline columns: 8-byte integers for the counts, doubles for the rest."""
    return [array("q" if name in TIMELINE_INT_COLUMNS else "d") for name in TIMELINE_COLUMNS]


@mypyc_attr(allow_interpreted_subclasses=True)
class Recorder:
    """Event, timeline and node rows of one run, column-wise."""

    def __init__(self, topo: Topology, clock: Callable[[], float] | Instant) -> None:
        self.topo = topo
        self._clock = clock
        # the engine's own clock is read as a native field (`schedlab.sim.instant`), any other
        # clock through a call
        self._at: Instant | None = clock if isinstance(clock, Instant) else None
        self._events: list[Any] = []  # flat: EVENT_COLUMNS values of the latest rows
        self._ev = _EventColumns()  # the rows before them, packed
        self.event_count = 0  # events recorded (kept or not)
        # flat: TIMELINE_COLUMNS values of the latest rows (a list takes a row's tuple
        # in one copy, where an array converts it value by value), packed every _CHUNK
        self._tl: list[Any] = []
        self._tl_cols = _timeline_store()  # the rows before them, one array a column
        self._tl_given = -math.inf  # time of the last timeline row handed over
        self._tl_replaces = False  # the first row kept since then replaces it (same time)
        self.nodes: list[tuple[float, str, str, int]] = []  # rows of NODE_COLUMNS
        self._last: tuple[float, ...] | None = None
        # cluster version, queue version and running jobs at the last sample
        self._cv = self._qv = self._running = -1
        self._cells: dict[tuple[int, ...], str] = {}
        self._gpu_text: dict[tuple[int, ...], str] = {}
        # every placement (start, resume, migrate, resize), kept with events on or off:
        # the job id (a reference) and a code into the distinct GPU-name texts (jobs'
        # `gpus` column; 12 bytes a placement)
        self._placed_ids: list[Any] = []
        self._placed_codes = array("I")
        self._placed_texts: dict[str, int] = {}
        # the frames `schedlab.sim.results` built on the columns handed over (kept for the run's
        # lifetime, see `schedlab.sim.results._recorded_events`), None until then
        self.taken_events: Any = None
        self.taken_timeline: Any = None
        self.keep_events = True
        self.timeline_mode = "full"
        self.timeline_interval = 3600.0

    def _now(self) -> float:
        at = self._at
        return at.t if at is not None else self._clock()

    def configure(self, *, events: bool = True, timeline: str = "full",
                  interval: float = 3600.0) -> None:
        """What to keep: event rows or not; the timeline in full, coarse or off."""
        if timeline not in TIMELINE_MODES:
            raise ValueError(f"timeline {timeline!r}: expected one of {TIMELINE_MODES}")
        self.keep_events = events
        self.timeline_mode = timeline
        self.timeline_interval = interval

    def event(self, job: JobState, kind: EventKind, detail: str | None = "",
              job_id: str | None = None) -> None:
        """One row of events.parquet for `job` now (only counted with events off).

        `job_id` names another job for the row (a container job's, for its task runs).
        """
        self.event_count += 1
        if kind in _PLACING and job.gpus:
            text = self.gpu_names(job.gpus)
            code = self._placed_texts.get(text)
            if code is None:
                code = self._placed_texts[text] = len(self._placed_texts)
            self._placed_ids.append(job_id or job.spec.job_id)
            self._placed_codes.append(code)
        if self.keep_events:
            s: Any = job.spec  # its values go in the columns as given (no compiled checks)
            gpus = job.gpus
            cells = self._cells.get(gpus) if gpus else ""
            names = self._gpu_text.get(gpus) if gpus else ""
            ev = self._events
            # a placement says the GPUs it gave (an elastic job's actual size); other
            # events the job's request
            ev.extend((self._now(), job_id or s.job_id, kind._value_,
                       len(gpus) if gpus and kind in _SIZED else s.num_gpus,
                       self.cells(gpus) if cells is None else cells, detail,
                       self.gpu_names(gpus) if names is None else names))
            if len(ev) >= _EV_FLAT:
                self._events = []
                self._ev.add(ev)

    def task_event(self, job: JobState, role: str, index: int, node: int,
                   gpus: tuple[int, ...], kind: EventKind = EventKind.START) -> None:
        """A row for one non-gang task of a job with roles (placed or ended on its own).

        Its `num_gpus`, `cells` and `gpus` are the task's; `detail` names it,
        `task=ROLE[I]@NODE`. For the engine's placement of non-gang tasks
        (`schedlab.sim.role_tasks.place_side`).
        """
        self.event_count += 1
        if kind in _PLACING and gpus:
            text = self.gpu_names(gpus)
            code = self._placed_texts.get(text)
            if code is None:
                code = self._placed_texts[text] = len(self._placed_texts)
            self._placed_ids.append(job.spec.job_id)
            self._placed_codes.append(code)
        if self.keep_events:
            ev = self._events
            ev.extend((self._now(), job.spec.job_id, kind._value_, len(gpus),
                       self.cells(gpus),
                       f"task={role}[{index}]@{self.topo.nodes[node].name}",
                       self.gpu_names(gpus)))
            if len(ev) >= _EV_FLAT:
                self._events = []
                self._ev.add(ev)

    def node(self, name: str, kind: str) -> None:
        """One row of nodes.parquet (a failure or a repair) now."""
        self.nodes.append((self._now(), name, kind, self.event_count))

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

    def gpus_by_job(self) -> dict[Any, str]:
        """Job id -> every GPU it was placed on ('node0/gpu0;node0/gpu1'), first use first.

        A container job's task runs count under its id. Jobs never placed are absent.
        """
        texts = list(self._placed_texts)
        names: dict[Any, dict[str, None]] = {}
        last: dict[Any, int] = {}
        for job, code in zip(self._placed_ids, self._placed_codes, strict=True):
            if last.get(job) == code:
                continue  # the same GPUs again (a resume in place)
            last[job] = code
            seen = names.setdefault(job, {})
            for name in texts[code].split(";"):
                seen[name] = None
        return {job: ";".join(seen) for job, seen in names.items()}

    def gpu_names(self, gpus: tuple[int, ...]) -> str:
        """'node0/gpu3;node0/gpu4': the GPU cells' names of a placement, in its order."""
        if not gpus:
            return ""
        text = self._gpu_text.get(gpus)
        if text is not None:
            return text
        topo = self.topo
        cells = topo.cells
        gc = topo.gpu_cells
        text = ";".join(cells[gc[g]].name for g in gpus)
        if len(self._gpu_text) >= _CELLS_CACHE:
            self._gpu_text.clear()
        self._gpu_text[gpus] = text
        return text

    def sample(self, c: ClusterState, queue: PendingQueue, running: int) -> None:
        """Add a timeline row if the cluster or queue changed since the last one.

        Typed by the engine's own classes: compiled, their fields are then read directly
        (a protocol would look each up by name, at every instant of a run).
        """
        cv = c.version
        qv = queue.version
        if cv == self._cv and qv == self._qv and running == self._running:
            return
        self._cv = cv
        self._qv = qv
        self._running = running
        busy = c.busy_milli / MILLI
        pending = len(queue.held)  # as len(queue), without a call
        healthy = c.healthy_gpus
        state = (busy, c.free_whole, c.free_in_free_nodes, pending, running, healthy,
                 c.fgd_sum)
        if state == self._last:
            return
        self._last = state
        now = self._now()
        row = (now, healthy, busy, busy / healthy if healthy else 0.0, c.fragmentation,
               c.fragmentation_fgd, pending, running, queue.blocked_free(healthy - busy))
        tl = self._tl
        if tl:
            if tl[-_TL] == now:  # a later change at the same instant: the row it leaves
                tl[-_TL:] = row
                return
        elif now == self._tl_given:  # the same, for the last row handed over
            self._tl_replaces = True
        tl.extend(row)
        if len(tl) >= _TL_FLAT:
            self._pack_timeline(keep_last=True)

    def _pack_timeline(self, *, keep_last: bool) -> None:
        """Move the flat timeline rows into the columns (but the last, if `keep_last`)."""
        tl = self._tl
        rows = len(tl) // _TL - (1 if keep_last else 0)
        if rows <= 0:
            return
        flat = np.array(tl[:rows * _TL], dtype=np.float64).reshape(-1, _TL)
        for i, col in enumerate(self._tl_cols):
            part = flat[:, i]
            col.frombytes((part.astype(np.int64) if col.typecode == "q" else part).tobytes())
        self._tl = tl[rows * _TL:]

    # --- columns, handed over once at the end (schedlab.sim.results) ---

    def take_events(self) -> dict[str, Column]:
        """The kept event rows as columns, handed over: the recorder forgets them.

        Numbers come as float64 or int64 arrays on the recorder's own memory (no copy),
        `kind`, `cells` and `detail` as `Coded`, `job_id` as a list; a column whose values
        were not all of its usual type comes as the list of values given. A later call
        gives the rows recorded since. Empty lists with events off.
        """
        self._ev.add(self._events)
        self._events = []
        ev, self._ev = self._ev, _EventColumns()
        return ev.columns(copy=False)

    def event_columns(self) -> dict[str, Column]:
        """The kept event rows as columns (as `take_events`), copied: the recorder keeps them."""
        self._ev.add(self._events)
        self._events = []
        return self._ev.columns(copy=True)

    def take_timeline(self) -> tuple[dict[str, np.ndarray], bool]:
        """Every timeline row as columns, handed over, and whether the first replaces one.

        Integer columns are int64, the others float64, on the recorder's own memory. A
        later call gives the rows recorded since; the flag then tells that the first of
        them replaces the last row given before (a change at the same instant).
        """
        self._pack_timeline(keep_last=False)
        cols, self._tl_cols = self._tl_cols, _timeline_store()
        self._tl = []
        if cols[0]:
            self._tl_given = cols[0][-1]
        replaces, self._tl_replaces = self._tl_replaces, False
        return {name: np.frombuffer(col, dtype=np.int64 if col.typecode == "q" else np.float64)
                for name, col in zip(TIMELINE_COLUMNS, cols, strict=True)}, replaces

    def timeline_columns(self) -> dict[str, np.ndarray]:
        """Every timeline row as columns (as `take_timeline`), copied: the recorder keeps them."""
        tl = self._tl
        flat = np.array(tl, dtype=np.float64).reshape(-1, _TL) if tl \
            else np.empty((0, _TL))
        cols: dict[str, np.ndarray] = {}
        for i, (name, col) in enumerate(zip(TIMELINE_COLUMNS, self._tl_cols, strict=True)):
            dtype = np.int64 if col.typecode == "q" else np.float64
            cols[name] = np.concatenate([np.frombuffer(col, dtype=dtype) if col
                                         else np.empty(0, dtype), flat[:, i].astype(dtype)])
        return cols


def timeline_rows(cols: dict[str, np.ndarray], mode: str,
                  interval: float) -> dict[str, np.ndarray]:
    """The rows of a full timeline (columns) that a timeline mode writes.

    `full`: all (the same arrays); `coarse`: the state in effect every `interval` s from
    the first row, and the last row; `off`: none.
    """
    if mode == "full":
        return cols
    if mode == "off":
        return {name: col[:0].copy() for name, col in cols.items()}
    t = cols["time"]
    if not len(t):
        return {name: col.copy() for name, col in cols.items()}
    grid = np.arange(t[0], t[-1], interval)
    at = np.searchsorted(t, grid, side="right") - 1
    last = not len(grid) or t[-1] > grid[-1]
    out = {}
    for name, col in cols.items():
        rows = grid.astype(col.dtype) if name == "time" else col[at]
        out[name] = np.concatenate([rows, col[-1:]]) if last else rows
    return out
