"""Gandiva's behaviours with exact expected placements and times (OSDI'18, reactive and
introspective modes)."""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.policies.conformance import check_policy
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def dgx(nodes):
    return uniform_topology(nodes, sockets=2, switches_per_socket=2, gpus_per_switch=2)


def starts(result):
    ev = result.events[result.events.kind.isin(["start", "resume", "migrate", "resize"])]
    return [(e.time, e.job_id, e.kind, e.cells, e.detail) for e in ev.itertuples()]


def test_same_affinity_node_before_an_empty_one():
    # a (4 GPUs) opens node0 and labels it 4; b (4 GPUs) joins node0, not empty node1
    trace = make_trace(("a", 0.0, 4, 100.0), ("b", 1.0, 4, 100.0))
    r = Simulation(trace, dgx(2), "gandiva").run()
    assert [c for _, _, _, c, _ in starts(r)] == ["node0:4", "node0:4"]


def test_order_same_affinity_then_empty_then_other_affinity():
    # a (1 GPU) labels node0 "1"; b, c (4 GPUs) fill node1 ("4"); d, e (4 GPUs) find no
    # same-affinity room and open node2; f (4 GPUs) finds neither: node0, of affinity 1
    trace = make_trace(("a", 0.0, 1, 500.0), ("b", 1.0, 4, 500.0), ("c", 2.0, 4, 500.0),
                       ("d", 3.0, 4, 500.0), ("e", 4.0, 4, 500.0), ("f", 5.0, 4, 500.0))
    r = Simulation(trace, dgx(3), "gandiva").run()
    got = {j: c for _, j, _, c, _ in starts(r)}
    assert got == {"a": "node0:1", "b": "node1:4", "c": "node1:4", "d": "node2:4",
                   "e": "node2:4", "f": "node0:4"}


def test_least_loaded_same_affinity_node_first():
    # node0 and node1 both labelled 2; node1 is less loaded (6 free vs 4): it gets c
    trace = make_trace(("a", 0.0, 2, 500.0), ("x", 0.5, 2, 500.0), ("b", 1.0, 2, 500.0),
                       ("y", 1.5, 2, 500.0), ("c", 2.0, 2, 500.0))
    # a, x, b, y: a -> node0; x -> node0 (same affinity, most free); ... the first two
    # nodes share the 2-GPU jobs as Gandiva spreads load to the least loaded server
    r = Simulation(trace, dgx(2), "gandiva").run()
    cells = [c for _, _, _, c, _ in starts(r)]
    assert cells[0] == "node0:2"
    assert cells.count("node0:2") + cells.count("node1:2") == 5


def test_full_cluster_time_slices_same_affinity_jobs():
    # one 4-GPU node: a runs; b (same size) time-slices with it; each progresses at
    # (1 - 0.5 / 60) / 2 = 0.49583: both 100-s jobs end at 201.68 s
    topo = uniform_topology(1, gpus_per_switch=4)
    trace = make_trace(("a", 0.0, 4, 100.0), ("b", 0.0, 4, 100.0))
    r = Simulation(trace, topo, "gandiva", params={"restore_overhead": 0.0}).run()
    rate = (1 - 0.5 / 60) / 2
    assert list(r.jobs.end_time) == pytest.approx([100 / rate, 100 / rate])
    assert starts(r)[1][4] == "timeshare N=2"
    # three sharers: 1/3 each
    trace = make_trace(("a", 0.0, 4, 100.0), ("b", 0.0, 4, 100.0), ("c", 0.0, 4, 100.0))
    r = Simulation(trace, topo, "gandiva", params={"time_slice": 30.0, "switch_cost": 0.3,
                                                   "restore_overhead": 0.0}).run()
    assert list(r.jobs.end_time) == pytest.approx([100 * 3 / 0.99] * 3)


def test_time_slicing_is_capped_then_jobs_queue():
    topo = uniform_topology(1, gpus_per_switch=4)
    trace = make_trace(*[(f"j{i}", 0.0, 4, 100.0) for i in range(3)])
    r = Simulation(trace, topo, "gandiva", params={"max_timeshare": 2,
                                                   "restore_overhead": 0.0}).run()
    j = r.jobs.set_index("job_id")
    rate = (1 - 0.5 / 60) / 2
    assert j.loc["j2", "start_time"] == pytest.approx(100 / rate)


