"""The `hai` policy: HAI platform time-sharing, scenario by scenario, with exact times."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import make_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.conformance import check_invariants, check_policy, scenarios
from schedlab.policies.hai import (
    GroupPlan,
    HaiPolicy,
    PlanJob,
    admit,
    assign_levels,
    choose_group,
    node_groups,
)
from schedlab.policies.quota_files import AUTO, hai_level, load_hai_quotas
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def nodes(n: int, name: str = "eight"):
    """n nodes of 8 GPUs."""
    return uniform_topology(n, sockets=2, switches_per_socket=2, gpus_per_switch=2, name=name)


def job(job_id, t, gpus, dur, user="u", pri="NORMAL", **kw) -> JobSpec:
    """A job with a HAI priority given by name."""
    return JobSpec(job_id, t, gpus, dur, user=user, priority=hai_level(pri), **kw)


def run(jobs, n=2, params=None, **policy):
    """Run `hai` on n 8-GPU nodes; return (result, policy)."""
    pol = HaiPolicy(**policy)
    res = Simulation(make_trace(*jobs), nodes(n), pol, params=params or {}).run()
    return res, pol


def starts(res) -> dict[str, float]:
    """First start time per job."""
    return dict(zip(res.jobs.job_id, res.jobs.start_time, strict=True))


def log(res, kinds=("start", "suspend", "resume", "finish", "reject")) -> list[tuple]:
    """(time, job, kind) of the events of these kinds, in order."""
    ev = res.events
    ev = ev[ev.kind.isin(kinds)]
    return list(zip(ev.time, ev.job_id, ev.kind, strict=True))


@pytest.fixture
def quota_file(tmp_path):
    """Write a quota file from YAML text; return its path."""
    def write(text: str) -> str:
        p = tmp_path / "quotas.yaml"
        p.write_text(text)
        return str(p)
    return write


# --- levels and quota files ---


def test_levels_by_name_and_number():
    assert hai_level("EXTREME_HIGH") == 50 and hai_level("normal") == 10
    assert hai_level("AUTO") == AUTO == hai_level(-1)
    assert [hai_level(v) for v in (0, 5, 7, 8, 9, 10, 29, 30, 100, -7)] == \
        [0, 5, 5, 8, 8, 10, 20, 30, 50, 0]
    assert hai_level("20") == 20
    with pytest.raises(ValueError, match="unknown priority 'NORMALL'.*did you mean 'NORMAL'"):
        hai_level("NORMALL")


def test_quota_file_reading_and_errors(quota_file):
    q = load_hai_quotas(quota_file("default: {NORMAL: 4, HIGH: 0}\n"
                                   "users:\n  alice: {high: 2, 10: 8}\n"))
    assert dict(q.of("alice")) == {30: 2, 10: 8}
    assert dict(q.of("bob")) == {10: 4, 30: 0}
    assert dict(load_hai_quotas(quota_file("users: {a: {LOW: 1}}\n")).of("b")) == {}
    with pytest.raises(InvalidParameter, match=r"users.a.HIHG: unknown level.*'HIGH'"):
        load_hai_quotas(quota_file("users: {a: {HIHG: 1}}\n"))
    with pytest.raises(InvalidParameter, match=r"default.NORMAL: expected a whole number"):
        load_hai_quotas(quota_file("default: {NORMAL: -1}\n"))
    with pytest.raises(InvalidParameter, match="unknown key 'user'.*'users'"):
        load_hai_quotas(quota_file("user: {}\n"))
    with pytest.raises(InvalidParameter, match="replan='every-period'.*plan_period > 0"):
        HaiPolicy(replan="every-period", plan_period=0)


def test_assign_levels_follows_the_assigner():
    """Submission order consumes quota per level; AUTO takes the highest level with room."""
    jobs = [PlanJob(i, "x", lv, n, 0, float(i)) for i, (lv, n) in
            enumerate([(10, 2), (10, 2), (10, 1), (AUTO, 1), (AUTO, 1), (AUTO, 1), (10, 5),
                       (AUTO, 9)])]
    got = assign_levels("x", jobs, {10: 4, 30: 1})
    assert [lv for lv, _ in got] == [10, 10, None, 30, None, None, None, None]
    assert got[6][1].startswith("QUOTA_EXCEEDED: needs 5 nodes at NORMAL")
    assert got[7][1].startswith("QUOTA_EXCEEDED: AUTO job needs 9 nodes")
    assert got[2][1] == got[4][1] == ""  # over quota now: waits, not rejected
    assert [lv for lv, _ in assign_levels("x", jobs, None)] == \
        [10, 10, 10, 50, 50, 50, 10, 50]


# --- plan: incremental cut-off equals the literal cumulative sum ---


@settings(max_examples=150, deadline=None)
@given(st.booleans(), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 11),
                                         st.integers(1, 4)), max_size=60))
def test_group_plan_matches_admit(backfill, ops):
    plan = GroupPlan(4, backfill)
    live: dict[int, tuple[tuple, int]] = {}
    for op, i, n in ops:
        if op == 0 and i not in live:
            key = (-(i % 3) * 10, float(i), i)
            live[i] = (key, n)
            plan.add(key, n)
        elif op == 1 and i in live:
            plan.remove(live.pop(i)[0])
        elif op == 2:
            plan.cap = n + 1
        plan.settle()
        order = sorted(live.values())
        want = set(admit([(k[-1], m) for k, m in order], plan.cap, backfill))
        assert {i for i, (k, _) in live.items() if plan.admitted(i, k)} == want


def test_admit_strict_and_backfill():
    entries = [(0, 1), (1, 3), (2, 1), (3, 1)]
    assert admit(entries, 3, backfill=False) == [0]
    assert admit(entries, 3, backfill=True) == [0, 2, 3]


# --- whole nodes ---


def test_whole_nodes_and_rounding():
    """A 12-GPU job takes two whole nodes (8 + 4 GPUs); nobody uses its idle 4."""
    res, _ = run([job("big", 0, 12, 100), job("small", 1, 4, 10)], n=2)
    ev = res.events.set_index(["job_id", "kind"])
    assert ev.loc[("big", "start"), "cells"] == "node0:8;node1:4"
    assert starts(res) == {"big": 0.0, "small": 100.0}


def test_node_groups_and_choice():
    from schedlab.sim.model import Level
    from schedlab.topologies.build import node_cell
    from schedlab.topologies.tree import CellSpec, Topology

    k80 = [node_cell(f"k{i}", {"gpu_type": "K80"}, 1, 1, 2) for i in range(4)]
    p40 = [node_cell(f"p{i}", {"gpu_type": "P40"}, 2, 2, 2) for i in range(2)]
    topo = Topology("mixed", CellSpec(Level.CLUSTER, "mixed", k80 + p40))
    groups = node_groups(topo)
    assert [(g.label, len(g.nodes)) for g in groups] == [("K80x2", 4), ("P40x8", 2)]
    assert choose_group(JobSpec("a", 0, 1, 1), groups, [0, 0]) == (0, 1)  # lighter load
    assert choose_group(JobSpec("a", 0, 1, 1), groups, [8, 0]) == (1, 1)  # K80 is full
    assert choose_group(JobSpec("a", 0, 8, 1), groups, [0, 0]) == (1, 1)
    assert choose_group(JobSpec("a", 0, 4, 1, gpu_type="P40"), groups, [0, 16]) == (1, 1)
    assert "largest node group of type 'P40' has 2 nodes" in \
        choose_group(JobSpec("a", 0, 24, 1, gpu_type="P40"), groups, [0, 0])


# --- quotas ---


def test_third_job_waits_for_quota_though_nodes_are_free(quota_file):
    q = quota_file("users:\n  alice: {NORMAL: 2}\n  bob: {NORMAL: 2}\n")
    res, _ = run([job("a1", 0, 8, 100, "alice"), job("a2", 1, 8, 100, "alice"),
                  job("a3", 2, 8, 100, "alice"), job("b1", 3, 8, 100, "bob")],
                 n=4, quotas=q)
    assert starts(res) == {"a1": 0.0, "a2": 1.0, "a3": 100.0, "b1": 3.0}


def test_job_larger_than_its_quota_is_rejected(quota_file):
    q = quota_file("default: {NORMAL: 2, HIGH: 1}\nusers:\n  alice: {NORMAL: 2}\n")
    res, pol = run([job("big", 0, 24, 100, "alice"), job("auto", 1, 24, 100, "carol", "AUTO"),
                    job("ok", 2, 16, 100, "alice")], n=4, quotas=q)
    rows = res.jobs.set_index("job_id")
    assert rows.status.to_dict() == {"big": "rejected", "auto": "rejected", "ok": "completed"}
    assert rows.loc["big", "reason"] == (
        "QUOTA_EXCEEDED: needs 3 nodes at NORMAL, user 'alice' has a quota of 2 there")
    assert rows.loc["auto", "reason"].startswith("QUOTA_EXCEEDED: AUTO job needs 3 nodes")
    assert rows.loc["big", "end_time"] == 0.0 and rows.loc["auto", "end_time"] == 1.0
    assert pol.metrics()["quota_rejections"] == 2


def test_auto_takes_the_highest_level_with_room(quota_file):
    """y's first AUTO job gets HIGH and suspends x's NORMAL job; the second gets only
    NORMAL (behind x2, submitted earlier) until y1 ends and frees y's HIGH quota: AUTO is
    chosen again at every plan, so y2 then goes ahead of x2."""
    q = quota_file("default: {HIGH: 1, NORMAL: 4}\n")
    res, _ = run([job("x1", 0, 8, 1000, "x"), job("x2", 1, 8, 1000, "x"),
                  job("y1", 10, 8, 100, "y", "AUTO"), job("y2", 20, 8, 100, "y", "AUTO")],
                 n=2, quotas=q)
    assert log(res) == [
        (0.0, "x1", "start"), (1.0, "x2", "start"), (15.0, "x2", "suspend"),
        (15.0, "y1", "start"), (115.0, "y1", "finish"), (115.0, "y2", "start"),
        (215.0, "y2", "finish"), (215.0, "x2", "resume"), (1000.0, "x1", "finish"),
        (1231.0, "x2", "finish")]  # 14 s done before, 215 + 30 restore + 986


# --- suspend with grace ---


def test_high_job_suspends_the_latest_normal_job_after_the_grace():
    jobs = [job("n1", 0, 8, 1000, "u1"), job("n2", 10, 8, 1000, "u1"),
            job("h", 100, 8, 50, "u2", "HIGH")]
    res, pol = run(jobs)
    assert log(res) == [
        (0.0, "n1", "start"), (10.0, "n2", "start"), (105.0, "n2", "suspend"),
        (105.0, "h", "start"), (155.0, "h", "finish"), (155.0, "n2", "resume"),
        (1000.0, "n1", "finish"), (1090.0, "n2", "finish")]  # 155 + 30 restore + 905 left
    tl = res.timeline
    assert tl[(tl.time >= 100) & (tl.time < 105)].gpus_busy.eq(16).all()  # busy till 105
    sus = res.events[res.events.kind == "suspend"].detail.iloc[0]
    assert sus.startswith("queued-suspended: past the plan cut-off")
    rows = res.jobs.set_index("job_id")
    assert rows.loc["n2", "lost_work"] == 0.0 and rows.loc["n2", "preemptions"] == 1
    assert pol.metrics()["suspend_commands"] == 1
    assert HaiPolicy.state_names["submit"] == "waiting-init"


def test_grace_between_ticks_frees_gpus_at_the_deadline_and_starts_at_the_next_tick():
    jobs = [job("n1", 0, 8, 1000), job("h", 100, 8, 50, "v", "HIGH")]
    res, _ = run(jobs, n=1, suspend_grace=2.5)
    assert log(res, ("suspend", "start")) == [
        (0.0, "n1", "start"), (102.5, "n1", "suspend"), (103.0, "h", "start")]
    res, _ = run(jobs, n=1, suspend_grace=0)
    assert log(res, ("suspend", "start"))[1:] == [(100.0, "n1", "suspend"), (100.0, "h", "start")]


def test_arrival_between_ticks_waits_for_the_next_tick():
    res, _ = run([job("a", 0.4, 8, 10), job("b", 3.0, 8, 10)], n=2, plan_period=2.0)
    assert starts(res) == {"a": 2.0, "b": 4.0}


def test_resumed_job_loses_progress_since_checkpoint_and_keeps_its_place():
    jobs = [job("n1", 0, 8, 1000, "u1", checkpoint_interval=100.0),
            job("h", 250, 8, 100, "u2", "HIGH"), job("n3", 260, 8, 50, "u3")]
    res, _ = run(jobs, n=1, params={"checkpoint_on_suspend": False})
    assert log(res) == [
        (0.0, "n1", "start"), (255.0, "n1", "suspend"), (255.0, "h", "start"),
        (355.0, "h", "finish"), (355.0, "n1", "resume"),  # ahead of n3, submitted later
        (1185.0, "n1", "finish"), (1185.0, "n3", "start"), (1235.0, "n3", "finish")]
    assert res.jobs.set_index("job_id").loc["n1", "lost_work"] == 55.0  # 255 - 200


def test_job_that_checkpoints_before_the_deadline_stops_then():
    jobs = [job("n1", 0, 8, 1000, checkpoint_interval=100.0), job("h", 297, 8, 100, "v", "HIGH")]
    res, _ = run(jobs, n=1, params={"checkpoint_on_suspend": False})
    assert log(res, ("suspend", "start")) == [
        (0.0, "n1", "start"), (300.0, "n1", "suspend"), (300.0, "h", "start")]
    assert res.jobs.set_index("job_id").loc["n1", "lost_work"] == 0.0
    res, _ = run(jobs, n=1, params={"checkpoint_on_suspend": False},
                 suspend_at_checkpoint=False)
    assert log(res, ("suspend",)) == [(302.0, "n1", "suspend")]
    assert res.jobs.set_index("job_id").loc["n1", "lost_work"] == 2.0


def test_never_interrupted_for_a_later_job_of_the_same_priority():
    jobs = [job("a", 0, 8, 500, "u1"), job("b", 10, 8, 10, "u1"), job("c", 20, 8, 10, "u2")]
    res, pol = run(jobs, n=1)
    assert starts(res) == {"a": 0.0, "b": 500.0, "c": 510.0}
    assert res.jobs.preemptions.sum() == 0 and pol.metrics()["suspend_commands"] == 0


def test_demoted_job_is_not_interrupted_for_its_users_earlier_job_of_the_same_level():
    """u1's NORMAL b runs; u1's ABOVE_NORMAL a suspends it (a higher level may). After
    1800 s of running a is NORMAL like b, submitted earlier: a keeps running (same user,
    same priority: never interrupted for the other), b resumes when a ends."""
    jobs = [job("b", 0, 8, 5000, "u1"), job("a", 10, 8, 5000, "u1", "ABOVE_NORMAL")]
    res, pol = run(jobs, n=1)
    assert log(res) == [
        (0.0, "b", "start"), (15.0, "b", "suspend"), (15.0, "a", "start"),
        (5015.0, "a", "finish"), (5015.0, "b", "resume"),
        (10030.0, "b", "finish")]  # 5015 + 30 restore + 4985 left
    assert pol.metrics()["demotions"] == 1 and pol.metrics()["suspend_commands"] == 1
    # another user's earlier NORMAL job does take the GPUs back after the demotion
    res, _ = run([job("b", 0, 8, 5000, "u2"), job("a", 10, 8, 5000, "u1", "ABOVE_NORMAL")],
                 n=1)
    assert log(res, ("suspend",)) == [(15.0, "b", "suspend"), (1820.0, "a", "suspend")]


def test_backfilled_job_is_not_interrupted_for_its_users_blocked_job():
    """With backfill, u1's 1-node job backfilled behind u1's blocked 2-node job keeps its
    node when a node frees up: the 2-node job waits for it to end."""
    jobs = [job("x", 0, 8, 100, "u2"), job("big", 1, 16, 100, "u1"),
            job("small", 2, 8, 1000, "u1")]
    res, pol = run(jobs, n=2, backfill=True)
    assert log(res) == [
        (0.0, "x", "start"), (2.0, "small", "start"), (100.0, "x", "finish"),
        (1002.0, "small", "finish"), (1002.0, "big", "start"), (1102.0, "big", "finish")]
    assert pol.metrics()["suspend_commands"] == 0
    # another user's backfilled job is suspended for the blocked job ahead of it
    res, _ = run([*jobs[:2], job("small", 2, 8, 1000, "u3")], n=2, backfill=True)
    assert log(res, ("suspend", "start")) == [
        (0.0, "x", "start"), (2.0, "small", "start"), (105.0, "small", "suspend"),
        (105.0, "big", "start")]


# --- plan order without and with backfill ---


def test_strict_order_small_job_waits_behind_blocked_big_one():
    jobs = [job("a", 0, 8, 100), job("big", 1, 16, 100), job("small", 2, 8, 10)]
    res, _ = run(jobs, n=2)
    assert starts(res) == {"a": 0.0, "big": 100.0, "small": 200.0}
    res, _ = run(jobs, n=2, backfill=True)
    assert starts(res) == {"a": 0.0, "big": 100.0, "small": 2.0}


# --- demotion ---


def test_demotion_after_30_minutes_lets_another_above_normal_job_in():
    jobs = [job("a", 0, 8, 5000, "ua", "ABOVE_NORMAL"), job("b", 10, 8, 100, "ub", "ABOVE_NORMAL")]
    res, pol = run(jobs, n=1)
    assert log(res) == [
        (0.0, "a", "start"), (1805.0, "a", "suspend"), (1805.0, "b", "start"),
        (1905.0, "b", "finish"), (1905.0, "a", "resume"), (5130.0, "a", "finish")]
    assert pol.metrics()["demotions"] == 1
    res, _ = run(jobs, n=1, demote_after=None)
    assert starts(res)["b"] == 5000.0


def test_demotion_counts_all_attempts():
    """Suspended at 1000 s of running, `a` is demoted 800 s after it resumes, not 1800."""
    jobs = [job("a", 0, 8, 5000, "ua", "ABOVE_NORMAL"), job("h", 995, 8, 100, "uh", "HIGH"),
            job("b", 1200, 8, 100, "ub", "ABOVE_NORMAL")]
    res, _ = run(jobs, n=1, params={"restore_overhead": 0.0})
    # a runs 0..1000, h 1000..1100, a resumes 1100 and reaches 1800 s of running at 1900
    assert log(res, ("suspend", "start", "resume")) == [
        (0.0, "a", "start"), (1000.0, "a", "suspend"), (1000.0, "h", "start"),
        (1100.0, "a", "resume"), (1905.0, "a", "suspend"), (1905.0, "b", "start"),
        (2005.0, "a", "resume")]


# --- the event-driven re-plan equals a literal re-plan every period ---


def _random_trace(seed: int, n: int = 24):
    rng = np.random.default_rng(seed)
    levels = ["EXTREME_HIGH", "HIGH", "ABOVE_NORMAL", "ABOVE_NORMAL", "NORMAL", "NORMAL",
              "NORMAL", "LOW", "AUTO"]
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(15.0))
        if rng.random() < 0.5:
            t = float(round(t))
        jobs.append(job(f"j{i}", round(t, 2), int(rng.choice([0, 1, 4, 8, 8, 12, 16])),
                        float(rng.integers(20, 300)), f"u{int(rng.integers(0, 3))}",
                        str(rng.choice(levels)),
                        checkpoint_interval=float(rng.choice([40.0, 55.5]))
                        if rng.random() < 0.5 else None))
    return jobs


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kw", [
    {}, {"backfill": True, "demote_after": 120.0},
    {"quotas": "Q", "suspend_grace": 2.5, "plan_period": 2.0, "demote_after": 90.0},
])
def test_event_replan_equals_literal_replan(seed, kw, quota_file):
    if kw.get("quotas"):
        kw = {**kw, "quotas": quota_file(
            "default: {EXTREME_HIGH: 1, HIGH: 1, ABOVE_NORMAL: 1, NORMAL: 2, LOW: 2}\n"
            "users:\n  u1: {HIGH: 2, NORMAL: 1, LOW: 1}\n")}
    jobs = _random_trace(seed)
    topo = nodes(2)
    params = {"checkpoint_on_suspend": False}
    a = Simulation(make_trace(*jobs), topo, HaiPolicy(**kw), params=params).run()
    b = Simulation(make_trace(*jobs), topo, HaiPolicy(replan="every-period", **kw),
                   params=params).run()
    check_invariants(a, topo, make_trace(*jobs))
    assert a.jobs.equals(b.jobs)
    assert a.summary["events_processed"] < b.summary["events_processed"] / 5


def test_no_event_per_second_over_a_long_run():
    res, _ = run([job("a", 0, 8, 1e6), job("b", 1, 8, 1e6), job("h", 5e5, 8, 10, "v", "HIGH")])
    assert res.summary["events_processed"] < 20


# --- conformance ---


def test_check_policy(quota_file):
    check_policy(HaiPolicy)
    q = quota_file("default: {LOW: 2, NORMAL: 1}\n")
    check_policy(lambda: HaiPolicy(quotas=q, backfill=True),
                 params={"checkpoint_on_suspend": False})


def test_invariants_with_mixed_priorities(quota_file):
    """The conformance scenarios with HAI levels drawn per job, quotas and node failures."""
    q = quota_file("default: {HIGH: 1, ABOVE_NORMAL: 1, NORMAL: 2, LOW: 2}\n")
    rng = np.random.default_rng(7)
    levels = [50, 30, 20, 10, 10, 0, -1]
    for _name, topo, trace in scenarios(3):
        jobs = tuple(dataclasses.replace(s, priority=int(rng.choice(levels)))
                     for s in trace.jobs)
        trace = dataclasses.replace(trace, jobs=jobs)
        for pol in (HaiPolicy(suspend_grace=3.0, demote_after=60.0),
                    HaiPolicy(quotas=q, backfill=True)):
            res = Simulation(trace, topo, pol, params={"mtbf": 2000.0, "mttr": 100.0,
                                                       "retry_delay": 3.0}).run()
            check_invariants(res, topo, trace)
