"""The `capacity` policy: guarantees, elasticity, user limits, preemption rounds, queues."""

from __future__ import annotations

import math

import pytest
from conftest import make_trace

from schedlab.policies.capacity import CapacityPolicy
from schedlab.policies.conformance import check_policy, scenarios
from schedlab.policies.queues import QueueTree, load_queue_file
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.topologies.native import native_from_dict

TWO = """queues:
  - {name: A, capacity: 0.6, max_capacity: 1.0, user_limit_factor: 2}
  - {name: B, capacity: 0.4, max_capacity: 1.0}
"""


def _queues(tmp_path, text: str = TWO) -> str:
    p = tmp_path / "queues.yaml"
    p.write_text(text)
    return str(p)


def _twenty():
    """5 nodes x 4 GPUs."""
    return uniform_topology(5, switches_per_socket=2, gpus_per_switch=2)


def _gpus_by(result, when: float, key: str = "vc") -> dict[str, int]:
    """GPUs held per queue (or user) at time `when`, replayed from the event log."""
    holding: dict[str, int] = {}
    for ev in result.events.itertuples():
        if ev.time > when:
            break
        if ev.kind in ("start", "resume"):
            holding[ev.job_id] = ev.num_gpus
        elif ev.kind in ("preempt", "finish", "fail", "kill"):
            holding[ev.job_id] = 0
    jobs = result.jobs.set_index("job_id")
    out: dict[str, int] = {}
    for jid, g in holding.items():
        if g:
            k = jobs.at[jid, key]
            out[k] = out.get(k, 0) + g
    return out


def _a_then_b(b_at: float = 100.0, a_jobs: int = 30, b_jobs: int = 10):
    jobs = [JobSpec(f"a{i}", float(i), 1, 10000.0, user="ua", vc="A") for i in range(a_jobs)]
    jobs += [JobSpec(f"b{i}", b_at, 1, 10000.0, user="ub", vc="B") for i in range(b_jobs)]
    return make_trace(*jobs)


def test_queue_alone_uses_the_whole_cluster(tmp_path):
    """A (capacity 0.6, max 1.0) borrows B's idle 40%: bonus resources."""
    result = Simulation(_a_then_b(b_jobs=0), _twenty(),
                        CapacityPolicy(queues=_queues(tmp_path))).run(until=50)
    assert _gpus_by(result, 40.0) == {"A": 20}


def test_preemption_back_to_guarantee(tmp_path):
    """B (0.4) asks at t=100: A goes back to 12 of 20 GPUs, 2 GPUs (0.1) a round at most,
    each victim marked at a round and preempted `max_wait_before_kill` (15 s) later."""
    pol = CapacityPolicy(queues=_queues(tmp_path))
    result = Simulation(_a_then_b(), _twenty(), pol).run(until=400)
    ev = result.events
    pre = ev[ev.kind == "preempt"]
    # rounds at multiples of 3 s: marks at 102, preempted at 117; then marks at 120 ...
    assert list(pre.time) == [117.0, 117.0, 135.0, 135.0, 153.0, 153.0, 171.0, 171.0]
    assert list(pre.job_id) == [f"a{i}" for i in range(19, 11, -1)]  # youngest first
    assert pre.groupby("time").num_gpus.sum().max() <= 0.1 * 20
    assert pre.time.min() >= 100.0 + 15.0
    # bounded: ceil(8 GPUs / 2 per round) cycles of (wait 15 s + 1 round) plus one round
    bound = 100.0 + (math.ceil(8 / 2) * (math.ceil(15 / 3) + 1) + 1) * 3
    assert pre.time.max() <= bound
    assert _gpus_by(result, bound) == {"A": 12, "B": 8}
    assert _gpus_by(result, 399.0) == {"A": 12, "B": 8}  # stable: no more preemption
    # events: rounds only while preempting (no timers after the last kill, none before B)
    # (events_processed also counts every decision applied: starts, preemptions, ...)
    timers = result.summary["events_processed"] - len(ev[ev.kind.isin(
        ("submit", "finish", "start", "preempt", "resume", "suspend", "reject"))])
    assert pol.rounds <= timers <= 2 * pol.rounds


def test_cap_and_wait_are_parameters(tmp_path):
    pol = CapacityPolicy(queues=_queues(tmp_path), total_preemption_per_round=1.0,
                         max_wait_before_kill=0.0, preemption_interval=10.0)
    result = Simulation(_a_then_b(), _twenty(), pol).run(until=400)
    pre = result.events[result.events.kind == "preempt"]
    assert list(pre.time) == [120.0] * 8  # marked at the round at 110, preempted at 120
    assert _gpus_by(result, 121.0) == {"A": 12, "B": 8}


