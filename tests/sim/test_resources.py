"""Whole-node resources: CPUs, memory and disk per node, CPU-only jobs, interconnect, queues.

Every expected time is worked out in the comment next to it.
"""

from __future__ import annotations

import pickle
import re

import pytest
from conftest import make_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.policies import PLACERS, registered_policies
from schedlab.policies.base import Policy
from schedlab.policies.conformance import check_invariants
from schedlab.sim.cluster import ClusterState
from schedlab.sim.engine import Run, Simulation
from schedlab.sim.engine_params import DEFAULT_LOCALITY, ENGINE_PARAMS, NODE_ETHERNET
from schedlab.sim.errors import InvalidDecision, InvalidParameter, InvalidTopology
from schedlab.sim.model import HostPlacement, JobSpec, Level, Start, Unschedulable
from schedlab.sim.params import resolve
from schedlab.topologies.build import uniform_topology
from schedlab.topologies.native import native_from_dict, node_cell
from schedlab.topologies.tree import CellSpec, Topology
from schedlab.traces.base import Trace


def rows(result):
    return result.jobs.set_index("job_id")


def cpu_job(jid, t=0.0, dur=100.0, **kw):
    return JobSpec(jid, t, 0, dur, **kw)


def mixed_topology(gpu_cpus=8.0, cpu_cpus=16.0, **cpu_node):
    """node0: 2 GPUs and `gpu_cpus` CPUs; node1: no GPU, `cpu_cpus` CPUs (CPU-only)."""
    gpu = node_cell("node0", {"gpu_type": "V100", "num_cpus": gpu_cpus, "mem_gb": 64.0,
                              "gpu_mem_gb": 0.0}, 1, 1, 2)
    cpu = node_cell("node1", {"gpu_type": "", "num_cpus": cpu_cpus, "mem_gb": 64.0,
                              "gpu_mem_gb": 0.0, **cpu_node}, 1, 1, 0)
    return Topology("mixed", CellSpec(Level.CLUSTER, "mixed", [gpu, cpu]))


# --- CPU-only jobs take CPUs and memory on one node ---


@pytest.mark.parametrize("policy", registered_policies())
def test_three_4cpu_jobs_on_an_8cpu_node_start_two_then_one(policy):
    # one node, 8 CPUs: a and b take 4 each at 0 and end at 100; c starts then, ends 200
    topo = uniform_topology(1, gpus_per_switch=2, num_cpus=8)
    trace = make_trace(*(cpu_job(j, num_cpus=4) for j in "abc"))
    j = rows(Simulation(trace, topo, policy).run())
    assert list(j.loc[["a", "b", "c"], "start_time"]) == [0.0, 0.0, 100.0]
    assert list(j.loc[["a", "b", "c"], "end_time"]) == [100.0, 100.0, 200.0]
    assert set(j.status) == {"completed"}


def test_cpu_only_job_asking_nothing_starts_at_once_and_holds_nothing():
    # no CPUs, memory or disk asked: all three start at 0, as before
    topo = uniform_topology(1, num_cpus=8)
    trace = make_trace(*(cpu_job(x) for x in "abc"))
    r = Simulation(trace, topo, "fifo").run()
    assert list(rows(r).start_time) == [0.0, 0.0, 0.0]
    starts = r.events[r.events.kind == "start"]
    assert set(starts.cells) == {""} and set(starts.detail) == {""}


def test_cpu_only_job_goes_to_the_cpu_only_node_first():
    # node1 has no GPU: CPU work goes there first (GPU nodes keep their CPUs for GPU jobs)
    r = Simulation(make_trace(cpu_job("a", num_cpus=4)), mixed_topology(), "fifo").run()
    start = r.events[(r.events.kind == "start")].iloc[0]
    assert start.detail == "node=node1" and start.cells == ""


def test_cpu_only_jobs_best_fit_by_free_cpus_and_spill_to_gpu_nodes():
    # node1 (CPU-only) has 16 CPUs: a (12) goes there at 0; b (8) does not fit the 4 left
    # there and goes to node0 (8 CPUs); c (4) fits node1's 4 left: best fit, not node0
    trace = make_trace(cpu_job("a", num_cpus=12), cpu_job("b", num_cpus=8),
                       cpu_job("c", num_cpus=4))
    r = Simulation(trace, mixed_topology(), "fifo").run()
    ev = r.events[r.events.kind == "start"].set_index("job_id")
    assert dict(ev.detail) == {"a": "node=node1", "b": "node=node0", "c": "node=node1"}
    assert list(rows(r).start_time) == [0.0, 0.0, 0.0]


