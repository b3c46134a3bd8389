"""Kueue's fair-sharing preemption table (preemption_fair_test.go, TestFairPreemptions).

Upstream's `baseCQs`: a, b and c with 3 CPUs each in cohort `all` (withinClusterQueue
LowerPriority, reclaimWithinCohort Any, borrowWithinCohort LowerPriority with
maxPriorityThreshold -3) and `preemptible` with 0; fair sharing on with the default
strategies (LessThanOrEqualToFinalShare, then LessThanInitialShare). Every admitted
workload reserved its quota at the same instant; ties go to the first created, as
upstream's UIDs. Each row: admitted (name, queue, CPUs, priority), the incoming
workload's queue, CPUs and priority, and the expected targets with their reasons.
"""

from __future__ import annotations

import pytest
from kueue_cases import cq, fair_sharing, flavor, group, res, write

from schedlab.policies.kueue import preemption
from schedlab.policies.kueue.config import KueueConfig, load_config
from schedlab.policies.kueue.policy import build_tree
from schedlab.policies.kueue.workload import Workload

PRE = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
       "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3}}
BASE = [flavor("default"), fair_sharing()] + [
    cq(n, group(("default", [res("cpu", "3")])), cohort="all", preemption=PRE)
    for n in ("a", "b", "c")
] + [cq("preemptible", group(("default", [res("cpu", "0")])), cohort="all")]

IC, RC, FS = "InClusterQueue", "InCohortReclamation", "InCohortFairSharing"


def _units(q, *names_cqs, prio=0):
    return [(n, c, q, prio) for n, c in names_cqs]


ROWS = {
    "reclaim nominal from user using the most": (
        _units("1", *[(f"a{i}", "a") for i in (1, 2, 3)], *[(f"b{i}", "b") for i in
                                                          range(1, 6)], ("c1", "c")),
        ("c", "1", 0), {"b1": RC}),
    "can reclaim from queue using less, if taking the latest workload from user using "
    "the most isn't enough": (
        [("a1", "a", "3", 0), ("a2", "a", "1", 0), ("b1", "b", "2", 0),
         ("b2", "b", "3", 0)],
        ("c", "3", 0), {"a1": RC}),
    "reclaim borrowable quota from user using the most": (
        _units("1", *[(f"a{i}", "a") for i in (1, 2, 3)], *[(f"b{i}", "b") for i in
                                                          range(1, 6)], ("c1", "c")),
        ("a", "1", 0), {"b1": FS}),
    "preempt one from each CQ borrowing": (
        [("a1", "a", "0.5", 0), ("a2", "a", "0.5", 0), ("a3", "a", "3", 0),
         ("b1", "b", "0.5", 0), ("b2", "b", "0.5", 0), ("b3", "b", "3", 0)],
        ("c", "2", 0), {"a1": RC, "b1": RC}),
    "can't preempt when everyone under nominal": (
        _units("1", *[(f"{q}{i}", q) for q in "abc" for i in (1, 2, 3)]),
        ("c", "1", 0), {}),
    "can't preempt when it would switch the imbalance": (
        _units("1", *[(f"a{i}", "a") for i in (1, 2, 3)], *[(f"b{i}", "b") for i in
                                                          range(1, 6)]),
        ("a", "2", 0), {}),
    "can preempt lower priority workloads from same CQ": (
        [("a1_low", "a", "1", -1), ("a2_low", "a", "1", -1), ("a3", "a", "1", 0),
         ("a4", "a", "1", 0)] + _units("1", *[(f"b{i}", "b") for i in range(1, 6)]),
        ("a", "2", 0), {"a1_low": IC, "a2_low": IC}),
    "can preempt a combination of same CQ and highest user": (
        [("a_low", "a", "1", -1), ("a2", "a", "1", 0), ("a3", "a", "1", 0)]
        + _units("1", *[(f"b{i}", "b") for i in range(1, 7)]),
        ("a", "2", 0), {"a_low": IC, "b1": FS}),
    "preempt huge workload if there is no other option, as long as the target CQ gets a "
    "lower share": (
        [("b1", "b", "9", 0)], ("a", "2", 0), {"b1": RC}),
    "can't preempt huge workload if the incoming is also huge": (
        [("a1", "a", "2", 0), ("b1", "b", "7", 0)], ("a", "5", 0), {}),
    "can't preempt 2 smaller workloads if the incoming is huge": (
        [("b1", "b", "2", 0), ("b2", "b", "2", 0), ("b3", "b", "3", 0)],
        ("a", "6", 0), {}),
    "preempt from target and others even if over nominal": (
        [("a1_low", "a", "2", -1), ("a2_low", "a", "1", -1), ("b1", "b", "3", 0),
         ("b2", "b", "3", 0)],
        ("a", "4", 0), {"a1_low": IC, "b1": FS}),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": (
        [("b1", "b", "2", 0), ("b2", "b", "1", 0), ("b3", "b", "2", 0),
         ("c1", "c", "1", 0)],
        ("a", "3.5", 0), {"b2": FS}),
    "preempt from different cluster queues if the end result has a smaller max share": (
        [("b1", "b", "2", 0), ("b2", "b", "2.5", 0), ("c1", "c", "2", 0),
         ("c2", "c", "2.5", 0)],
        ("a", "3.5", 0), {"b1": FS, "c1": FS}),
    "scenario above does not flap": (
        [("a1", "a", "3.5", 0), ("b2", "b", "2.5", 0), ("c2", "c", "2.5", 0)],
        ("b", "2", 0), {}),
}

_CFG: list[KueueConfig] = []


@pytest.mark.parametrize("name", list(ROWS))
def test_fair_preemptions(tmp_path, name):
    """One row of upstream TestFairPreemptions: the same targets and reasons."""
    admitted, (cq_name, cpus, prio), want = ROWS[name]
    if not _CFG:
        _CFG.append(load_config(write(tmp_path, *BASE, local_queues=False)))
    cfg = _CFG[0]
    nodes, _ = build_tree(cfg)
    by_cq: dict[str, dict[int, Workload]] = {n: {} for n in nodes}
    for i, (n, q, c, p) in enumerate(admitted):
        w = Workload(i, n, nodes[q], p, 0.0, {}, "")
        w.usage = {("default", "cpu"): float(round(float(c) * 1000))}
        w.add()
        by_cq[q][i] = w
    pre = Workload(len(admitted), "in", nodes[cq_name], prio, 0.0, {}, "")
    fr = ("default", "cpu")
    conf = next(c for c in cfg.cluster_queues if c.name == cq_name)
    ctx = preemption.Ctx(pre, conf, {fr}, {fr: float(round(float(cpus) * 1000))}, by_cq)
    got = {t.workload.job_id: t.reason for t in preemption.fair(ctx, cfg.strategies)}
    assert got == want
