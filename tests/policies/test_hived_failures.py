"""Bad hardware under `hived`: failed nodes mark cells bad, the VC that loses sees it."""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.policies.conformance import check_invariants
from schedlab.policies.hived import HivedPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies import load_topology


def job(jid, t, gpus, dur, vc, prio=0, **kw):
    return JobSpec(jid, t, gpus, dur, vc=vc, priority=prio, **kw)


def failures(tmp_path, *rows):
    f = tmp_path / "failures.csv"
    f.write_text("node,fail_time,repair_time\n" + "".join(f"{n},{a},{b}\n" for n, a, b in rows))
    return str(f)


def starts(result):
    ev = result.events
    return {r.job_id: (r.time, r.cells) for r in ev[ev.kind == "start"].itertuples()}


def test_the_vc_whose_cell_went_bad_sees_the_loss(hived_root, tmp_path):
    """hived-config-2: vc1's only M60 node fails; vc1 waits for it, `default` does not care."""
    topo = load_topology(hived_root / "hived-configs" / "hived-config-2.yaml")
    trace = make_trace(job("m60", 20, 4, 50, "vc1", gpu_type="M60"),
                       job("k80", 20, 8, 50, "default", gpus_per_task=4),
                       job("vc1k80", 20, 4, 50, "vc1", gpu_type="K80"))
    params = {"failures": failures(tmp_path, ("10.151.41.26", 10, 1000))}
    pol = HivedPolicy()
    Simulation(trace, topo, pol, params=params).run(until=500)
    assert pol.algo.doomed_count("vc1") == 1  # its M60 cell is bound to the bad node
    assert pol.algo.doomed_count("default") == 0
    r = Simulation(trace, topo, HivedPolicy(order="fifo-backfill"), params=params).run()
    st = starts(r)
    assert st["m60"] == (1000.0, "10.151.41.26:4")  # waited for the repair
    assert st["k80"][0] == 20.0 and st["vc1k80"][0] == 20.0
    check_invariants(r, topo, trace)


def test_buddy_allocation_skips_bad_cells(hived_root, tmp_path):
    topo = load_topology(hived_root / "hived-configs" / "basic-hivedscheduler.yaml")
    trace = make_trace(job("a", 2, 4, 10, "VC1"))
    r = Simulation(trace, topo, HivedPolicy(), params={
        "failures": failures(tmp_path, ("10.151.41.20", 1, 100))}).run()
    assert starts(r)["a"] == (2.0, "10.151.41.22:4")


@pytest.mark.parametrize("delay", [0.0, 30.0])
def test_job_on_a_failed_node_restarts_on_a_healthy_cell_of_its_vc(hived_root, tmp_path,
                                                                   delay):
    topo = load_topology(hived_root / "hived-configs" / "basic-hivedscheduler.yaml")
    trace = make_trace(job("a", 0, 4, 100, "VC1"),
                       job("p", 0, 4, 1000, "VC2", extra=(("pinned_cell_id", "VC2-K80"),)),
                       job("o", 0, 2, 1000, "VC1", prio=-1))  # lands on 10.151.41.22
    r = Simulation(trace, topo, HivedPolicy(preemption_delay=delay), params={
        "failures": failures(tmp_path, ("10.151.41.20", 10, 500))}).run()
    ev = r.events
    a = ev[ev.job_id == "a"]
    assert list(a.kind) == ["submit", "start", "fail", "retry", "resume", "finish"]
    resume = a[a.kind == "resume"].iloc[0]
    # VC1's cell is rebound to the only other unpinned node, where the opportunistic job
    # ran: it is preempted as a whole, once the preemption delay is over
    assert (resume.time, resume.cells) == (10.0 + delay, "10.151.41.22:4")
    assert ev[(ev.job_id == "o") & (ev.kind == "preempt")].time.tolist() == [10.0 + delay]
    check_invariants(r, topo, trace)


def test_random_failures_keep_the_invariants(hived_root):
    topo = load_topology(hived_root / "hived-configs" / "hived-config-1.yaml")
    jobs = []
    vcs = ["vc1", "vc2", "default"]  # 4, 4 (+ a pinned node) and 8 GPUs
    for i in range(60):
        vc = vcs[i % 3]
        gpus = [1, 2, 4, 4, 8][i % 5] if vc == "default" else [1, 2, 4][i % 3]
        jobs.append(job(f"j{i}", i * 7.0, gpus, 50 + 13 * (i % 7), vc,
                        prio=-1 if i % 4 == 0 else i % 3, gpus_per_task=min(gpus, 4),
                        checkpoint_interval=20.0))
    trace = make_trace(*jobs)
    for lazy in (False, True):
        r = Simulation(trace, topo, HivedPolicy(lazy_preemption=lazy), seed=3,
                       params={"mtbf": 300.0, "mttr": 60.0, "retry_delay": 2.0}).run()
        check_invariants(r, topo, trace)
