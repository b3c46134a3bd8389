"""`take_gpus`' shortcuts pick the GPUs its best-fit search picks (issue 18, placement cost).

Inside a GPU parent it reads the first n free GPUs off the GPUs' free counts, and a cell
with exactly n free gives all of them, without walking the cell tree. The GPUs chosen
must be those of the search (callers sort them, so only the set counts).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.placement.base import take_gpus
from schedlab.sim.cluster import ClusterState
from schedlab.sim.model import MILLI
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology

TOPOS = [uniform_topology(3, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                          name="u3x8"), load_topology("default"), load_topology("philly")]


def searched(c: ClusterState, cell: int, n: int) -> list[int]:
    """The best-fit search itself: the fullest child holding all n, else most free first."""
    topo = c.topo
    node = topo.cells[cell]
    if not node.children:
        return [node.gpu_lo]
    free = c.cell_free
    kids = [k for k in node.children if free[k] > 0]
    fit = [k for k in kids if free[k] >= n]
    if fit:
        return searched(c, min(fit, key=lambda k: (free[k], k)), n)
    out: list[int] = []
    for k in sorted(kids, key=lambda k: (-free[k], k)):
        out.extend(searched(c, k, min(free[k], n - len(out))))
        if len(out) == n:
            break
    return out


@settings(max_examples=40, deadline=None)
@given(topo_i=st.integers(0, 2), data=st.data())
def test_take_gpus_picks_the_gpus_the_search_picks(topo_i, data):
    topo = TOPOS[topo_i]
    c = ClusterState(topo)
    free = list(range(topo.num_gpus))
    busy = data.draw(st.lists(st.sampled_from(free), max_size=topo.num_gpus, unique=True))
    for i, g in enumerate(busy):
        c.allocate(i, (g,), MILLI)
    cells = [cell.id for cell in topo.cells if c.cell_free[cell.id] > 0]
    for cell in data.draw(st.lists(st.sampled_from(cells), min_size=1, max_size=8)):
        n = data.draw(st.integers(1, c.cell_free[cell]))
        got = take_gpus(c, cell, n)
        assert sorted(got) == sorted(searched(c, cell, n))
        assert len(set(got)) == n and all(c.gpu_free[g] == MILLI for g in got)