def test_gpu_job_waits_for_cpus_held_by_cpu_only_jobs():
    # a CPU-only job holds all 8 CPUs of the only node until 100; the 1-GPU job asking
    # 2 CPUs starts then and ends at 150
    topo = uniform_topology(1, gpus_per_switch=2, num_cpus=8)
    trace = make_trace(cpu_job("cpu", num_cpus=8),
                       JobSpec("gpu", 0.0, 1, 50.0, num_cpus=2))
    j = rows(Simulation(trace, topo, "fifo-backfill").run())
    assert (j.loc["gpu", "start_time"], j.loc["gpu", "end_time"]) == (100.0, 150.0)


def test_memory_limit():
    # 100 GB on the node: a (60 GB) runs 0..100; b (60 GB) waits until 100, ends 200;
    # c (40 GB) fits beside a at 0 (fifo-backfill)
    topo = uniform_topology(1, num_cpus=64, mem_gb=100)
    trace = make_trace(cpu_job("a", mem_gb=60), cpu_job("b", mem_gb=60),
                       cpu_job("c", mem_gb=40))
    j = rows(Simulation(trace, topo, "fifo-backfill").run())
    assert list(j.loc[["a", "b", "c"], "start_time"]) == [0.0, 100.0, 0.0]
    assert j.loc["b", "end_time"] == 200.0


def test_disk_limit_for_cpu_only_and_gpu_jobs():
    # 50 GB of disk: the CPU-only job (30) holds it 0..100; the GPU job (30 per task)
    # waits for it and runs 100..150
    topo = uniform_topology(1, gpus_per_switch=2, disk_gb=50)
    trace = make_trace(cpu_job("a", disk_gb=30), JobSpec("g", 0.0, 1, 50.0, disk_gb=30))
    j = rows(Simulation(trace, topo, "fifo").run())
    assert (j.loc["g", "start_time"], j.loc["g", "end_time"]) == (100.0, 150.0)


def test_disk_is_per_task_and_spreads_a_gang_over_nodes():
    # 2 nodes of 2 GPUs, 50 GB disk each; a gang of 2 one-GPU tasks needs 30 GB per
    # task: both tasks on one node would need 60, so they go one per node
    topo = uniform_topology(2, gpus_per_switch=2, disk_gb=50)
    job = JobSpec("g", 0.0, 2, 10.0, gpus_per_task=1, disk_gb=30, locality_sensitivity=0)
    r = Simulation(make_trace(job), topo, "fifo").run()
    start = r.events[r.events.kind == "start"].iloc[0]
    assert sorted(start.cells.split(";")) == ["node0:1", "node1:1"]


def test_disk_zero_is_not_modelled():
    # node disk 0: any disk ask fits; both start at once
    topo = uniform_topology(1, num_cpus=8)
    trace = make_trace(cpu_job("a", disk_gb=1e6), cpu_job("b", disk_gb=1e6))
    assert list(rows(Simulation(trace, topo, "fifo").run()).start_time) == [0.0, 0.0]


def test_job_too_large_in_cpus_is_rejected_at_arrival_with_the_reason():
    topo = uniform_topology(2, gpus_per_switch=2, num_cpus=8, mem_gb=32)
    trace = make_trace(cpu_job("big", num_cpus=16), cpu_job("mem", num_cpus=4, mem_gb=64),
                       JobSpec("gbig", 0.0, 1, 10.0, num_cpus=16), cpu_job("ok", num_cpus=8))
    j = rows(Simulation(trace, topo, "fifo").run())
    assert j.loc["big", "status"] == "rejected" and j.loc["big", "end_time"] == 0.0
    assert j.loc["big", "reason"] == (
        "needs 16 CPUs on one node; no node has all of it (the most any node has: 8 CPUs)")
    assert j.loc["mem", "reason"] == ("needs 4 CPUs, 64 GB memory on one node; no node has "
                                      "all of it (the most any node has: 8 CPUs, 32 GB "
                                      "memory)")
    assert j.loc["gbig", "status"] == "rejected"
    assert "1 GPUs with 16 CPUs" in j.loc["gbig", "reason"]
    assert (j.loc["ok", "status"], j.loc["ok", "start_time"]) == ("completed", 0.0)


