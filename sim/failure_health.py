"""Node health under a failure model: component outages, repairs, technicians, hot spares.

`ComponentHealth` replaces `NodeHealth` when the run has a `failure_model`
(`schedlab.sim.failure_models`). It draws the model's component failures from the run's
seeded generator a day of simulated time at a time (exponential components as one Poisson
stream per component, Weibull ones as a renewal process per unit), turns each into an
outage of nodes (a GPU-level failure downs its node; a correlated one its whole domain),
detected `detect_s` later and mended after waiting for a free technician, and puts the
failures and repairs on the agenda as node failures and repairs. Hot spares are nodes
held out of service (drained); when a node in service fails one of them enters service
after `spare_swap_time`, and the mended node becomes a spare.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import numpy as np

from schedlab.sim.agenda import Agenda, Due
from schedlab.sim.cluster import ClusterState
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.failure_models import DAY, Component, FailureModel
from schedlab.sim.jobstate import RUNNING, JobState
from schedlab.sim.model import Level
from schedlab.sim.nodes import NodeHealth
from schedlab.sim.progress import Progress
from schedlab.sim.recorder import Recorder

MODEL: Final = 3  # agenda version of a model's node failure
REPAIR_BASE: Final = 10  # a model's repair: REPAIR_BASE + a token (a later one supersedes)
PULL: Final = 2  # agenda version of "draw the next day of failures" (node -1)
SWAP: Final = 4  # agenda version of "this spare enters service"
DRAIN: Final = 5  # agenda version of "drain this node for a maintenance window"
CHUNK: Final = DAY
"""Simulated seconds of failures drawn at a time."""


class _Stream:
    """One component's failure times, in order: (time, unit)."""

    def __init__(self, comp: Component, units: int, rng: np.random.Generator) -> None:
        self.comp = comp
        self.units = units
        self.rng = rng
        mean = DAY / comp.per_day if comp.per_day > 0 else math.inf  # s, one unit
        self.heap: list[tuple[float, int]] = []
        self.t = math.inf
        self.unit = -1
        if units <= 0 or math.isinf(mean):
            return
        if comp.shape == 1.0:  # memoryless: one stream for all units
            self.gap = mean / units
            self.t = float(rng.exponential(self.gap))
            self.unit = int(rng.integers(units))
        else:  # Weibull: a renewal process per unit, times on a heap
            self.scale = mean / math.gamma(1.0 + 1.0 / comp.shape)
            first = self.scale * rng.weibull(comp.shape, size=units)
            self.heap = [(float(x), u) for u, x in enumerate(first)]
            heapq.heapify(self.heap)
            self.t, self.unit = self.heap[0]

    def step(self) -> None:
        """Move to the next failure."""
        rng = self.rng
        if self.comp.shape == 1.0:
            self.t += float(rng.exponential(self.gap))
            self.unit = int(rng.integers(self.units))
        else:
            t, u = self.heap[0]
            heapq.heapreplace(self.heap, (t + self.scale * float(rng.weibull(self.comp.shape)),
                                          u))
            self.t, self.unit = self.heap[0]


