"""kueue end to end: one hand-computed scenario per rule, and rows of Kueue's TestSchedule.

Start times and preemptions are worked out by hand in each docstring. Clusters are tiny
(8 GPUs, 64 CPUs a node); durations are round so every instant is exact.
"""

from __future__ import annotations

import math

import pytest
from kueue_cases import (
    cluster,
    cohort,
    cq,
    fair_sharing,
    flavor,
    gpus,
    group,
    job,
    lq,
    preempted,
    res,
    run,
    starts,
    wpc,
    write,
)

from schedlab.policies.kueue import KueuePolicy
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec

GPU = "nvidia.com/gpu"
EIGHT = cluster((2, 4, "V100"))


def _cpu_job(jid, t, cpus, dur, queue):
    return JobSpec(jid, t, 0, dur, num_cpus=cpus, extra=(("queue", queue),))


@pytest.mark.parametrize(("strategy", "want"), [
    ("StrictFIFO", {"j1": 0.0, "j2": 100.0, "j3": 200.0}),
    ("BestEffortFIFO", {"j1": 0.0, "j2": 100.0, "j3": 2.0}),
])
def test_queueing_strategy(tmp_path, strategy, want):
    """4 GPUs of quota; j1 holds 2 until 100; j2 (4) cannot fit; j3 (1) could.
    StrictFIFO: j3 waits behind the head j2 (starts when j2 ends at 200);
    BestEffortFIFO: j2 is parked as inadmissible and j3 starts at once."""
    cfg = write(tmp_path, flavor("default"), cq("a", gpus("default", 4), strategy=strategy))
    r = run(cfg, EIGHT, job("j1", 0, 2, 100, "a"), job("j2", 1, 4, 100, "a"),
            job("j3", 2, 1, 10, "a"))
    assert starts(r) == want


def test_borrowing_limit(tmp_path):
    """a (4 GPUs, borrowingLimit 2) and b (4) in one cohort, b idle: a1 (4) fits its
    nominal quota, a3 (2) borrows 2 at t=1, a2 (4) would borrow 4 > 2 and waits for a1
    to end at 100."""
    cfg = write(tmp_path, flavor("default"), cq("a", gpus("default", 4, 2), cohort="co"),
                cq("b", gpus("default", 4), cohort="co"))
    r = run(cfg, EIGHT, job("a1", 0, 4, 100, "a"), job("a2", 0, 4, 100, "a"),
            job("a3", 1, 2, 100, "a"))
    assert starts(r) == {"a1": 0.0, "a2": 100.0, "a3": 1.0}


def test_lending_limit(tmp_path):
    """a (4 GPUs, lendingLimit 1) lends 1; b (4, lends all): the cohort pools 5. b1 (5)
    runs at 0 on b's 4 plus a's 1; b2 (1) finds no quota until b1 ends at 100 although
    3 GPUs are free; a1 (3) uses a's 3 that it never lends, at once."""
    cfg = write(tmp_path, flavor("default"),
                cq("a", gpus("default", 4, lending=1), cohort="co"),
                cq("b", gpus("default", 4), cohort="co"))
    r = run(cfg, EIGHT, job("b1", 0, 5, 100, "b"), job("b2", 1, 1, 10, "b"),
            job("a1", 2, 3, 100, "a"))
    assert starts(r) == {"b1": 0.0, "b2": 100.0, "a1": 2.0}


def test_priority_class_preemption_within_cluster_queue(tmp_path):
    """withinClusterQueue LowerPriority: hi (WorkloadPriorityClass high=100) evicts lo
    (low=10) at 10 and starts; lo starts over (no checkpoint) when hi ends at 110."""
    cfg = write(tmp_path, flavor("default"), wpc("high", 100), wpc("low", 10),
                cq("a", gpus("default", 4), preemption={"withinClusterQueue": "LowerPriority"}))
    r = run(cfg, EIGHT, job("lo", 0, 4, 100, "a", pc="low"),
            job("hi", 10, 4, 100, "a", pc="high"))
    assert preempted(r) == [(10.0, "lo")]
    assert starts(r) == {"lo": 0.0, "hi": 10.0}
    assert r.jobs.set_index("job_id").end_time.to_dict() == {"lo": 210.0, "hi": 110.0}


