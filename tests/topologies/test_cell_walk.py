"""`schedlab.topologies.walk.CellWalk`: the lowest common cell and best level from first principles.

Every start, resume and multi-node placement asks the walk, compiled with the engine;
here it is compared with the cell tree itself (intersecting the GPUs' ancestor chains,
scanning every cell for the best level) on random placements over several topologies.
"""

from __future__ import annotations

import pickle
import random

import pytest

from schedlab.sim.model import Level
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology


def ancestors(topo, cell: int) -> list[int]:
    """The cell and its ancestors up to the root, lowest first."""
    out = []
    while cell >= 0:
        out.append(cell)
        cell = topo.cells[cell].parent
    return out


def common_cell(topo, gpus) -> int:
    """The lowest cell on every GPU's chain to the root."""
    chains = [ancestors(topo, topo.gpu_cells[g]) for g in gpus]
    shared = set(chains[0]).intersection(*chains[1:])
    return next(c for c in chains[0] if c in shared)


def best_level(topo, n: int) -> Level:
    """The lowest level of any cell holding at least n GPUs (the root's if none)."""
    levels = [c.level for c in topo.cells if c.num_gpus >= n]
    return min(levels) if levels else max(c.level for c in topo.cells)


TOPOLOGIES = [load_topology("philly"), load_topology("default"),
              uniform_topology(6, gpus_per_switch=2, name="six")]


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=lambda t: t.name)
def test_walk_matches_the_cell_tree(topo):
    walk = topo.walk
    rng = random.Random(11)
    for _ in range(2000):
        k = rng.randint(1, min(16, topo.num_gpus))
        if rng.random() < 0.5:  # scattered, or a contiguous run of GPUs
            gpus = rng.sample(range(topo.num_gpus), k)
        else:
            s = rng.randrange(topo.num_gpus - k + 1)
            gpus = list(range(s, s + k))
        want = common_cell(topo, gpus)
        assert walk.lowest_common_cell(gpus) == want, gpus
        assert walk.lowest_common_cell(tuple(gpus)) == want
        assert topo.lowest_common_level(gpus) == topo.cells[want].level
    for n in [-1, 0, *range(1, topo.num_gpus + 1), topo.num_gpus + 1, 10**6]:
        assert topo.best_level(n) == best_level(topo, max(n, 1)), n


def test_a_topology_pickles_with_its_walk():
    """Sweeps send topologies to Dask workers: the walk travels and answers the same."""
    topo = TOPOLOGIES[0]
    back = pickle.loads(pickle.dumps(topo))
    gpus = (0, 5, 9)
    assert back.walk.lowest_common_cell(gpus) == topo.walk.lowest_common_cell(gpus)
    assert back.best_level(8) == topo.best_level(8)
