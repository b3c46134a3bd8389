"""Kueue's own preemption table (pkg/scheduler/preemption/preemption_test.go, TestPreemption).

Each case is one upstream row: the same ClusterQueues (`defaultClusterQueues` there, in
YAML here), the admitted workloads with their priorities and flavor assignments, the
incoming workload and the flavor-resources its assignment marks Preempt; the expected
targets and reasons are upstream's `wantWorkloads` with a Preempted condition. The rows
run against schedlab's quota tree and preemption search directly, as upstream runs
`GetTargets` against a cache snapshot. Upstream's CPU quantities are in cores ("3"),
memory in bytes ("3Gi"); schedlab's internal units (millicores, bytes) are the same
after `quantity`.
"""

from __future__ import annotations

import pytest
from kueue_cases import cohort, cq, group, res, write

from schedlab.policies.kueue import preemption
from schedlab.policies.kueue.config import KueueConfig, load_config, quantity
from schedlab.policies.kueue.policy import build_tree
from schedlab.policies.kueue.workload import Workload

RES = {"cpu": "cpu", "mem": "memory"}


def _q(name, rg, pre=None, co=None):
    return cq(name, *rg, cohort=co, preemption=pre)


def _fl(flavor, *resources):
    return group((flavor, [res(*r) for r in resources]))


LP, ANY, NEVER = "LowerPriority", "Any", "Never"
DEFAULT_CQS = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
     "metadata": {"name": n}, "spec": {}} for n in ("default", "alpha", "beta")
] + [
    cq("standalone", _fl("default", ("cpu", "6")),
       group(("alpha", [res("memory", "3Gi")]), ("beta", [res("memory", "3Gi")])),
       preemption={"withinClusterQueue": LP}),
    _q("c1", [_fl("default", ("cpu", "6", "6"), ("memory", "3Gi", "3Gi"))],
       {"withinClusterQueue": LP, "reclaimWithinCohort": LP}, "cohort"),
    _q("c2", [_fl("default", ("cpu", "6", "6"), ("memory", "3Gi", "3Gi"))],
       {"withinClusterQueue": NEVER, "reclaimWithinCohort": ANY}, "cohort"),
    _q("d1", [_fl("default", ("cpu", "6"), ("memory", "3Gi"))],
       {"withinClusterQueue": LP, "reclaimWithinCohort": LP}, "cohort-no-limits"),
    _q("d2", [_fl("default", ("cpu", "6"), ("memory", "3Gi"))],
       {"withinClusterQueue": NEVER, "reclaimWithinCohort": ANY}, "cohort-no-limits"),
    _q("l1", [_fl("default", ("cpu", "6", "12"), ("memory", "3Gi", "6Gi"))],
       {"withinClusterQueue": LP, "reclaimWithinCohort": LP}, "legion"),
    _q("preventStarvation", [_fl("default", ("cpu", "6"))],
       {"withinClusterQueue": "LowerOrNewerEqualPriority"}),
    _q("a_standard", [_fl("default", ("cpu", "1", "12"))],
       {"withinClusterQueue": NEVER, "reclaimWithinCohort": LP,
        "borrowWithinCohort": {"policy": LP, "maxPriorityThreshold": 0}}, "with_shared_cq"),
    _q("b_standard", [_fl("default", ("cpu", "1", "12"))],
       {"withinClusterQueue": LP, "reclaimWithinCohort": ANY,
        "borrowWithinCohort": {"policy": LP, "maxPriorityThreshold": 0}}, "with_shared_cq"),
    _q("a_best_effort", [_fl("default", ("cpu", "1", "12"))],
       {"withinClusterQueue": NEVER, "reclaimWithinCohort": LP,
        "borrowWithinCohort": {"policy": LP, "maxPriorityThreshold": 0}}, "with_shared_cq"),
    _q("b_best_effort", [_fl("default", ("cpu", "0", "13"))],
       {"withinClusterQueue": NEVER, "reclaimWithinCohort": LP,
        "borrowWithinCohort": {"policy": LP, "maxPriorityThreshold": 0}}, "with_shared_cq"),
    _q("shared", [_fl("default", ("cpu", "10"))], None, "with_shared_cq"),
    _q("lend1", [_fl("default", ("cpu", "6", None, "4"))],
       {"withinClusterQueue": LP, "reclaimWithinCohort": LP}, "cohort-lend"),
    _q("lend2", [_fl("default", ("cpu", "6", None, "2"))],
       {"withinClusterQueue": LP, "reclaimWithinCohort": LP}, "cohort-lend"),
    _q("a", [_fl("default", ("cpu", "2"), ("memory", "2"))],
       {"withinClusterQueue": LP, "reclaimWithinCohort": ANY}, "cohort-three"),
    _q("b", [_fl("default", ("cpu", "2"), ("memory", "2"))], None, "cohort-three"),
    _q("c", [_fl("default", ("cpu", "2"), ("memory", "2"))], None, "cohort-three"),
]
LONG_RANGE = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
     "metadata": {"name": "default"}, "spec": {}},
    _q("cq-left", [_fl("default", ("cpu", "10"))], {"reclaimWithinCohort": ANY},
       "cohort-left"),
    _q("cq-right", [_fl("default", ("cpu", "0"))], None, "cohort-right"),
    cohort("cohort-left", parent="root"),
    cohort("cohort-right", parent="root"),
]