def test_reclaim_within_cohort(tmp_path):
    """a borrows b's 4 GPUs at 0 (a1, a2); b1 at 10 reclaims them (reclaimWithinCohort
    Any): of two equals admitted together the first created, a1, is evicted (Kueue:
    lowest UID); a1 starts again when a2 ends at 100, b2 when b1 ends at 110."""
    cfg = write(tmp_path, flavor("default"), cq("a", gpus("default", 4), cohort="co"),
                cq("b", gpus("default", 4), cohort="co",
                   preemption={"reclaimWithinCohort": "Any"}))
    r = run(cfg, EIGHT, job("a1", 0, 4, 100, "a"), job("a2", 0, 4, 100, "a"),
            job("b1", 10, 4, 100, "b"), job("b2", 20, 4, 100, "b"))
    assert preempted(r) == [(10.0, "a1")]
    assert starts(r) == {"a1": 0.0, "a2": 0.0, "b1": 10.0, "b2": 110.0}
    assert r.jobs.set_index("job_id").end_time["a1"] == 200.0


def test_flavors_map_to_gpu_types(tmp_path):
    """Flavors a100 / v100 select nodes by nvidia.com/gpu.product: j1 takes a100 (node0),
    j2 finds a100's quota used and no one to preempt, so it tries v100 (node1); j3
    waits for j1 and goes back to a100."""
    cfg = write(tmp_path, flavor("a100", "A100"), flavor("v100", "V100"),
                cq("x", group(("a100", [res(GPU, 4)]), ("v100", [res(GPU, 4)]))))
    r = run(cfg, cluster((1, 4, "A100"), (1, 4, "V100")), job("j1", 0, 4, 100, "x"),
            job("j2", 1, 4, 100, "x"), job("j3", 2, 4, 100, "x"))
    ev = r.events[r.events.kind == "start"]
    assert dict(zip(ev.job_id, ev.cells, strict=True)) == {
        "j1": "node0:4", "j2": "node1:4", "j3": "node0:4"}
    assert starts(r) == {"j1": 0.0, "j2": 1.0, "j3": 100.0}


@pytest.mark.parametrize(("when_can_borrow", "node"), [("MayStopSearch", "node0:4"),
                                                       ("TryNextFlavor", "node1:4")])
def test_when_can_borrow(tmp_path, when_can_borrow, node):
    """x has 0 of a100 (y lends it 4) and 4 of v100. MayStopSearch: a100 fits by
    borrowing and the search stops there; TryNextFlavor: v100 fits without borrowing."""
    cfg = write(tmp_path, flavor("a100", "A100"), flavor("v100", "V100"),
                cq("x", group(("a100", [res(GPU, 0)]), ("v100", [res(GPU, 4)])),
                   cohort="co", fungibility={"whenCanBorrow": when_can_borrow}),
                cq("y", group(("a100", [res(GPU, 4)])), cohort="co"))
    r = run(cfg, cluster((1, 4, "A100"), (1, 4, "V100")), job("j", 0, 4, 10, "x"))
    assert r.events[r.events.kind == "start"].cells.tolist() == [node]


@pytest.mark.parametrize(("weight", "a_gets"), [(None, 4), ("2", 5)])
def test_fair_sharing_weights(tmp_path, weight, a_gets):
    """A Cohort holds all 8 GPUs; a and b have none. b takes all 8 at 0; a asks for 8
    at 10. Fair-sharing preemption (S2-a: the preemptor's share after admission <= the
    target's after the eviction; S2-b: < before) evicts b's jobs until a has 4 (equal
    weights: 4/8 vs 4/8) or 5 (a's weight 2: 5/8/2 = 0.3125 <= 3/8 for the 5th, then
    6/8/2 = 0.375 is not <= 2/8 nor < 3/8)."""
    cfg = write(tmp_path, flavor("default"), fair_sharing(),
                cohort("co", gpus("default", 8)),
                cq("a", gpus("default", 0), cohort="co", weight=weight,
                   preemption={"reclaimWithinCohort": "Any"}),
                cq("b", gpus("default", 0), cohort="co"))
    jobs = [job(f"b{i}", 0, 1, 1000, "b") for i in range(8)]
    jobs += [job(f"a{i}", 10, 1, 1000, "a") for i in range(8)]
    r = run(cfg, EIGHT, *jobs, until=20)
    ev = r.events
    running_a = ((ev.kind == "start") & ev.job_id.str.startswith("a")).sum()
    assert running_a == a_gets
    assert len(preempted(r)) == a_gets
    assert {t for t, _ in preempted(r)} == {10.0}


