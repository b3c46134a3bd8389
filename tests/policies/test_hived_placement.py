"""Table-driven HiveD placements on the HiveD example configs, as in HiveD's own algorithm tests.

`HIVED_NORMAL` and `HIVED_STATEFUL` replay microsoft/hivedscheduler's
`pkg/algorithm/hived_algorithm_test.go` (testCasesThatShouldSucceed and
testStatefulPreemption) under HiveD's test chain order, with every expectation we can
express: node and leaf addresses, waits, victims, lazy preemption per gang, preempting
gangs that reserve their cells while their victims are being preempted, cancelled
preemptions. Left out: pods 8/9 (a 7-GPU + 5-GPU gang: test_hived_roles.py), pods 10-15
(request validation, rejected by the policy instead), pod27 and 36-41 (suggested nodes,
a Kubernetes notion), the bad-node and reconfiguration tests (test_hived_failures.py
covers doomed cells). The other tables are our own, computed by hand on HiveD's
free-list order after its boot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from schedlab.policies.hived.algorithm import HivedAlgorithm, Request
from schedlab.policies.hived.config import build_physical, resolve_vcs
from schedlab.sim.errors import InvalidTopology
from schedlab.topologies import load_topology
from schedlab.topologies.hived import hived_from_dict
from schedlab.topologies.native import load_yaml


def fresh(shared, name, *, lazy=False, hived_chain_order=False):
    topo = load_topology(shared / "hived-configs" / name)
    pc = build_physical(topo)
    vcs, _ = resolve_vcs(topo, pc)
    algo = HivedAlgorithm(pc, vcs, lazy=lazy)
    if hived_chain_order:  # hived_algorithm_test.go sorts each type's chains descending
        algo.chain_order = sorted(algo.chains, reverse=True)
    return topo, algo


def where(topo, plan):
    """[(node name, [leaf addresses])] per pod of a plan."""
    out = []
    for pod in plan.pods:
        node = topo.nodes[topo.gpu_node[pod[0].gpu]].name
        out.append((node, [int(c.name.rsplit("/", 1)[1]) for c in pod]))
    return out


def run_table(topo, algo, rows):
    for idx, (vc, prio, leaf, gpus, pods, pinned, expect, victims) in enumerate(rows, 1):
        req = Request(idx, vc, prio, leaf, gpus, pods, pinned)
        got = algo.schedule(req, commit=True)
        if isinstance(expect, str):
            assert isinstance(got, str), f"row {idx}: expected to wait, got {where(topo, got)}"
            assert got.startswith(expect), f"row {idx}: {got}"
        else:
            assert not isinstance(got, str), f"row {idx}: waits: {got}"
            assert where(topo, got) == expect, f"row {idx}"
            assert got.victims == victims, f"row {idx}"


PREEMPTING = "preempting"  # HiveD returns no bind info: the gang waits on its victims


def run_hived(topo, algo, rows):
    """Rows of HiveD's own test: requests (by HiveD pod number) and what HiveD expects.

    A request row is (pod, vc, priority, leaf type, GPUs per pod, pods, pinned id,
    lazy preemption, expected pods | reason | PREEMPTING, victims, cancelled
    preemptions); ("release", pod) and ("cancel", pod) rows delete a gang or a
    preemption, as HiveD's test deletes pods.
    """
    for row in rows:
        if row[0] == "release":
            algo.release(row[1])
            continue
        if row[0] == "cancel":
            algo.cancel(row[1])
            continue
        pod, vc, prio, leaf, gpus, pods, pinned, lazy, expect, victims, cancels = row
        got = algo.schedule(Request(pod, vc, prio, leaf, gpus, pods, pinned, lazy),
                            commit=True)
        if isinstance(expect, str) and expect != PREEMPTING:
            assert isinstance(got, str), f"pod{pod}: expected to wait, got {where(topo, got)}"
            assert got.startswith(expect), f"pod{pod}: {got}"
            continue
        assert not isinstance(got, str), f"pod{pod}: waits: {got}"
        assert got.victims == victims, f"pod{pod}"
        assert got.cancels == cancels, f"pod{pod}"
        assert all(c not in algo.groups for c in cancels), f"pod{pod}"
        if expect == PREEMPTING:
            assert algo.groups[pod].preempting and not algo.ready(pod), f"pod{pod}"
        else:
            assert not algo.groups[pod].preempting, f"pod{pod}"
            assert where(topo, got) == expect, f"pod{pod}"


ALL16 = list(range(16))
V = "DGX2-V100"
PIN = "VC1-YQW-DGX2"
# HiveD's testCasesThatShouldSucceed (a gang's first pod numbers it); pods 8/9 form a
# 7-GPU + 5-GPU gang (members that differ): in test_hived_roles.py
HIVED_NORMAL = [
    (1, "VC1", 0, V, 1, 1, "", True, [("0.0.1.0", [0])], [], []),
    (2, "VC1", 1, V, 1, 1, "", True, [("0.0.1.0", [1])], [], []),  # buddy of pod1
    (3, "VC1", 2, V, 8, 1, "", True, [("0.0.1.0", list(range(8, 16)))], [], []),
    (4, "VC1", -1, V, 1, 1, "", True, [("0.0.5.0", [0])], [], []),  # away from VC1
    (5, "VC1", 1, V, 16, 2, PIN, True, [("0.0.3.0", ALL16), ("0.0.3.1", ALL16)], [], []),
    (7, "VC2", 1, "DGX1-P100", 8, 3, "", True, "insufficient capacity", [], []),
    (16, "VC1", 2, V, 16, 2, PIN, True, PREEMPTING, [5], []),  # pod5/6 being preempted
    (18, "VC1", 1, V, 16, 2, "", True, [("0.0.3.2", ALL16), ("0.0.3.3", ALL16)], [], []),
    (20, "VC1", 1, V, 16, 2, "", True, [("0.0.4.0", ALL16), ("0.0.4.1", ALL16)], [], []),
    (22, "VC1", -1, V, 16, 2, "", True, [("0.0.4.2", ALL16), ("0.0.4.3", ALL16)], [], []),
    (24, "VC2", 0, "CT1", 2, 1, "", True, [("0.0.0.1", [0, 1])], [], []),
    (25, "VC2", 1, "CT1", 2, 1, "", False, [("0.0.0.0", [0, 1])], [], []),  # pod24 lazy
    (26, "VC2", 2, "CT1", 2, 1, "", False, PREEMPTING, [25], []),  # pod25 is not lazy
]
# HiveD's testStatefulPreemption, on a fresh algorithm
HIVED_STATEFUL = [
    (28, "VC1", 1, V, 16, 2, PIN, False, [("0.0.3.0", ALL16), ("0.0.3.1", ALL16)], [], []),
    (29, "VC1", 2, V, 16, 1, PIN, True, PREEMPTING, [28], []),
    (30, "VC1", 1, V, 16, 1, PIN, True, "insufficient capacity", [], []),  # pod28 holds on
    (31, "VC1", 2, V, 16, 1, PIN, True, PREEMPTING, [28], []),  # pod28's other node
    (32, "VC1", 2, V, 16, 1, PIN, True, "insufficient capacity", [], []),  # all reserved
    (33, "VC1", 3, V, 16, 2, PIN, True, PREEMPTING, [28], [29, 31]),
    ("release", 28),  # pod28 deleted: pod33's cells are reserved and free
    (34, "VC1", 4, V, 16, 1, PIN, False, [("0.0.3.0", ALL16)], [], [33]),  # at once
    (35, "VC1", 5, V, 16, 2, PIN, True, PREEMPTING, [34], []),  # a gang of both nodes
    ("cancel", 35),  # pod35 deleted before its preemption is done
]


def test_design_config_hived_normal_operations(hived_root):
    """HiveD's hived_algorithm_test.go, normal operations: every expectation we can express."""
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml", hived_chain_order=True)
    run_hived(topo, algo, HIVED_NORMAL)
    assert algo.groups[24].lazy_preempted and not algo.groups[25].lazy_preempted
    assert algo.groups[5].being_preempted and algo.groups[25].being_preempted