class ComponentHealth(NodeHealth):
    """Node failures and repairs of a failure model, with technicians and hot spares."""

    def __init__(self, cluster: ClusterState, agenda: Agenda, recorder: Recorder,
                 params: Mapping[str, Any], rng: np.random.Generator,
                 clock: Callable[[], float], model: FailureModel) -> None:
        super().__init__(cluster, agenda, recorder, params, rng, clock)
        self.model = model
        topo = cluster.topo
        n_nodes = len(topo.nodes)
        self.node_of_gpu = topo.gpu_node
        # racks: the nodes under each rack-level cell (none: each node its own rack)
        racks = [c for c in topo.cells if c.level == Level.RACK]
        self.racks: list[tuple[int, ...]] = [
            tuple(sorted({topo.gpu_node[g] for g in range(c.gpu_lo, c.gpu_hi)}))
            for c in racks] or [(n,) for n in range(n_nodes)]
        self.rack_of = [0] * n_nodes
        for r, nodes in enumerate(self.racks):
            for n in nodes:
                self.rack_of[n] = r
        self.technicians = int(params["technicians"])
        self.free_at: list[float] = [0.0] * self.technicians  # when each is free (heap)
        self.planned_up = [0.0] * n_nodes  # when a node's drawn outages end
        self.last_repair: dict[int, int] = {}  # node -> version of its last drawn repair
        self.valid_repairs: set[int] = set()  # versions of repairs not superseded
        self._tokens = REPAIR_BASE
        self.cause_at: dict[tuple[int, float], tuple[str, float]] = {}  # -> cause, when
        self.progress: Progress | None = None  # set by the run: hangs before detection
        self.outages: Counter[str] = Counter()  # outages that downed a node, by cause
        self.interruptions: Counter[str] = Counter()  # job interruptions, by cause
        self.job_interruptions: Counter[int] = Counter()  # by job index
        self.drawn_to = 0.0
        units = {"gpu": topo.num_gpus, "node": n_nodes, "rack": len(self.racks)}
        self.streams = [_Stream(c, units[c.unit], rng) for c in model.components]
        self._maint_targets = [self._target(m.target) for m in model.maintenance]
        n_spares = int(params["spare_nodes"])
        if n_spares >= n_nodes:
            raise InvalidParameter(f"spare_nodes {n_spares}: the topology has {n_nodes} "
                                   "nodes; at least one must stay in service")
        self.swap_s = float(params["spare_swap_time"])
        self.pool: set[int] = set(range(n_nodes - n_spares, n_nodes))  # idle spares
        self.replaced: set[int] = set()  # failed nodes a spare took the place of
        self.swaps = 0
        self.maint_drained: set[int] = set()  # drained ahead of a maintenance window

    def _target(self, name: str) -> tuple[int, ...]:
        topo = self.cluster.topo
        if name == "all":
            return tuple(range(len(topo.nodes)))
        for c in topo.cells:
            if c.name == name and c.level >= Level.NODE:
                return tuple(sorted({topo.gpu_node[g] for g in range(c.gpu_lo, c.gpu_hi)}))
        raise InvalidParameter(f"failure model {self.model.name!r}: maintenance target "
                               f"{name!r} is no node or cell of topology {topo.name!r}")

    # --- drawing ---

    def schedule(self) -> None:
        """Set the spares aside and draw the first day of failures."""
        for n in sorted(self.pool):
            self.cluster.drain_node(n)
            self.recorder.node(self.cluster.topo.nodes[n].name, "drain")
        self._draw(CHUNK)

    def _draw(self, until: float) -> None:
        """Put every failure and maintenance window starting before `until` on the agenda."""
        t0 = self.drawn_to
        self.drawn_to = until
        events: list[tuple[float, int, str, tuple[int, ...], float, float]] = []
        for s in self.streams:
            while s.t < until:
                events.append((s.t, len(events), s.comp.name, self._nodes_of(s), s.comp.detect_s,
                               -1.0))
                s.step()
        for m, nodes in zip(self.model.maintenance, self._maint_targets, strict=True):
            # windows whose drain (or start, without one) falls in [t0, until)
            first = m.start_s - m.drain_s
            starts = [m.start_s] if m.every_s <= 0 else [
                m.start_s + k * m.every_s for k in range(
                    max(0, math.ceil((t0 - first) / m.every_s)),
                    max(0, math.ceil((until - first) / m.every_s)))]
            for st in starts:
                if t0 <= st - m.drain_s < until:
                    events.append((st, len(events), "maintenance", nodes, 0.0, m.duration_s))
                    if m.drain_s > 0:
                        for n in nodes:
                            self.agenda.schedule(st - m.drain_s, Due.NODE_REPAIR, n, DRAIN)
        events.sort()
        comps = {c.name: c for c in self.model.components}
        for t, _, cause, nodes, detect, fixed in events:
            td = t + detect
            if fixed >= 0:  # maintenance: planned, no technician
                end = td + fixed
            else:
                c = comps[cause]
                dur = c.repair_s if c.repair_fixed else float(self.rng.exponential(c.repair_s))
                start = td
                if self.technicians > 0:
                    start = max(td, heapq.heappop(self.free_at))
                    heapq.heappush(self.free_at, start + dur)
                end = start + dur
            hit = False
            for n in nodes:
                up = self.planned_up[n] <= td
                if up:  # up then: it fails
                    self.agenda.schedule(td, Due.NODE_FAIL, n, MODEL)
                    self.cause_at[(n, td)] = (cause, t)
                    hit = True
                if end > self.planned_up[n]:
                    if not up:  # down already: its repair moves later
                        self.valid_repairs.discard(self.last_repair[n])
                    self.planned_up[n] = end
                    self._tokens += 1
                    self.last_repair[n] = self._tokens
                    self.valid_repairs.add(self._tokens)
                    self.agenda.schedule(end, Due.NODE_REPAIR, n, self._tokens)
            if hit:
                self.outages[cause] += 1
        self.agenda.schedule(until, Due.NODE_REPAIR, -1, PULL)

    def _nodes_of(self, s: _Stream) -> tuple[int, ...]:
        """The nodes an outage of stream `s`'s current unit takes down."""
        c = s.comp
        if c.unit == "gpu":
            node = self.node_of_gpu[s.unit]
        elif c.unit == "node":
            node = s.unit
        else:
            return self.racks[s.unit]
        if c.correlated > 0 and self.rng.random() < c.correlated:
            return self._domain(node, c.domain)
        return (node,)

    def _domain(self, node: int, domain: str) -> tuple[int, ...]:
        if domain == "node":
            return (node,)
        if domain == "cluster":
            return tuple(range(len(self.rack_of)))
        r = self.rack_of[node]
        if domain == "rack":
            return self.racks[r]
        lo = r - r % self.model.pod_racks  # pod: pod_racks consecutive racks
        return tuple(n for rr in range(lo, min(lo + self.model.pod_racks, len(self.racks)))
                     for n in self.racks[rr])

    # --- applying ---

    def fail(self, node: int, generated: int, jobs: Sequence[JobState],
             interrupt: Callable[[JobState, str], float]) -> None:
        """A node fails (a model outage, or by hand): interrupt its jobs, count the cause."""
        now = self._clock()
        cause, since = self.cause_at.pop((node, now), ("by hand", now)) \
            if generated == MODEL else ("by hand", now)
        if not self.cluster.node_up[node]:
            return
        name = self.cluster.topo.nodes[node].name
        for idx in self.cluster.jobs_on_node(node):
            if jobs[idx].status != RUNNING:
                continue
            if since < now and self.progress is not None:  # hung since the failure
                self.progress.hang_since(jobs[idx], since)
            self.interruptions[cause] += 1
            self.job_interruptions[idx] += 1
            self.lost_gpu_s += interrupt(jobs[idx], f"node {name} failed ({cause})")
        if self.cluster.drained[node]:
            self.cluster.give_back_drain(node)
        self.cluster.fail_node(node)
        self.failures += 1
        self.down_since[node] = now
        self.recorder.node(name, "fail")
        up = self.cluster.node_up
        spare = min((s for s in self.pool if up[s]), default=-1)
        if spare >= 0 and node not in self.pool and node not in self.replaced:
            self.pool.discard(spare)
            self.replaced.add(node)
            self.agenda.schedule(now + self.swap_s, Due.NODE_REPAIR, spare, SWAP)

    def repair(self, node: int, generated: int) -> None:
        """A model repair (unless a later outage extended it), a swap, or the next day."""
        now = self._clock()
        if generated == PULL:
            self._draw(now + CHUNK)
            return
        if generated == SWAP:
            if self.cluster.node_up[node] and self.cluster.drained[node]:
                self.cluster.undrain_node(node)
                self.swaps += 1
                self.recorder.node(self.cluster.topo.nodes[node].name, "restore")
            else:  # the spare failed meanwhile: back to the pool, still drained
                self.pool.add(node)
            return
        if generated == DRAIN:
            c = self.cluster
            if c.node_up[node] and not c.drained[node]:
                c.drain_node(node)
                self.maint_drained.add(node)
                self.recorder.node(c.topo.nodes[node].name, "drain")
            return
        if generated >= REPAIR_BASE:
            if generated not in self.valid_repairs:
                return  # a later outage keeps it down: its own repair is due later
            self.valid_repairs.discard(generated)
        super().repair(node, 0)
        if node in self.maint_drained:  # the window is over: back in service
            self.maint_drained.discard(node)
            if node not in self.pool:
                self.cluster.undrain_node(node)
                self.recorder.node(self.cluster.topo.nodes[node].name, "restore")
        if node in self.replaced:  # its place was taken by a spare: it is one now
            self.replaced.discard(node)
            self.cluster.drain_node(node)
            self.pool.add(node)
            self.recorder.node(self.cluster.topo.nodes[node].name, "drain")

    def count_software(self, job: JobState, cause: str) -> None:
        """A job-level software failure interrupted `job`."""
        self.interruptions[cause] += 1
        self.job_interruptions[job.idx] += 1
