"""Kueue's flavor-assignment tables (pkg/scheduler/flavorassigner/flavorassigner_test.go).

TestIsPreferred row by row; TestReclaimBeforePriorityPreemption and TestHierarchical row
by row (their "gpu"/"compute" resources are nvidia.com/gpu and cpu here); and the
fungibility rows of TestAssignFlavors ("preempt before try next flavor", "borrow try
next flavor, ...", "lend try next flavor, ..."), whose `pods` quotas (10, never binding)
are left out. Like upstream, the preemption oracle is a stub returning the row's
`simulationResult` (default: Preempt, borrowing 0); usage is set on the queues directly.
"""

from __future__ import annotations

import pytest
from kueue_cases import cohort, cq, flavor, group, res, write

from schedlab.policies.kueue.config import GPU, Fungibility, load_config
from schedlab.policies.kueue.flavors import (
    FIT,
    NO_CANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    assign,
    preferred,
)
from schedlab.policies.kueue.policy import build_tree

TNF, MSS = "TryNextFlavor", "MayStopSearch"
NO_FIT, NO_CAND, PRE, REC = NOFIT, NO_CANDIDATES, PREEMPT, RECLAIM

# (a, b, fungibility, want isPreferred(a, b)); modes are (preemption mode, borrowing level)
IS_PREFERRED = {
    "feature gate disabled prioritises preemption":
        ((FIT, 0), (PRE, 0), Fungibility(TNF, TNF), True),
    "explicit BorrowingOverPreemption prioritises borrowing distance":
        ((PRE, 1), (FIT, 2), Fungibility(TNF, TNF, "BorrowingOverPreemption"), False),
    "explicit PreemptionOverBorrowing prioritises lower preemption":
        ((PRE, 1), (FIT, 2), Fungibility(TNF, TNF, "PreemptionOverBorrowing"), True),
    "explicit PreemptionOverBorrowing breaks borrowing ties with preemption":
        ((PRE, 1), (FIT, 1), Fungibility(TNF, TNF, "PreemptionOverBorrowing"), False),
    "explicit PreemptionOverBorrowing rejects no-candidate flavor before borrowing "
    "comparison":
        ((NO_CAND, 1), (FIT, 2), Fungibility(TNF, TNF, "PreemptionOverBorrowing"), False),
    "explicit PreemptionOverBorrowing prefers fit over shallower-borrowing no-candidate "
    "flavor":
        ((FIT, 2), (NO_CAND, 1), Fungibility(TNF, TNF, "PreemptionOverBorrowing"), True),
    "no-candidate flavor remains preferable to no-fit flavor":
        ((NO_CAND, 1), (NO_FIT, 0), Fungibility(), True),
    "no-fit flavor remains worse than no-candidate flavor":
        ((NO_FIT, 0), (NO_CAND, 1), Fungibility(), False),
    "no-candidate flavors retain borrowing preference":
        ((NO_CAND, 1), (NO_CAND, 2), Fungibility(preference="PreemptionOverBorrowing"), True),
    "no-candidate flavors retain borrowing preference in reverse":
        ((NO_CAND, 2), (NO_CAND, 1), Fungibility(preference="PreemptionOverBorrowing"),
         False),
}


@pytest.mark.parametrize("name", list(IS_PREFERRED))
def test_is_preferred(name):
    """TestIsPreferred."""
    a, b, f, want = IS_PREFERRED[name]
    assert preferred(a, b, f) is want


_CONFIGS: dict[str, object] = {}


def _assign(tmp_path, key, docs, cq_name, requests, usage, sim=None, other_usage=None,
            other="other-clusterqueue"):
    """Build the tree, set usage, assign with a stub oracle; (mode, {res: flavor})."""
    cfg = _CONFIGS.get(key)
    if cfg is None:
        cfg = _CONFIGS[key] = load_config(write(tmp_path, *docs, local_queues=False))
    nodes, _ = build_tree(cfg)
    for fr, v in usage.items():
        nodes[cq_name].add_usage(fr, v)
    for fr, v in (other_usage or {}).items():
        nodes[other].add_usage(fr, v)
    conf = next(c for c in cfg.cluster_queues if c.name == cq_name)
    sim = sim or {}

    def oracle(fr, v):
        return sim.get(fr, (PREEMPT, 0))

    flavors = {f.name: f for f in cfg.flavors}
    a = assign(requests, nodes[cq_name], conf, flavors, "", GPU, oracle, False, True)
    return a.mode, {r: fl for (fl, r) in a.usage}


# --- TestReclaimBeforePriorityPreemption: flavors uno, due, tre of 10 compute, 10 gpu ---

