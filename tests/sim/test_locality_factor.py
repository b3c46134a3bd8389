"""`LocalitySpeed`'s factor is its class doc's formula on the topology's levels.

(The walk that finds a placement's level is checked against the cell tree itself in
`tests/topologies/test_cell_walk.py`.)
"""

from __future__ import annotations

import random

import pytest

from schedlab.sim.engine_params import DEFAULT_LOCALITY, NODE_ETHERNET
from schedlab.sim.model import JobSpec, Level
from schedlab.sim.speed import LocalitySpeed
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology


def reference(topo, spec: JobSpec, gpus: tuple[int, ...]) -> float:
    """The factor as the topology's own walks give it (the formula of the class doc)."""
    if len(gpus) <= 1 or spec.locality_sensitivity <= 0:
        return 1.0
    f = DEFAULT_LOCALITY
    actual = topo.lowest_common_level(gpus)
    fa = f.get(actual, 1.0)
    if topo.has_ethernet and actual > Level.NODE \
            and any(topo.nodes[topo.gpu_node[g]].ethernet for g in gpus):
        fa = f.get(NODE_ETHERNET, fa)
    slow = fa / f.get(topo.best_level(len(gpus)), 1.0)
    return 1.0 if slow <= 1.0 else 1.0 / (1.0 + spec.locality_sensitivity * (slow - 1.0))


@pytest.mark.parametrize("topo", [load_topology("philly"), load_topology("default"),
                                  uniform_topology(6, gpus_per_switch=2, name="six")],
                         ids=lambda t: t.name)
def test_factor_matches_the_topology_walk(topo):
    factor = LocalitySpeed(topo, DEFAULT_LOCALITY)
    rng = random.Random(7)
    for _ in range(3000):
        k = rng.randint(1, min(16, topo.num_gpus))
        if rng.random() < 0.5:  # scattered, or a contiguous run of GPUs
            gpus = tuple(sorted(rng.sample(range(topo.num_gpus), k)))
        else:
            s = rng.randrange(topo.num_gpus - k + 1)
            gpus = tuple(range(s, s + k))
        spec = JobSpec("j", 0.0, k, 100.0, locality_sensitivity=rng.choice([0.0, 0.5, 1.0]))
        assert factor.factor(spec, gpus) == reference(topo, spec, gpus), gpus
