"""SJF and SRTF as Helios' simulator runs them: `blocked=stop` and `admit=gpus`, by hand."""

from __future__ import annotations

from conftest import make_trace

from schedlab.policies.sjf import SjfPolicy, SrtfPolicy
from schedlab.sim.engine import Simulation
from schedlab.topologies.build import uniform_topology

NO_PAUSE = {"restore_overhead": 0.0}


def starts(result):
    return [(e.time, e.job_id, e.kind) for e in result.events.itertuples()
            if e.kind in ("start", "resume", "preempt", "suspend")]


def test_sjf_blocked_stop_waits_behind_the_shortest_job():
    # one node of 4 GPUs, `big` holds 3 until 100. At 1 the shortest job (s2, 2 GPUs)
    # does not fit: schedlab's default starts l1 beside it, Helios' stops the walk there
    node4 = uniform_topology(1, gpus_per_switch=4, name="node4")
    trace = make_trace(("big", 0.0, 3, 100.0), ("s2", 1.0, 2, 10.0), ("l1", 1.0, 1, 50.0))
    skip = Simulation(trace, node4, SjfPolicy()).run()
    assert starts(skip) == [(0.0, "big", "start"), (1.0, "l1", "start"),
                            (100.0, "s2", "start")]
    stop = Simulation(trace, node4, SjfPolicy(blocked="stop")).run()
    assert starts(stop) == [(0.0, "big", "start"), (100.0, "s2", "start"),
                            (100.0, "l1", "start")]
    assert stop.summary["jct_mean"] == (100 + (110 - 1) + (150 - 1)) / 3


def test_srtf_admit_gpus_ignores_placement():
    # two nodes of 2 GPUs. A and Z (1 GPU) go on node0, B (at 1) on node1; Z ends at 3.
    # P (2 GPUs, 10 s) arrives at 5: by count it is admitted and so are A and B (2 + 1 +
    # 1 = 4), so nobody is stopped, but no node has 2 GPUs free: P waits for A to end
    # (1000). The default stops B (the most work left) to free node1 for P at once
    # (B then resumes on node0's free GPU).
    two = uniform_topology(2, gpus_per_switch=2, name="two")
    trace = make_trace(("A", 0.0, 1, 1000.0), ("Z", 0.0, 1, 3.0), ("B", 1.0, 1, 1000.0),
                       ("P", 5.0, 2, 10.0))
    helios = Simulation(trace, two, SrtfPolicy(admit="gpus"), params=NO_PAUSE).run()
    assert [e for e in starts(helios) if e[1] in "PB"] == [(1.0, "B", "start"),
                                                           (1000.0, "P", "start")]
    assert helios.summary["preemptions"] == 0
    default = Simulation(trace, two, SrtfPolicy(), params=NO_PAUSE).run()
    assert [e for e in starts(default) if e[1] in "PB"] == [
        (1.0, "B", "start"), (5.0, "B", "suspend"), (5.0, "P", "start"),
        (5.0, "B", "resume")]  # on node0's free GPU


def test_srtf_admit_gpus_stops_every_running_job_over_the_count():
    # one node of 4 GPUs: A (2 GPUs, 100 s) and C (2 GPUs, 200 s) run from 0. At 10 B
    # (3 GPUs, 20 s) and D (1 GPU, 500 s) arrive. Ranked by remaining time: B 20 (4 -> 1
    # left), A 90 (2 > 1: stopped), C 190 (stopped), D 500 (1 -> 0: admitted). At 30 B
    # ends: A 90, C 190 take all 4 GPUs and the running D (480 left) is stopped, though
    # nobody needs its GPU... by count it was not admitted. At 120 A ends: D resumes.
    node4 = uniform_topology(1, gpus_per_switch=4, name="node4")
    trace = make_trace(("A", 0.0, 2, 100.0), ("C", 0.0, 2, 200.0), ("B", 10.0, 3, 20.0),
                       ("D", 10.0, 1, 500.0))
    r = Simulation(trace, node4, SrtfPolicy(admit="gpus"), params=NO_PAUSE).run()
    assert starts(r) == [
        (0.0, "A", "start"), (0.0, "C", "start"),
        (10.0, "A", "suspend"), (10.0, "C", "suspend"),
        (10.0, "B", "start"), (10.0, "D", "start"),
        (30.0, "D", "suspend"), (30.0, "A", "resume"), (30.0, "C", "resume"),
        (120.0, "D", "resume")]
    end = r.jobs.set_index("job_id")["end_time"].to_dict()
    assert end == {"A": 120.0, "C": 220.0, "B": 30.0, "D": 600.0}


def test_srtf_admit_gpus_a_waiting_job_wins_a_tie():
    # one GPU: at 50 A has 50 s left and B needs 50. Helios sorts `que_list + run_list`
    # stably, so the waiting B comes first and A is stopped; the default keeps A.
    one = uniform_topology(1, name="one")
    trace = make_trace(("A", 0.0, 1, 100.0), ("B", 50.0, 1, 50.0))
    helios = Simulation(trace, one, SrtfPolicy(admit="gpus"), params=NO_PAUSE).run()
    assert starts(helios) == [(0.0, "A", "start"), (50.0, "A", "suspend"),
                              (50.0, "B", "start"), (100.0, "A", "resume")]
    default = Simulation(trace, one, SrtfPolicy(), params=NO_PAUSE).run()
    assert starts(default) == [(0.0, "A", "start"), (100.0, "B", "start")]
