"""Tiresias 2D-LAS and 2D-Gittins: queues by attained GPU time, demotion, promotion."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_trace

from schedlab.policies.conformance import check_policy
from schedlab.policies.registry import policy_class
from schedlab.policies.tiresias import GittinsIndex, TiresiasGittinsPolicy, TiresiasLasPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology

CLASSES = {"tiresias-las": TiresiasLasPolicy, "tiresias-gittins": TiresiasGittinsPolicy}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_registered_by_name(name):
    assert policy_class(name) is CLASSES[name]


def log(result, kinds=None):
    return [(e.time, e.job_id, e.kind) for e in result.events.itertuples()
            if kinds is None or e.kind in kinds]


def ends(result):
    return result.jobs.set_index("job_id").end_time.to_dict()


@pytest.mark.parametrize("params", [
    {"thresholds": "300,1200", "promote_knob": 1.0},
    {"thresholds": "100,250,500", "num_queues": 4, "stop": "preempt"},  # no promotion
    {"thresholds": "100,250", "demoted": "running-first"},
    {"thresholds": "100,250", "demotion_timer": "simulator", "requeue": "front"},
    {"thresholds": "300,1200", "promote_knob": 1.0, "demotion_timer": "simulator"},
])
@pytest.mark.parametrize("cls", [TiresiasLasPolicy, TiresiasGittinsPolicy])
def test_conformance_with_queue_changes(cls, params):
    check_policy(lambda: cls(**params), params={"placer": "pack"})


def test_defaults_are_the_simulators():
    p = TiresiasLasPolicy()
    assert p.p["num_queues"] == 3
    assert p.p["thresholds"] == (3250.0, 7200.0, 18000.0)
    assert p.limits == (3250.0, 7200.0)  # K queues use the first K-1 thresholds
    assert p.p["promote_knob"] == 0.0
    assert p.p["stop"] == "suspend"
    assert TiresiasGittinsPolicy().p["gittins_delta"] == 3250.0


@pytest.mark.parametrize("params", [
    {"thresholds": "100,50"}, {"thresholds": "0"}, {"thresholds": "x"},
    {"num_queues": 4, "thresholds": "100"}, {"promote_knob": -1},
])
def test_bad_parameters_are_refused(params):
    with pytest.raises(InvalidParameter):
        TiresiasLasPolicy(**params)


def test_demotion_of_a_four_gpu_job_after_900s_preempts_it():
    # 4 GPUs x 900 s = 3600 GPU-s: A crosses the threshold at t=900 and drops to Q1; B,
    # waiting in Q0 since t=100, takes the GPUs. A checkpointed at 900, resumes at 1000
    # after B, pays the 30 s restore and runs its last 9100 s: 1030 + 9100 = 10130.
    topo = uniform_topology(1, switches_per_socket=2, gpus_per_switch=2)
    trace = make_trace(JobSpec("A", 0.0, 4, 10000.0, checkpoint_interval=300.0),
                       JobSpec("B", 100.0, 4, 100.0))
    for stop in ("preempt", "suspend"):
        las = TiresiasLasPolicy(num_queues=2, thresholds="3600", stop=stop)
        r = Simulation(trace, topo, las).run()
        assert log(r) == [
            (0.0, "A", "submit"), (0.0, "A", "start"), (100.0, "B", "submit"),
            (900.0, "A", stop), (900.0, "B", "start"), (1000.0, "B", "finish"),
            (1000.0, "A", "resume"), (10130.0, "A", "finish"),
        ]


def test_fifo_inside_a_queue_never_preempts(one_gpu):
    # all three stay in Q0 (far below 3250 GPU-s): A is not preempted by the shorter
    # jobs, which then run in arrival order (SRTF would run B and C first)
    trace = make_trace(("A", 0.0, 1, 100.0), ("B", 10.0, 1, 50.0), ("C", 20.0, 1, 30.0))
    r = Simulation(trace, one_gpu, TiresiasLasPolicy()).run()
    assert log(r, ("start", "preempt")) == [(0.0, "A", "start"), (100.0, "B", "start"),
                                             (150.0, "C", "start")]


def test_new_job_in_a_higher_queue_preempts_a_demoted_one(one_gpu):
    # A is demoted to Q1 at t=100 (100 GPU-s); C arrives at 150 in Q0 and takes the GPU
    trace = make_trace(JobSpec("A", 0.0, 1, 300.0, checkpoint_interval=50.0),
                       JobSpec("C", 150.0, 1, 20.0))
    las = TiresiasLasPolicy(num_queues=2, thresholds="100", stop="preempt")
    r = Simulation(trace, one_gpu, las, params={"restore_overhead": 0.0}).run()
    assert log(r, ("start", "preempt", "resume", "finish")) == [
        (0.0, "A", "start"), (150.0, "A", "preempt"), (150.0, "C", "start"),
        (170.0, "C", "finish"), (170.0, "A", "resume"), (320.0, "A", "finish"),
    ]


def test_promote_knob_brings_a_starved_job_back_to_queue_zero(one_gpu):
    # Q0 < 100 GPU-s <= Q1, knob 1, suspend (no lost work), no restore pause.
    # t=100: A demoted, B (Q0) takes over. t=200: B demoted; A waited 100 >= 1 x its 100 s
    # run -> promoted to Q0, preempts B. t=300: the same with roles swapped, and at 400
    # again; A finishes at 500 (3 x 100 s runs) and B runs its last 800 s to 1300.
    trace = make_trace(("A", 0.0, 1, 300.0), ("B", 50.0, 1, 1000.0))
    params = {"restore_overhead": 0.0}
    knob = TiresiasLasPolicy(num_queues=2, thresholds="100", promote_knob=1.0,
                             stop="suspend")
    r = Simulation(trace, one_gpu, knob, params=params).run()
    assert log(r, ("start", "suspend", "resume", "finish")) == [
        (0.0, "A", "start"), (100.0, "A", "suspend"), (100.0, "B", "start"),
        (200.0, "B", "suspend"), (200.0, "A", "resume"), (300.0, "A", "suspend"),
        (300.0, "B", "resume"), (400.0, "B", "suspend"), (400.0, "A", "resume"),
        (500.0, "A", "finish"), (500.0, "B", "resume"), (1300.0, "B", "finish"),
    ]
    # demoted: A at 100 and 300, B at 200, 400 and 600; promoted: A at 200 and 400, B at
    # 300 and 500 (it waited 100 s after its 100 s run; back in Q0 it resumes at once)
    assert r.summary["policy_demotions"] == 5 and r.summary["policy_promotions"] == 4
    # without promotion, B demoted at 200 joins Q1 behind A (waiting there since 100) and
    # A takes the GPU back at once (Tiresias); with demoted=running-first B keeps it and A
    # starves to 1300
    plain = TiresiasLasPolicy(num_queues=2, thresholds="100", stop="suspend")
    r0 = Simulation(trace, one_gpu, plain, params=params).run()
    assert ends(r0) == {"A": 400.0, "B": 1300.0}
    first = TiresiasLasPolicy(num_queues=2, thresholds="100", stop="suspend",
                              demoted="running-first")
    r1 = Simulation(trace, one_gpu, first, params=params).run()
    assert ends(r1) == {"A": 1300.0, "B": 1100.0}


def test_demoted_job_joins_behind_the_waiting_jobs_of_its_new_queue(one_gpu):
    # Tiresias' simulator appends a demoted job to the lower queue, behind the jobs
    # waiting there. Q0 < 100 GPU-s <= Q1 < 300 <= Q2. A (0) is demoted to Q1 at 100; B
    # (arrived 50) runs from 100 and is demoted to Q1 at 200: behind A, which resumes at
    # once. A reaches 300 GPU-s at 400 and drops to Q2 (alone there); B, waiting in Q1,
    # preempts it and runs its last 150 s to 550; A then ends at 750.
    trace = make_trace(("A", 0.0, 1, 500.0), ("B", 50.0, 1, 250.0))
    las = TiresiasLasPolicy(num_queues=3, thresholds="100,300", stop="suspend")
    r = Simulation(trace, one_gpu, las, params={"restore_overhead": 0.0}).run()
    assert log(r, ("start", "suspend", "resume", "finish")) == [
        (0.0, "A", "start"), (100.0, "A", "suspend"), (100.0, "B", "start"),
        (200.0, "B", "suspend"), (200.0, "A", "resume"), (400.0, "A", "suspend"),
        (400.0, "B", "resume"), (550.0, "B", "finish"), (550.0, "A", "resume"),
        (750.0, "A", "finish"),
    ]
    assert r.summary["policy_demotions"] == 3


def test_gittins_index_formula():
    g = GittinsIndex(np.array([200.0, 200.0, 200.0, 1000.0]), delta=100.0)
    # a=100: all 4 alive, 3 end within 100 more: P=3/4, E[min(S-a, 100)] = 100 -> 0.0075
    assert g(100.0) == pytest.approx(0.0075)
    # a=150: P=3/4, E = (3 x 50 + 100) / 4 = 62.5 -> 0.012
    assert g(150.0) == pytest.approx(0.012)
    assert g(1000.0) == 0.0  # past every sample


def test_gittins_orders_a_queue_by_index_where_las_keeps_fifo(one_gpu, tmp_path):
    # X and Y both end up waiting in Q1: X with 100 GPU-s (entered Q1 at 100), Y with
    # 150 (entered at 200, preempted at 250 by the short Z). When Z ends at 300, LAS
    # resumes X (first in), Gittins resumes Y (index 0.012 > 0.0075: likelier to end soon)
    samples = tmp_path / "gput.csv"
    samples.write_text("duration\n200\n200\n200\n1000\n")
    trace = make_trace(("X", 0.0, 1, 400.0), ("Y", 0.0, 1, 400.0), ("Z", 250.0, 1, 50.0))
    common = {"num_queues": 2, "thresholds": "100", "stop": "suspend",
              "demoted": "running-first"}  # Y keeps the GPU when demoted at 200
    params = {"restore_overhead": 0.0}
    las = Simulation(trace, one_gpu, TiresiasLasPolicy(**common), params=params).run()
    git = Simulation(trace, one_gpu, TiresiasGittinsPolicy(
        **common, gittins_samples=str(samples), gittins_delta=100.0), params=params).run()
    head = [(0.0, "X", "start"), (100.0, "X", "suspend"), (100.0, "Y", "start"),
            (250.0, "Y", "suspend"), (250.0, "Z", "start")]
    kinds = ("start", "suspend", "resume")
    assert log(las, kinds) == [*head, (300.0, "X", "resume"), (600.0, "Y", "resume")]
    assert log(git, kinds) == [*head, (300.0, "Y", "resume"), (550.0, "X", "resume")]
    assert ends(git) == {"X": 850.0, "Y": 550.0, "Z": 300.0}


def test_gittins_learns_from_completed_jobs(dgx2):
    # history mode: the index is built from completed jobs' GPU time as they finish
    jobs = [JobSpec(f"j{i}", float(i * 5), 1 + i % 4, float(50 + 37 * i % 400))
            for i in range(30)]
    pol = TiresiasGittinsPolicy(thresholds="200,800", gittins_delta=100.0)
    r = Simulation(make_trace(*jobs), dgx2, pol).run()
    assert (r.jobs.status == "completed").all()
    assert pol.index is not None and len(pol.history) == 30


def test_bad_sample_file_is_refused(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("duration\n100\nabc\n")
    with pytest.raises(InvalidParameter, match="line 3"):
        Simulation(make_trace(("a", 0.0, 1, 10.0)), uniform_topology(1),
                   TiresiasGittinsPolicy(gittins_samples=str(bad))).run()


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_promotions_cannot_livelock_on_restore_overhead(name):
    # fuzz campaign (benchmarks/fuzz_campaign.py): with promotions, a 4-GPU job's slice in
    # queue 0 (40 GPU-s: 10 s) was shorter than its 30 s restore pause, so each resumed job
    # was demoted and suspended for the next promoted one before any progress, for ever
    # (2,000 suspensions by t = 20,000 s, nothing completed). Lossless suspends now always
    # progress: the slice counts from the end of the pause.
    topo = uniform_topology(1, gpus_per_switch=4)
    trace = make_trace(*(JobSpec(f"j{i}", float(i), 4, 100.0, checkpoint_interval=5.0)
                         for i in range(3)))
    r = Simulation(trace, topo, name,
                   params={"thresholds": "40,4000", "promote_knob": 2.0}).run(until=20000)
    assert list(r.jobs.status) == ["completed"] * 3
    assert r.summary["preemptions"] < 100


def test_demotion_timer_simulator_demotes_when_tiresias_simulator_does():
    # 2 GPUs, Q0 < 100 GPU-s. A (2 GPUs) crosses 100 GPU-s at 50 s. C arrives at 20 and
    # waits in Q0 (80 GPU-s: it stays there). At the crossing A drops to Q1 and C takes
    # the GPUs. Tiresias' simulator re-arms its queue-jump timer at C's arrival:
    # 20 + (100 - 20 run s) // 2 = 60, so A is demoted and preempted at 60.
    topo = uniform_topology(1, gpus_per_switch=2)
    trace = make_trace(JobSpec("A", 0.0, 2, 300.0), JobSpec("C", 20.0, 2, 40.0))
    kinds = ("start", "suspend", "resume", "finish")
    params = {"restore_overhead": 0.0}
    exact = TiresiasLasPolicy(num_queues=2, thresholds="100")
    r = Simulation(trace, topo, exact, params=params).run()
    assert log(r, kinds) == [(0.0, "A", "start"), (50.0, "A", "suspend"), (50.0, "C", "start"),
                             (90.0, "C", "finish"), (90.0, "A", "resume"),
                             (340.0, "A", "finish")]
    sim = TiresiasLasPolicy(num_queues=2, thresholds="100", demotion_timer="simulator")
    r = Simulation(trace, topo, sim, params=params).run()
    assert log(r, kinds) == [(0.0, "A", "start"), (60.0, "A", "suspend"), (60.0, "C", "start"),
                             (100.0, "C", "finish"), (100.0, "A", "resume"),
                             (340.0, "A", "finish")]



class _WalkEveryPass(TiresiasLasPolicy):
    """Tiresias-LAS that walks the queue on every pass, even when nothing changed."""

    name = "tiresias-las"  # the same name: it appears in the frames
    skip_unchanged = False


@pytest.mark.parametrize("params", [
    {}, {"promote_knob": 2.0, "stop": "preempt"},
    {"demotion_timer": "simulator", "requeue": "front"},
])
def test_skipping_idle_walks_keeps_every_decision(params):
    """A pass that changed nothing since a walk that started nothing (a timer that found
    nothing to do, or arrivals queued behind the first job of their request class)
    skips the walk: the run is the same as walking every pass."""
    from schedlab.traces import load_trace

    topo = uniform_topology(2, sockets=1, switches_per_socket=1, gpus_per_switch=4)
    trace = load_trace("philly-like:300", topology=topo, load=1.5, seed=5)
    fast = Simulation(trace, topo, TiresiasLasPolicy(**params)).run()
    slow = Simulation(trace, topo, _WalkEveryPass(**params)).run()
    assert log(fast) == log(slow) and len(log(fast)) > 900
    assert fast.jobs.equals(slow.jobs)
    # a walk that is never skipped never settles: it asks for every timer's wake-up
    assert fast.summary["events_processed"] <= slow.summary["events_processed"]


@pytest.mark.parametrize(("seed", "params"), [
    (3, {}), (11, {}), (3, {"promote_knob": 2.0}), (5, {"promote_knob": 2.0}),
])
def test_known_failures_keep_every_decision(seed, params):
    """A walk from the state the last walk left (a timer's pass after a walk that
    started jobs) counts the classes whose first entry failed after that walk's last
    decision as failed until its own first decision: the run is the same as walking
    every pass. (After stopping victims a walk resumes past the current entry, so it
    may fail a class at a later entry than its first: that is no known failure.)"""
    from schedlab.traces import load_trace

    topo = uniform_topology(4, sockets=2, switches_per_socket=1, gpus_per_switch=4)
    trace = load_trace("philly-like:400", topology=topo, load=1.3, seed=seed)
    fast = Simulation(trace, topo, TiresiasLasPolicy(**params)).run()
    slow = Simulation(trace, topo, _WalkEveryPass(**params)).run()
    assert log(fast) == log(slow) and len(log(fast)) > 1000
    assert fast.jobs.equals(slow.jobs)


def test_known_failures_after_stops_keep_every_decision():
    """The case that showed a walk resuming past a class's first entry after stopping
    victims: 3,000 philly-like jobs made for the 2,490-GPU `philly` preset on 448 GPUs,
    with promotions (a later entry of a class failed, its first had not been met)."""
    from schedlab.topologies import load_topology
    from schedlab.traces import load_trace

    topo = uniform_topology(56, sockets=2, switches_per_socket=2, gpus_per_switch=2)
    trace = load_trace("philly-like:3000", topology=load_topology("philly"), load=0.8, seed=0)
    fast = Simulation(trace, topo, TiresiasLasPolicy(promote_knob=2.0)).run()
    slow = Simulation(trace, topo, _WalkEveryPass(promote_knob=2.0)).run()
    assert log(fast) == log(slow) and len(log(fast)) > 16000
    assert fast.jobs.equals(slow.jobs)


def test_skipping_idle_walks_keeps_every_decision_of_sjf():
    """The same for a policy whose key puts a later arrival ahead (shortest job first):
    an arrival that becomes the first of its request class is walked for."""
    from schedlab.policies.sjf import SjfPolicy
    from schedlab.traces import load_trace

    class WalkEveryPass(SjfPolicy):
        skip_unchanged = False

    topo = uniform_topology(2, sockets=1, switches_per_socket=1, gpus_per_switch=4)
    trace = load_trace("philly-like:300", topology=topo, load=1.5, seed=7)
    fast = Simulation(trace, topo, SjfPolicy()).run()
    slow = Simulation(trace, topo, WalkEveryPass()).run()
    assert log(fast) == log(slow) and len(log(fast)) > 800
    assert fast.jobs.equals(slow.jobs)
