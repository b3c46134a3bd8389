"""Bundled presets, the Philly machine list reader, load_topology dispatch and describe."""

from __future__ import annotations

import shutil

import pytest
from conftest import SHARED, TOPOLOGY_SAMPLES

from schedlab.sim.errors import InvalidTopology, SimError, UnknownName
from schedlab.sim.model import Level
from schedlab.topologies import describe, load_topology, preset_names, read_philly_machine_list
from schedlab.topologies.presets import DATA_DIR

MACHINE_LIST = DATA_DIR / "philly_cluster_machine_list"
HEADER = "machineId, number of GPUs, single GPU mem\n"


def test_preset_names():
    assert {"default", "dgx1-v100", "dgx-a100", "philly"} <= set(preset_names())
    assert preset_names() == sorted(preset_names())


@pytest.mark.parametrize("name", ["default", "dgx1-v100", "dgx-a100", "philly"])
def test_presets_load_and_round_trip_by_source(name):
    t = load_topology(name)
    assert t.name == name and t.source == name
    again = load_topology(t.source)
    assert (len(again.nodes), again.num_gpus) == (len(t.nodes), t.num_gpus)


def test_dgx1_v100():
    t = load_topology("dgx1-v100")
    assert len(t.nodes) == 1 and t.num_gpus == 8
    n = t.nodes[0]
    assert (n.gpu_type, n.num_cpus, n.mem_gb, n.gpu_mem_gb) == ("V100", 80.0, 512.0, 32.0)
    assert t.level_counts() == {"gpu": 8, "switch": 4, "socket": 2, "node": 1, "cluster": 1}
    assert t.lowest_common_level([0, 1]) == Level.SWITCH
    assert t.lowest_common_level([0, 2]) == Level.SOCKET
    assert t.lowest_common_level([0, 4]) == Level.NODE
    assert t.lowest_common_level([3]) == Level.GPU
    g = t.to_networkx()
    assert (g.number_of_nodes(), g.number_of_edges()) == (16, 15)


def test_dgx_a100():
    t = load_topology("dgx-a100")
    n = t.nodes[0]
    assert (n.gpu_type, n.num_gpus, n.num_cpus, n.mem_gb, n.gpu_mem_gb) == (
        "A100", 8, 256.0, 2048.0, 80.0)
    assert t.level_counts()["switch"] == 4 and t.level_counts()["socket"] == 2


def test_default_preset():
    t = load_topology("default")
    assert len(t.nodes) == 36 and t.num_gpus == 288 and t.gpu_types == {"V100": 288}
    assert Level.RACK not in t.levels


def test_philly_preset():
    t = load_topology("philly")
    assert len(t.nodes) == 552
    assert t.num_gpus == 2490
    assert t.gpu_types == {"K80": 321 * 2, "P40": 231 * 8}
    assert sum(1 for n in t.nodes if n.num_gpus == 8) == 231
    assert t.nodes[0].name == "m0"
    k80 = next(n for n in t.nodes if n.gpu_type == "K80")
    assert (k80.num_gpus, k80.gpu_mem_gb) == (2, 12.0)
    assert {t.cells[c].level for c in t.cells[k80.cell].children} == {Level.GPU}
    p40 = next(n for n in t.nodes if n.gpu_type == "P40")
    lo = t.cells[p40.cell].gpu_lo
    assert t.lowest_common_level([lo, lo + 1]) == Level.SWITCH
    assert t.lowest_common_level([lo, lo + 2]) == Level.SOCKET
    assert t.lowest_common_level([lo, lo + 7]) == Level.NODE
    assert t.lowest_common_level([0, t.num_gpus - 1]) == Level.CLUSTER
    g = t.to_networkx()
    assert g.number_of_nodes() == 1 + 552 + 231 * (2 + 4) + 2490
    assert g.number_of_edges() == g.number_of_nodes() - 1


def test_bundled_machine_list_is_a_verbatim_copy():
    original = SHARED / "traces" / "philly" / "cluster_machine_list"
    if not original.is_file():
        pytest.skip("shared Philly machine list not found")
    assert MACHINE_LIST.read_bytes() == original.read_bytes()


