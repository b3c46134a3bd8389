"""FGD: fragmentation gradient descent placement, as a placer and as a policy."""

from __future__ import annotations

import math

import pytest
from conftest import make_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.policies.fgd import FgdPolicy
from schedlab.policies.placement.fgd import FgdPlacer, ShapeCounter, node_fragmentation
from schedlab.policies.placement.pack import PackPlacer
from schedlab.policies.registry import policy_class
from schedlab.sim.cluster import ClusterState
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec, Unschedulable
from schedlab.topologies.build import uniform_topology

ONE = (1, 1000, 0.0, "")
EIGHT = (8, 1000, 0.0, "")


def test_registered_by_name():
    assert policy_class("fgd") is FgdPolicy


def test_fragmentation_of_a_node():
    # 4 whole free GPUs and a shared one with 300 free, half the tasks 1 GPU, half 8:
    # a 1-GPU task leaves the 0.3 stranded, an 8-GPU task cannot use any of the 4.3
    state = ("V100", 8, 4, (300,), 64.0)
    assert node_fragmentation(state, ((ONE, 0.5), (EIGHT, 0.5))) == pytest.approx(
        0.5 * 0.3 + 0.5 * 4.3)
    # a task that needs more CPUs than the node has free cannot use its GPUs either
    hungry = ((1, 1000, 80.0, ""), 1.0)
    assert node_fragmentation(state, (hungry,)) == pytest.approx(4.3)
    # nor one bound to another GPU type
    other = ((1, 1000, 0.0, "K80"), 1.0)
    assert node_fragmentation(state, (other,)) == pytest.approx(4.3)


def test_fgd_keeps_a_whole_node_for_a_later_8_gpu_job(dgx2):
    # node1 has one free GPU per switch (8, 10, 12, 14 busy). Pack puts a 2-GPU job on a
    # free switch of node0; FGD puts it on node1 (gradient -1 there, +3 on node0), so
    # node0 stays whole for the 8-GPU jobs of the workload
    cluster = ClusterState(dgx2)
    cluster.allocate(99, (8, 10, 12, 14), 1000)
    job = JobSpec("two", 0.0, 2, 10.0)
    assert PackPlacer().place(job, cluster) == (0, 1)
    fgd = FgdPlacer(workload=((ONE, 0.5), (EIGHT, 0.5)))
    got = fgd.place(job, cluster)
    assert got == (9, 11)
    cluster.allocate(100, got, 1000)
    assert fgd.place(JobSpec("big", 0.0, 8, 10.0), cluster) == tuple(range(8))


def test_fgd_puts_a_share_where_the_rest_stays_usable():
    # GPU0 has 600 free, GPU1 500, the others none; the workload is half-GPU tasks.
    # A 0.1 share on GPU1 leaves 400 (useless to them): best fit does that; FGD puts it
    # on GPU0, leaving 500 (usable).
    topo = uniform_topology(1, gpus_per_switch=4)
    cluster = ClusterState(topo)
    cluster.allocate(1, (0,), 400)
    cluster.allocate(2, (1,), 500)
    cluster.allocate(3, (2, 3), 1000)
    job = JobSpec("s", 0.0, 1, 10.0, gpu_share=0.1)
    assert PackPlacer().place(job, cluster) == (1,)
    assert FgdPlacer(workload=(((1, 500, 0.0, ""), 1.0),)).place(job, cluster) == (0,)


def test_fgd_placer_follows_cluster_changes(dgx2):
    # the bare placer re-reads node states on every call: no stale scores
    cluster = ClusterState(dgx2)
    fgd = FgdPlacer(workload=((ONE, 0.5), (EIGHT, 0.5)))
    first = fgd.place(JobSpec("a", 0.0, 1, 1.0), cluster)
    cluster.allocate(1, first, 1000)
    second = fgd.place(JobSpec("b", 0.0, 1, 1.0), cluster)
    assert set(second).isdisjoint(first)
    assert dgx2.gpu_node[second[0]] == dgx2.gpu_node[first[0]]  # packs the same node
    cluster.release(1, first, 1000)
    assert fgd.place(JobSpec("c", 0.0, 1, 1.0), cluster) == first


