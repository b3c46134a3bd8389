"""The scratch twin of a cluster state always holds what the live state holds.

What-ifs (`ClusterState.sandbox`) run on a twin kept current from a log of the live
state's changes and rolled back after each use; the replay and the rollback take logged
GPU changes straight to `_apply`. On random sequences of live changes (jobs of whole and
shared GPUs arriving and leaving, nodes failing and coming back) with sandboxes in
between that change the twin freely (and nest), every structure a placer reads must be
the live state's at each sandbox's entry.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.cluster import ClusterState
from schedlab.sim.model import MILLI
from schedlab.topologies.build import uniform_topology

TOPO = uniform_topology(4, sockets=2, switches_per_socket=2, gpus_per_switch=2)


def snapshot(c: ClusterState) -> tuple[Any, ...]:
    """Everything a placer or a policy reads of a cluster state."""
    return (
        list(c.gpu_free), [sorted(h.items()) for h in c.gpu_holders], list(c.cell_free),
        {t: [list(b) for b in bs] for t, bs in c.node_buckets.items()},
        {t: list(p) for t, p in c.partial.items()},
        {lk: list(v) for lk, v in sorted(c.level_index.items(), key=repr)},
        c.free_whole, dict(c.free_by_type), c.busy_milli, c.free_in_free_nodes,
        c.healthy_gpus, c.nodes_down, list(c.node_up), list(c.node_cpu_free),
        [sorted(h.items()) for h in c.host_jobs],
    )


def _step(c: ClusterState, held: dict[int, tuple[tuple[int, ...], int]], op: int,
          pick: int, size: int, job: int) -> None:
    """One change: allocate, release, fail or repair, as the draw allows (else nothing)."""
    if op == 0:  # a job takes `size` GPUs with `milli` free each, if there are
        milli = (MILLI, MILLI, 500, 250)[pick % 4]
        free = [g for g in range(TOPO.num_gpus)
                if c.gpu_free[g] >= milli and c.node_up[TOPO.gpu_node[g]]]
        if len(free) >= size:
            start = pick % (len(free) - size + 1)
            gpus = tuple(free[start:start + size])
            c.allocate(job, gpus, milli)
            held[job] = (gpus, milli)
    elif op == 1 and held:
        k = sorted(held)[pick % len(held)]
        gpus, milli = held.pop(k)
        c.release(k, gpus, milli)
    elif op == 2:
        node = pick % len(TOPO.nodes)
        cell = TOPO.cells[TOPO.nodes[node].cell]
        if c.node_up[node] and not any(c.gpu_holders[g] for g in range(cell.gpu_lo,
                                                                          cell.gpu_hi)):
            c.fail_node(node)
    elif op == 3:
        c.repair_node(pick % len(TOPO.nodes))


ops = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 99), st.integers(1, 8)),
               min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(ops, st.lists(ops, min_size=1, max_size=6))
def test_the_twin_holds_the_live_state_at_every_sandbox(live_ops: Any, scratch_ops: Any) -> None:
    c = ClusterState(TOPO)
    held: dict[int, tuple[tuple[int, ...], int]] = {}
    job = 0
    for n, (op, pick, size) in enumerate(live_ops):
        if op == 4:  # a sandbox: it starts as the live state, and is changed freely
            with c.sandbox() as twin:
                assert snapshot(twin) == snapshot(c)
                mine = dict(held)
                for sop, spick, ssize in scratch_ops[n % len(scratch_ops)]:
                    if sop == 4:
                        with twin.sandbox() as nested:  # nests: rolled back to its mark
                            before = snapshot(nested)
                            _step(nested, dict(mine), 1, spick, ssize, 10_000 + spick)
                            _step(nested, dict(mine), 0, spick, ssize, 20_000 + spick)
                        assert snapshot(twin) == before
                    else:
                        job += 1
                        _step(twin, mine, sop, spick, ssize, 100_000 + job)
            continue
        job += 1
        _step(c, held, op, pick, size, job)
    with c.sandbox() as twin:
        assert snapshot(twin) == snapshot(c)


def test_a_job_that_came_and_went_between_two_sandboxes_is_not_replayed() -> None:
    """The sync skips an allocation and its release (same job, GPUs and share), but
    counts them: the twin's version is that of a full replay."""
    from schedlab.sim.cluster import _cancelled

    c = ClusterState(TOPO)
    with c.sandbox():
        pass  # the twin exists from here on, fed by the log
    c.allocate(1, (0, 1), MILLI)
    c.allocate(2, (2,), 500)
    c.release(1, (0, 1), MILLI)
    c.allocate(3, (4,), MILLI, cpus=2.0)
    c.release(3, (4,), MILLI, cpus=2.0)  # host resources: replayed (float sums)
    assert _cancelled(c._log) == {0, 2}
    twin = c._twin
    assert twin is not None
    before = twin.version
    with c.sandbox() as scratch:
        assert snapshot(scratch) == snapshot(c)
        assert scratch.version == before + 5