def test_machine_list_detected_by_header(tmp_path):
    path = tmp_path / "machines.txt"
    shutil.copy(MACHINE_LIST, path)
    t = load_topology(path)
    assert t.name == "machines" and t.num_gpus == 2490 and t.source == str(path)


def test_machine_list_other_sizes(tmp_path):
    path = tmp_path / "ml"
    path.write_text(HEADER + "a, 4, 16GB\nb,1, 24GB\n\n")
    t = read_philly_machine_list(path, "small")
    assert [(n.name, n.gpu_type, n.num_gpus) for n in t.nodes] == [
        ("a", "GPU-16GB", 4), ("b", "P40", 1)]
    assert t.level_counts() == {"gpu": 5, "switch": 2, "node": 2, "cluster": 1}


@pytest.mark.parametrize(("body", "where", "value"), [
    ("m0, 2\n", "line 2", "m0, 2"),
    ("m0, two, 12GB\n", "line 2", "two"),
    ("m0, 2, 12GB\nm1, 0, 12GB\n", "line 3", "'0'"),
    ("m0, 2, 12GB\nm1, 2, 12 TB\n", "line 3", "12 TB"),
    ("m0, 2, 12GB\nm0, 2, 12GB\n", "line 3", "m0"),
    (", 2, 12GB\n", "line 2", "machineId"),
    ("", "no machines", "header"),
])
def test_machine_list_errors(tmp_path, body, where, value):
    path = tmp_path / "bad_list"
    path.write_text(HEADER + body)
    with pytest.raises(InvalidTopology) as e:
        read_philly_machine_list(path)
    msg = str(e.value)
    assert "bad_list" in msg and where in msg and value in msg


def test_machine_list_bad_header(tmp_path):
    path = tmp_path / "bad_list"
    path.write_text("id,gpus\nm0,2\n")
    with pytest.raises(InvalidTopology) as e:
        read_philly_machine_list(path)
    assert "bad_list" in str(e.value) and "line 1" in str(e.value) and "id,gpus" in str(e.value)


def test_unknown_preset_has_did_you_mean():
    with pytest.raises(UnknownName) as e:
        load_topology("phily")
    msg = str(e.value)
    assert "'phily'" in msg and "did you mean 'philly'" in msg and "dgx-a100" in msg


def test_missing_file_and_unrecognized_file(tmp_path):
    with pytest.raises(InvalidTopology, match="nothere.yaml"):
        load_topology(tmp_path / "nothere.yaml")
    with pytest.raises(InvalidTopology, match="not found"):
        load_topology("some/dir/cluster.yaml")
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(InvalidTopology, match="notes.txt"):
        load_topology(other)
    assert issubclass(UnknownName, SimError)


def test_describe_philly_is_compact():
    text = describe(load_topology("philly"))
    lines = text.splitlines()
    assert len(lines) < 40
    assert "552 nodes" in text and "2490 GPUs" in text
    assert "321 nodes of 2 x K80" in text and "231 nodes of 8 x P40" in text
    assert "K80 642" in text and "P40 1848" in text
    assert "identical nodes" in text


def test_describe_native_with_queues_and_vcs(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text("nodes_per_rack: 2\nnodes:\n  - count: 4\n"
                    "vcs:\n  vc1: {rack: 1}\n"
                    "queues:\n  - {name: team-a, capacity: 0.7}\n"
                    "  - {name: team-b, capacity: 0.3}\n")
    text = describe(load_topology(path))
    assert "rack 2" in text and "vc1: rack 1" in text
    assert "team-a: capacity 0.7" in text and "team-b" in text
    assert "identical rack" in text


def test_describe_hived():
    t = load_topology(TOPOLOGY_SAMPLES / "hived-configs" / "design-hivedscheduler.yaml")
    text = describe(t)
    assert "VC1:" in text and "pinned VC1-YQW-CT1" in text
    assert "(DGX2-V100-NODE-8-GPU)" in text
    assert len(text.splitlines()) < 80