# name: (admitted [(name, cq, priority, {res: (flavor, qty)}, reserved at, created at)],
#        incoming (cq, priority, {res: (flavor, qty, mode)}, created at),
#        want {name: reason}); times in s from upstream's `now`
IC, RC, RWB = "InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing"


def _w(name, cq_name, prio, *assign, at=0.0, created=0.0):
    return (name, cq_name, prio, dict(assign), at, created)


def _cpu(q, flavor="default"):
    return ("cpu", (flavor, q))


CASES = {
    "preempt lowest priority": (
        [_w("low", "standalone", -1, _cpu("2")), _w("mid", "standalone", 0, _cpu("2")),
         _w("high", "standalone", 1, _cpu("2"))],
        ("standalone", 1, {"cpu": ("default", "2", "Preempt")}), {"low": IC}),
    "preempt multiple": (
        [_w("low", "standalone", -1, _cpu("2")), _w("mid", "standalone", 0, _cpu("2")),
         _w("high", "standalone", 1, _cpu("2"))],
        ("standalone", 1, {"cpu": ("default", "3", "Preempt")}), {"low": IC, "mid": IC}),
    "no preemption for low priority": (
        [_w("low", "standalone", -1, _cpu("3")), _w("mid", "standalone", 0, _cpu("3"))],
        ("standalone", -1, {"cpu": ("default", "1", "Preempt")}), {}),
    "not enough low priority workloads": (
        [_w("low", "standalone", -1, _cpu("3")), _w("mid", "standalone", 0, _cpu("3"))],
        ("standalone", 0, {"cpu": ("default", "4", "Preempt")}), {}),
    "some free quota, preempt low priority": (
        [_w("low", "standalone", -1, _cpu("1")), _w("mid", "standalone", 0, _cpu("1")),
         _w("high", "standalone", 1, _cpu("3"))],
        ("standalone", 1, {"cpu": ("default", "2", "Preempt")}), {"low": IC}),
    "minimal set excludes low priority": (
        [_w("low", "standalone", -1, _cpu("1")), _w("mid", "standalone", 0, _cpu("2")),
         _w("high", "standalone", 1, _cpu("3"))],
        ("standalone", 1, {"cpu": ("default", "2", "Preempt")}), {"mid": IC}),
    "only preempt workloads using the chosen flavor": (
        [_w("low", "standalone", -1, ("memory", ("alpha", "2Gi"))),
         _w("mid", "standalone", 0, ("memory", ("beta", "1Gi"))),
         _w("high", "standalone", 1, ("memory", ("beta", "1Gi")))],
        ("standalone", 1, {"cpu": ("default", "1", "Fit"),
                           "memory": ("beta", "2Gi", "Preempt")}), {"mid": IC}),
    "reclaim quota from borrower": (
        [_w("c1-low", "c1", -1, _cpu("3")), _w("c2-mid", "c2", 0, _cpu("3")),
         _w("c2-high", "c2", 1, _cpu("6"))],
        ("c1", 1, {"cpu": ("default", "3", "Preempt")}), {"c2-mid": RC}),
    "no workloads borrowing": (
        [_w("c1-high", "c1", 1, _cpu("4")), _w("c2-low-1", "c2", -1, _cpu("4"))],
        ("c1", 1, {"cpu": ("default", "4", "Preempt")}), {}),
    "not enough workloads borrowing": (
        [_w("c1-high", "c1", 1, _cpu("4")), _w("c2-low-1", "c2", -1, _cpu("4")),
         _w("c2-low-2", "c2", -1, _cpu("4"))],
        ("c1", 1, {"cpu": ("default", "4", "Preempt")}), {}),
    "preempting locally and borrowing other resources in cohort, without cohort "
    "candidates": (
        [_w("c1-low", "c1", -1, _cpu("4")), _w("c2-low-1", "c2", -1, _cpu("4")),
         _w("c2-high-2", "c2", 1, _cpu("4"))],
        ("c1", 1, {"cpu": ("default", "4", "Preempt"),
                   "memory": ("default", "5Gi", "Preempt")}), {"c1-low": IC}),
    "preempting locally and borrowing same resource in cohort": (
        [_w("c1-med", "c1", 0, _cpu("4")), _w("c1-low", "c1", -1, _cpu("4")),
         _w("c2-low-1", "c2", -1, _cpu("4"))],
        ("c1", 1, {"cpu": ("default", "4", "Preempt")}), {"c1-low": IC}),
    "preempting locally and borrowing same resource in cohort; no borrowing limit in the "
    "cohort": (
        [_w("d1-med", "d1", 0, _cpu("4")), _w("d1-low", "d1", -1, _cpu("4")),
         _w("d2-low-1", "d2", -1, _cpu("4"))],
        ("d1", 1, {"cpu": ("default", "4", "Preempt")}), {"d1-low": IC}),
    "preempting locally and borrowing other resources in cohort, with cohort candidates": (
        [_w("c1-med", "c1", 0, _cpu("4")), _w("c2-low-1", "c2", -1, _cpu("5")),
         _w("c2-low-2", "c2", -1, _cpu("1")), _w("c2-low-3", "c2", -1, _cpu("1"))],
        ("c1", 1, {"cpu": ("default", "2", "Preempt"),
                   "memory": ("default", "5Gi", "Preempt")}), {"c1-med": IC}),
    "preempting locally and not borrowing same resource in 1-queue cohort": (
        [_w("l1-med", "l1", 0, _cpu("4")), _w("l1-low", "l1", -1, _cpu("2"))],
        ("l1", 1, {"cpu": ("default", "4", "Preempt")}), {"l1-med": IC}),
    "do not reclaim borrowed quota from same priority for "
    "withinCohort=ReclaimFromLowerPriority": (
        [_w("c1", "c1", 0, _cpu("2")), _w("c2-1", "c2", 0, _cpu("4")),
         _w("c2-2", "c2", 0, _cpu("4"))],
        ("c1", 0, {"cpu": ("default", "4", "Preempt")}), {}),
    "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny": (
        [_w("c1-1", "c1", 0, _cpu("4")), _w("c1-2", "c1", 1, _cpu("4")),
         _w("c2", "c2", 0, _cpu("2"))],
        ("c2", 0, {"cpu": ("default", "4", "Preempt")}), {"c1-1": RC}),
    "preempt from all ClusterQueues in cohort": (
        [_w("c1-low", "c1", -1, _cpu("3")), _w("c1-mid", "c1", 0, _cpu("2")),
         _w("c2-low", "c2", -1, _cpu("3")), _w("c2-mid", "c2", 0, _cpu("4"))],
        ("c1", 0, {"cpu": ("default", "4", "Preempt")}), {"c1-low": IC, "c2-low": RC}),
    "can't preempt workloads in ClusterQueue for withinClusterQueue=Never": (
        [_w("c2-low", "c2", -1, _cpu("3"))],
        ("c2", 1, {"cpu": ("default", "4", "Preempt")}), {}),
    "preempt newer workloads with the same priority": (
        [_w("wl1", "preventStarvation", 2, _cpu("2")),
         _w("wl2", "preventStarvation", 1, _cpu("2"), at=1.0),
         _w("wl3", "preventStarvation", 1, _cpu("2"))],
        ("preventStarvation", 1, {"cpu": ("default", "2", "Preempt")}, -15.0),
        {"wl2": IC}),
    "use BorrowWithinCohort; allow preempting a lower-priority workload from another "
    "ClusterQueue while borrowing": (
        [_w("a_best_effort_low", "a_best_effort", -1, _cpu("10")),
         _w("b_best_effort_low", "b_best_effort", -1, _cpu("1"))],
        ("a_standard", 0, {"cpu": ("default", "10", "Preempt")}),
        {"a_best_effort_low": RWB}),
    "use BorrowWithinCohort; don't allow preempting a lower-priority workload with "
    "priority above MaxPriorityThreshold, if borrowing is required even after the "
    "preemption": (
        [_w("b_standard", "b_standard", 1, _cpu("10"))],
        ("a_standard", 2, {"cpu": ("default", "10", "Preempt")}), {}),
    "use BorrowWithinCohort; allow preempting a lower-priority workload with priority "
    "above MaxPriorityThreshold, if borrowing is not required after the preemption": (
        [_w("b_standard", "b_standard", 1, _cpu("13"))],
        ("a_standard", 2, {"cpu": ("default", "1", "Preempt")}), {"b_standard": RC}),
    "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from "
    "the same ClusterQueue": (
        [_w("a_standard", "a_standard", 1, _cpu("13"))],
        ("a_standard", 2, {"cpu": ("default", "1", "Preempt")}), {}),
    "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and "
    "already above nominal": (
        [_w("a_standard_1", "a_standard", 1, _cpu("10")),
         _w("a_standard_2", "a_standard", 1, _cpu("1")),
         _w("b_standard_1", "b_standard", 1, _cpu("1")),
         _w("b_standard_2", "b_standard", 2, _cpu("1"))],
        ("b_standard", 3, {"cpu": ("default", "1", "Preempt")}), {"b_standard_1": IC}),
    "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below "
    "threshold": (
        [_w("b_standard_high", "b_standard", 2, _cpu("10")),
         _w("b_standard_mid", "b_standard", 1, _cpu("1")),
         _w("a_best_effort_low", "a_best_effort", -1, _cpu("1")),
         _w("a_best_effort_lower", "a_best_effort", -2, _cpu("1"))],
        ("b_standard", 2, {"cpu": ("default", "2", "Preempt")}),
        {"a_best_effort_lower": RWB, "b_standard_mid": IC}),
    "reclaim quota from lender": (
        [_w("lend1-low", "lend1", -1, _cpu("3")), _w("lend2-mid", "lend2", 0, _cpu("3")),
         _w("lend2-high", "lend2", 1, _cpu("4"))],
        ("lend1", 1, {"cpu": ("default", "3", "Preempt")}), {"lend2-mid": RC}),
    "preempt from all ClusterQueues in cohort-lend": (
        [_w("lend1-low", "lend1", -1, _cpu("3")), _w("lend1-mid", "lend1", 0, _cpu("2")),
         _w("lend2-low", "lend2", -1, _cpu("3")), _w("lend2-mid", "lend2", 0, _cpu("4"))],
        ("lend1", 0, {"cpu": ("default", "4", "Preempt")}),
        {"lend1-low": IC, "lend2-low": RC}),
    "cannot preempt from other ClusterQueues if exceeds requestable quota including "
    "lending limit": (
        [_w("lend2-low", "lend2", -1, _cpu("10"))],
        ("lend1", 0, {"cpu": ("default", "9", "Preempt")}), {}),
    "preemptions from cq when target queue is exhausted for the single requested "
    "resource": (
        [_w("a1", "a", -2, _cpu("1")), _w("a2", "a", -2, _cpu("1")),
         _w("a3", "a", -1, _cpu("1")), _w("b1", "b", 0, _cpu("1")),
         _w("b2", "b", 0, _cpu("1")), _w("b3", "b", 0, _cpu("1"))],
        ("a", 0, {"cpu": ("default", "2", "Preempt")}), {"a1": IC, "a2": IC}),
    "preemptions from cq when target queue is exhausted for two requested resources": (
        [_w(n, cqn, p, _cpu("1"), ("memory", ("default", "1")))
         for n, cqn, p in (("a1", "a", -2), ("a2", "a", -2), ("a3", "a", -1),
                           ("b1", "b", 0), ("b2", "b", 0), ("b3", "b", 0))],
        ("a", 0, {"cpu": ("default", "2", "Preempt"),
                  "memory": ("default", "2", "Preempt")}), {"a1": IC, "a2": IC}),
    "preemptions from cq when target queue is exhausted for one requested resource, but "
    "not the other": (
        [_w("a1", "a", -2, _cpu("1")), _w("a2", "a", -2, _cpu("1")),
         _w("a3", "a", -1, _cpu("1")), _w("b1", "b", 0, _cpu("1")),
         _w("b2", "b", 0, _cpu("1")), _w("b3", "b", 0, _cpu("1"))],
        ("a", 0, {"cpu": ("default", "2", "Preempt"),
                  "memory": ("default", "2", "Preempt")}), {"a1": IC, "a2": IC}),
    "allow preemption from other cluster queues if target cq is not exhausted for the "
    "requested resource": (
        [_w("a1", "a", -1, _cpu("1"))]
        + [_w(f"b{i}", "b", 0, _cpu("1")) for i in range(1, 5)]
        + [_w("b5", "b", -1, _cpu("1"))],
        ("a", 0, {"cpu": ("default", "2", "Preempt")}), {"a1": IC, "b5": RC}),
}