def test_fgd_rejects_like_other_placers(dgx2):
    cluster = ClusterState(dgx2)
    fgd = FgdPlacer()
    assert fgd.name == "fgd"
    assert fgd.place(JobSpec("z", 0.0, 0, 1.0), cluster) == ()
    too_big = fgd.place(JobSpec("x", 0.0, 32, 1.0), cluster)
    assert not too_big.resolvable
    wrong = fgd.place(JobSpec("t", 0.0, 1, 1.0, gpu_type="K80"), cluster)
    assert not wrong.resolvable
    # a task larger than a node goes to the fallback (consolidated): both nodes
    assert fgd.place(JobSpec("w", 0.0, 16, 1.0), cluster) == tuple(range(16))


def test_learned_workload_refreshes_by_ten_percent():
    c = ShapeCounter()
    for i in range(19):
        c.add(JobSpec(f"j{i}", 0.0, 1, 1.0))
        c.current()
    assert c.built_at == 19
    c.add(JobSpec("big", 0.0, 8, 1.0))
    assert dict(c.current()) == {ONE: 1.0}  # 20 < 1.1 x 19: not rebuilt yet
    c.add(JobSpec("big2", 0.0, 8, 1.0))
    assert dict(c.current())[EIGHT] == pytest.approx(2 / 21)


def test_policy_keeps_a_whole_node_free(dgx2):
    # 8 one-GPU jobs fill node0; those on GPUs 1, 3, 5, 7 end at 10. At 20 a 2-GPU job
    # arrives. The workload (learned from submissions) holds the 8-GPU job `big`, held
    # until j0 ends at 30. FGD puts the 2-GPU job on node0's free GPUs 1 and 3 (across
    # switches), keeping node1 whole: `big` starts at 30. fifo-backfill with the engine's
    # placer breaks node1 and `big` waits for node0 to drain at 1000.
    jobs = [JobSpec(f"j{i}", 0.0, 1, 30.0 if i == 0 else (10.0 if i % 2 else 1000.0))
            for i in range(8)]
    jobs += [JobSpec("big", 0.0, 8, 100.0, depends_on=("j0",)),
             JobSpec("two", 20.0, 2, 1000.0)]
    fgd = Simulation(make_trace(*jobs), dgx2, FgdPolicy()).run()
    base = Simulation(make_trace(*jobs), dgx2, "fifo-backfill").run()
    f = {e.job_id: (e.time, e.cells) for e in fgd.events.itertuples() if e.kind == "start"}
    b = {e.job_id: (e.time, e.cells) for e in base.events.itertuples() if e.kind == "start"}
    assert f["two"] == (20.0, "node0:2") and f["big"] == (30.0, "node1:8")
    assert b["two"] == (20.0, "node1:2") and b["big"] == (1000.0, "node0:8")


@st.composite
def fgd_case(draw):
    topo = uniform_topology(draw(st.integers(1, 4)), switches_per_socket=2,
                            gpus_per_switch=draw(st.integers(1, 2)))
    cluster = ClusterState(topo)
    for g in range(topo.num_gpus):  # random occupancy: idle, shared or busy GPUs
        used = draw(st.sampled_from([0, 0, 250, 500, 700, 1000]))
        if used:
            cluster.allocate(1000 + g, (g,), used)
    shapes = draw(st.lists(st.sampled_from([ONE, EIGHT, (2, 1000, 0.0, ""),
                                            (1, 500, 0.0, ""), (1, 300, 0.0, "")]),
                           min_size=1, max_size=4, unique=True))
    workload = tuple((s, 1.0 / len(shapes)) for s in shapes)
    job = draw(st.sampled_from([JobSpec("j", 0.0, 1, 1.0), JobSpec("j", 0.0, 2, 1.0),
                                JobSpec("j", 0.0, 1, 1.0, gpu_share=0.3),
                                JobSpec("j", 0.0, 1, 1.0, gpu_share=0.5)]))
    return topo, cluster, workload, job


