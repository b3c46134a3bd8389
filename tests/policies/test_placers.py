"""Placers: where each one puts jobs, on hand-built cluster states."""

from __future__ import annotations

from schedlab.sim.cluster import ClusterState
from schedlab.sim.model import JobSpec, Level, Unschedulable
from schedlab.sim.registry import PLACERS
from schedlab.topologies.build import uniform_topology
from schedlab.topologies.native import native_from_dict


def dgx(nodes=2, **kw):
    return uniform_topology(nodes, sockets=2, switches_per_socket=2, gpus_per_switch=2, **kw)


def place(name, job, state):
    return PLACERS[name]().place(job, state)


def J(n, **kw):
    return JobSpec("j", 0.0, n, 10.0, **kw)


def test_pack_takes_the_tightest_cell_then_the_fullest_node():
    topo = dgx(2)
    st = ClusterState(topo)
    st.allocate(100, (0,), 1000)  # node0: switch0 half used
    st.allocate(101, (8, 9, 10), 1000)  # node1: switch0 full, switch1 half used
    # one GPU: the half-free switch in the fuller node (node1 has 5 free, node0 7)
    assert place("pack", J(1), st) == (11,)
    # two GPUs: a whole free switch; ties go to the fullest socket, then node, so the
    # switch next to GPU 0 is taken and the whole free socket of node1 stays whole
    assert place("pack", J(2), st) == (2, 3)
    # four GPUs: a whole socket (node1 socket1)
    assert place("pack", J(4), st) == (12, 13, 14, 15)


def test_consolidated_waits_instead_of_spreading():
    topo = dgx(2)
    st = ClusterState(topo)
    st.allocate(100, (0, 1, 2, 3, 4), 1000)
    st.allocate(101, (8, 9, 10, 11, 12), 1000)
    # 6 free GPUs in total, 3 per node: a 4-GPU job would have to cross nodes
    assert isinstance(place("consolidated", J(4), st), Unschedulable)
    got = place("pack", J(4), st)
    assert len(got) == 4 and topo.lowest_common_level(got) == Level.CLUSTER
    # 16 GPUs need two whole nodes: fine for consolidated on an empty cluster
    assert len(place("consolidated", J(16), ClusterState(topo))) == 16


def test_first_fit_takes_the_lowest_numbered_node_and_gpus():
    topo = dgx(2)
    st = ClusterState(topo)
    st.allocate(100, (1,), 1000)
    assert place("first-fit", J(2), st) == (0, 2)
    assert place("first-fit", J(8), st) == tuple(range(8, 16))


def test_whole_node_jobs_prefer_whole_free_nodes_on_pack():
    topo = dgx(3)
    st = ClusterState(topo)
    st.allocate(100, (8,), 1000)
    assert place("pack", J(16), st) == tuple(range(0, 8)) + tuple(range(16, 24))


def test_fractional_jobs_share_best_fit():
    topo = dgx(1)
    st = ClusterState(topo)
    st.allocate(100, (3,), 700)  # GPU 3 has 0.3 free
    st.allocate(101, (5,), 400)  # GPU 5 has 0.6 free
    assert place("pack", J(1, gpu_share=0.25), st) == (3,)
    assert place("pack", J(1, gpu_share=0.5), st) == (5,)
    got = place("pack", J(1, gpu_share=0.8), st)
    assert got not in ((3,), (5,)) and len(got) == 1


def test_gpu_type_constraint_and_unknown_type():
    topo = native_from_dict({"name": "mix", "nodes": [
        {"count": 1, "gpu_type": "K80", "sockets": 1, "switches_per_socket": 1,
         "gpus_per_switch": 4},
        {"count": 1, "gpu_type": "V100", "sockets": 1, "switches_per_socket": 1,
         "gpus_per_switch": 4}]}, "mix.yaml")
    st = ClusterState(topo)
    v100 = {g for g in range(topo.num_gpus) if topo.node_of_gpu(g).gpu_type == "V100"}
    assert set(place("pack", J(2, gpu_type="V100"), st)) <= v100
    bad = place("pack", J(2, gpu_type="A100"), st)
    assert isinstance(bad, Unschedulable) and not bad.resolvable and "A100" in bad.reason


def test_host_resources_are_respected():
    topo = dgx(2, num_cpus=16, mem_gb=100)
    st = ClusterState(topo)
    st.allocate(100, (0,), 1000, cpus=14)  # node0 has 2 CPUs left
    got = place("pack", J(1, num_cpus=4), st)
    assert topo.node_of_gpu(got[0]).name == "node1"


def test_too_big_is_not_resolvable_but_busy_is():
    topo = dgx(1)
    st = ClusterState(topo)
    big = place("pack", J(9), st)
    assert isinstance(big, Unschedulable) and not big.resolvable
    st.allocate(100, tuple(range(8)), 1000)
    busy = place("pack", J(1), st)
    assert isinstance(busy, Unschedulable) and busy.resolvable


def test_gangs_of_tasks_are_placed_whole():
    topo = dgx(2)
    st = ClusterState(topo)
    st.allocate(100, (0, 1, 2, 3, 4, 5), 1000)
    got = place("pack", J(4, gpus_per_task=2), st)
    assert len(got) == 4 and len(set(got)) == 4
    # the tentative allocations were rolled back
    assert st.free_whole == 10