_CONFIGS: dict[int, KueueConfig] = {}


def _targets(tmp_path, docs, admitted, incoming):
    cfg = _CONFIGS.get(id(docs))
    if cfg is None:  # parsed once per table: the rows share upstream's ClusterQueues
        cfg = _CONFIGS[id(docs)] = load_config(write(tmp_path, *docs, local_queues=False))
    nodes, _ = build_tree(cfg)
    confs = {c.name: c for c in cfg.cluster_queues}
    by_cq: dict[str, dict[int, Workload]] = {n: {} for n in nodes}
    where = None
    for i, (name, cqn, prio, assign, at, created) in enumerate(admitted):
        w = Workload(i, name, nodes[cqn], prio, created, {}, "")
        for r, (fl, q) in assign.items():
            w.usage[(fl, r)] = quantity(r, q, where, r)
        w.admitted_at = at
        w.add()
        by_cq[cqn][i] = w
    cqn, prio, assign, *created = incoming
    pre = Workload(len(admitted), "in", nodes[cqn], prio, created[0] if created else 0.0,
                   {}, "")
    requests = {(fl, r): quantity(r, q, where, r) for r, (fl, q, _) in assign.items()}
    frs = {(fl, r) for r, (fl, _, mode) in assign.items() if mode == "Preempt"}
    ctx = preemption.Ctx(pre, confs[cqn], frs, requests, by_cq)
    before = {n.name: dict(n.usage) for n in nodes.values()}
    got = {t.workload.job_id: t.reason for t in preemption.classical(ctx)}
    assert {n.name: dict(n.usage) for n in nodes.values()} == before  # snapshot restored
    return got


@pytest.mark.parametrize("name", list(CASES))
def test_preemption_table(tmp_path, name):
    """One row of upstream TestPreemption: the same targets with the same reasons."""
    admitted, incoming, want = CASES[name]
    assert _targets(tmp_path, DEFAULT_CQS, admitted, incoming) == want


def test_long_range_preemption(tmp_path):
    """Upstream "long range preemption": nested cohorts root <- cohort-left <- cq-left
    and root <- cohort-right <- cq-right; cq-left reclaims from a workload two cohort
    levels away."""
    got = _targets(tmp_path, LONG_RANGE,
                   [_w("to-be-preempted", "cq-right", 0, _cpu("5"))],
                   ("cq-left", 0, {"cpu": ("default", "8", "Preempt")}))
    assert got == {"to-be-preempted": RC}