def test_cpu_only_job_on_a_failed_node_is_retried(tmp_path):
    # node1 (the CPU-only node, where the job runs) fails at 40: the job loses its work
    # (no checkpoint), is retried on node0 at 40 and ends at 140
    f = tmp_path / "failures.csv"
    f.write_text("node,fail_time,repair_time\nnode1,40,1000\n")
    r = Simulation(make_trace(cpu_job("a", num_cpus=4)), mixed_topology(), "fifo",
                   params={"failures": str(f)}).run()
    j = rows(r)
    assert (j.loc["a", "status"], j.loc["a", "end_time"]) == ("completed", 140.0)
    starts = r.events[r.events.kind.isin(["start", "resume"])]
    assert list(starts.detail) == ["node=node1", "node=node0"]


# --- the decisions: a CPU-only placement names a node, the engine validates it ---


class Once(Policy):
    """Yields the given decisions at the first pass."""

    name = "once"

    def __init__(self, *decisions):
        super().__init__()
        self.decisions = list(decisions)

    def schedule(self, ctx):
        while self.decisions:
            yield self.decisions.pop(0)


def test_host_placement_is_an_empty_gpu_tuple_that_start_takes_the_node_from():
    p = HostPlacement(3)
    assert p == () and len(p) == 0 and p.node == 3 and repr(p) == "HostPlacement(node=3)"
    assert pickle.loads(pickle.dumps(p)).node == 3
    d = Start("a", p)
    assert (d.gpus, d.node) == ((), 3) and d == Start("a", (), node=3) != Start("a", ())


@pytest.mark.parametrize(("decisions", "match"), [
    ([Start("a", ())], "needs a node"),
    ([Start("b", (), node=0), Start("a", (), node=0)],
     "Start 'a': node node0 has 2 CPUs free, the job needs 6"),
    ([Start("a", (), node=7)], "node 7 does not exist"),
])
def test_engine_validates_the_node_of_a_cpu_only_start(decisions, match):
    topo = uniform_topology(1, num_cpus=8)
    trace = make_trace(cpu_job("a", num_cpus=6), cpu_job("b", num_cpus=6))
    with pytest.raises(InvalidDecision, match=match):
        Simulation(trace, topo, Once(*decisions)).run()


def test_engine_validates_host_resources_of_a_gpu_start():
    topo = uniform_topology(1, gpus_per_switch=2, num_cpus=8)
    trace = make_trace(JobSpec("a", 0.0, 1, 10.0, num_cpus=6),
                       JobSpec("b", 0.0, 1, 10.0, num_cpus=6))
    with pytest.raises(InvalidDecision, match="node0 has 2 CPUs free, the job needs 6"):
        Simulation(trace, topo, Once(Start("a", (0,)), Start("b", (1,)))).run()
    with pytest.raises(InvalidDecision, match="node 0 given for a job with GPUs"):
        Simulation(trace, topo, Once(Start("a", (0,), node=0))).run()


def test_placers_all_place_cpu_only_jobs_the_same_way():
    # node1 (no GPU, 16 CPUs) for all but dot-product, which takes the node whose free
    # CPUs align least with the ask: node0 (8 CPUs: 8 x 4 < 16 x 4)
    topo = mixed_topology()
    job = cpu_job("a", num_cpus=4, mem_gb=8)
    for name in sorted(PLACERS):
        got = PLACERS.get(name)().place(job, ClusterState(topo))
        want = 0 if name == "dot-product" else 1
        assert isinstance(got, HostPlacement) and got.node == want, name
    assert PLACERS.get("pack")().place(cpu_job("b"), ClusterState(topo)) == ()
    busy = ClusterState(topo)
    busy.allocate_host(5, 1, 16.0, 0.0, 0.0)
    busy.allocate_host(6, 0, 8.0, 0.0, 0.0)
    got = PLACERS.get("pack")().place(job, busy)
    assert isinstance(got, Unschedulable) and got.resolvable
    assert got.reason == "no healthy node has 4 CPUs, 8 GB memory free now"


