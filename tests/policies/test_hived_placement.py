"""Table-driven HiveD placements on the HiveD example configs, as in HiveD's own algorithm tests.

Each row places one gang (VC, priority, leaf type, GPUs per pod, pods, pinned cell) on the
state the rows above left, and lists the expected node and leaf addresses of every pod
(or the start of the reason it waits) and the gangs it preempts. The design-config table
follows hivedscheduler's `hived_algorithm_test.go` (pods 1-7, 16-23, which we match
exactly under HiveD's test chain order); rows where HiveD's expectation comes from the
order its init shuffles free lists in (its pod24, pod8) are our own, computed by hand.
"""

from __future__ import annotations

import pytest

from policies.hived.algorithm import HivedAlgorithm, Request
from policies.hived.config import build_physical, resolve_vcs
from sim.errors import InvalidTopology
from topologies import load_topology
from topologies.hived import hived_from_dict
from topologies.native import load_yaml

ALL16 = list(range(16))


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


# vc, priority, leaf type, GPUs per pod, pods, pinned id, expected pods | reason, victims
DESIGN_ROWS = [
    ("VC1", 0, "DGX2-V100", 1, 1, "", [("0.0.1.0", [0])], []),  # HiveD pod1
    ("VC1", 1, "DGX2-V100", 1, 1, "", [("0.0.1.0", [1])], []),  # pod2: buddy of pod1
    ("VC1", 2, "DGX2-V100", 8, 1, "", [("0.0.1.0", list(range(8, 16)))], []),  # pod3
    ("VC1", -1, "DGX2-V100", 1, 1, "", [("0.0.5.0", [0])], []),  # pod4: away from VC1
    ("VC1", 1, "DGX2-V100", 16, 2, "VC1-YQW-DGX2",  # pod5/6: the pinned rack
     [("0.0.3.0", ALL16), ("0.0.3.1", ALL16)], []),
    ("VC2", 1, "DGX1-P100", 8, 3, "", "insufficient capacity", []),  # pod7: VC too small
    ("VC1", 2, "DGX2-V100", 16, 2, "VC1-YQW-DGX2",  # pod16/17 preempt pod5/6 (row 5)
     [("0.0.3.0", ALL16), ("0.0.3.1", ALL16)], [5]),
    ("VC1", 1, "DGX2-V100", 16, 2, "", [("0.0.3.2", ALL16), ("0.0.3.3", ALL16)], []),  # 18/19
    ("VC1", 1, "DGX2-V100", 16, 2, "", [("0.0.4.0", ALL16), ("0.0.4.1", ALL16)], []),  # 20/21
    ("VC1", -1, "DGX2-V100", 16, 2, "", [("0.0.4.2", ALL16), ("0.0.4.3", ALL16)], []),  # 22/23
    ("VC2", 0, "CT1", 2, 1, "", [("0.0.0.0", [0, 1])], []),  # pod24 (HiveD: 0.0.0.1)
    ("VC1", 0, "DGX2-V100", 16, 1, "", [("0.0.5.0", ALL16)], [4]),  # preempts pod4's gang
    ("VC1", 0, "DGX2-V100", 1, 1, "", [("0.0.1.0", [2])], []),  # fullest 4-GPU cell
    ("VC1", 0, "DGX2-V100", 8, 1, "", [("0.0.2.0", list(range(8)))], []),  # 3-DGX2 chain
    ("VC1", 0, "DGX2-V100", 16, 2, "", "insufficient capacity", []),  # one VC node left
    ("VC2", 1, "DGX1-P100", 7, 1, "", [("1.0.0.2", list(range(7)))], []),  # any 7 GPUs
    ("VC2", 1, "DGX1-P100", 4, 2, "", [("1.0.0.1", [0, 1, 2, 3]), ("1.0.0.1", [4, 5, 6, 7])],
     []),  # two pods pack one node
    ("VC2", 1, "DGX1-P100", 4, 1, "", [("1.0.0.0", [1, 3, 4, 7])], []),  # a socket cell
]


def test_design_config_table(hived_root):
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml", hived_chain_order=True)
    run_table(topo, algo, DESIGN_ROWS)


def test_design_config_topology_chain_order(hived_root):
    """Our default chain order is the topology's: the single-node DGX2 chain comes first."""
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml")
    rows = [("VC1", 1, "DGX2-V100", 16, 2, "", [("0.0.1.0", ALL16), ("0.0.5.0", ALL16)], []),
            ("VC1", 1, "DGX2-V100", 16, 2, "", [("0.0.2.0", ALL16), ("0.0.2.1", ALL16)], [])]
    run_table(topo, algo, rows)


@pytest.mark.parametrize("lazy", [False, True])
def test_intra_vc_preemption_immediate_or_lazy(hived_root, lazy):
    """HiveD pod24/pod25: a higher priority takes the VC's only CT1 node.

    Immediate: the lower gang is preempted. Lazy: it is downgraded to opportunistic and
    keeps its node, and buddy allocation binds the VC's cell to the other free node.
    """
    topo, algo = fresh(hived_root, "design-hivedscheduler.yaml", lazy=lazy)
    low = algo.schedule(Request(1, "VC2", 0, "CT1", 2, 1), commit=True)
    assert where(topo, low) == [("0.0.0.0", [0, 1])]
    high = algo.schedule(Request(2, "VC2", 1, "CT1", 2, 1), commit=True)
    if lazy:
        assert where(topo, high) == [("0.0.0.1", [0, 1])]
        assert high.victims == [] and high.lazy == [1]
        g = algo.groups[1]
        assert g.lazy_preempted and g.prio == -1 and g.vleaves is None
        # a third gang of VC2 at priority 2 finds the VC full of priority 1: preempts it
        top = algo.schedule(Request(3, "VC2", 2, "CT1", 2, 1), commit=True)
        assert top.lazy == [2]
    else:
        assert where(topo, high) == [("0.0.0.0", [0, 1])]
        assert high.victims == [1] and 1 not in algo.groups


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
        ("default", 0, "", 4, 2, "", [("10.151.41.19", [0, 1, 2, 3]),
                                      ("10.151.41.23", [0, 1, 2, 3])], []),
        ("default", 0, "M60", 1, 1, "", "VC 'default' has no cells", []),
        ("vc1", -1, "K80", 4, 1, "", [("10.151.41.24", [0, 1, 2, 3])], []),
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
    assert [n for n, _ in where(topo, got)] == ["10.151.41.18", "10.151.41.19",
                                               "10.151.41.23"]


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