def test_design_config_hived_stateful_preemption(hived_root):
    """HiveD's testStatefulPreemption: reservations, cancellations, cells handed back."""
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml", hived_chain_order=True)
    run_hived(topo, algo, HIVED_STATEFUL[:2])
    node29 = algo.groups[29].leaves[0].node
    run_hived(topo, algo, HIVED_STATEFUL[2:4])
    assert algo.groups[31].leaves[0].node != node29  # the other node of pod28
    run_hived(topo, algo, HIVED_STATEFUL[4:])
    assert 35 not in algo.groups
    for leaf in algo.groups[34].leaves:  # the cancelled pod35 gave them back to pod34
        assert leaf.group == 34 and leaf.prio == 4 and leaf.reserver == -1
    pinned = algo.pc.cells[next(c.id for c in algo.pc.cells.values() if c.pinned)]
    assert pinned is not None
    others = [leaf for top in algo.pc.tops[algo.groups[34].chain] for leaf in top.leaves()
              if leaf.reserver >= 0]
    assert others == []


def test_preemption_completes_when_victims_leave(hived_root):
    """A preempting gang starts once every victim released its cells (HiveD allocates it)."""
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml", hived_chain_order=True)
    run_hived(topo, algo, HIVED_STATEFUL[:2])
    assert algo.victims_of(29) == [28] and not algo.ready(29)
    algo.release(28)
    assert algo.ready(29)
    algo.allocate(29)
    g = algo.groups[29]
    assert not g.preempting and all(leaf.group == 29 and leaf.prio == 2 for leaf in g.leaves)
    # the node pod28 held besides is free again: pod30 (priority 1) fits there now
    got = algo.schedule(Request(30, "VC1", 1, V, 16, 1, PIN), commit=True)
    assert not isinstance(got, str) and got.victims == []


