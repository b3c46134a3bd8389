"""HiveD affinity groups whose members differ (issue 16): jobs of roles under `hived`.

A job of roles is one affinity group: each gang GPU task a member pod of `gpus` leaf
cells (HiveD `members: [{podNumber, leafCellNumber}]`), each pod within one node, the
group placed by HiveD's topology-aware scheduler inside its VC and bound by buddy
allocation; CPU-only gang tasks (ps) go on host capacity as the placers' `place_roles`
puts them; non-gang tasks (an evaluator) are the engine's (`place_side`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.hived import HivedPolicy
from schedlab.policies.hived.algorithm import Request
from schedlab.policies.hived.config import build_physical
from schedlab.sim.engine import Simulation
from schedlab.topologies import load_topology
from schedlab.traces.synthetic import from_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
from test_roles import dgx, tf_job, where  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_hived_placement import HIVED_NORMAL, fresh, run_hived  # noqa: E402
from test_hived_placement import where as pods_where  # noqa: E402


def roles_job(job_id: str, submit: float, duration: float, roles: list[dict[str, Any]],
              **kw: Any) -> dict[str, Any]:
    gang = sum(r.get("count", 1) * r.get("gpus", 0) for r in roles if r.get("gang", True))
    return {"job_id": job_id, "submit_time": submit, "num_gpus": gang, "duration": duration,
            "tasks": json.dumps(roles), **kw}


SEVEN_FIVE = [{"role": "a", "gpus": 7}, {"role": "b", "gpus": 5}]


def test_hived_own_7_plus_5_gang_lands_where_hived_expects(hived_root: Path) -> None:
    """HiveD's hived_algorithm_test.go pods 8/9: group9 {7 leaves} + {5 leaves}, VC2, prio 1.

    Expected answer from microsoft/hivedscheduler@66f26ac pkg/algorithm/
    hived_algorithm_test.go `expectedBindInfos`: pod8 (7 leaves) on node 1.0.0.0, leaf
    cells [1, 3, 4, 7, 0, 2, 6]; pod9 (5 leaves) on node 1.0.0.2, leaf cells [0-4]. Same
    replay as test_hived_placement (pods 1-7 first, the test's chain order); our plan
    lists pods smallest first, as HiveD's scheduler sorts them.
    """
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml", hived_chain_order=True)
    before = [r for r in HIVED_NORMAL if r[0] < 8]
    after = [r for r in HIVED_NORMAL if r[0] > 8]
    run_hived(topo, algo, before)
    got = algo.schedule(Request(8, "VC2", 1, "", 0, 0, "", True, members=(7, 5)),
                        commit=True)
    assert not isinstance(got, str) and got.victims == [] and got.chain == "3-DGX1-P100-NODE"
    assert pods_where(topo, got) == [("1.0.0.2", [0, 1, 2, 3, 4]),
                                     ("1.0.0.0", [1, 3, 4, 7, 0, 2, 6])]
    run_hived(topo, algo, after)  # the rest of HiveD's table is unchanged by the group


def test_the_7_plus_5_job_of_roles_runs_on_hived_cells(hived_root: Path) -> None:
    # the same group as a job of roles in a whole simulation (the policy's default chain
    # order: the P100 chain is untouched by it): role a (7 GPUs) on 1.0.0.0, b on 1.0.0.2
    topo = load_topology(hived_root / "hived-configs" / "design-hivedscheduler.yaml")
    leaf = build_physical(topo).leaf_of_gpu
    rec = roles_job("g", 0, 100, SEVEN_FIVE, vc="VC2", priority=1)
    sim = Simulation(from_records([rec]), topo, HivedPolicy(), seed=0)
    run = sim.start()
    run.env.run(until=1)
    g = run.jobs[0]
    assert [(t.role, topo.nodes[t.node].name,
             [int(leaf[x].name.rsplit("/", 1)[1]) for x in t.gpus]) for t in g.tasks] == [
        ("a", "1.0.0.0", [1, 3, 4, 7, 0, 2, 6]), ("b", "1.0.0.2", [0, 1, 2, 3, 4])]
    run.env.run()
    j = sim.result(run, 0.0).jobs.set_index("job_id")
    # across two nodes the engine's locality model slows it (its factor, not HiveD's)
    assert (j.status["g"], j.start_time["g"]) == ("completed", 0.0)
    assert j.end_time["g"] == pytest.approx(294.11764705882354, abs=1e-9)


def test_tf_job_with_ps_under_hived() -> None:
    # dgx (2 nodes x 2 sockets x 2 switches x 2 GPUs, 32 CPUs each), no VCs: one VC owns
    # every cell. Gang pods 1 (chief) + 4 x 2 (workers), smallest first as HiveD: the chief
    # on node0's leftmost leaf (GPU 0); the 2-GPU pods fill node0 by tightest cell, the
    # fullest socket first: switch (2,3), then (4,5), (6,7); the fourth on node1 (8,9).
    # Tasks of one size take the pods in role order; both ps (8 CPUs) go on node0 (the
    # first GPU task's node: 32 - 3 x 4 - 2 = 18 CPUs free). The evaluator (not in the
    # group) is the engine's: the run's placer puts it on GPU 1, next to the gang
    sim = Simulation(from_records([tf_job()]), dgx(), HivedPolicy(), seed=0)
    run = sim.start()
    run.env.run(until=5)
    tf = run.jobs[0]
    assert where(tf) == {"ps0": (0, ()), "ps1": (0, ()), "worker0": (0, (2, 3)),
                         "worker1": (0, (4, 5)), "worker2": (0, (6, 7)),
                         "worker3": (1, (8, 9)), "chief0": (0, (0,))}
    assert tf.side is not None
    (ev, _end, since), = tf.side.values()
    assert (ev.node, ev.gpus, since) == (0, (1,), 0)
    assert run.cluster.node_cpu_free == [2.0, 28.0]
    run.env.run()
    r = sim.result(run, 0.0)
    j = r.jobs.set_index("job_id")
    assert (j.status["tf"], j.start_time["tf"], j.end_time["tf"]) == ("completed", 0.0, 100.0)
    assert run.cluster.free_whole == 16 and run.cluster.node_cpu_free == [32.0, 32.0]


def test_a_group_larger_than_its_vc_is_rejected_and_one_that_fits_waits(
        hived_root: Path) -> None:
    # basic config: VC1 owns one K80 node of 4 GPUs. A 3 + 2 group never fits VC1 (HiveD
    # would leave its pods pending for ever): rejected with the reason. A 3-GPU job of
    # VC1 leaves it 1 leaf, so a 2 + 1 group waits until that job ends at 50
    topo = load_topology(hived_root / "hived-configs" / "basic-hivedscheduler.yaml")
    recs = [{"job_id": "x", "submit_time": 0, "num_gpus": 3, "duration": 50, "vc": "VC1"},
            roles_job("big", 1, 100, [{"role": "a", "gpus": 3}, {"role": "b", "gpus": 2}],
                      vc="VC1"),
            roles_job("g", 2, 100, [{"role": "a", "gpus": 2}, {"role": "b", "gpus": 1}],
                      vc="VC1")]
    sim = Simulation(from_records(recs), topo, HivedPolicy(), seed=0)
    run = sim.start()
    run.env.run(until=10)
    assert run.jobs[2].status == "pending"
    run.env.run()
    r = sim.result(run, 0.0)
    j = r.jobs.set_index("job_id")
    assert j.status["big"] == "rejected"
    assert j.reason["big"].startswith(
        "hived: 3 + 2 GPU pods cannot be placed even in the empty cluster")
    assert (j.start_time["x"], j.end_time["x"]) == (0.0, 50.0)
    assert (j.status["g"], j.start_time["g"], j.end_time["g"]) == ("completed", 50.0, 150.0)


@pytest.mark.parametrize("delay", [0.0, 30.0])
def test_a_multi_member_group_is_preempted_whole(hived_root: Path, delay: float) -> None:
    # VC1's node (4 GPUs): a priority-0 group 2 + 1 + 1 fills it at 0; a priority-1 job of
    # 4 GPUs at 10 preempts the whole group (every member stops at once, after the delay)
    # and runs 10 + delay .. 110 + delay; the group (no checkpoint) starts over then
    topo = load_topology(hived_root / "hived-configs" / "basic-hivedscheduler.yaml")
    roles = [{"role": "w", "count": 1, "gpus": 2}, {"role": "e", "count": 2, "gpus": 1}]
    recs = [roles_job("grp", 0, 100, roles, vc="VC1", priority=0),
            {"job_id": "hi", "submit_time": 10, "num_gpus": 4, "duration": 100, "vc": "VC1",
             "priority": 1}]
    sim = Simulation(from_records(recs), topo, HivedPolicy(preemption_delay=delay), seed=0)
    run = sim.start()
    run.env.run(until=5)
    grp = run.jobs[0]
    assert len(grp.tasks) == 3 and {t.node for t in grp.tasks} == {0}
    run.env.run(until=11 + delay)
    assert grp.status == "pending" and grp.tasks == ()
    run.env.run()
    r = sim.result(run, 0.0)
    j = r.jobs.set_index("job_id")
    pre = r.events[r.events.kind == "preempt"]
    assert list(pre.job_id) == ["grp"] and list(pre.time) == [10.0 + delay]
    assert (j.start_time["hi"], j.end_time["hi"]) == (10.0 + delay, 110.0 + delay)
    assert (j.status["grp"], j.end_time["grp"], j.preemptions["grp"]) == (
        "completed", 210.0 + delay, 1)


GROUP = [{"role": "w", "count": 1, "gpus": 2}, {"role": "e", "count": 2, "gpus": 1}]


def cells_at(result: Any, kind: str) -> dict[str, tuple[float, str]]:
    ev = result.events
    return {r.job_id: (r.time, r.cells) for r in ev[ev.kind == kind].itertuples()}


def test_lazy_preemption_downgrades_the_whole_group(hived_root: Path) -> None:
    # as test_hived_sim's lazy case with the low job a 2 + 1 + 1 group: at 5 the group is
    # downgraded to opportunistic (every member keeps running on 10.151.41.20), VC1 binds
    # to the free 22 for high; at 10 VC2's cell needs 20: the group is preempted whole
    topo = load_topology(hived_root / "hived-configs" / "basic-hivedscheduler.yaml")
    recs = [roles_job("low", 0, 1000, GROUP, vc="VC1", priority=1),
            {"job_id": "high", "submit_time": 5, "num_gpus": 4, "duration": 100,
             "vc": "VC1", "priority": 5},
            {"job_id": "vc2", "submit_time": 10, "num_gpus": 4, "duration": 100,
             "vc": "VC2"}]
    pol = HivedPolicy(lazy_preemption=True, preemption_delay=0)
    sim = Simulation(from_records(recs), topo, pol, seed=0)
    run = sim.start()
    run.env.run(until=7)
    low = run.jobs[0]
    assert low.status == "running" and len(low.tasks) == 3
    assert pol.algo.groups[low.idx].lazy_preempted and len(pol.algo.groups[low.idx].leaves) == 4
    run.env.run()
    r = sim.result(run, 0.0)
    st = cells_at(r, "start")
    assert st["low"] == (0.0, "10.151.41.20:4")
    assert st["high"] == (5.0, "10.151.41.22:4") and st["vc2"] == (10.0, "10.151.41.20:4")
    pre = r.events[r.events.kind == "preempt"]
    assert list(pre.job_id) == ["low"] and list(pre.time) == [10.0]
    assert pol.lazy_preemptions == 1


@pytest.mark.parametrize("delay", [0.0, 30.0])
def test_a_failed_node_stops_the_group_which_restarts_on_a_healthy_cell(
        hived_root: Path, tmp_path: Path, delay: float) -> None:
    # as test_hived_failures' case with `a` a 2 + 1 + 1 group: node 20 fails at 10, the
    # whole group stops; VC1's cell is rebound to 22 where the opportunistic `o` runs: `o`
    # is preempted whole after the delay and the group resumes there, every member
    from schedlab.policies.conformance import check_invariants

    topo = load_topology(hived_root / "hived-configs" / "basic-hivedscheduler.yaml")
    recs = [roles_job("a", 0, 100, GROUP, vc="VC1"),
            {"job_id": "p", "submit_time": 0, "num_gpus": 4, "duration": 1000, "vc": "VC2",
             "pinned_cell_id": "VC2-K80"},
            {"job_id": "o", "submit_time": 0, "num_gpus": 2, "duration": 1000, "vc": "VC1",
             "priority": -1}]
    f = tmp_path / "failures.csv"
    f.write_text("node,fail_time,repair_time\n10.151.41.20,10,500\n")
    trace = from_records(recs)
    r = Simulation(trace, topo, HivedPolicy(preemption_delay=delay),
                   params={"failures": str(f)}).run()
    ev = r.events
    a = ev[ev.job_id == "a"]
    assert list(a.kind) == ["submit", "start", "fail", "retry", "resume", "finish"]
    assert cells_at(r, "start")["a"] == (0.0, "10.151.41.20:4")
    assert cells_at(r, "resume")["a"] == (10.0 + delay, "10.151.41.22:4")
    assert ev[(ev.job_id == "o") & (ev.kind == "preempt")].time.tolist() == [10.0 + delay]
    check_invariants(r, topo, trace)


def test_hived_cells_count_the_evaluators_gpu() -> None:
    # the TF job above (gang on GPUs 0 and 2-9, its evaluator on GPU 1, placed by the
    # engine) and a guaranteed 1-GPU job at 1. HiveD would pack it on node0's last free
    # leaf (GPU 1): the evaluator's GPU is booked in HiveD's cells (a virtual leaf of the
    # VC, at the TF job's priority) so it goes to node1 at once: the free leaf whose
    # ancestors are fullest, GPU 10 (switch 10-11 of the socket holding worker3's 8-9).
    # Without the booking it would wait for GPU 1 until the TF job ends at 100
    recs = [tf_job(), {"job_id": "one", "submit_time": 1, "num_gpus": 1, "duration": 10}]
    pol = HivedPolicy()
    sim = Simulation(from_records(recs), dgx(), pol, seed=0)
    run = sim.start()
    run.env.run(until=2)
    assert run.jobs[1].gpus == (10,)
    assert list(pol.side_owner.values()) == [0]
    run.env.run()
    j = sim.result(run, 0.0).jobs.set_index("job_id")
    assert (j.start_time["one"], j.end_time["one"]) == (1.0, 11.0)
    assert pol.side_owner == {} and pol.side_held == {} and not pol.algo.groups


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), lazy=st.booleans(), delay=st.sampled_from([0.0, 30.0]),
       fail=st.booleans())
def test_groups_of_roles_keep_the_invariants(seed: int, lazy: bool, delay: float,
                                             fail: bool) -> None:
    """The conformance roles scenario with random priorities (opportunistic to high),
    lazy preemption, preemption delays and a node failure: every job ends, and the
    conformance invariants (gang never partial, exact GPU/CPU accounting) hold."""
    import tempfile
    from dataclasses import replace

    import numpy as np

    from schedlab.policies.conformance import _roles_scenario, check_invariants

    rng = np.random.default_rng(seed)
    _name, topo, trace = _roles_scenario(rng)
    trace = type(trace)(trace.name, tuple(
        replace(s, priority=int(rng.choice([-1, 0, 5, 9]))) for s in trace.jobs))
    params: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if fail:
            f = Path(tmp) / "failures.csv"
            at = float(rng.integers(1, 200))
            f.write_text(f"node,fail_time,repair_time\n{topo.nodes[0].name},{at},{at + 300}\n")
            params["failures"] = str(f)
        r = Simulation(trace, topo, HivedPolicy(lazy_preemption=lazy,
                                                preemption_delay=delay),
                       params=params, seed=0).run()
    assert set(r.jobs.status) <= {"completed", "rejected"}
    check_invariants(r, topo, trace)  # raises on a violation