def test_packing_when_memory_fits_time_slicing_when_not():
    topo = uniform_topology(1, gpu_mem_gb=16.0)
    low = dict(gpu_util=0.3)
    fits = make_trace(JobSpec("a", 0.0, 1, 90.0, gpu_mem_gb=6.0, **low),
                      JobSpec("b", 0.0, 1, 90.0, gpu_mem_gb=6.0, **low))
    r = Simulation(fits, topo, "gandiva", params={"restore_overhead": 0.0}).run()
    assert starts(r)[1][4] == "pack N=2"
    # u1 + u2 = 0.6 < 1: each at full speed less the 10% penalty: 90 / 0.9 = 100
    assert list(r.jobs.end_time) == pytest.approx([100.0, 100.0])
    too_big = make_trace(JobSpec("a", 0.0, 1, 90.0, gpu_mem_gb=10.0, **low),
                         JobSpec("b", 0.0, 1, 90.0, gpu_mem_gb=10.0, **low))
    r = Simulation(too_big, topo, "gandiva", params={"restore_overhead": 0.0}).run()
    assert starts(r)[1][4] == "timeshare N=2"


def test_packing_only_when_it_beats_time_slicing():
    # busy jobs (u = 0.9 each): a pair runs at 2 * (1 / 1.8) * 0.9 = 1.0 of a GPU, which
    # does not beat time-slicing's 0.9917: they time-slice instead
    topo = uniform_topology(1)
    trace = make_trace(JobSpec("a", 0.0, 1, 90.0, gpu_util=0.9),
                       JobSpec("b", 0.0, 1, 90.0, gpu_util=0.9))
    r = Simulation(trace, topo, "gandiva", params={"pack_penalty": 0.1}).run()
    assert starts(r)[1][4] == "pack N=2"
    r = Simulation(trace, topo, "gandiva", params={"pack_penalty": 0.2}).run()
    assert starts(r)[1][4] == "timeshare N=2"


def test_badly_placed_job_migrates_when_a_better_pair_frees_up():
    # one node, two PCIe switches of 2 GPUs. x, w, z, q (1 GPU) fill GPUs 0, 1, 2, 3;
    # x and q end at 50. j (2 GPUs) arrives at 60: only GPUs 0 and 3 are free, across
    # the switches (node level: 1.7x slower). w ends at 100, freeing GPU 1: the next
    # introspection round (100 + 60 = 160) moves j to GPUs 0-1 (one switch), paying
    # the 10 s migration cost. Work by 160: 100 / 1.7; the rest at full speed from 170.
    topo = uniform_topology(1, switches_per_socket=2, gpus_per_switch=2)
    trace = make_trace(("x", 0.0, 1, 50.0), ("w", 0.0, 1, 100.0), ("z", 0.0, 1, 5000.0),
                       ("q", 0.0, 1, 50.0), ("j", 60.0, 2, 1000.0))
    r = Simulation(trace, topo, "gandiva").run()
    ev = [(t, j, k, c) for t, j, k, c, _ in starts(r) if j == "j"]
    assert ev == [(60.0, "j", "start", "node0:2"), (160.0, "j", "migrate", "node0:2")]
    j = r.jobs.set_index("job_id").loc["j"]
    assert j.migrations == 1 and j.locality_level == "node"
    assert j.end_time == pytest.approx(170 + 1000 - 100 / 1.7)


def test_reactive_only_mode_never_migrates():
    topo = uniform_topology(1, switches_per_socket=2, gpus_per_switch=2)
    trace = make_trace(("x", 0.0, 1, 50.0), ("w", 0.0, 1, 100.0), ("z", 0.0, 1, 5000.0),
                       ("q", 0.0, 1, 50.0), ("j", 60.0, 2, 1000.0))
    r = Simulation(trace, topo, "gandiva", params={"introspective": False}).run()
    assert r.summary["migrations"] == 0
    assert r.jobs.set_index("job_id").loc["j", "end_time"] == pytest.approx(60 + 1700.0)