def test_design_config_topology_chain_order(hived_root):
    """Our default chain order is the topology's: the single-node DGX2 chain comes first.

    The 3-node chain's free nodes are in HiveD's order after its boot (every node bad,
    then healthy): 0.0.2.0, 0.0.2.2, 0.0.2.1.
    """
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml")
    rows = [("VC1", 1, "DGX2-V100", 16, 2, "", [("0.0.1.0", ALL16), ("0.0.5.0", ALL16)], []),
            ("VC1", 1, "DGX2-V100", 16, 2, "", [("0.0.2.0", ALL16), ("0.0.2.2", ALL16)], [])]
    run_table(topo, algo, rows)


@pytest.mark.parametrize("lazy", [False, True])
def test_intra_vc_preemption_immediate_or_lazy(hived_root, lazy):
    """HiveD pod24/pod25: a higher priority takes the VC's only CT1 node.

    The victim's own flag decides. Lazy: it is downgraded to opportunistic and keeps its
    node, and buddy allocation binds the VC's cell to the other free node. Not lazy: the
    preemptor reserves the victim's node and waits until the victim is gone.
    """
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml")
    low = algo.schedule(Request(1, "VC2", 0, "CT1", 2, 1, lazy=lazy), commit=True)
    assert where(topo, low) == [("0.0.0.1", [0, 1])]
    high = algo.schedule(Request(2, "VC2", 1, "CT1", 2, 1), commit=True)
    if lazy:
        assert where(topo, high) == [("0.0.0.0", [0, 1])]
        assert high.victims == [] and high.lazy == [1]
        g = algo.groups[1]
        assert g.lazy_preempted and g.prio == -1 and g.vleaves is None
        # a third gang of VC2 at priority 2 finds the VC full of priority 1 (not lazy)
        top = algo.schedule(Request(3, "VC2", 2, "CT1", 2, 1), commit=True)
        assert top.lazy == [] and top.victims == [2] and algo.groups[3].preempting
    else:
        assert where(topo, high) == [("0.0.0.1", [0, 1])]
        assert high.victims == [1] and algo.groups[2].preempting and not algo.ready(2)
        assert algo.groups[1].being_preempted
        algo.release(1)
        assert algo.ready(2)
        algo.allocate(2)
        assert all(leaf.group == 2 and leaf.prio == 1 for leaf in algo.groups[2].leaves)


def test_run_default_decides_lazy(hived_root):
    """A request without its own flag takes the run's lazy_preemption."""
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml", lazy=True)
    algo.schedule(Request(1, "VC2", 0, "CT1", 2, 1), commit=True)
    high = algo.schedule(Request(2, "VC2", 1, "CT1", 2, 1), commit=True)
    assert high.lazy == [1] and high.victims == []


def test_basic_config_table(hived_root):
    topo, algo = fresh(hived_root, "basic-hivedscheduler.yaml")
    all4 = [0, 1, 2, 3]
    rows = [
        ("VC2", 0, "", 4, 1, "VC2-K80", [("10.151.41.21", all4)], []),  # the pinned node
        ("VC1", 0, "", 1, 4, "", [("10.151.41.20", [0]), ("10.151.41.20", [1]),
                                  ("10.151.41.20", [2]), ("10.151.41.20", [3])], []),
        ("VC2", 0, "K80", 2, 1, "", [("10.151.41.22", [0, 1])], []),
        ("VC2", 0, "K80", 1, 1, "", [("10.151.41.22", [2])], []),  # packs inside the VC
        ("VC1", 0, "", 1, 1, "", "insufficient capacity", []),  # VC1's node is full
        ("VC1", -1, "", 1, 1, "", [("10.151.41.22", [3])], []),  # opportunistic: anywhere
        ("VC2", 0, "", 1, 1, "", [("10.151.41.22", [3])], [6]),  # preempts it
    ]
    run_table(topo, algo, rows)


