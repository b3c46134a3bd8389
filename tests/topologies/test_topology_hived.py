"""The HiveD config reader: the example configs (bundled) load as is, levels, VCs, errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import SHARED, TOPOLOGY_SAMPLES

from schedlab.sim.errors import InvalidTopology
from schedlab.sim.model import Level
from schedlab.topologies import load_topology, read_hived

HIVED = TOPOLOGY_SAMPLES / "hived-configs"  # verbatim copies of shared/hived-configs
needs_shared = pytest.mark.skipif(not (SHARED / "hived-configs").is_dir(),
                                  reason="shared/hived-configs not found")

K80_LEVELS = (Level.GPU, Level.SWITCH, Level.NODE, Level.RACK, Level.CLUSTER)
# file -> (nodes, GPUs, GPU types, levels), counted by hand from the YAML
EXPECTED = {
    "basic-hivedscheduler.yaml": (3, 12, {"K80": 12}, K80_LEVELS),
    "hived-config-1.yaml": (5, 20, {"K80": 20}, K80_LEVELS),
    "hived-config-2.yaml": (5, 20, {"K80": 16, "M60": 4}, K80_LEVELS),
    "hived-config-3.yaml": (5, 20, {"K80": 16, "M60": 4}, K80_LEVELS),
    # 3 CT1 nodes x 2, 3 DGX1-P100 x 8, 2 + 3 + 4 + 4 DGX2-V100 x 16, 2 IB-DGX2 x 16
    "design-hivedscheduler.yaml": (
        21, 270, {"CT1": 6, "DGX1-P100": 24, "DGX2-V100": 208, "IB-DGX2-V100-V100": 32},
        tuple(Level),
    ),
}


def load(name: str):
    return load_topology(HIVED / name)


def test_every_bundled_config_is_expected():
    names = sorted(p.name for p in HIVED.glob("*.yaml"))
    assert names == sorted(EXPECTED)


@needs_shared
def test_bundled_configs_are_verbatim_copies_of_the_shared_ones():
    shared = SHARED / "hived-configs"
    assert sorted(p.name for p in shared.glob("*.yaml")) == sorted(EXPECTED)
    for name in EXPECTED:
        assert (HIVED / name).read_bytes() == (shared / name).read_bytes(), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shared_configs_load(name):
    nodes, gpus, types, levels = EXPECTED[name]
    t = load(name)
    assert t.name == Path(name).stem
    assert len(t.nodes) == nodes
    assert t.num_gpus == gpus
    assert t.gpu_types == types
    assert t.levels == levels
    assert t.hived is not None and set(t.hived) == {
        "cell_types", "physical_cells", "virtual_clusters", "pinned"}
    assert t.vcs == t.hived["virtual_clusters"]
    g = t.to_networkx()
    assert g.number_of_nodes() == len(t.cells) and g.number_of_edges() == len(t.cells) - 1


def test_basic_config_details():
    t = load("basic-hivedscheduler.yaml")
    assert [n.name for n in t.nodes] == ["10.151.41.20", "10.151.41.21", "10.151.41.22"]
    assert t.level_counts() == {"gpu": 12, "switch": 6, "node": 3, "rack": 1, "cluster": 1}
    pinned = t.cells[t.hived["pinned"]["VC2-K80"]]
    assert (pinned.level, pinned.name, pinned.cell_type) == (
        Level.NODE, "10.151.41.21", "K80-NODE")
    assert t.vcs == {
        "VC1": {"virtual_cells": [("3-K80-NODE.K80-NODE", 1)], "pinned_cells": []},
        "VC2": {"virtual_cells": [("3-K80-NODE.K80-NODE", 1)], "pinned_cells": ["VC2-K80"]},
    }
    ct = t.hived["cell_types"]
    assert ct["K80-NODE"] == {"child": "K80-2GPU", "number": 2, "is_node_level": True}
    assert ct["K80"] == {"child": None, "number": 0, "is_node_level": False}
    assert t.nodes[0].num_cpus == 0  # no skuTypes
    assert t.lowest_common_level([0, 1]) == Level.SWITCH
    assert t.lowest_common_level([0, 2]) == Level.NODE
    assert t.lowest_common_level([0, 4]) == Level.RACK


def test_sku_types_give_cpus_and_memory():
    t = load("hived-config-1.yaml")
    n = t.nodes[0]
    assert (n.gpu_type, n.num_gpus, n.num_cpus, n.mem_gb) == ("K80", 4, 16.0, 32.0)
    assert t.vcs["default"] == {"virtual_cells": [("2-K80-NODE", 1)], "pinned_cells": []}


def test_design_config_details():
    t = load("design-hivedscheduler.yaml")
    assert t.level_counts() == {
        "gpu": 270, "switch": 3 * 4 + 15 * 12, "socket": 3 * 2 + 15 * 2, "node": 21,
        "rack": 9, "cluster": 1,
    }
    names = [n.name for n in t.nodes]
    assert names[:6] == ["0.0.0.0", "0.0.0.1", "1.0.0.2", "1.0.0.2", "1.0.0.1", "1.0.0.0"]
    # pinned cells: a GPU (explicit address 8), a forged rack, a top-level rack
    pins = {pid: t.cells[c] for pid, c in t.hived["pinned"].items()}
    assert (pins["VC1-YQW-CT1"].level, pins["VC1-YQW-CT1"].name) == (Level.GPU, "1.0.0.2/8")
    assert pins["VC1-YQW-DGX2"].level == Level.RACK
    assert pins["VC1-YQW-DGX2"].cell_type == "2-DGX2-V100-NODE"
    assert pins["VC1-YQW-DGX2"].num_gpus == 32
    assert pins["VC1-YQW-IB-DGX2"].cell_type == "2-IB-DGX2-V100-NODE"
    assert pins["VC1-YQW-IB-DGX2"].parent == t.root
    # cellChildren: null -> children inferred with default addresses (GPU index in node)
    p100 = [n for n in t.nodes if n.gpu_type == "DGX1-P100"]
    inferred = t.cells[p100[0].cell]
    gpu_names = [t.cells[g].name for g in t.gpu_cells[inferred.gpu_lo:inferred.gpu_hi]]
    assert [name.rsplit("/", 1)[1] for name in gpu_names] == [str(i) for i in range(8)]
    # explicit addresses are kept, in the listed order
    explicit = t.cells[p100[2].cell]
    assert t.cells[t.gpu_cells[explicit.gpu_lo]].name == "1.0.0.0/1/1/1"
    # forged DGX-2 hierarchy: 2-GPU and 4-GPU cells are switches, 8-GPU cells sockets
    dgx2 = next(n for n in t.nodes if n.name == "0.0.1.0")
    base = t.cells[dgx2.cell].gpu_lo
    assert t.lowest_common_level([base, base + 1]) == Level.SWITCH
    assert t.lowest_common_level([base, base + 3]) == Level.SWITCH
    assert t.lowest_common_level([base, base + 7]) == Level.SOCKET
    assert t.lowest_common_level([base, base + 15]) == Level.NODE
    assert t.vcs["VC2"]["virtual_cells"][-1] == ("CT1-NODE", 1)
    assert t.vcs["VC1"]["pinned_cells"] == ["VC1-YQW-CT1", "VC1-YQW-DGX2", "VC1-YQW-IB-DGX2"]


def write(tmp_path: Path, text: str, name: str = "hived.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


CLUSTER = """
physicalCluster:
  cellTypes:
    SW:
      childCellType: G
      childCellNumber: 2
    NODE:
      childCellType: SW
      childCellNumber: 2
      isNodeLevel: true
    RACK:
      childCellType: NODE
      childCellNumber: 3
  physicalCells:
  - cellType: RACK
    cellChildren:
    - cellAddress: n0
      cellChildren:
      - cellAddress: 7
    - cellAddress: n1
