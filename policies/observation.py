"""What a learned scheduler sees and may choose at a decision point (fixed-size, numpy).

One definition, shared by the Gym environment (`schedlab.app.rl`) and the `learned` policy,
so a model trained in the one replays decision for decision in the other.

**Decision point**: a scheduling pass at which at least one of the *candidates* (the
first K pending jobs in arrival order) can be placed now by the run's placer. Passes
where none can are not decision points (nothing could start). **Choices**: ``i`` in
0..K-1 starts candidate i on the placer's GPUs; ``K`` starts nothing more this pass.
``mask`` (int8, K+1) marks the valid choices: a present candidate the placer can place
now, and "no more" unless nothing runs while some candidate fits (so a run never idles
the whole cluster for good: the engine would reject the waiting jobs).

**Observation** (float32, every entry in [0, 1]): the ``GLOBAL_FEATURES`` then K blocks
of ``JOB_FEATURES`` (an absent candidate's block is zeros). Times and GPU-seconds go
through ``squash(x) = min(1, log1p(x / 60) / log1p(30 days / 60))`` (1 min 0.07, 1 h 0.38,
1 day 0.68); counts through ``n / (n + K)``.

Global: ``bias`` (1); ``free_gpus`` (whole free / all GPUs); ``nodes_free_0`` ..
``nodes_free_8`` (fraction of GPU nodes with exactly k whole free GPUs, 8 or more in the
last); ``switch_free``, ``socket_free``, ``node_free`` (fraction of the cells of that
level that are entirely free; 0 when the topology has no such level); ``pending`` and
``pending_beyond`` (queued jobs, and those past the first K, as counts); ``running``
(count); ``busy`` (busy / all GPUs); ``healthy`` (GPUs on healthy nodes / all);
``running_done`` (mean estimated fraction done of the running jobs) and ``running_left``
(mean estimated time left, squashed): both from the trace's durations as if each job ran
at speed 1 since it last started, and 0 when durations are hidden.

Per candidate: ``present``; ``position`` (i / K: arrival order); ``gpus`` (n / (n + 8));
``gpus_vs_free`` (n / free whole GPUs, at most 1; 1 when none is free); ``wait`` (time
queued so far, squashed); ``duration`` and ``gpu_time`` (the trace's duration and
duration x GPUs, squashed, as the oracle baselines sjf/srtf read them; 0 when durations
are hidden); ``cpu_only`` (asks for no GPU).

Costs per decision point: O(K) plus one placer call per distinct request among the
candidates (answers are cached until the cluster changes); the running-job summary is
kept from the engine's events, never by scanning the running jobs.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Level, Placement, Unschedulable, request_class

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext

__all__ = [
    "GLOBAL_FEATURES", "JOB_FEATURES", "DecisionPoint", "ObsConfig", "Observer", "squash",
]

GLOBAL_FEATURES: tuple[str, ...] = (
    "bias", "free_gpus", *(f"nodes_free_{k}" for k in range(9)), "switch_free",
    "socket_free", "node_free", "pending", "pending_beyond", "running", "busy", "healthy",
    "running_done", "running_left",
)
"""Names of the global block of the observation, in order."""

JOB_FEATURES: tuple[str, ...] = (
    "present", "position", "gpus", "gpus_vs_free", "wait", "duration", "gpu_time",
    "cpu_only",
)
"""Names of each candidate's block of the observation, in order."""

_LEVELS = (Level.SWITCH, Level.SOCKET, Level.NODE)
_HIST = 9  # nodes_free_0 .. nodes_free_8
_SQUASH = math.log1p(30 * 86400 / 60)


def squash(x: float) -> float:
    """Seconds (or GPU-seconds) to [0, 1] on a log scale: 1 min 0.07, 1 h 0.38, 30 d 1."""
    return min(1.0, math.log1p(max(0.0, x) / 60.0) / _SQUASH)


@dataclass(frozen=True)
class ObsConfig:
    """The shape of the observation: K candidates, and whether durations are visible."""

    k: int = 16
    durations: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k {self.k!r}: expected an integer >= 1 (candidates shown)")

    @property
    def size(self) -> int:
        """Length of the observation vector."""
        return len(GLOBAL_FEATURES) + self.k * len(JOB_FEATURES)

    @property
    def num_actions(self) -> int:
        """K starts and one "no more starts this pass"."""
        return self.k + 1