def test_host_index_follows_changes_and_failures():
    c = ClusterState(mixed_topology())
    assert list(c.host_nodes(4)) == [1, 0]
    c.allocate_host(1, 1, 14.0, 0.0, 0.0)  # node1 left with 2: node0 (8) first for 4
    assert list(c.host_nodes(4)) == [0] and list(c.host_nodes(2)) == [1, 0]
    c.allocate(2, (0,), 1000, 6.0)  # a GPU job takes 6 of node0's CPUs
    assert list(c.host_nodes(2)) == [1, 0] and list(c.host_nodes(3)) == []
    with c.sandbox() as twin:
        twin.release_host(1, 1, 14.0, 0.0, 0.0)
        assert list(twin.host_nodes(3)) == [1]
    assert list(c.host_nodes(3)) == [] and c.jobs_on_node(1) == [1]
    c.release_host(1, 1, 14.0, 0.0, 0.0)
    c.fail_node(1)
    assert list(c.host_nodes(1)) == [0]
    with pytest.raises(InvalidDecision, match="failed"):
        c.allocate_host(3, 1, 1.0, 0.0, 0.0)
    c.repair_node(1)
    assert list(c.host_nodes(1)) == [1, 0]


# --- interconnect: jobs spanning ethernet nodes pay node_ethernet ---


def _two_node(interconnect, **kw):
    return native_from_dict({"name": "t", "nodes": [
        {"count": 2, "gpus_per_node": 2, "interconnect": interconnect, **kw}]}, "<t>")


@pytest.mark.parametrize(("params", "ratio"), [
    ({}, 12.5 / 5.0),
    ({"locality_factors": "node_ethernet=8"}, 8.0 / 5.0),
    ({"locality_factors": {"node_ethernet": 20, "cluster": 4}}, 20.0 / 4.0),
])
def test_two_node_job_on_ethernet_is_slower_by_the_factor_ratio(params, ratio):
    # 4 GPUs on nodes of 2: the job spans both nodes on either network; the best level
    # for 4 GPUs is the cluster, so on infiniband it runs at speed 1 (JCT 100); on
    # ethernet f[actual] is node_ethernet: JCT 100 x node_ethernet / f[cluster]
    job = JobSpec("j", 0.0, 4, 100.0)
    ib = rows(Simulation(make_trace(job), _two_node("infiniband"), "fifo",
                         params=params).run())
    eth = rows(Simulation(make_trace(job), _two_node("ethernet"), "fifo",
                          params=params).run())
    assert ib.loc["j", "jct"] == 100.0
    assert eth.loc["j", "jct"] == pytest.approx(100.0 * ratio, rel=1e-12)


def test_ethernet_costs_nothing_inside_a_node_and_one_ethernet_node_is_enough():
    mixed = native_from_dict({"name": "m", "nodes": [
        {"count": 1, "gpus_per_node": 2},
        {"count": 1, "gpus_per_node": 2, "interconnect": "ethernet"}]}, "<m>")
    # inside one ethernet node: the node level, best for 2 GPUs: JCT 100
    one = rows(Simulation(make_trace(JobSpec("j", 0.0, 2, 100.0)), _two_node("ethernet"),
                          "fifo").run())
    assert one.loc["j", "jct"] == 100.0
    # across an infiniband and an ethernet node: JCT 100 x 12.5 / 5 = 250
    both = rows(Simulation(make_trace(JobSpec("j", 0.0, 4, 100.0)), mixed, "fifo").run())
    assert both.loc["j", "jct"] == pytest.approx(250.0, rel=1e-12)


def test_node_ethernet_default_and_parsing():
    assert DEFAULT_LOCALITY[NODE_ETHERNET] == 12.5
    f = resolve({"locality_factors": "rack=4, node_ethernet=9"}, ENGINE_PARAMS, "e")
    assert f["locality_factors"][NODE_ETHERNET] == 9.0
    assert f["locality_factors"][Level.RACK] == 4.0
    with pytest.raises(InvalidParameter, match="node_ethernet"):
        resolve({"locality_factors": "nodes_ethernet=2"}, ENGINE_PARAMS, "e")