def brute_force(topo, cluster, workload, job):
    """(gradient, free left, node) of every feasible spot, scored node by node."""
    milli = 1000 if job.gpu_share >= 1 else round(job.gpu_share * 1000)
    out = []
    for node in topo.nodes:
        c = topo.cells[node.cell]
        frees = [cluster.gpu_free[g] for g in range(c.gpu_lo, c.gpu_hi)]
        whole = sum(f == 1000 for f in frees)
        part = sorted(f for f in frees if 0 < f < 1000)
        state = (node.gpu_type, node.num_gpus, whole, tuple(part), math.inf)
        before = node_fragmentation(state, workload)
        total = whole * 1000 + sum(part)
        opts = []
        if milli == 1000 and whole >= job.num_gpus:
            opts.append((whole - job.num_gpus, part))
        if milli < 1000:
            for f in set(part):
                if f >= milli:
                    rest = list(part)
                    rest.remove(f)
                    opts.append((whole, rest + ([f - milli] if f > milli else [])))
            if whole:
                opts.append((whole - 1, part + [1000 - milli]))
        for w, p in opts:
            after = node_fragmentation((node.gpu_type, node.num_gpus, w, tuple(sorted(p)),
                                        math.inf), workload)
            out.append((after - before, total - job.num_gpus * milli, node.index))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=fgd_case())
def test_fgd_picks_a_node_with_the_least_gradient(case):
    # the grouped, memoized search agrees with scoring every node and GPU one by one
    topo, cluster, workload, job = case
    got = FgdPlacer(workload=workload).place(job, cluster)
    spots = brute_force(topo, cluster, workload, job)
    if not spots:
        assert isinstance(got, Unschedulable)
        return
    assert not isinstance(got, Unschedulable)
    best = min(spots)
    node = topo.gpu_node[got[0]]
    assert all(topo.gpu_node[g] == node for g in got)
    assert min(s for s in spots if s[2] == node)[:2] == pytest.approx(best[:2])
    cluster.allocate(1, got, 1000 if job.gpu_share >= 1 else round(job.gpu_share * 1000))


def test_fgd_gangs_keep_one_set_of_groups_per_cluster(monkeypatch):
    # a gang is placed on the scratch twin: the placer keeps node groups for the live
    # state and for the twin, and going back and forth re-reads only changed nodes
    from schedlab.policies.placement import fgd as fgd_module

    topo = uniform_topology(6, sockets=2, switches_per_socket=2, gpus_per_switch=2)
    cluster = ClusterState(topo)
    placer = FgdPlacer(workload=((ONE, 0.5), (EIGHT, 0.5)))
    reads: list[int] = []
    refresh = fgd_module.NodeGroups.refresh

    def counting(self, view, nodes):
        nodes = list(nodes)
        reads.append(len(nodes))
        refresh(self, view, nodes)

    monkeypatch.setattr(fgd_module.NodeGroups, "refresh", counting)
    one = placer.place(JobSpec("one", 0.0, 1, 1.0), cluster)
    cluster.allocate(1, one, 1000)
    gang = JobSpec("g", 0.0, 4, 1.0, gpus_per_task=2)
    got = placer.place(gang, cluster)
    assert len(got) == 4 and cluster.free_whole == 47  # the twin's changes rolled back
    assert reads.count(6) == 2  # the live state and its twin, each read in full once
    groups = {k: g for k, (_, g) in placer._views.items()}
    assert len(groups) == 2
    for i in range(3):  # back and forth between the live state and the twin
        reads.clear()
        cluster.allocate(10 + i, got, 1000)
        assert isinstance(placer.place(JobSpec("x", 0.0, 1, 1.0), cluster), tuple)
        got = placer.place(gang, cluster)
        assert len(got) == 4
        assert reads and max(reads) < 6  # only changed nodes are re-read
    assert {k: g for k, (_, g) in placer._views.items()} == groups


def test_observed_placer_learns_only_from_observations(dgx2):
    cluster = ClusterState(dgx2)
    bare = FgdPlacer()
    bare.place(JobSpec("a", 0.0, 1, 1.0), cluster)
    bare.place(JobSpec("a", 0.0, 1, 1.0), cluster)  # the same job counts once
    assert bare.learned.total == 1
    run = FgdPlacer()
    run.observe(JobSpec("b", 0.0, 8, 1.0))
    run.observe(JobSpec("c", 0.0, 0, 1.0))  # CPU-only: not part of the workload
    run.place(JobSpec("a", 0.0, 1, 1.0), cluster)
    assert run.learned.total == 1 and dict(run.workload()) == {EIGHT: 1.0}


def test_policy_defaults_to_the_fgd_placer():
    assert FgdPolicy.placer == "fgd"