def test_unknown_local_queue_and_priority_class_are_rejected(tmp_path):
    """A job naming no existing LocalQueue, or an unknown WorkloadPriorityClass, is
    rejected with the reason (Kueue would leave it pending for ever)."""
    cfg = write(tmp_path, flavor("default"), cq("a", gpus("default", 4)))
    r = run(cfg, EIGHT, job("ok", 0, 1, 10, "a"), job("nolq", 0, 1, 10, "team/zzz"),
            job("nopc", 0, 1, 10, "a", pc="gold"))
    rows = r.jobs.set_index("job_id")
    assert rows.status.to_dict() == {"ok": "completed", "nolq": "rejected",
                                     "nopc": "rejected"}
    ev = r.events[r.events.kind == "reject"].set_index("job_id").detail
    assert "LocalQueue team/zzz does not exist" in ev["nolq"]
    assert "WorkloadPriorityClass gold does not exist" in ev["nopc"]


def test_namespaced_local_queue(tmp_path):
    """`queue` as namespace/name picks the LocalQueue of that namespace: team/main is b's,
    a plain `a` is default/a; each has 4 GPUs of its own."""
    cfg = write(tmp_path, flavor("default"), cq("a", gpus("default", 4)),
                cq("b", gpus("default", 4)), lq("main", "b", namespace="team"),
                local_queues=True)
    r = run(cfg, EIGHT, job("j", 0, 4, 10, "team/main"), job("k", 0, 4, 10, "a"))
    assert starts(r) == {"j": 0.0, "k": 0.0}


# --- rows of Kueue's TestSchedule (pkg/scheduler/scheduler_test.go), CPUs as quota ---

def test_schedule_workload_exceeds_lending_limit_when_borrow_in_cohort(tmp_path):
    """TestSchedule "workload exceeds lending limit when borrow in cohort": lend-a (3 CPUs,
    lends 2) and lend-b (2, lends 2); a (2) admitted in lend-b; b (3) in lend-b is
    inadmissible ("1 more needed": the cohort pools 4, 2 used) until a ends at 100."""
    cfg = write(tmp_path, flavor("default"),
                cq("lend-a", group(("default", [res("cpu", "3", lending="2")])),
                   cohort="lend"),
                cq("lend-b", group(("default", [res("cpu", "2", lending="2")])),
                   cohort="lend"))
    r = run(cfg, EIGHT, _cpu_job("a", 0, 2, 100, "lend-b"),
            _cpu_job("b", 1, 3, 100, "lend-b"))
    assert starts(r) == {"a": 0.0, "b": 100.0}


@pytest.mark.parametrize(("lending", "want"), [("3", 100.0), ("5", 1.0)])
def test_schedule_hierarchical_cohort_lending_limit(tmp_path, lending, want):
    """TestSchedule "hierarchical cohort respects lending limit when borrowing" (lender
    lends 3: the 4 CPUs asked do not fit next to the 5 used, wl-pending waits) and
    "... allows borrowing up to lending limit" (lends 5: admitted at once). Cohorts
    root <- child; cq-lender (10 CPUs) and cq-borrower (5, borrowingLimit 10) in child."""
    cfg = write(tmp_path, flavor("on-demand"), cohort("root"),
                cohort("child", parent="root"),
                cq("cq-lender", group(("on-demand", [res("cpu", "10", lending=lending)])),
                   cohort="child"),
                cq("cq-borrower", group(("on-demand", [res("cpu", "5", borrowing="10")])),
                   cohort="child"))
    ask = 4 if lending == "3" else 5
    r = run(cfg, EIGHT, _cpu_job("wl-existing", 0, 5, 100, "cq-borrower"),
            _cpu_job("wl-pending", 1, ask, 100, "cq-borrower"))
    assert starts(r) == {"wl-existing": 0.0, "wl-pending": want}