"""


def test_partial_children_and_generated_addresses(tmp_path):
    t = read_hived(write(tmp_path, CLUSTER))
    assert len(t.nodes) == 3 and t.num_gpus == 12
    assert [n.name for n in t.nodes] == ["n0", "n1", "0/2"]  # third node: generated address
    n0 = t.cells[t.nodes[0].cell]
    assert [t.cells[c].name for c in n0.children] == ["n0/7", "n0/1"]
    assert t.levels == (Level.GPU, Level.SWITCH, Level.NODE, Level.RACK, Level.CLUSTER)
    assert t.vcs == {} and t.hived["pinned"] == {}


def test_two_intermediate_levels_are_switch_then_socket(tmp_path):
    path = write(tmp_path, """
        physicalCluster:
          cellTypes:
            SW: {childCellType: G, childCellNumber: 2}
            SOCK: {childCellType: SW, childCellNumber: 2}
            NODE: {childCellType: SOCK, childCellNumber: 2, isNodeLevel: true}
          physicalCells:
          - cellType: NODE
            cellAddress: host-a
        """)
    t = read_hived(path)
    assert t.level_counts() == {"gpu": 8, "switch": 4, "socket": 2, "node": 1, "cluster": 1}
    assert t.nodes[0].name == "host-a" and t.nodes[0].gpu_type == "G"


HEAD = "physicalCluster:\n  cellTypes:\n"
NODE = "    N: {childCellType: G, childCellNumber: 2, isNodeLevel: true}\n"
CELLS = "  physicalCells:\n  - cellType: N\n    cellAddress: h0\n"
OK = HEAD + NODE + CELLS


@pytest.mark.parametrize(("text", "key", "value"), [
    ("foo: 1\n" + OK, "foo", "foo"),
    ("virtualClusters: {}\n", "physicalCluster", "missing"),
    (HEAD + NODE + CELLS.replace("  physicalCells", "  physicalCellz"),
     "physicalCluster.physicalCellz", "physicalCellz"),
    (HEAD + "    N: {childCellType: G, childCellNumber: 0, isNodeLevel: true}\n" + CELLS,
     "cellTypes.N.childCellNumber", "0"),
    (HEAD + "    N: {childCellType: G, childCellNumber: two, isNodeLevel: true}\n" + CELLS,
     "cellTypes.N.childCellNumber", "two"),
    (HEAD + "    N: {childCellNumber: 2, isNodeLevel: true}\n" + CELLS,
     "cellTypes.N.childCellType", "None"),
    (HEAD + "    N: {childCellType: G, childCellNumber: 2, isNodeLevel: yes please}\n" + CELLS,
     "cellTypes.N.isNodeLevel", "yes please"),
    (HEAD + "    N: {childCellType: G, childCellNumber: 2, nodeLevel: true}\n" + CELLS,
     "cellTypes.N.nodeLevel", "nodeLevel"),
    ("physicalCluster:\n  skuTypes:\n    G: {gpu: 1, cpu: 4, memory: 8192Mi}\n  cellTypes:\n"
     "    N: {childCellType: GG, childCellNumber: 2, isNodeLevel: true}\n" + CELLS,
     "cellTypes.N.childCellType", "GG"),
    ("physicalCluster:\n  skuTypes:\n    G: {gpu: 1, cpu: 4, memory: lots}\n  cellTypes:\n"
     + NODE + CELLS, "skuTypes.G.memory", "lots"),
    ("physicalCluster:\n  skuTypes:\n    G: {gpu: 0, cpu: 4}\n  cellTypes:\n"
     + NODE + CELLS, "skuTypes.G.gpu", "0"),
    (HEAD + "    A: {childCellType: B, childCellNumber: 2}\n"
     "    B: {childCellType: A, childCellNumber: 2}\n" + NODE + CELLS,
     "childCellType", "A -> B -> A"),
    (HEAD + "    A: {childCellType: A, childCellNumber: 2}\n" + NODE + CELLS,
     "cellTypes.A.childCellType", "A -> A"),
    (HEAD + "    N: {childCellType: G, childCellNumber: 2}\n" + CELLS,
     "physicalCells[0].cellType", "N -> G"),
    (HEAD + NODE + "    M: {childCellType: N, childCellNumber: 2, isNodeLevel: true}\n"
     "  physicalCells:\n  - cellType: M\n", "physicalCells[0].cellType", "M -> N -> G"),
    (HEAD + NODE + "  physicalCells:\n  - cellType: NN\n", "physicalCells[0].cellType", "NN"),
    (HEAD + NODE + "  physicalCells:\n  - cellType: G\n", "physicalCells[0].cellType", "G"),
    (HEAD + NODE + "  physicalCells: []\n", "physicalCluster.physicalCells", "[]"),
    (HEAD + NODE + CELLS + "    cellChildren: [{}, {}, {}]\n",
     "physicalCells[0].cellChildren", "3 children listed"),
    (HEAD + NODE + CELLS + "    cellChildren: 2\n", "physicalCells[0].cellChildren", "2"),
    (HEAD + NODE + CELLS + "    cellChildren:\n    - {cellType: X}\n",
     "physicalCells[0].cellChildren[0].cellType", "X"),
    (HEAD + NODE + CELLS + "    cellChildren:\n    - {celAddress: 1}\n",
     "physicalCells[0].cellChildren[0].celAddress", "celAddress"),
    (HEAD + NODE + CELLS + "    pinnedCellId: P\n  - cellType: N\n    pinnedCellId: P\n",
     "physicalCells[1].pinnedCellId", "P"),
    (OK + "virtualClusters:\n  vc1:\n    pinnedCells:\n    - pinnedCellId: NOPE\n",
     "virtualClusters.vc1.pinnedCells[0].pinnedCellId", "NOPE"),
    (OK + "virtualClusters:\n  vc1:\n    virtualCells:\n    - {cellType: N, cellNumber: -1}\n",
     "virtualClusters.vc1.virtualCells[0].cellNumber", "-1"),
    (OK + "virtualClusters:\n  vc1:\n    virtualCells:\n    - {cellType: N, cellNumber: x}\n",
     "virtualClusters.vc1.virtualCells[0].cellNumber", "x"),
    (OK + "virtualClusters:\n  vc1:\n    virtualCells:\n    - {cellType: N}\n",
     "virtualClusters.vc1.virtualCells[0].cellNumber", "None"),
    (OK + "virtualClusters:\n  vc1:\n    virtualCells:\n    - {cellType: Q, cellNumber: 1}\n",
     "virtualClusters.vc1.virtualCells[0].cellType", "Q"),
    (OK + "virtualClusters:\n  vc1:\n    virtualCells:\n    - {cellType: N.H, cellNumber: 1}\n",
     "virtualClusters.vc1.virtualCells[0].cellType", "N.H"),
    (OK + "virtualClusters:\n  vc1:\n    virtualCellz: []\n",
     "virtualClusters.vc1.virtualCellz", "virtualCellz"),
])
def test_errors_name_file_key_and_value(tmp_path, text, key, value):
    path = write(tmp_path, text, "bad-hived.yaml")
    with pytest.raises(InvalidTopology) as e:
        load_topology(path)
    msg = str(e.value)
    assert "bad-hived.yaml" in msg
    assert key in msg
    assert value in msg


def test_cell_number_zero_is_accepted_as_hived_does(shared_dir, tmp_path):
    """HiveD's own tests set cellNumber 0 (testSuggestedNodes, testSafeRelaxedBuddyAlloc)."""
    import yaml

    from schedlab.policies.hived.algorithm import HivedAlgorithm
    from schedlab.policies.hived.config import build_physical, resolve_vcs

    data = yaml.safe_load((shared_dir / "hived-configs" / "design-hivedscheduler.yaml")
                          .read_text(encoding="utf-8"))
    cells = data["virtualClusters"]["VC1"]["virtualCells"]
    cells[0]["cellNumber"] = 0
    cells[3]["cellNumber"] = 3
    topo = load_topology(write(tmp_path, yaml.safe_dump(data), "zero.yaml"))
    pc = build_physical(topo)
    vcs, _ = resolve_vcs(topo, pc)
    algo = HivedAlgorithm(pc, vcs)
    rack = [c for c in algo.pc.chains if c.startswith("4-DGX2")][0]
    assert {lv: n for lv, n in algo.vc_free["VC1"][rack].items() if n} == {6: 3}  # racks of 2


def test_minimal_config_is_valid(tmp_path):
    t = load_topology(write(tmp_path, OK))
    assert (len(t.nodes), t.num_gpus, t.nodes[0].name) == (1, 2, "h0")
    assert t.levels == (Level.GPU, Level.NODE, Level.CLUSTER)


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, OK + "virtualClusters:\n  vc1: {virtualCells: [\n", "broken.yaml")
    with pytest.raises(InvalidTopology) as e:
        read_hived(path)
    assert "broken.yaml" in str(e.value) and "line " in str(e.value)
