"""SJF and SRTF: oracle size-based baselines, and the shared priority-walk machinery."""

from __future__ import annotations

import pytest
from conftest import make_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.policies.conformance import check_invariants, check_policy
from schedlab.policies.registry import policy_class
from schedlab.policies.sjf import SjfPolicy, SrtfPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology

CLASSES = {"sjf": SjfPolicy, "srtf": SrtfPolicy}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_registered_by_name(name):
    assert policy_class(name) is CLASSES[name]


def starts(result):
    return [(e.time, e.job_id, e.kind) for e in result.events.itertuples()
            if e.kind in ("start", "resume", "preempt", "suspend")]


@pytest.mark.parametrize("cls", [SjfPolicy, SrtfPolicy])
def test_conformance_weighted(cls):
    check_policy(lambda: cls(weight="gpus"))


def test_sjf_runs_shortest_first_without_preempting(one_gpu):
    # A runs; B, C, D queue at 10 and go shortest first: C 100..150, D 150..350, B 350
    trace = make_trace(("A", 0.0, 1, 100.0), ("B", 10.0, 1, 300.0), ("C", 10.0, 1, 50.0),
                       ("D", 10.0, 1, 200.0))
    r = Simulation(trace, one_gpu, SjfPolicy()).run()
    assert starts(r) == [(0.0, "A", "start"), (100.0, "C", "start"), (150.0, "D", "start"),
                         (350.0, "B", "start")]


def test_sjf_skips_a_job_that_does_not_fit(dgx2):
    # 12 GPUs busy until 100: the short 8-GPU job cannot start, the longer 2-GPU one can
    trace = make_trace(("big", 0.0, 12, 100.0), ("s8", 1.0, 8, 10.0), ("l2", 1.0, 2, 50.0))
    r = Simulation(trace, dgx2, SjfPolicy(), params={"placer": "pack"}).run()
    assert starts(r) == [(0.0, "big", "start"), (1.0, "l2", "start"), (100.0, "s8", "start")]


def test_sjf_weighted_by_gpus(dgx2):
    # by time the 4-GPU 60 s job goes first; by GPU time (240 vs 100) the 1-GPU 100 s one
    jobs = (("hog", 0.0, 16, 10.0), ("wide", 1.0, 4, 60.0), ("thin", 1.0, 1, 100.0),
            ("fill", 1.0, 16, 5.0))
    plain = Simulation(make_trace(*jobs), dgx2, SjfPolicy()).run()
    weighted = Simulation(make_trace(*jobs), dgx2, SjfPolicy(weight="gpus")).run()
    assert [j for _, j, _ in starts(plain)] == ["hog", "fill", "wide", "thin"]
    assert [j for _, j, _ in starts(weighted)] == ["hog", "fill", "thin", "wide"]


def test_srtf_preempts_the_job_with_more_work_left(one_gpu):
    # at 10 A has 90 s left, B needs 20: B preempts A. A had no checkpoint: it lost its
    # 10 s and starts over at 30 (nothing to restore, no pause), ending at 130.
    trace = make_trace(("A", 0.0, 1, 100.0), ("B", 10.0, 1, 20.0))
    r = Simulation(trace, one_gpu, SrtfPolicy(stop="preempt")).run()
    assert starts(r) == [(0.0, "A", "start"), (10.0, "A", "preempt"), (10.0, "B", "start"),
                         (30.0, "A", "resume")]
    j = r.jobs.set_index("job_id")
    assert j.loc["A", "end_time"] == 130.0 and j.loc["A", "lost_work"] == 10.0
    # by default the job is suspended: it keeps its 10 s, restores 30 s, ends at 150
    r = Simulation(trace, one_gpu, SrtfPolicy()).run()
    assert starts(r)[1] == (10.0, "A", "suspend")
    assert r.jobs.set_index("job_id").loc["A", "end_time"] == 150.0


def test_srtf_keeps_a_job_closer_to_the_end(one_gpu):
    # at 80 A has 20 s left, B needs 30: no preemption; a tie keeps the running job too
    trace = make_trace(("A", 0.0, 1, 100.0), ("B", 80.0, 1, 30.0), ("C", 100.0, 1, 30.0))
    r = Simulation(trace, one_gpu, SrtfPolicy(), params={"restore_overhead": 0.0}).run()
    assert r.summary["preemptions"] == 0
    assert [j for _, j, _ in starts(r)] == ["A", "B", "C"]


def test_srtf_takes_only_the_victims_it_needs(dgx2):
    # four 4-GPU long jobs fill the cluster; a short 4-GPU job preempts exactly one of
    # them (the lowest priority: most work left, ties to the later submission)
    jobs = [JobSpec(f"l{i}", float(i), 4, 1000.0 + 10 * i, checkpoint_interval=10.0)
            for i in range(4)]
    jobs.append(JobSpec("s", 50.0, 4, 10.0))
    r = Simulation(make_trace(*jobs), dgx2, SrtfPolicy()).run()
    pre = [(t, j) for t, j, k in starts(r) if k == "suspend"]
    assert pre == [(50.0, "l3")]


@st.composite
def small_case(draw):
    topo = uniform_topology(draw(st.integers(1, 3)), switches_per_socket=2,
                            gpus_per_switch=draw(st.integers(1, 2)))
    jobs = []
    for i in range(draw(st.integers(1, 15))):
        g = draw(st.integers(0, topo.num_gpus))
        share = draw(st.sampled_from([1.0, 0.5])) if g == 1 else 1.0
        jobs.append(JobSpec(f"j{i}", float(draw(st.integers(0, 100))), g,
                            float(draw(st.integers(1, 200))), gpu_share=share,
                            checkpoint_interval=draw(st.sampled_from([None, 25.0]))))
    return topo, make_trace(*jobs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=small_case(), cls=st.sampled_from([SjfPolicy, SrtfPolicy]))
def test_invariants_and_no_preemption_without_a_shorter_job(case, cls):
    topo, trace = case
    r = Simulation(trace, topo, cls()).run()
    check_invariants(r, topo, trace)
    if cls is SjfPolicy:
        assert r.summary["preemptions"] == 0


def test_srtf_preempts_for_a_big_job_only_when_whole_nodes_can_be_freed():
    # 3 nodes of 4. Long 3-GPU jobs L0..L2 and short 1-GPU jobs k0..k2 fill them. At 10 the
    # 8-GPU job B (50 s) has less left than the L jobs but more than the k jobs: stopping
    # all L jobs frees 9 GPUs, but no 2 nodes hold 8 (3 + 3), and consolidated never uses
    # a third node. B waits until the k jobs end at 30, then takes two nodes.
    topo = uniform_topology(3, switches_per_socket=2, gpus_per_switch=2)
    jobs = [JobSpec(f"L{i}", 0.0, 3, 1000.0) for i in range(3)]
    jobs += [JobSpec(f"k{i}", 1.0, 1, 29.0) for i in range(3)]
    jobs.append(JobSpec("B", 10.0, 8, 50.0))
    r = Simulation(make_trace(*jobs), topo, SrtfPolicy()).run()
    ev = [(t, j, k) for t, j, k in starts(r) if 1.0 < t <= 30.0]
    assert sorted(ev) == [(30.0, "B", "start"), (30.0, "L1", "suspend"),
                          (30.0, "L2", "suspend")]
