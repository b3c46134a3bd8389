"""Topologies of the Alibaba trace bundles: the PAI 2020 machine spec and openb node lists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import shared_or_sample

from schedlab.sim.errors import InvalidTopology
from schedlab.sim.model import Level
from schedlab.topologies import load_topology, read_openb_nodes, read_pai_machines
from schedlab.traces import DATA_DIR

SAMPLES = DATA_DIR / "samples"
ROOT = Path(__file__).resolve().parents[2]


def test_pai_machine_spec_topology() -> None:
    topo = read_pai_machines(SAMPLES / "pai_machine_spec_sample.csv")
    assert topo.num_gpus == 2 + 8 + 2 + 8 + 8
    assert topo.gpu_types == {"MISC": 8, "P100": 2, "T4": 2, "V100": 8, "V100M32": 8}
    assert [(n.gpu_type, n.num_gpus, n.num_cpus, n.mem_gb) for n in topo.nodes][:2] == [
        ("", 0, 96.0, 512.0), ("T4", 2, 96.0, 512.0)]
    big = next(n for n in topo.nodes if n.num_gpus == 8)
    assert topo.cells[big.cell].level == Level.NODE
    assert {topo.cells[c].level for c in topo.cells[big.cell].children} == {Level.SOCKET}


def test_pai_machine_spec_archive() -> None:
    """The spec as shipped, inside a .tar.gz (the shared archive, else a bundled one)."""
    path, full = shared_or_sample("traces/alibaba-gpu-v2020/pai_machine_spec.tar.gz",
                                  "pai_machine_spec_sample.tar.gz")
    topo = read_pai_machines(path)
    if full:
        assert len(topo.nodes) == 1897 and topo.num_gpus == 6742
    else:  # the same rows as pai_machine_spec_sample.csv, archived
        assert len(topo.nodes) == 6 and topo.num_gpus == 2 + 8 + 2 + 8 + 8
        plain = read_pai_machines(SAMPLES / "pai_machine_spec_sample.csv")
        assert [(n.name, n.gpu_type, n.num_gpus) for n in topo.nodes] == [
            (n.name, n.gpu_type, n.num_gpus) for n in plain.nodes]


@pytest.mark.parametrize(("line", "fragment"), [
    ("m1,T4,96,512", "line 1: 'm1,T4,96,512' has 4 fields"),
    ("m1,T4,96,512,x", "line 1: cap_gpu: got 'x'; allowed: an integer >= 0"),
    ("m1,,96,512,2", "line 1: gpu_type: got ''"),
    ("m1,T4,96,512,2\nm1,T4,96,512,2",
     "line 2: machine: got 'm1'; allowed: a machine id not used before (line 1)"),
])
def test_pai_machine_spec_errors(tmp_path: Path, line: str, fragment: str) -> None:
    p = tmp_path / "spec.csv"
    p.write_text(line + "\n")
    with pytest.raises(InvalidTopology) as e:
        read_pai_machines(p)
    assert f"spec.csv: {fragment}" in str(e.value)


# --------------------------------------------------------------------------- openb


def test_openb_node_list_topology() -> None:
    topo = read_openb_nodes(SAMPLES / "openb_node_list_sample.csv")
    assert len(topo.nodes) == 8 and topo.num_gpus == 8 + 4 + 2 + 4 + 8 + 1
    assert topo.gpu_types == {"A10": 1, "G2": 8, "P100": 2, "T4": 4, "V100M16": 4,
                              "V100M32": 8}
    v = next(n for n in topo.nodes if n.gpu_type == "V100M32")
    assert (v.num_cpus, v.mem_gb, v.gpu_mem_gb) == (96.0, 768.0, 32.0)


def test_openb_node_list_real() -> None:
    path, full = shared_or_sample("traces/alibaba-gpu-v2023/openb_node_list_all_node.csv",
                                  "openb_node_list_sample.csv")
    topo = read_openb_nodes(path)
    if full:
        assert len(topo.nodes) == 1523 and topo.num_gpus == 6212
    else:
        assert len(topo.nodes) == 8 and topo.num_gpus == 27


def test_openb_node_list_errors(tmp_path: Path) -> None:
    p = tmp_path / "nodes.csv"
    p.write_text("sn,cpu,memory_mib,gpu,model\n")
    with pytest.raises(InvalidTopology, match="line 1: header"):
        read_openb_nodes(p)
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,2,\n")
    with pytest.raises(InvalidTopology, match="nodes.csv: line 2: model: got ''"):
        read_openb_nodes(p)
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,2.5,T4\n")
    with pytest.raises(InvalidTopology, match="line 2: gpu: got '2.5'; allowed: an integer"):
        read_openb_nodes(p)


def test_openb_node_list_skips_blank_lines_and_names_a_short_line(tmp_path: Path) -> None:
    p = tmp_path / "nodes.csv"
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\n\nn1,1000,1024,2,T4\n\n")
    assert read_openb_nodes(p).num_gpus == 2
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,2,T4\nn2,1000\n")
    with pytest.raises(InvalidTopology, match="nodes.csv: line 3: .*allowed: 5 fields"):
        read_openb_nodes(p)
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\n")
    with pytest.raises(InvalidTopology, match="nodes.csv: no nodes"):
        read_openb_nodes(p)


@pytest.mark.parametrize("name", ["openb_node_list_sample.csv", "pai_machine_spec_sample.csv"])
def test_load_topology_detects_the_alibaba_tables(name: str) -> None:
    topo = load_topology(SAMPLES / name)
    assert topo.num_gpus > 0 and topo.nodes


def _runtime_imports(path: Path) -> set[str]:
    """Top-level packages a module imports outside `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize(("package", "forbidden"), [("topologies", "traces"),
                                                    ("traces", "topologies")])
def test_topologies_and_traces_do_not_import_each_other(package: str, forbidden: str) -> None:
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / package).rglob("*.py"))
                 if forbidden in _runtime_imports(p)]
    assert not offenders, f"{offenders} import {forbidden} outside TYPE_CHECKING"