def _reclaim_docs(fungibility):
    fq = [(f, [res("cpu", "10"), res(GPU, "10")]) for f in ("uno", "due", "tre")]
    fq0 = [(f, [res("cpu", "0"), res(GPU, "0")]) for f in ("uno", "due", "tre")]
    return [flavor("uno"), flavor("due"), flavor("tre"),
            cq("test-clusterqueue", group(*fq), cohort="cohort", fungibility=fungibility,
               preemption={"withinClusterQueue": "LowerPriority",
                           "reclaimWithinCohort": "LowerPriority"}),
            cq("other-clusterqueue", group(*fq0), cohort="cohort")]


G10 = {GPU: 10.0}
RECLAIM_ROWS = {
    "Select first flavor which fits": (
        None, G10, {("uno", GPU): 1}, {("due", GPU): 1}, None, FIT, {GPU: "tre"}),
    "Select first flavor where gpu reclamation is possible": (
        None, G10, {("uno", GPU): 1}, {("due", GPU): 1, ("tre", GPU): 1},
        {("uno", GPU): (PREEMPT, 0), ("due", GPU): (RECLAIM, 0)}, PREEMPT, {GPU: "due"}),
    "Select first flavor when flavor fungibility is disabled": (
        {"whenCanPreempt": MSS}, G10, {("uno", GPU): 1},
        {("due", GPU): 1, ("tre", GPU): 1}, None, PREEMPT, {GPU: "uno"}),
    "Select first flavor where priority based preemption is possible": (
        None, G10, {("uno", GPU): 1, ("due", GPU): 1, ("tre", GPU): 1}, {}, None, PREEMPT,
        {GPU: "uno"}),
    "Select second flavor where gpu reclamation is possible, as compute Fits": (
        None, {GPU: 10.0, "cpu": 10000.0},
        {("uno", GPU): 1, ("uno", "cpu"): 1, ("due", "cpu"): 1},
        {("due", GPU): 1, ("tre", GPU): 1},
        {("uno", GPU): (PREEMPT, 0), ("due", GPU): (RECLAIM, 0), ("tre", GPU): (RECLAIM, 0)},
        PREEMPT, {GPU: "tre", "cpu": "tre"}),
}


@pytest.mark.parametrize("name", list(RECLAIM_ROWS))
def test_reclaim_before_priority_preemption(tmp_path, name):
    """TestReclaimBeforePriorityPreemption (whenCanPreempt TryNextFlavor: a flavor where
    quota can be reclaimed from the cohort beats one needing priority preemption)."""
    fung, req, usage, other, sim, want_mode, want = RECLAIM_ROWS[name]
    f = {"whenCanPreempt": TNF, **(fung or {})}
    docs = _reclaim_docs(f)
    got = _assign(tmp_path, f"reclaim-{f}", docs, "test-clusterqueue", req, usage, sim,
                  other)
    assert got == (want_mode, want)


# --- TestHierarchical: cohorts three <- two <- one, each lending 4 CPUs of its flavor ---

def _hier_docs(test_flavors, fungibility):
    return [
        flavor("one"), flavor("two"), flavor("three"),
        cohort("three", group(("three", [res("cpu", "4")]))),
        cohort("two", group(("two", [res("cpu", "4")])), parent="three"),
        cohort("one", group(("one", [res("cpu", "4")])), parent="two"),
        cq("test-clusterqueue", group(*test_flavors), cohort="one",
           preemption={"withinClusterQueue": "LowerPriority",
                       "reclaimWithinCohort": "LowerPriority"},
           fungibility=fungibility),
        cq("other-clusterqueue", group(*[(f, [res("cpu", "0")])
                                         for f in ("one", "two", "three")]), cohort="two"),
    ]


ZERO = [(f, [res("cpu", "0")]) for f in ("one", "two", "three")]
HIER_ROWS = {
    "Select the top flavor": (
        ZERO, None, {("one", "cpu"): 4000}, {("two", "cpu"): 4000}, None, FIT,
        {"cpu": "three"}),
    "Select the first flavor which fits": (
        ZERO, None, {("one", "cpu"): 4000}, {}, None, FIT, {"cpu": "two"}),
    "Select deeper-borrowing flavor that fits when shallower-borrowing flavor has no "
    "preemption candidates": (
        [("one", [res("cpu", "4", borrowing="0")]), ("two", [res("cpu", "0")]),
         ("three", [res("cpu", "0")])],
        {"whenCanBorrow": TNF, "whenCanPreempt": TNF,
         "preference": "PreemptionOverBorrowing"},
        {("one", "cpu"): 4000}, {}, {("one", "cpu"): (NO_CANDIDATES, 1)}, FIT,
        {"cpu": "two"}),
}