# --- topology: disk_gb and interconnect per node group, queue state ---


def test_native_reads_disk_and_interconnect_with_defaults():
    t = native_from_dict({"nodes": [
        {"count": 1}, {"count": 2, "disk_gb": 500, "interconnect": "Ethernet"}]}, "<x>")
    n0, n1 = t.nodes[0], t.nodes[1]
    assert (n0.disk_gb, n0.interconnect, n0.ethernet) == (0.0, "infiniband", False)
    assert (n1.disk_gb, n1.interconnect, n1.ethernet) == (500.0, "ethernet", True)
    assert t.has_ethernet and not uniform_topology(2).has_ethernet


@pytest.mark.parametrize(("group", "key", "value"), [
    ({"interconnect": "myrinet"}, "nodes[0].interconnect", "myrinet"),
    ({"disk_gb": -1}, "nodes[0].disk_gb", "-1"),
])
def test_native_rejects_bad_disk_and_interconnect(group, key, value):
    with pytest.raises(InvalidTopology, match=re.escape(key) + f": got .?{value}"):
        native_from_dict({"nodes": [{"count": 1, **group}]}, "<x>")


def _queues(**b):
    return {"nodes": [{"count": 1}], "queues": [
        {"name": "a", "capacity": 0.5}, {"name": "b", "capacity": 0.5, **b}]}


def test_queue_state_is_read_and_checked():
    t = native_from_dict(_queues(state="stopped"), "<q>")
    assert [q.state for q in t.queues] == ["running", "stopped"]
    with pytest.raises(InvalidTopology, match=r"queues\[1\].state: got 'paused'"):
        native_from_dict(_queues(state="paused"), "<q>")


def test_stopped_queue_rejects_new_jobs_under_capacity():
    topo = native_from_dict(_queues(state="stopped"), "<q>")
    trace = make_trace(JobSpec("a1", 0.0, 1, 10.0, vc="a"), JobSpec("b1", 0.0, 1, 10.0, vc="b"),
                       JobSpec("b2", 5.0, 1, 10.0, vc="b"))
    j = rows(Simulation(trace, topo, "capacity").run())
    assert (j.loc["a1", "status"], j.loc["a1", "end_time"]) == ("completed", 10.0)
    for b in ("b1", "b2"):
        assert j.loc[b, "status"] == "rejected"
        assert j.loc[b, "reason"] == ("queue 'b' is stopped: it accepts no new jobs "
                                      "(state: stopped)")


def test_leaf_of_a_stopped_parent_queue_is_stopped_too(tmp_path):
    f = tmp_path / "q.yaml"
    f.write_text("queues:\n  - {name: a, capacity: 0.5}\n"
                 "  - name: p\n    capacity: 0.5\n    state: stopped\n"
                 "    queues: [{name: c, capacity: 1.0}]\n")
    trace = make_trace(JobSpec("a1", 0.0, 1, 10.0, vc="a"), JobSpec("c1", 0.0, 1, 10.0, vc="c"))
    j = rows(Simulation(trace, uniform_topology(1, gpus_per_switch=4), "capacity",
                        params={"queues": str(f)}).run())
    assert j.loc["a1", "status"] == "completed"
    assert j.loc["c1", "reason"] == ("queue 'c' is stopped (in stopped queue 'p'): it "
                                     "accepts no new jobs (state: stopped)")


# --- invariants: CPUs, memory and disk never over-committed, for every policy ---