def test_mark_dropped_when_no_longer_needed(tmp_path):
    """A's jobs end between the mark and the kill: B starts on them, nothing is preempted."""
    jobs = [JobSpec(f"a{i}", 0.0, 1, 105.0 if i < 2 else 10000.0, user="ua", vc="A")
            for i in range(20)]
    jobs += [JobSpec(f"b{i}", 100.0, 1, 1000.0, user="ub", vc="B") for i in range(2)]
    pol = CapacityPolicy(queues=_queues(tmp_path))
    result = Simulation(make_trace(*jobs), _twenty(), pol).run(until=400)
    assert result.summary["preemptions"] == 0
    assert pol.marks == {}
    assert _gpus_by(result, 106.0) == {"A": 18, "B": 2}


def test_without_preemption_b_waits(tmp_path):
    pol = CapacityPolicy(queues=_queues(tmp_path), preempt=False)
    result = Simulation(_a_then_b(), _twenty(), pol).run(until=400)
    assert result.summary["preemptions"] == 0
    assert _gpus_by(result, 399.0) == {"A": 20}


def test_user_limit_factor_1_stops_one_user_at_capacity(tmp_path):
    """One user of A (capacity 0.6, user_limit_factor 1) stops at 12 of 20 idle GPUs;
    a second user of A may take the rest (A's max_capacity is 1)."""
    path = _queues(tmp_path, TWO.replace("user_limit_factor: 2", "user_limit_factor: 1"))
    alone = [JobSpec(f"a{i}", 0.0, 1, 100.0, user="u1", vc="A") for i in range(30)]
    result = Simulation(make_trace(*alone), _twenty(), CapacityPolicy(queues=path)).run(until=50)
    assert _gpus_by(result, 10.0, "user") == {"u1": 12}
    two = alone + [JobSpec(f"x{i}", 0.0, 1, 100.0, user="u2", vc="A") for i in range(30)]
    result = Simulation(make_trace(*two), _twenty(), CapacityPolicy(queues=path)).run(until=50)
    assert _gpus_by(result, 10.0, "user") == {"u1": 12, "u2": 8}


def test_free_resources_go_to_the_least_served_queue(tmp_path):
    """Both queues backlogged on an empty cluster: guarantees 12 / 8, FIFO inside a queue."""
    jobs = [JobSpec(f"b{i}", 0.0, 1, 100.0, user="ub", vc="B") for i in range(30)]
    jobs += [JobSpec(f"a{i}", 0.0, 1, 100.0, user="ua", vc="A") for i in range(30)]
    result = Simulation(make_trace(*jobs), _twenty(),
                        CapacityPolicy(queues=_queues(tmp_path))).run(until=50)
    assert _gpus_by(result, 10.0) == {"A": 12, "B": 8}
    started = result.jobs[result.jobs.start_time == 0.0]
    assert sorted(started.job_id) == sorted([f"a{i}" for i in range(12)]
                                            + [f"b{i}" for i in range(8)])


def test_unknown_and_parent_queues_are_rejected_with_a_reason(tmp_path):
    text = """queues:
  - name: eng
    capacity: 0.5
    queues:
      - {name: eng-a}
      - {name: eng-b}
  - {name: research, capacity: 0.5}
"""
    jobs = [JobSpec("ok", 0.0, 1, 10.0, vc="eng-a"), JobSpec("typo", 0.0, 1, 10.0, vc="reserch"),
            JobSpec("parent", 0.0, 1, 10.0, vc="eng")]
    result = Simulation(make_trace(*jobs), _twenty(),
                        CapacityPolicy(queues=_queues(tmp_path, text))).run()
    jobs = result.jobs.set_index("job_id")
    assert list(jobs.status) == ["completed", "rejected", "rejected"]
    reasons = result.events[result.events.kind == "reject"].set_index("job_id").detail
    assert "unknown queue 'reserch'" in reasons["typo"]
    assert "eng-a, eng-b, research" in reasons["typo"]
    assert "parent queue" in reasons["parent"]


def test_jobs_above_the_ceiling_or_user_limit_are_rejected(tmp_path):
    text = """queues:
  - {name: A, capacity: 0.5, max_capacity: 0.5}
  - {name: B, capacity: 0.5, user_limit_factor: 0.5}
"""
    jobs = [JobSpec("big-a", 0.0, 12, 10.0, vc="A"), JobSpec("big-b", 0.0, 8, 10.0, vc="B"),
            JobSpec("fits", 0.0, 4, 10.0, vc="B")]
    result = Simulation(make_trace(*jobs), _twenty(),
                        CapacityPolicy(queues=_queues(tmp_path, text))).run()
    reasons = result.events[result.events.kind == "reject"].set_index("job_id").detail
    assert "max_capacity" in reasons["big-a"] and "'A' may use at most 0.5" in reasons["big-a"]
    assert "user_limit_factor 0.5" in reasons["big-b"]
    assert result.jobs.set_index("job_id").status["fits"] == "completed"


