"""How fast a job runs: an ordered chain of speed factors whose product is its rate.

A rate of 1 means one second of the trace's `duration` per second. The built-in chain is
GPU type (the slowest type of the placement, from `gpu_speeds`), locality (the slowdown
of the placement's lowest common level, `locality_factors`), elasticity (an elastic job
away from its nominal size) and co-location (time-slicing or packing with other jobs).
More factors are registered in `schedlab.sim.registry.SPEED_FACTORS` (or named as
'module:Class') and enabled per run with the `speed_factors` engine parameter; they are
applied after the built-in ones. A factor is asked whenever a job's placement or
co-location changes and must be deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mypy_extensions import mypyc_attr

from schedlab.sim.interfaces import SpeedFactor
from schedlab.sim.jobstate import JobState, plain_spec
from schedlab.sim.model import JobSpec, Level
from schedlab.sim.registry import SPEED_FACTORS

if TYPE_CHECKING:
    from schedlab.sim.interfaces import RunView
    from schedlab.topologies.tree import Topology
    from schedlab.topologies.walk import CellWalk


@mypyc_attr(allow_interpreted_subclasses=True)
class GpuTypeSpeed:
    """The job's speed on the slowest GPU type of its placement (`gpu_speeds`)."""

    name = "gpu_type"

    def __init__(self, topo: Topology) -> None:
        self._topo = topo

    def factor(self, job: JobState | JobSpec, gpus: tuple[int, ...], run: Any = None
               ) -> float:
        """Multiplier of the job's speed on `gpus`."""
        spec = job.spec if isinstance(job, JobState) else job
        if not spec.gpu_speeds:
            return 1.0
        topo = self._topo
        types = {topo.nodes[topo.gpu_node[g]].gpu_type for g in gpus}
        return min(spec.speed_on(t) for t in sorted(types))


@mypyc_attr(allow_interpreted_subclasses=True)
class LocalitySpeed:
    """Slowdown of the placement's lowest common level against the best one for its size.

    With factors f (`locality_factors`) and the job's sensitivity s, the speed is
    1 / (1 + s (f[actual] / f[best] - 1)). A placement spanning nodes (actual above the
    node level) any of which is on ethernet takes f[actual] = f["node_ethernet"] (the
    best level is the topology's, so ethernet always pays against infiniband's ideal).
    """

    name = "locality"

    def __init__(self, topo: Topology, factors: Mapping[Level | str, float]) -> None:
        self._topo = topo
        self._f = factors
        # per node: on ethernet? (None when no node is: the common case costs nothing)
        self._eth: tuple[bool, ...] | None = (
            tuple(n.ethernet for n in topo.nodes) if topo.has_ethernet else None)
        self._walk: CellWalk = topo.walk  # the topology's lowest-common-cell walk

    def factor(self, job: JobState | JobSpec, gpus: tuple[int, ...], run: Any = None
               ) -> float:
        """Multiplier of the job's speed on `gpus`."""
        if isinstance(job, JobState):
            spec = job.spec
            if job.tasks:  # a job with roles: its GPU tasks and where its `ps` sit
                return self._roles(spec, gpus, job.tasks)
        else:
            spec = job
        if len(gpus) <= 1 or spec.locality_sensitivity <= 0:
            return 1.0
        return self._slowdown(spec, gpus, self._walk.lowest_common_level(gpus), ())

    def _roles(self, spec: JobSpec, gpus: tuple[int, ...], tasks: tuple[Any, ...]
               ) -> float:
        """A job with roles: the level of its gang's GPU tasks and its off-node `ps` tasks."""
        if spec.locality_sensitivity <= 0 or not gpus:
            return 1.0
        topo = self._topo
        actual, nodes = roles_level(topo, gpus, tasks)
        if actual <= Level.GPU:
            return 1.0
        return self._slowdown(spec, gpus, actual, nodes)

    def _slowdown(self, spec: JobSpec, gpus: tuple[int, ...], actual: Level,
                  nodes: tuple[int, ...]) -> float:
        """The slowdown at level `actual` (ethernet when a GPU's or one of `nodes`' is)."""
        topo = self._topo
        best = self._walk.best_level(len(gpus))
        fa = self._f.get(actual, 1.0)
        eth = self._eth
        if eth is not None and actual > Level.NODE:
            gnode = topo.gpu_node
            if any(eth[gnode[g]] for g in gpus) or any(eth[n] for n in nodes):
                fa = self._f.get("node_ethernet", fa)
        slow = fa / self._f.get(best, 1.0)
        if slow <= 1.0:
            return 1.0
        return 1.0 / (1.0 + spec.locality_sensitivity * (slow - 1.0))


def roles_level(topo: Topology, gpus: tuple[int, ...], tasks: tuple[Any, ...]
                ) -> tuple[Level, tuple[int, ...]]:
    """Lowest common level of a job with roles, and the nodes of its off-node `ps` tasks.

    The level of the gang's GPUs (`gpus`), raised to the lowest cell holding both them and
    every CPU-only task (a `ps`) that sits on a node holding none of them: such a task
    makes the job pay the cross-node factor.
    """
    gnode = topo.gpu_node
    on = {gnode[g] for g in gpus}
    off = tuple(sorted({t.node for t in tasks if not t.gpus and t.node not in on}))
    if not gpus:
        return Level.GPU, off
    common = topo.walk.lowest_common_cell(gpus)
    if not off:
        return topo.cells[common].level, off
    cells = topo.cells
    for n in off:
        above = set(topo.ancestors(common))
        c = topo.nodes[n].cell
        while c not in above:
            c = cells[c].parent
        common = c
    return cells[common].level, off