def test_heterogeneous_chains(hived_root):
    """hived-config-2: K80 pool (4 nodes) and M60 pool (1 node); a gang stays in a chain."""
    topo, algo = fresh(hived_root, "hived-config-2.yaml")
    rows = [
        ("vc1", 0, "M60", 4, 1, "", [("10.151.41.26", [0, 1, 2, 3])], []),
        ("vc1", 0, "", 2, 1, "", [("10.151.41.18", [0, 1])], []),  # any type: K80 first
        ("vc1", 0, "", 4, 1, "", "insufficient capacity", []),  # vc1's K80 node half used
        ("vc1", 0, "M60", 1, 1, "", "insufficient capacity", []),
        ("default", 0, "", 4, 2, "", [("10.151.41.24", [0, 1, 2, 3]),  # HiveD's boot order
                                      ("10.151.41.23", [0, 1, 2, 3])], []),
        ("default", 0, "M60", 1, 1, "", "VC 'default' has no cells", []),
        ("vc1", -1, "K80", 4, 1, "", [("10.151.41.19", [0, 1, 2, 3])], []),
        ("vc1", -1, "M60", 1, 1, "", "insufficient capacity", []),
    ]
    run_table(topo, algo, rows)


def test_gang_never_spans_chains(hived_root):
    """vc1 has one K80 and one M60 node: two 4-GPU pods fit by count, not in one chain."""
    topo, algo = fresh(hived_root, "hived-config-2.yaml")
    got = algo.schedule(Request(1, "vc1", 0, "", 4, 2), commit=True)
    assert isinstance(got, str) and "insufficient capacity" in got


def test_config_3_vcs_load_and_place(hived_root):
    topo, algo = fresh(hived_root, "hived-config-3.yaml")
    got = algo.schedule(Request(1, "default", 0, "", 4, 3), commit=True)
    assert [n for n, _ in where(topo, got)] == ["10.151.41.18", "10.151.41.24",
                                               "10.151.41.23"]  # HiveD's boot order


def test_config_1_vcs_and_default_vc(hived_root):
    topo, algo = fresh(hived_root, "hived-config-1.yaml")
    assert list(algo.vcs) == ["vc1", "vc2", "default"]
    got = algo.schedule(Request(1, "default", 0, "", 4, 2), commit=True)
    assert [n for n, _ in where(topo, got)] == ["10.151.41.23", "10.151.41.24"]
    got = algo.schedule(Request(2, "vc2", 0, "", 4, 1, "VC2-K80"), commit=True)
    assert where(topo, got) == [("10.151.41.25", [0, 1, 2, 3])]


def test_invalid_initial_assignment_names_vc_and_level(hived_root):
    """HiveD's testInvalidInitialAssignment: VC1 asks for CT1 cells the cluster lacks."""
    path = hived_root / "hived-configs" / "design-hivedscheduler.yaml"
    data = load_yaml(path)
    cells = data["virtualClusters"]["VC1"]["virtualCells"]
    cells[0]["cellType"] = "CT1-NODE"
    cells[1]["cellType"] = "CT1-NODE.CT1"
    cells[1]["cellNumber"] = 2
    topo = hived_from_dict(data, path)
    pc = build_physical(topo)
    vcs, _ = resolve_vcs(topo, pc)
    with pytest.raises(InvalidTopology, match=r"VC 'VC1' cannot be backed .*chain 'CT1-NODE' "
                       r"level 1 \(cell type 'CT1', gpu\): the VCs need 3 cells there"):
        HivedAlgorithm(pc, vcs)


def test_crosscheck_script_agrees_with_hived_on_every_expressible_pod():
    """benchmarks/crosscheck/hived.py: rows() for run_all, HiveD's answer beside ours."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "crosscheck" / "hived.py"
    spec = importlib.util.spec_from_file_location("crosscheck_hived", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.rows()
    assert {tuple(sorted(r)) for r in rows} == {
        ("case", "metric", "peer", "peer_value", "schedlab_value", "source")}
    differ = [r["case"] for r in rows if r["peer_value"] != r["schedlab_value"]]
    assert differ == []  # pod8/9 too: a gang of unequal pods (test_hived_roles.py)
