"""Gavel: the max-min fairness LP over GPU types, rounds, and the agnostic baseline."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.conformance import check_policy
from schedlab.policies.gavel import (
    GavelAgnosticPolicy,
    GavelPolicy,
    _max_min_classes,
    max_min_allocation,
    spread_by_capacity,
)
from schedlab.policies.registry import policy_class
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec, Level
from schedlab.topologies.native import node_cell
from schedlab.topologies.tree import CellSpec, Topology

CLASSES = {"gavel-mmf": GavelPolicy, "gavel-mmf-agnostic": GavelAgnosticPolicy}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_registered_by_name(name):
    assert policy_class(name) is CLASSES[name]


@pytest.fixture
def het():
    """One V100 node and one K80 node, one GPU each."""
    nodes = [node_cell("v0", {"gpu_type": "V100"}, 1, 1, 1),
             node_cell("k0", {"gpu_type": "K80"}, 1, 1, 1)]
    return Topology("het", CellSpec(Level.CLUSTER, "het", nodes))


def log(result):
    return [(e.time, e.job_id, e.kind, e.cells) for e in result.events.itertuples()
            if e.kind != "submit"]


@pytest.mark.parametrize("params", [
    {"round": 40.0, "reset_interval": 0.0},
    # preempting loses uncheckpointed work: rounds must outlast such jobs (300 s here)
    {"stop": "preempt"},
    {"round": 60.0, "unallocated": "wait"},
])
@pytest.mark.parametrize("cls", [GavelPolicy, GavelAgnosticPolicy])
def test_conformance_other_settings(cls, params):
    check_policy(lambda: cls(**params))


def test_max_min_gives_equal_gpu_time_on_one_type():
    # 2 GPUs, jobs of 1, 1 and 2 GPUs: x1 = x2 = 2 x3 = z and x1 + x2 + 2 x3 <= 2 give
    # z = 2/3: each job gets 2/3 of a GPU over time
    x = max_min_allocation(np.ones((3, 1)), np.array([1.0, 1.0, 2.0]), np.array([2.0]))
    assert x[:, 0] == pytest.approx([2 / 3, 2 / 3, 1 / 3], abs=1e-6)


def test_heterogeneity_aware_allocation():
    # types (K80, V100), one GPU each. A barely runs on a K80 (0.1), B does not care.
    # Max-min: B can reach 1 at most (its whole time), A reaches >= 1 with V100 time
    # >= 0.55; of those optima the most efficient gives A the V100 and B the K80.
    tput = np.array([[0.1, 1.0], [1.0, 1.0]])
    x = max_min_allocation(tput, np.ones(2), np.ones(2))
    assert x == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-6)
    # the agnostic view: time on "a GPU", spread by type size
    blind = max_min_allocation(np.ones((2, 2)), np.ones(2), np.ones(2))
    spread = spread_by_capacity(blind, np.ones((2, 2), dtype=bool), np.ones(2))
    assert spread == pytest.approx(np.full((2, 2), 0.5), abs=1e-6)


def test_gavel_puts_each_job_on_the_type_it_needs_and_agnostic_does_not(het):
    slow_on_k80 = (("V100", 1.0), ("K80", 0.1))
    trace = make_trace(JobSpec("A", 0.0, 1, 1000.0, gpu_speeds=slow_on_k80),
                       JobSpec("B", 0.0, 1, 1000.0, gpu_speeds=(("V100", 1.0), ("K80", 1.0))))
    aware = Simulation(trace, het, GavelPolicy()).run()
    assert log(aware) == [(0.0, "A", "start", "v0:1"), (0.0, "B", "start", "k0:1"),
                          (1000.0, "A", "finish", ""), (1000.0, "B", "finish", "")]
    blind = Simulation(trace, het, GavelAgnosticPolicy()).run()
    # the agnostic allocation swaps A onto the K80 at the first round (types shuffled,
    # equal priorities), where it crawls at 0.1
    assert (360.0, "A", "resume", "k0:1") in log(blind)
    assert blind.summary["jct_mean"] > aware.summary["jct_mean"]


def test_rounds_time_share_one_gpu_by_priority(one_gpu):
    # equal allocations (1/2 each); the job that received less of the GPU's time goes
    # next (ties to the earlier job): A, B, A, B... switching at round ends with a 30 s
    # restore; A ends at 1780, and nothing starts before the next round at 1800
    trace = make_trace(("A", 0.0, 1, 1000.0), ("B", 0.0, 1, 1000.0))
    r = Simulation(trace, one_gpu, GavelPolicy()).run()
    assert [(t, j, k) for t, j, k, _ in log(r)] == [
        (0.0, "A", "start"), (360.0, "A", "suspend"), (360.0, "B", "start"),
        (720.0, "B", "suspend"), (720.0, "A", "resume"), (1080.0, "A", "suspend"),
        (1080.0, "B", "resume"), (1440.0, "B", "suspend"), (1440.0, "A", "resume"),
        (1780.0, "A", "finish"), (1800.0, "B", "resume"), (2140.0, "B", "finish"),
    ]


def test_typed_job_only_gets_its_type(het):
    trace = make_trace(JobSpec("k", 0.0, 1, 100.0, gpu_type="K80"),
                       JobSpec("v", 0.0, 1, 100.0, gpu_type="K80"))
    r = Simulation(trace, het, GavelPolicy(round=50.0)).run()
    assert all(c in ("", "k0:1") for *_, c in log(r))


@settings(max_examples=40, deadline=None)
@given(scale=st.lists(st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0]), min_size=1, max_size=12),
       capacity=st.sampled_from([4.0, 8.0, 16.0]), speed=st.floats(0.1, 2.0))
def test_one_type_closed_form_matches_the_lp(scale, capacity, speed):
    # the water-filling shortcut for one type equals the LP solved on two identical types
    s = np.array(scale)
    one = max_min_allocation(np.full((len(s), 1), speed), s, np.array([capacity]))
    two = max_min_allocation(np.full((len(s), 2), speed), s, np.array([capacity, 0.0]))
    assert one[:, 0] @ s <= capacity + 1e-4  # X is rounded to 1e-6
    assert (s * one[:, 0]).min() == pytest.approx((s * two.sum(axis=1)).min(), abs=1e-5)


def test_a_gang_goes_to_the_type_whose_nodes_hold_it():
    # K80 on four 2-GPU nodes (sorted first by name), P40 on one 8-GPU node; equal
    # speeds. An 8-GPU job would span 4 K80 nodes (5x cross-node slowdown vs 1.7 in a
    # node: speed 1 / 2.94), so Gavel's throughput, which includes placement, puts it on
    # the P40 node and it runs at full speed.
    nodes = [node_cell(f"k{i}", {"gpu_type": "K80"}, 1, 1, 2) for i in range(4)]
    nodes.append(node_cell("p0", {"gpu_type": "P40"}, 2, 2, 2))
    topo = Topology("mix", CellSpec(Level.CLUSTER, "mix", nodes))
    trace = make_trace(JobSpec("big", 0.0, 8, 1000.0))
    r = Simulation(trace, topo, GavelPolicy(), params={"placer": "pack"}).run()
    assert log(r) == [(0.0, "big", "start", "p0:8"), (1000.0, "big", "finish", "")]


def _min_normalized(x, tput, scale, cap):
    usable = (tput > 0) & (scale[:, None] <= cap[None, :])
    t = np.where(usable, tput, 0.0)
    prop = t @ (cap / cap.sum())
    live = usable.any(axis=1)
    got = (t * x).sum(axis=1) * scale / np.where(prop > 0, prop, 1.0)
    return got[live].min() if live.any() else 0.0


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0]),
                               st.sampled_from([0.5, 1.0, 3.0]),
                               st.sampled_from([1.0, 2.0, 4.0])), min_size=1, max_size=5),
       copies=st.integers(2, 4))
def test_identical_jobs_are_one_lp_class_at_the_same_optimum(rows, copies):
    # every job `copies` times: one allocation row per class, feasible, and the same
    # max-min value and total throughput as the LP over every job separately
    tput = np.repeat(np.array([[a, b] for a, b, _ in rows]), copies, axis=0)
    scale = np.repeat(np.array([s for *_, s in rows]), copies)
    cap = np.array([4.0, 8.0])
    x = max_min_allocation(tput, scale, cap)
    raw = _max_min_classes(np.where((tput > 0) & (scale[:, None] <= cap), tput, 0.0),
                           scale, np.ones(len(scale)), cap)
    for i in range(len(rows)):
        assert (x[i * copies:(i + 1) * copies] == x[i * copies]).all()
    assert (x.sum(axis=1) <= 1 + 1e-5).all() and (scale @ x <= cap + 1e-4).all()
    assert _min_normalized(x, tput, scale, cap) == pytest.approx(
        _min_normalized(raw, tput, scale, cap), rel=1e-4, abs=1e-5)


def test_a_job_arriving_after_the_allocation_waits_for_the_next_one_with_unallocated_wait(het):
    # A alone at 0 gets the allocation (the V100). B arrives at 100; the allocation is
    # not recomputed before reset_interval (1920 s) has passed since it was made. By
    # default B takes the K80 nobody is allocated at the 360 s round; with
    # unallocated=wait (Gavel's simulator) it gets nothing until the round at 2160, the
    # first >= 1920, when the allocation is recomputed, though the cluster is idle from
    # A's end at 1000.
    sp = (("V100", 1.0), ("K80", 0.5))
    trace = make_trace(JobSpec("A", 0.0, 1, 1000.0, gpu_speeds=sp),
                       JobSpec("B", 100.0, 1, 1000.0, gpu_speeds=sp))
    spare = Simulation(trace, het, GavelPolicy()).run()
    assert log(spare) == [
        (0.0, "A", "start", "v0:1"), (360.0, "B", "start", "k0:1"),
        (1000.0, "A", "finish", ""), (1080.0, "B", "suspend", "k0:1"),
        (1080.0, "B", "resume", "v0:1"),  # the faster type, free: 360 s done at 0.5
        (1750.0, "B", "finish", "")]  # 1080 + 30 restore + 640 left
    wait = Simulation(trace, het, GavelPolicy(unallocated="wait")).run()
    assert log(wait) == [(0.0, "A", "start", "v0:1"), (1000.0, "A", "finish", ""),
                         (2160.0, "B", "start", "v0:1"), (3160.0, "B", "finish", "")]
    assert wait.summary["policy_allocations"] == 2