@mypyc_attr(allow_interpreted_subclasses=True)
class ElasticSpeed:
    """An elastic job on k GPUs instead of its nominal n: k/n (linear) or Amdahl's law."""

    name = "elastic"

    def __init__(self, scaling: str, serial_fraction: float) -> None:
        self._linear = scaling == "linear"
        self._f = serial_fraction

    def factor(self, job: JobState, gpus: tuple[int, ...], run: Any = None) -> float:
        """Multiplier of the job's speed on `gpus`."""
        k, n = len(gpus), job.spec.num_gpus
        if k == n or n <= 0:
            return 1.0
        if self._linear:
            return k / n
        f = self._f
        return (f + (1 - f) / n) / (f + (1 - f) / k)


class GroupSpeeds(Protocol):
    """The speed of a job in its time-sharing or packing group (`schedlab.sim.colocation`)."""

    def factor(self, job: JobState) -> float:
        """The job's speed multiplier in its group."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)
class ColocationSpeed:
    """A member of a time-sharing or packing group (1 when the job runs alone)."""

    name = "colocation"

    def __init__(self, colocation: GroupSpeeds) -> None:
        self._co = colocation

    def factor(self, job: JobState, gpus: tuple[int, ...], run: Any = None) -> float:
        """Multiplier of the job's speed on `gpus`."""
        return 1.0 if job.group is None else self._co.factor(job)


@mypyc_attr(allow_interpreted_subclasses=True)
class NodeSpeed:
    """Speed multipliers of nodes set during the run (`RunHandle.set_speed`).

    A gang runs at the pace of its slowest node, so a job's factor is the least of its
    GPUs' nodes'. Put on the chain only once a multiplier is set.
    """

    def __init__(self, topo: Topology) -> None:
        self._gpu_node = topo.gpu_node
        self.speed: list[float] = [1.0] * len(topo.nodes)

    def factor(self, job: JobState | JobSpec, gpus: tuple[int, ...], run: Any = None
               ) -> float:
        """The least multiplier of the nodes of `gpus` (1 with none)."""
        speed, node = self.speed, self._gpu_node
        return min((speed[node[g]] for g in gpus), default=1.0)


@mypyc_attr(allow_interpreted_subclasses=True)
class SpeedChain:
    """The ordered factors of one run; `rate` is their product for a job where it runs."""

    def __init__(self, builtin: Sequence[Any], extra: Sequence[str], run: RunView,
                 placement: int = 2, model: Any = None) -> None:
        # the first `placement` factors are a placement's own speed (type and locality;
        # with a performance model, the model first)
        self.placement = tuple(builtin[:placement])
        self.factors: tuple[Any, ...] = tuple(builtin) + tuple(
            make_factor(name) for name in extra)
        self._run = run
        # the run's performance-model factor (`schedlab.sim.perf.speed.ModelSpeed`): its
        # jobs' speed may change with their progress (`horizon`), their restart cost is
        # the model's (`restart_cost`); None for a run whose jobs name no model
        self.model = model
        # only the built-in factors: a job none of them slows down runs at 1 (`rate`)
        self._builtin_only = not extra and tuple(map(type, self.factors)) == (
            GpuTypeSpeed, LocalitySpeed, ElasticSpeed, ColocationSpeed)

    def add(self, factor: Any) -> None:
        """Append a factor during the run (the caller re-rates the jobs it slows)."""
        self.factors = self.factors + (factor,)
        self._builtin_only = False

    def rate(self, job: JobState) -> float:
        """The job's speed on its current GPUs (1 for a job that holds none)."""
        gpus = job.gpus
        if not gpus:
            return 1.0
        # a job with roles may pay for an off-node `ps` even on one GPU (`LocalitySpeed`)
        if self._builtin_only and job.group is None and not job.tasks:
            s = job.spec
            plain = plain_spec(s)  # no speeds, locality_sensitivity 1
            if (len(gpus) == s.num_gpus and (plain or not s.gpu_speeds)
                    and (len(gpus) == 1 or not plain and s.locality_sensitivity <= 0)):
                return 1.0  # each built-in factor is 1: alone, own type, size, locality
        speed = 1.0
        run = self._run
        for f in self.factors:
            speed *= f.factor(job, gpus, run)
        return speed

    def horizon(self, job: JobState) -> float:
        """Work (ideal s) at which the job's rate must be asked again (inf: never)."""
        model = self.model
        return math.inf if model is None else float(model.horizon(job))

    def restart_cost(self, spec: JobSpec, default: float) -> float:
        """Seconds of no progress when the job (re)starts or moves.

        Its model's restart cost when the model gives one (at every start), else `default`.
        """
        model = self.model
        if model is None or not spec.model:
            return default
        cost = model.restart_cost(spec)
        return default if cost is None else float(cost)

    def placement_speed(self, spec: JobSpec, gpus: tuple[int, ...]) -> float:
        """Speed on these GPUs alone: type x locality (no sharing, no resizing)."""
        if not gpus:
            return 1.0
        speed = 1.0
        for f in self.placement:
            speed *= f.factor(spec, gpus, self._run)
        return speed


def make_factor(name: str) -> SpeedFactor:
    """An instance of a registered speed factor (or 'module:Class'), built with no args."""
    factor: SpeedFactor = SPEED_FACTORS.get(name)()
    return factor