def test_elastic_job_grows_into_idle_gpus():
    # r (6 GPUs) ends at 20; e (nominal 2, 1..8) started on the 2 GPUs left. The round
    # after r leaves (20 + 60 = 80) grows e to 8 GPUs: work 80 by then, a 30 s
    # restore, then 4x speed for the 20 s of work left: 110 + 5 = 115.
    topo = uniform_topology(1, gpus_per_switch=8)
    trace = make_trace(JobSpec("r", 0.0, 6, 20.0),
                       JobSpec("e", 0.0, 2, 100.0, min_gpus=1, max_gpus=8))
    r = Simulation(trace, topo, "gandiva", params={"resize_interval": 0.0}).run()
    resize = r.events[r.events.kind == "resize"]
    assert list(resize.time) == [80.0] and list(resize.cells) == ["node0:8"]
    assert r.jobs.set_index("job_id").loc["e", "end_time"] == pytest.approx(115.0)


def test_elastic_job_shrinks_when_a_job_arrives():
    # e (nominal 4, 2..8) starts alone on all 8 GPUs (2x speed). x (4 GPUs) arrives at
    # 10 and cannot start; the round at 70 shrinks e back to its nominal 4 GPUs and x
    # starts at once on the 4 GPUs freed.
    topo = uniform_topology(1, gpus_per_switch=8)
    trace = make_trace(JobSpec("e", 0.0, 4, 400.0, min_gpus=2, max_gpus=8),
                       JobSpec("x", 10.0, 4, 100.0))
    r = Simulation(trace, topo, "gandiva", params={"resize_interval": 0.0}).run()
    ev = [(t, j, k, c) for t, j, k, c, _ in starts(r)]
    assert ev[:3] == [(0.0, "e", "start", "node0:8"), (70.0, "e", "resize", "node0:4"),
                      (70.0, "x", "start", "node0:4")]


def test_no_introspection_events_on_a_settled_cluster():
    # one long job alone: nothing to improve, so no periodic rounds at all
    r = Simulation(make_trace(("a", 0.0, 2, 1e6)), dgx(1), "gandiva").run()
    assert r.summary["events_processed"] == 3  # submit, start, finish


@pytest.mark.parametrize("params", [{}, {"introspective": False},
                                    {"migration": False, "packing": False}])
def test_check_policy(params):
    check_policy("gandiva", params=params)


def test_a_fractional_job_is_no_packing_partner():
    # fuzz campaign (benchmarks/fuzz_campaign.py): a fractional job (gpu_share 0.3) running
    # alone on GPU 0 was offered as a packing partner; the engine refuses a pack founded on
    # a GPU a job holds only in part (InvalidDecision). The whole job now waits for a GPU.
    from schedlab.policies.conformance import check_invariants

    topo = uniform_topology(2, gpus_per_switch=2)
    trace = make_trace(JobSpec("frac", 0.0, 1, 13.0, gpu_share=0.3, gpu_util=0.3),
                       JobSpec("elastic", 0.0, 2, 65.0, max_gpus=5),
                       JobSpec("whole", 0.0, 1, 19.0))
    r = Simulation(trace, topo, "gandiva").run()
    check_invariants(r, topo, trace)
    assert set(r.jobs.status) == {"completed"}
    assert not r.events.detail.astype(str).str.startswith("pack").any()


def test_a_job_with_gpu_speeds_starts_on_the_faster_free_type():
    # the placer prefers the fastest type that can hold a job with gpu_speeds, so the
    # type-blind gandiva no longer leaves it on the K80 (node 0) with the V100 free
    from schedlab.policies.gandiva import GandivaPolicy
    from schedlab.sim.model import Level
    from schedlab.topologies.native import node_cell
    from schedlab.topologies.tree import CellSpec, Topology
    nodes = [node_cell("k0", {"gpu_type": "K80"}, 1, 1, 1),
             node_cell("v0", {"gpu_type": "V100"}, 1, 1, 1)]
    het = Topology("het", CellSpec(Level.CLUSTER, "het", nodes))
    sp = (("V100", 1.0), ("K80", 0.25))
    trace = make_trace(JobSpec("A", 0.0, 1, 1000.0, gpu_speeds=sp))
    r = Simulation(trace, het, GandivaPolicy()).run()
    starts = r.events[r.events.kind == "start"]
    assert list(starts.cells) == ["v0:1"] and r.jobs.end_time.iloc[0] == 1000.0
