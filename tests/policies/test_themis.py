"""Themis finish-time fairness: rho, lease re-auctions, the fairness knob."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import make_trace

from schedlab.policies.conformance import check_policy
from schedlab.policies.registry import policy_class
from schedlab.policies.themis import ThemisFtfPolicy, finish_time_fairness
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


@pytest.fixture
def two():
    """One node with 2 GPUs."""
    return uniform_topology(1, gpus_per_switch=2, name="two")


def log(result, kinds=("start", "suspend", "preempt", "resume", "finish")):
    return [(e.time, e.job_id, e.kind) for e in result.events.itertuples() if e.kind in kinds]


@pytest.mark.parametrize("params", [{"lease": 30.0, "fairness_knob": 0.0},
                                    {"lease": 50.0, "stop": "preempt"}])
def test_conformance_with_short_leases(params):
    check_policy(lambda: ThemisFtfPolicy(**params))


def test_registered_by_name():
    assert policy_class("themis-ftf") is ThemisFtfPolicy


def test_rho_is_shared_over_ideal_finish_time():
    # 2 GPUs of 4, 4 jobs contending: 1/N of the cluster is 1 GPU, so a 2-GPU job's ideal
    # time is twice its duration: 2 x 100. Submitted at 0, now 150, 40 s of work done:
    # T_shared = 150 + 60, rho = 210 / 200.
    job = SimpleNamespace(spec=JobSpec("j", 0.0, 2, 100.0), work=40.0)
    ctx = SimpleNamespace(now=150.0, cluster=SimpleNamespace(healthy_gpus=4),
                          progress=lambda j: j.work)
    assert finish_time_fairness(ctx, job, 4) == pytest.approx(210.0 / 200.0)
    # a 1-GPU job gets its whole 1/N share: ideal = duration
    small = SimpleNamespace(spec=JobSpec("s", 100.0, 1, 50.0), work=0.0)
    assert finish_time_fairness(ctx, small, 4) == pytest.approx((50.0 + 50.0) / 50.0)


def test_lease_goes_to_the_worst_rho(two):
    # At the lease boundary t=100, N=3 on 2 GPUs: rho(B) = (90+100)/150 = 1.27,
    # rho(C) = (90+400)/600 = 0.82, rho(A) = (100+900)/3000 = 0.33. B, then C, get GPUs;
    # A's lease is not renewed (suspended). At 200: rho(A) = 1100/2000 = 0.55 < rho(C)
    # = 490/400: C keeps its GPU, A waits for both GPUs until C ends at 500, restores
    # 30 s and runs its last 900 s.
    trace = make_trace(("A", 0.0, 2, 1000.0), ("B", 10.0, 1, 100.0), ("C", 10.0, 1, 400.0))
    r = Simulation(trace, two, ThemisFtfPolicy(lease=100.0, fairness_knob=0.0)).run()
    assert log(r) == [
        (0.0, "A", "start"), (100.0, "A", "suspend"), (100.0, "B", "start"),
        (100.0, "C", "start"), (200.0, "B", "finish"), (500.0, "C", "finish"),
        (500.0, "A", "resume"), (1430.0, "A", "finish"),
    ]


def test_fairness_knob_one_offers_nothing_and_never_preempts(two):
    # f = 1: no job is in the auction; waiting jobs only get leftover (free) GPUs
    trace = make_trace(("A", 0.0, 2, 1000.0), ("B", 10.0, 1, 100.0), ("C", 10.0, 1, 400.0))
    r = Simulation(trace, two, ThemisFtfPolicy(lease=100.0, fairness_knob=1.0)).run()
    assert r.summary["preemptions"] == 0
    assert log(r, ("start",))[0] == (0.0, "A", "start")
    assert sorted(log(r, ("start",))[1:]) == [(1000.0, "B", "start"), (1000.0, "C", "start")]


def test_freed_gpus_are_handed_out_between_leases(two):
    # a job finishing mid-lease frees its GPU for the waiting job at once
    trace = make_trace(("A", 0.0, 1, 30.0), ("B", 0.0, 1, 1000.0), ("C", 5.0, 1, 50.0))
    r = Simulation(trace, two, ThemisFtfPolicy(lease=600.0)).run()
    assert (30.0, "C", "start") in log(r, ("start",))


def _v100_and_k80():
    from schedlab.sim.model import Level
    from schedlab.topologies.native import node_cell
    from schedlab.topologies.tree import CellSpec, Topology
    nodes = [node_cell("v0", {"gpu_type": "V100"}, 1, 1, 1),
             node_cell("k0", {"gpu_type": "K80"}, 1, 1, 1)]
    return Topology("het", CellSpec(Level.CLUSTER, "het", nodes))


def test_perf_moves_a_job_stuck_on_a_slow_type_to_the_freed_fast_one():
    # A and B run 4x slower on the K80. The placer gives A the V100, B the K80. Type-blind
    # themis-ftf leaves B on the K80 for its whole run (4000 s); with perf, at the lease
    # boundary after A ends (1200) B moves to the V100: 300 s of work done, 30 s restore,
    # 700 s left.
    sp = (("V100", 1.0), ("K80", 0.25))
    trace = make_trace(JobSpec("A", 0.0, 1, 1000.0, gpu_speeds=sp),
                       JobSpec("B", 0.0, 1, 1000.0, gpu_speeds=sp))
    blind = Simulation(trace, _v100_and_k80(), ThemisFtfPolicy()).run()
    assert log(blind) == [(0.0, "A", "start"), (0.0, "B", "start"), (1000.0, "A", "finish"),
                          (4000.0, "B", "finish")]
    perf = Simulation(trace, _v100_and_k80(), ThemisFtfPolicy(perf=True)).run()
    assert log(perf, ("start", "migrate", "finish")) == [
        (0.0, "A", "start"), (0.0, "B", "start"), (1000.0, "A", "finish"),
        (1200.0, "B", "migrate"), (1930.0, "B", "finish")]
    assert perf.summary["policy_migrations"] == 1


def test_perf_rho_is_over_per_type_throughputs():
    from schedlab.policies.themis import isolated_speed
    sp = (("V100", 1.0), ("K80", 0.25))
    # an equal share of 1 V100 + 1 K80 runs at (1 + 0.25) / 2
    assert isolated_speed(JobSpec("a", 0.0, 1, 10.0, gpu_speeds=sp),
                          {"V100": 1, "K80": 1}) == pytest.approx(0.625)
    assert isolated_speed(JobSpec("a", 0.0, 1, 10.0), {"V100": 1, "K80": 1}) == 1.0


def test_perf_without_gpu_speeds_is_themis_ftf(two):
    trace = make_trace(*(JobSpec(f"j{i}", 10.0 * i, 1 + i % 2, 300.0 + 50 * i)
                         for i in range(6)))
    a = Simulation(trace, two, ThemisFtfPolicy(lease=100.0)).run()
    b = Simulation(trace, two, ThemisFtfPolicy(lease=100.0, perf=True)).run()
    assert log(a) == log(b)


def test_conformance_with_perf():
    check_policy(lambda: ThemisFtfPolicy(perf=True, lease=60.0))