def test_schedule_hierarchical_cohort_borrowing_less_first(tmp_path):
    """TestSchedule "in a hierarchical cohort, workload borrowing less is scheduled
    first": cohort `guaranteed` (4 CPUs) under `root`; CQ guaranteed (0) in it, CQ
    best-effort (0) directly in root. Both ask 4 CPUs at once: guaranteed borrows from
    one level up, best-effort from two, so guaranteed is admitted although best-effort
    has the higher priority (3); best-effort waits until 100."""
    cfg = write(tmp_path, flavor("default"), cohort("root"),
                cohort("guaranteed", group(("default", [res("cpu", "4")])), parent="root"),
                cq("guaranteed", group(("default", [res("cpu", "0")])), cohort="guaranteed"),
                cq("best-effort", group(("default", [res("cpu", "0")])), cohort="root"))
    best = JobSpec("best-effort", 0.0, 0, 100.0, num_cpus=4, priority=3,
                   extra=(("queue", "best-effort"),))
    r = run(cfg, EIGHT, _cpu_job("guaranteed", 0, 4, 100, "guaranteed"), best)
    assert starts(r) == {"guaranteed": 0.0, "best-effort": 100.0}


# --- configuration errors: one line naming file, object, field, value, what is allowed ---

@pytest.mark.parametrize(("doc", "needle"), [
    (cq("a", gpus("default", 4), strategy="Lifo"),
     "ClusterQueue/a: spec.queueingStrategy: got 'Lifo'; allowed: StrictFIFO | BestEffortFIFO"),
    (cq("a", group(("default", [res("pods", 4)]))),
     "ClusterQueue/a: spec.resourceGroups[0].coveredResources: got 'pods'; allowed: "
     "nvidia.com/gpu, cpu, memory"),
    (cq("a", gpus("nope", 4)),
     "ClusterQueue/a: spec.resourceGroups[0].flavors[0].name: got 'nope'; allowed: a "
     "ResourceFlavor of the file: default"),
    (cq("a", gpus("default", "four")),
     "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: got 'four'; allowed: a "
     "Kubernetes quantity"),
    ({**cq("a", gpus("default", 4)), "spec": {**cq("a", gpus("default", 4))["spec"],
                                              "admissionChecks": ["prov"]}},
     "ClusterQueue/a: spec.admissionChecks: got ['prov']; allowed: fields"),
    (cq("a", gpus("default", 4), preemption={"withinClusterQueue": "Any"}),
     "spec.preemption.withinClusterQueue: got 'Any'; allowed: Never | LowerPriority | "
     "LowerOrNewerEqualPriority"),
])
def test_bad_config_names_file_object_field_value(tmp_path, doc, needle):
    path = write(tmp_path, flavor("default"), doc, local_queues=False)
    with pytest.raises(InvalidParameter) as e:
        KueuePolicy(config=path)
    msg = str(e.value)
    assert msg.startswith(path + ": ") and needle in msg and "\n" not in msg


def test_cohort_cycle_and_unknown_gpu_type(tmp_path):
    path = write(tmp_path, flavor("default"), cohort("x", parent="y"),
                 cohort("y", parent="x"), cq("a", gpus("default", 4), cohort="x"))
    with pytest.raises(InvalidParameter, match=r"Cohort/x: spec.parentName: got 'y'; "
                                               "allowed: a parent chain without cycles"):
        KueuePolicy(config=path)
    path = write(tmp_path, flavor("h100", "H100"), cq("a", gpus("h100", 4)))
    with pytest.raises(InvalidParameter, match=r"ResourceFlavor/h100: spec.nodeLabels: got "
                                               r"GPU type 'H100'; allowed: the topology's"):
        run(path, EIGHT, job("j", 0, 1, 10, "a"))


def test_without_config_one_queue_per_vc():
    """No `config`: a ClusterQueue per queue name with the GPUs split evenly, in one
    cohort; here two VCs of 4 GPUs each, the second idle, so vc a borrows all 8."""
    jobs = [JobSpec(f"a{i}", 0.0, 4, 100.0, vc="a") for i in range(2)]
    jobs.append(JobSpec("b0", 500.0, 4, 100.0, vc="b"))
    from schedlab.sim.engine import Simulation
    from schedlab.traces.base import Trace
    r = Simulation(Trace("t", tuple(jobs)), EIGHT, "kueue").run()
    assert starts(r) == {"a0": 0.0, "a1": 0.0, "b0": 500.0}
    assert not math.isnan(r.summary["jct_mean"])