def test_cluster_indexes_stay_consistent_after_churn():
    import numpy as np

    topo = dgx(4, nodes_per_rack=2)
    st = ClusterState(topo)
    rng = np.random.default_rng(0)
    held = {}
    for step in range(400):
        if held and rng.random() < 0.5:
            job = list(held)[int(rng.integers(len(held)))]
            st.release(job, held.pop(job), 1000)
        else:
            got = place("pack", J(int(rng.choice([1, 2, 4, 8]))), st)
            if not isinstance(got, Unschedulable):
                st.allocate(step, got, 1000)
                held[step] = got
        # the cached counts equal a recount from scratch
        for c in topo.cells:
            free = sum(1 for g in range(c.gpu_lo, c.gpu_hi) if st.gpu_free[g] == 1000)
            assert st.cell_free[c.id] == free
        assert st.free_whole == sum(1 for f in st.gpu_free if f == 1000)


def test_consolidated_uses_the_node_size_of_the_jobs_gpu_type():
    # 2-GPU K80 nodes next to 8-GPU P40 nodes: an 8-GPU K80 job must span 4 K80 nodes
    topo = native_from_dict({"name": "mix", "nodes": [
        {"count": 4, "gpu_type": "K80", "sockets": 1, "switches_per_socket": 1,
         "gpus_per_switch": 2},
        {"count": 1, "gpu_type": "P40", "sockets": 2, "switches_per_socket": 2,
         "gpus_per_switch": 2}]}, "mix.yaml")
    got = place("consolidated", J(8, gpu_type="K80"), ClusterState(topo))
    assert len(got) == 8 and {topo.node_of_gpu(g).gpu_type for g in got} == {"K80"}


def test_cluster_change_set_names_every_node_that_changed():
    st = ClusterState(uniform_topology(3, gpus_per_switch=2))
    seen = st.watch()
    assert seen == {0, 1, 2}  # a new watcher reads everything once
    seen.clear()
    st.allocate(7, (2, 3), 1000)  # node 1
    assert seen == {1}
    seen.clear()
    st.release(7, (2, 3), 1000)
    st.fail_node(2)
    assert seen == {1, 2}
    seen.clear()
    st.repair_node(2)
    assert seen == {2}


def test_placers_never_change_the_state_they_read():
    # gangs are placed task by task on a scratch twin: the live state, its version and
    # its change sets stay as they were, and the answer is the same when asked again
    topo = dgx(3, num_cpus=32, mem_gb=256)
    st = ClusterState(topo)
    st.allocate(100, (0, 1, 2, 9), 1000, cpus=8)
    st.allocate(101, (17,), 500)
    seen = st.watch()
    seen.clear()
    before = (st.version, list(st.gpu_free), list(st.node_cpu_free), st.free_whole)
    for name in PLACERS:
        for job in (J(4, gpus_per_task=2, num_cpus=8), J(6, gpus_per_task=3), J(1),
                    J(1, gpu_share=0.5), J(12, gpus_per_task=4)):
            placer = PLACERS[name]()
            first = placer.place(job, st)
            assert placer.place(job, st) == first, (name, job)
            assert (st.version, list(st.gpu_free), list(st.node_cpu_free),
                    st.free_whole) == before, (name, job)
            assert not seen, (name, job)


def test_the_package_reexports_the_registered_placers():
    import schedlab.policies.placement as placement
    from schedlab.policies.placement.first_fit import FirstFitPlacer

    assert placement.FirstFitPlacer is FirstFitPlacer is PLACERS["first-fit"]
    assert {PLACERS[n]().name for n in PLACERS} >= {"pack", "consolidated", "first-fit", "fgd"}


def _k80_then_v100():
    """Two 4-GPU K80 nodes (indices 0, 1) before one 4-GPU V100 node (index 2)."""
    return native_from_dict({"name": "het", "nodes": [
        {"count": 2, "gpu_type": "K80", "sockets": 1, "switches_per_socket": 1,
         "gpus_per_switch": 4},
        {"count": 1, "gpu_type": "V100", "sockets": 1, "switches_per_socket": 1,
         "gpus_per_switch": 4}]}, "het.yaml")


def test_every_placer_puts_a_job_with_gpu_speeds_on_the_fastest_type_that_holds_it():
    topo = _k80_then_v100()
    speeds = (("V100", 1.0), ("K80", 0.2))
    for name in ("consolidated", "pack", "first-fit", "fgd"):
        state = ClusterState(topo)
        got = place(name, J(2, gpu_speeds=speeds), state)
        assert {topo.node_of_gpu(g).gpu_type for g in got} == {"V100"}, name
        # a job without speeds keeps the type-blind search (first-fit: node 0, a K80)
        if name == "first-fit":
            assert topo.node_of_gpu(place(name, J(2), state)[0]).gpu_type == "K80"
        # the V100 node busy: the slower type rather than waiting
        v100 = [g for g in range(topo.num_gpus) if topo.node_of_gpu(g).gpu_type == "V100"]
        state.allocate(0, tuple(v100), 1000)
        got = place(name, J(2, gpu_speeds=speeds), state)
        assert {topo.node_of_gpu(g).gpu_type for g in got} == {"K80"}, name
        # too large for the V100 node: the K80s hold it
        assert len(place(name, J(8, gpu_speeds=speeds), ClusterState(topo))) == 8