def test_hierarchy_absolute_capacities(tmp_path):
    text = """queues:
  - name: eng
    capacity: 0.5
    max_capacity: 0.8
    queues:
      - {name: eng-a, capacity: 0.25, user_limit_factor: 2}
      - {name: eng-b, max_capacity: 0.9}
  - {name: research, capacity: 0.5}
"""
    tree = QueueTree(load_queue_file(_queues(tmp_path, text)), "test")
    q = {x.name: x for x in tree.queues}
    assert q["eng-a"].abs_capacity == pytest.approx(0.125)
    assert q["eng-b"].abs_capacity == pytest.approx(0.375)  # the rest of its siblings
    assert q["eng-a"].abs_max_capacity == pytest.approx(0.8)
    assert q["eng-b"].abs_max_capacity == pytest.approx(0.72)
    assert q["eng-a"].user_limit == pytest.approx(0.25)
    assert sorted(tree.leaves) == ["eng-a", "eng-b", "research"]
    assert q["eng-a"].path == (q["eng-a"].id, q["eng"].id)


HIER = """queues:
  - name: eng
    capacity: 0.5
    queues:
      - {name: eng-a, capacity: 0.5, user_limit_factor: 4}
      - {name: eng-b, capacity: 0.5, user_limit_factor: 4}
  - {name: research, capacity: 0.5, user_limit_factor: 2}
"""


def test_hierarchy_sub_queue_takes_its_idle_siblings_part_of_the_parent(tmp_path):
    """research fills the 16 GPUs; eng-a asks for 16 at t=10 with eng-b idle: YARN's
    hierarchical queues share eng's guarantee among its sub-queues before other queues use
    it (seeds/004), so eng-a gets eng's whole 8 back, research keeps its own 8."""
    topo = uniform_topology(4, switches_per_socket=2, gpus_per_switch=2)  # 16 GPUs
    jobs = [JobSpec(f"r{i}", 0.0, 1, 10000.0, user="r", vc="research") for i in range(16)]
    jobs += [JobSpec(f"e{i}", 10.0, 1, 10000.0, user="e", vc="eng-a") for i in range(16)]
    pol = CapacityPolicy(queues=_queues(tmp_path, HIER), total_preemption_per_round=1.0)
    result = Simulation(make_trace(*jobs), topo, pol).run(until=200)
    assert _gpus_by(result, 199.0) == {"research": 8, "eng-a": 8}


def test_hierarchy_busy_siblings_each_get_their_own_guarantee(tmp_path):
    """Same, but eng-b also asks for 16 at t=10: eng's 8 split 4/4, research keeps 8."""
    topo = uniform_topology(4, switches_per_socket=2, gpus_per_switch=2)
    jobs = [JobSpec(f"r{i}", 0.0, 1, 10000.0, user="r", vc="research") for i in range(16)]
    jobs += [JobSpec(f"a{i}", 10.0, 1, 10000.0, user="a", vc="eng-a") for i in range(16)]
    jobs += [JobSpec(f"b{i}", 10.0, 1, 10000.0, user="b", vc="eng-b") for i in range(16)]
    pol = CapacityPolicy(queues=_queues(tmp_path, HIER), total_preemption_per_round=1.0)
    result = Simulation(make_trace(*jobs), topo, pol).run(until=200)
    assert _gpus_by(result, 199.0) == {"research": 8, "eng-a": 4, "eng-b": 4}


def test_topology_queues_are_the_default():
    topo = native_from_dict({
        "nodes": [{"count": 2, "sockets": 1, "switches_per_socket": 1, "gpus_per_switch": 4}],
        "queues": [{"name": "x", "capacity": 0.75}, {"name": "y", "capacity": 0.25}],
    }, "inline.yaml")
    jobs = [JobSpec(f"x{i}", 0.0, 1, 100.0, user=f"u{i}", vc="x") for i in range(8)]
    jobs += [JobSpec(f"y{i}", 0.0, 1, 100.0, user=f"v{i}", vc="y") for i in range(8)]
    jobs += [JobSpec("z", 0.0, 1, 100.0, vc="z")]
    result = Simulation(make_trace(*jobs), topo, CapacityPolicy()).run(until=50)
    assert _gpus_by(result, 10.0) == {"x": 6, "y": 2}
    assert result.jobs.set_index("job_id").status["z"] == "rejected"


def test_queues_derived_from_the_trace_vcs():
    """No queues anywhere: one queue per VC, equal shares, each elastic up to 1."""
    topo = uniform_topology(2, gpus_per_switch=4)
    jobs = [JobSpec(f"p{i}", 0.0, 1, 1000.0, vc="p") for i in range(8)]
    jobs += [JobSpec(f"q{i}", 100.0, 1, 1000.0, vc="q") for i in range(8)]
    pol = CapacityPolicy(total_preemption_per_round=1.0)
    result = Simulation(make_trace(*jobs), topo, pol).run(until=300)
    assert _gpus_by(result, 50.0) == {"p": 8}
    assert _gpus_by(result, 299.0) == {"p": 4, "q": 4}
    assert pol.tree.source == "one equal queue per VC of the trace"