@dataclass(frozen=True)
class DecisionPoint:
    """The candidates of one decision point, where each would go, and the valid choices."""

    jobs: tuple[JobState, ...]
    places: tuple[Placement, ...]
    mask: np.ndarray  # int8, K + 1

    def job_id(self, action: int) -> str:
        """The trace id of the job a start choice names."""
        return self.jobs[action].job_id


class Observer:
    """Builds decision points and observations for one run; hears its events to stay O(K).

    Call `attach` when the policy is attached, `notify` from the policy's `notify`, and
    `point` / `observe` during a pass.
    """

    def __init__(self, cfg: ObsConfig, reads: frozenset[str] | None = None) -> None:
        self.cfg = cfg
        # features a consumer reads (None: all); the others stay 0 in `observe`, which
        # then skips the global block when it reads only `bias`, and the candidates'
        # measures when it reads only `present` and `position` (a model giving the
        # others zero weight scores the same: each adds an exact 0)
        self.reads = reads
        self._globals = reads is None or any(f in reads for f in GLOBAL_FEATURES[1:])
        self._measures = reads is None or any(f in reads for f in JOB_FEATURES[2:])
        self._running: dict[int, tuple[float, float, float]] = {}
        self._sums = [0.0, 0.0, 0.0]  # over running jobs: 1/d, s/d, d + s
        self._places: dict[Any, Placement] = {}
        self._places_at = -1
        self._keys: dict[int, Any] = {}  # job -> (request class, fit size), the cache key
        # per level: (GPU type, largest cell size, the cells when sizes are mixed)
        self._levels: list[list[tuple[str, Level, int, frozenset[int]]]] = []
        self._level_cells = [0, 0, 0]
        self._gpu_nodes = 1

    def attach(self, ctx: PolicyContext) -> None:
        """Fresh state for a run: the topology's level sizes and empty running sums."""
        self._running.clear()
        self._sums = [0.0, 0.0, 0.0]
        self._places.clear()
        self._places_at = -1
        self._keys.clear()
        topo = ctx.topology
        self._gpu_nodes = max(1, sum(1 for n in topo.nodes if n.num_gpus))
        codes: Any = getattr(ctx.cluster, "index_codes", None)
        self._levels = []
        self._level_cells = [0] * len(_LEVELS)
        for i, lv in enumerate(_LEVELS):
            groups = []
            for t in topo.gpu_types:
                cells = [c for c in topo.cells if c.level == lv and c.num_gpus
                         and topo.nodes[c.node].gpu_type == t]
                if not cells:
                    continue
                sizes = {c.num_gpus for c in cells}
                if codes is None or codes(t, lv) is None:
                    continue
                mixed = frozenset(c.id for c in cells) if len(sizes) > 1 else frozenset()
                groups.append((t, lv, max(sizes), mixed))
                self._level_cells[i] += len(cells)
            self._levels.append(groups)

    def notify(self, ctx: PolicyContext, job: JobState, kind: str) -> None:
        """Keep the running-job sums from the engine's events (start/resume in, stops out)."""
        if kind in ("start", "resume"):
            d = max(job.spec.duration, 1e-9)
            s = ctx.now - job.work  # as if it ran at speed 1 since its work was 0
            entry = (1.0 / d, s / d, d + s)
            old = self._running.pop(job.idx, None)
            if old is not None:
                self._drop(old)
            self._running[job.idx] = entry
            sums = self._sums
            sums[0] += entry[0]
            sums[1] += entry[1]
            sums[2] += entry[2]
        elif kind in ("preempt", "suspend", "finish", "fail", "kill"):
            old = self._running.pop(job.idx, None)
            if old is not None:
                self._drop(old)

    def _drop(self, entry: tuple[float, float, float]) -> None:
        sums = self._sums
        sums[0] -= entry[0]
        sums[1] -= entry[1]
        sums[2] -= entry[2]
        if not self._running:
            self._sums = [0.0, 0.0, 0.0]  # no drift left behind

    def point(self, ctx: PolicyContext) -> DecisionPoint | None:
        """The current decision point, or None when no candidate can start now.

        The placer's answers are cached per request until the cluster changes, so a
        point costs one placer call per distinct request among the candidates.
        """
        k = self.cfg.k
        version = ctx.cluster.version
        cache = self._places
        if version != self._places_at:
            cache.clear()
            self._places_at = version
        keys = self._keys
        jobs: list[JobState] = []
        places: list[Placement] = []
        valid: list[int] = []
        for job in ctx.pending():
            key = keys.get(job.idx)
            if key is None:
                key = keys[job.idx] = (request_class(job.spec), job.fit_gpus)
            got = cache.get(key)
            if got is None:
                got = cache[key] = ctx.place(job)
            if type(got) is not Unschedulable:
                valid.append(len(jobs))
            jobs.append(job)
            places.append(got)
            if len(jobs) == k:
                break
        if not valid:
            return None
        mask = np.zeros(k + 1, dtype=np.int8)
        mask[valid] = 1
        mask[k] = 1 if ctx.running() else 0
        return DecisionPoint(tuple(jobs), tuple(places), mask)

    def observe(self, ctx: PolicyContext, point: DecisionPoint) -> np.ndarray:
        """The observation vector of a decision point (float32, in [0, 1]).

        Features outside `reads` may be left 0 (see `__init__`).
        """
        cfg = self.cfg
        k = cfg.k
        g = len(GLOBAL_FEATURES)
        f = len(JOB_FEATURES)
        arr = np.zeros(g + k * f, dtype=np.float32)
        if self._globals:
            arr[:g] = self._global_block(ctx)
        else:
            arr[0] = 1.0  # bias
        m = len(point.jobs)
        if m:
            b = arr[g:g + m * f].reshape(m, f)
            b[:, 0] = 1.0
            b[:, 1] = np.arange(m) / k
            if self._measures:
                self._measure(ctx, point, b)
        return arr

    def _global_block(self, ctx: PolicyContext) -> list[float]:
        """The global features, in `GLOBAL_FEATURES` order."""
        cfg = self.cfg
        k = cfg.k
        c = ctx.cluster
        now = ctx.now
        total = max(1, c.total_gpus)
        free = c.free_whole
        hist = [0] * _HIST
        for buckets in c.node_buckets.values():
            for n_free, nodes in enumerate(buckets):
                if nodes:
                    hist[min(n_free, _HIST - 1)] += len(nodes)
        out: list[float] = [1.0, free / total]
        out.extend(h / self._gpu_nodes for h in hist)
        state: Any = c  # a ClusterState: `attach` kept levels only if it has the index
        for i, groups in enumerate(self._levels):
            whole = 0
            for t, lv, size, mixed in groups:
                lst = state.index_codes(t, lv)  # the live list, up to date
                if mixed:  # cells of several sizes at this level: count them one by one
                    cf = c.cell_free
                    last = state.codec.last
                    whole += sum(1 for code in lst
                                 if cf[last(code)] == _size(ctx, last(code)))
                else:
                    whole += len(lst) - bisect_left(lst, state.codec.probe(size))
            out.append(whole / self._level_cells[i] if self._level_cells[i] else 0.0)
        q = ctx.pending_count
        beyond = max(0, q - k)
        n_run = len(self._running)
        out.extend((q / (q + k), beyond / (beyond + k), n_run / (n_run + k),
                    min(1.0, c.busy_milli / (1000.0 * total)), c.healthy_gpus / total))
        if cfg.durations and n_run:
            inv_d, s_d, d_s = self._sums
            done = (now * inv_d - s_d) / n_run
            left = d_s / n_run - now
            out.extend((min(1.0, max(0.0, done)), squash(left)))
        else:
            out.extend((0.0, 0.0))
        return out

    def _measure(self, ctx: PolicyContext, point: DecisionPoint, b: np.ndarray) -> None:
        """The candidates' features after `position` into their blocks `b` (m x F)."""
        now = ctx.now
        free = ctx.cluster.free_whole
        raw = np.array([(j.spec.num_gpus, now - j.queued_since + j.queue_time,
                         j.spec.duration, j.spec.duration * j.spec.num_gpus
                         * j.spec.gpu_share) for j in point.jobs])
        n = raw[:, 0]
        b[:, 2] = n / (n + 8.0)
        b[:, 3] = np.minimum(1.0, n / free) if free else 1.0
        if self.cfg.durations:
            b[:, 4:7] = _squash(raw[:, 1:4])  # wait, duration, GPU time
        else:
            b[:, 4] = _squash(raw[:, 1])
        b[:, 7] = n == 0


def _squash(x: np.ndarray) -> np.ndarray:
    """`squash` over an array."""
    return np.minimum(1.0, np.log1p(np.maximum(x, 0.0) / 60.0) / _SQUASH)


def _size(ctx: PolicyContext, cell: int) -> int:
    return ctx.topology.cells[cell].num_gpus