@pytest.mark.parametrize("name", list(HIER_ROWS))
def test_hierarchical(tmp_path, name):
    """TestHierarchical: the borrowing level is the height of the cohort that has the
    quota; with whenCanBorrow MayStopSearch the first flavor that fits is taken."""
    flavors, fung, usage, other, sim, want_mode, want = HIER_ROWS[name]
    f = fung or {"whenCanPreempt": TNF}
    got = _assign(tmp_path, f"hier-{name}", _hier_docs(flavors, f), "test-clusterqueue",
                  {"cpu": 4000.0}, usage, sim, other)
    assert got == (want_mode, want)


# --- TestAssignFlavors: fungibility rows (test-clusterqueue in test-cohort) ---

def _fung_docs(one, two, fungibility, secondary=True):
    docs = [flavor("one"), flavor("two"),
            cq("test-clusterqueue", group(("one", [one]), ("two", [two])),
               cohort="test-cohort" if secondary else None, fungibility=fungibility)]
    if secondary:
        docs.append(cq("test-secondary-clusterqueue", group(("one", [res("cpu", "1")])),
                       cohort="test-cohort"))
    return docs


FUNG_ROWS = {
    "preempt before try next flavor": (
        res("cpu", "10"), res("cpu", "10"), {"whenCanBorrow": MSS, "whenCanPreempt": MSS},
        False, PREEMPT, {"cpu": "one"}),
    "preempt try next flavor": (
        res("cpu", "10"), res("cpu", "10"), None, False, FIT, {"cpu": "two"}),
    "borrow try next flavor, found the first flavor": (
        res("cpu", "10", borrowing="1"), res("cpu", "1"),
        {"whenCanBorrow": TNF, "whenCanPreempt": TNF}, True, FIT, {"cpu": "one"}),
    "borrow try next flavor, found the second flavor": (
        res("cpu", "10", borrowing="1"), res("cpu", "10"),
        {"whenCanBorrow": TNF, "whenCanPreempt": TNF}, True, FIT, {"cpu": "two"}),
    "borrow before try next flavor": (
        res("cpu", "10", borrowing="1"), res("cpu", "10"), None, True, FIT, {"cpu": "one"}),
    "lend try next flavor, found the second flavor": (
        res("cpu", "10", lending="1"), res("cpu", "10", lending="0"),
        {"whenCanBorrow": TNF, "whenCanPreempt": TNF}, True, FIT, {"cpu": "two"}),
    "lend try next flavor, found the first flavor": (
        res("cpu", "10", lending="1"), res("cpu", "1", lending="0"),
        {"whenCanBorrow": TNF, "whenCanPreempt": TNF}, True, FIT, {"cpu": "one"}),
}


@pytest.mark.parametrize("name", list(FUNG_ROWS))
def test_assign_flavors_fungibility(tmp_path, name):
    """TestAssignFlavors rows on whenCanBorrow / whenCanPreempt: 9 CPUs asked, 2 used in
    flavor one of a 10-CPU quota."""
    one, two, fung, secondary, want_mode, want = FUNG_ROWS[name]
    got = _assign(tmp_path, f"fung-{name}", _fung_docs(one, two, fung, secondary),
                  "test-clusterqueue", {"cpu": 9000.0}, {("one", "cpu"): 2000})
    assert got == (want_mode, want)


def test_resource_not_listed_in_cluster_queue(tmp_path):
    """TestAssignFlavors "resource not listed in clusterQueue": NoFit (with
    undeclared=nofit; schedlab's default ignores an undeclared resource)."""
    docs = [flavor("one"), cq("test-clusterqueue", group(("one", [res("cpu", "4")])))]
    assert _assign(tmp_path, "nolist", docs, "test-clusterqueue", {GPU: 1.0}, {}) == (
        NOFIT, {})


def test_not_enough_space_to_borrow(tmp_path):
    """TestAssignFlavors "not enough space to borrow": 1 CPU of quota; the other queue's
    10 lend nothing (lendingLimit 0) and 9 are used; 2 asked: NoFit, above the maximum
    capacity of 1."""
    docs = [flavor("one"),
            cq("test-clusterqueue", group(("one", [res("cpu", "1")])), cohort="test-cohort"),
            cq("other", group(("one", [res("cpu", "10", lending="0")])),
               cohort="test-cohort")]
    got = _assign(tmp_path, "space", docs, "test-clusterqueue", {"cpu": 2000.0}, {},
                  other_usage={("one", "cpu"): 9000}, other="other")
    assert got == (NOFIT, {})