def test_no_events_while_nothing_is_over_capacity(tmp_path):
    """Queues within their guarantees, a long idle stretch: only submit, start, finish."""
    jobs = [JobSpec("a0", 0.0, 4, 100.0, vc="A"), JobSpec("b0", 50.0, 4, 100.0, vc="B"),
            JobSpec("a1", 1e7, 12, 100.0, vc="A"), JobSpec("b1", 2e7, 8, 100.0, vc="B")]
    pol = CapacityPolicy(queues=_queues(tmp_path))
    result = Simulation(make_trace(*jobs), _twenty(), pol).run()
    assert result.summary["events_processed"] == 3 * len(jobs)
    assert pol.rounds == 0


def test_no_rounds_while_the_waiting_user_is_at_its_limit(tmp_path):
    """A is over its guarantee on B's idle share; B's queued jobs belong to a user at its
    user limit, so preemption could give B nothing: no round is ever scheduled."""
    jobs = [JobSpec(f"a{i}", 0.0, 1, 1000.0, user="ua", vc="A") for i in range(30)]
    jobs += [JobSpec(f"b{i}", 0.0, 1, 1000.0, user="ub", vc="B") for i in range(20)]
    path = _queues(tmp_path, TWO.replace("max_capacity: 1.0}", "max_capacity: 1.0, "
                                          "user_limit_factor: 0.5}"))
    pol = CapacityPolicy(queues=path)
    result = Simulation(make_trace(*jobs), _twenty(), pol).run(until=500)
    assert _gpus_by(result, 10.0) == {"A": 16, "B": 4}
    assert pol.rounds == 0 and result.summary["preemptions"] == 0


@pytest.mark.parametrize("text, match", [
    ("queues:\n  - {name: A, capacity: 0.7}\n  - {name: B, capacity: 0.7}\n", "sum to 1.4"),
    ("queues:\n  - {name: A, capacity: 1.0, max_capacity: 0.5}\n", "max_capacity"),
    ("queues:\n  - {name: A, capacity: 1.0, user_limit: 2}\n", "did you mean"),
    ("queues:\n  - {name: A, capacity: 0.5}\n  - {name: A, capacity: 0.5}\n", "not used"),
    ("queues: []\n", "non-empty"),
    ("nodes: []\n", "single key 'queues'"),
])
def test_bad_queue_files(tmp_path, text, match):
    with pytest.raises(InvalidParameter, match=match):
        CapacityPolicy(queues=_queues(tmp_path, text))


def test_bad_parameters():
    with pytest.raises(InvalidParameter, match="total_preemption_per_round"):
        CapacityPolicy(total_preemption_per_round=0)
    with pytest.raises(InvalidParameter, match="preemption_interval"):
        CapacityPolicy(preemption_interval=0)
    with pytest.raises(InvalidParameter, match="existing file"):
        CapacityPolicy(queues="/nonexistent/queues.yaml")


@pytest.mark.parametrize("params", [
    {}, {"preempt": False},
    {"total_preemption_per_round": 1.0, "max_wait_before_kill": 0.0},
])
def test_check_policy(params):
    check_policy(lambda: CapacityPolicy(**params))


def test_check_policy_scenarios_do_preempt():
    """With the whole cluster as the per-round budget the scenarios do preempt (with 0.1,
    their 4 to 16 GPUs leave no budget for any job, as in YARN)."""
    total = 0
    for _, topo, trace in scenarios(0):
        pol = CapacityPolicy(total_preemption_per_round=1.0, max_wait_before_kill=0.0)
        total += Simulation(trace, topo, pol).run().summary["preemptions"]
    assert total > 0


@pytest.fixture
def capacity_registered():
    """The name `capacity`, registered for the test if the registry does not list it yet."""
    from schedlab.policies import registry

    added = "capacity" not in registry.registered_policies()
    if added:
        registry.register("capacity", CapacityPolicy)
    yield
    if added:
        registry.unregister("capacity")


def test_by_name_with_string_parameters(capacity_registered, tmp_path):
    params = {"queues": _queues(tmp_path), "preemption_interval": "6",
              "total_preemption_per_round": "0.2", "max_wait_before_kill": "12",
              "preempt": "yes"}
    result = Simulation(_a_then_b(), _twenty(), "capacity", params=params).run(until=400)
    pre = result.events[result.events.kind == "preempt"]
    assert pre.time.min() == 114.0  # marked at the round at 102, preempted 12 s later
    assert pre.groupby("time").num_gpus.sum().max() == 4