@st.composite
def host_case(draw):
    nodes = draw(st.integers(1, 3))
    topo = uniform_topology(nodes, switches_per_socket=draw(st.integers(1, 2)),
                            gpus_per_switch=draw(st.integers(1, 2)), num_cpus=8, mem_gb=32,
                            disk_gb=draw(st.sampled_from([0.0, 40.0])),
                            interconnect=draw(st.sampled_from(["infiniband", "ethernet"])))
    jobs = []
    for i in range(draw(st.integers(1, 20))):
        g = draw(st.integers(0, topo.num_gpus))
        tasks = draw(st.sampled_from([d for d in (1, 2) if g and g % d == 0] or [1]))
        jobs.append(JobSpec(
            f"j{i}", float(draw(st.integers(0, 100))), g, float(draw(st.integers(1, 200))),
            user=f"u{i % 2}", vc=f"vc{i % 2}", gpus_per_task=g // tasks if g else 0,
            num_cpus=float(draw(st.sampled_from([0, 1, 2, 4, 8, 12]))),
            mem_gb=float(draw(st.sampled_from([0, 4, 16, 40]))),
            disk_gb=float(draw(st.sampled_from([0, 10, 30]))),
            checkpoint_interval=draw(st.sampled_from([None, 30.0])),
        ))
    return topo, Trace("hyp-host", tuple(jobs))


def _check_cluster(run: Run) -> None:
    """Free host resources never negative on a modelled node; holdings add up."""
    c = run.cluster
    held = {n: [0.0, 0.0, 0.0] for n in range(len(c.topo.nodes))}
    for job in run.running.values():
        if job.gpus:
            share = 1.0 / len(job.gpus)
            for g in job.gpus:
                for i, v in enumerate(job.host):
                    held[c.topo.gpu_node[g]][i] += v * share
        elif job.node >= 0:
            for i, v in enumerate(job.host):
                held[job.node][i] += v
    for n, spec in enumerate(c.topo.nodes):
        for i, (cap, free) in enumerate(((spec.num_cpus, c.node_cpu_free),
                                         (spec.mem_gb, c.node_mem_free),
                                         (spec.disk_gb, c.node_disk_free))):
            assert abs(cap - free[n] - held[n][i]) < 1e-6, (n, i)
            if cap > 0:
                assert free[n] >= -1e-6, f"node {spec.name} over-committed ({i})"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=host_case(), policy=st.sampled_from(registered_policies()),
       placer=st.sampled_from(sorted(PLACERS)))
def test_host_resources_never_over_committed(case, policy, placer, monkeypatch_session):
    topo, trace = case
    result = Simulation(trace, topo, policy, params={"placer": placer}).run()
    check_invariants(result, topo, trace)
    assert sorted(result.jobs.job_id) == sorted(j.job_id for j in trace.jobs)


@pytest.fixture(scope="module")
def monkeypatch_session():
    """Check the live cluster state after every pass of every run in this module's test."""
    mp = pytest.MonkeyPatch()
    orig = Run.sample

    def sample(self):
        _check_cluster(self)
        orig(self)

    mp.setattr(Run, "sample", sample)
    yield
    mp.undo()


def test_cpu_only_job_waits_for_its_only_node_to_be_repaired(tmp_path):
    # the only node with 12 CPUs (node1, no GPU) is down 0..500: the job waits for the
    # repair (nothing runs meanwhile, yet the run does not give up on it), runs 500..600
    f = tmp_path / "failures.csv"
    f.write_text("node,fail_time,repair_time\nnode1,0,500\n")
    j = rows(Simulation(make_trace(cpu_job("a", 1.0, num_cpus=12)), mixed_topology(), "fifo",
                        params={"failures": str(f)}).run())
    assert (j.loc["a", "status"], j.loc["a", "start_time"], j.loc["a", "end_time"]) == (
        "completed", 500.0, 600.0)


@pytest.mark.parametrize("policy", ["drf", "quota-priority"])
def test_request_classes_tell_disk_apart(policy):
    # 4 GPUs, 60 GB disk: x (u2) holds 2 GPUs and 40 GB 0..100. At 1, a (u1, 30 GB, tried
    # first: u1 has the lower share) does not fit the 20 GB left; b (u2, 10 GB, otherwise
    # the same request) does: b starts at 1, not after x at 100
    topo = uniform_topology(1, gpus_per_switch=4, disk_gb=60)
    trace = make_trace(JobSpec("x", 0.0, 2, 100.0, disk_gb=40, user="u2"),
                       JobSpec("a", 1.0, 1, 10.0, disk_gb=30, user="u1"),
                       JobSpec("b", 1.0, 1, 10.0, disk_gb=10, user="u2"))
    j = rows(Simulation(trace, topo, policy).run())
    assert list(j.loc[["x", "a", "b"], "start_time"]) == [0.0, 100.0, 1.0]
