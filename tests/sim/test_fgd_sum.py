"""The cluster's running FGD sum equals a recount over its nodes (issue 18, engine cost).

Each change updates only the changed node's term, read from a per-capacity table when
the node is up and holds no shared GPU; the sum must stay what a recount gives, through
whole and shared allocations, releases, failures and repairs.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.cluster import ClusterState
from schedlab.sim.model import MILLI, JobSpec
from schedlab.sim.recorder import FgdMetric
from schedlab.topologies.build import uniform_topology

TOPO = uniform_topology(4, sockets=2, switches_per_socket=2, gpus_per_switch=2, name="u4x8")
MIX = tuple(JobSpec(f"m{i}", 0.0, g, 10.0) for i, g in enumerate((1, 1, 2, 4, 8)))


def recount(c: ClusterState, fgd: FgdMetric) -> float:
    total = 0.0
    for n in TOPO.nodes:
        if not c.node_up[n.index]:
            continue
        cell = TOPO.cells[n.cell]
        gf = c.gpu_free[cell.gpu_lo:cell.gpu_hi]
        total += fgd(n.num_gpus, sum(1 for f in gf if f == MILLI),
                     tuple(f for f in gf if 0 < f < MILLI))
    return total


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 31), st.sampled_from(
    [MILLI, 500, 250])), min_size=1, max_size=40))
def test_fgd_sum_is_the_sum_of_the_nodes_fgd(ops):
    fgd = FgdMetric(MIX)
    c = ClusterState(TOPO, fgd=fgd)
    held: dict[int, tuple[tuple[int, ...], int]] = {}
    for i, (op, g, milli) in enumerate(ops):
        node = TOPO.gpu_node[g]
        if op == 0 and held:  # release the oldest holding
            job = min(held)
            gpus, m = held.pop(job)
            c.release(job, gpus, m)
        elif op == 1 and c.node_up[node] and not c.jobs_on_node(node):
            c.fail_node(node)
        elif op == 2 and not c.node_up[node]:
            c.repair_node(node)
        elif c.node_up[node] and c.gpu_free[g] >= milli:
            c.allocate(i, (g,), milli)
            held[i] = ((g,), milli)
        assert c.fgd_sum == pytest.approx(recount(c, fgd), abs=1e-9)
