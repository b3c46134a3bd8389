"""The native topology YAML reader: structure, racks, vcs, queues and every error path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTopology
from schedlab.sim.model import Level
from schedlab.topologies import QueueSpec, load_topology, read_native

EXAMPLE = """
name: example
nodes_per_rack: 2
nodes:
  - count: 3
    gpu_type: V100
    sockets: 2
    switches_per_socket: 2
    gpus_per_switch: 2
    num_cpus: 64
    mem_gb: 512
    gpu_mem_gb: 32
  - count: 2
    gpu_type: K80
    sockets: 1
    switches_per_socket: 2
    gpus_per_switch: 2
    num_cpus: 24
    mem_gb: 128
    gpu_mem_gb: 12
vcs:
  vc1: {node: 2}
  vc2: {switch: 3, gpu: 2}
queues:
  - name: team-a
    capacity: 0.6
    max_capacity: 1.0
    queues:
      - name: a1
        capacity: 0.5
      - name: a2
        capacity: 0.5
        user_limit_factor: 2
  - name: team-b
    capacity: 0.4
    max_capacity: 0.8
"""


def write(tmp_path: Path, text: str, name: str = "topo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_example_structure(tmp_path):
    t = read_native(write(tmp_path, EXAMPLE))
    assert t.name == "example"
    assert t.source.endswith("topo.yaml")
    assert len(t.nodes) == 5
    assert t.num_gpus == 3 * 8 + 2 * 4
    assert t.gpu_types == {"K80": 8, "V100": 24}
    assert [n.name for n in t.nodes] == [f"node{i}" for i in range(5)]
    assert t.level_counts() == {
        "gpu": 32, "switch": 3 * 4 + 2 * 2, "socket": 3 * 2, "node": 5, "rack": 3,
        "cluster": 1,
    }
    n0, n4 = t.nodes[0], t.nodes[4]
    assert (n0.gpu_type, n0.num_gpus, n0.num_cpus, n0.mem_gb, n0.gpu_mem_gb) == (
        "V100", 8, 64.0, 512.0, 32.0)
    assert (n4.gpu_type, n4.num_gpus, n4.num_cpus, n4.mem_gb, n4.gpu_mem_gb) == (
        "K80", 4, 24.0, 128.0, 12.0)
    # K80 nodes have 1 socket: no socket level, the switches hang off the node
    k80 = t.cells[n4.cell]
    assert {t.cells[c].level for c in k80.children} == {Level.SWITCH}


def test_racks_and_locality(tmp_path):
    t = read_native(write(tmp_path, EXAMPLE))
    racks = [c for c in t.cells if c.level == Level.RACK]
    assert [r.name for r in racks] == ["rack0", "rack1", "rack2"]
    assert [len(r.children) for r in racks] == [2, 2, 1]
    assert t.lowest_common_level([0, 1]) == Level.SWITCH
    assert t.lowest_common_level([0, 2]) == Level.SOCKET
    assert t.lowest_common_level([0, 4]) == Level.NODE
    assert t.lowest_common_level([0, 8]) == Level.RACK  # node0 and node1 share rack0
    assert t.lowest_common_level([0, 16]) == Level.CLUSTER  # node0 (rack0), node2 (rack1)
    assert t.lowest_common_level([24, 26]) == Level.NODE  # K80 node: 2 switches, no socket


def test_queues_and_vcs(tmp_path):
    t = read_native(write(tmp_path, EXAMPLE))
    assert t.queues == (
        QueueSpec("team-a", 0.6, 1.0, 1.0, (
            QueueSpec("a1", 0.5), QueueSpec("a2", 0.5, 1.0, 2.0))),
        QueueSpec("team-b", 0.4, 0.8),
    )
    assert t.vcs == {"vc1": {"node": 2}, "vc2": {"switch": 3, "gpu": 2}}


def test_defaults_and_missing_capacities(tmp_path):
    path = write(tmp_path, """
        nodes:
          - count: 2
        queues:
          - name: a
            capacity: 0.5
          - name: b
          - name: c
        """, "small.yaml")
    t = read_native(path)
    assert t.name == "small"
    assert len(t.nodes) == 2 and t.num_gpus == 16
    n = t.nodes[0]
    assert (n.gpu_type, n.num_cpus, n.mem_gb, n.gpu_mem_gb) == ("V100", 64.0, 512.0, 32.0)
    assert Level.RACK not in t.levels
    assert [q.capacity for q in t.queues] == [0.5, 0.25, 0.25]


def test_level_omission_rules(tmp_path):
    path = write(tmp_path, """
        nodes:
          - {count: 1, sockets: 1, switches_per_socket: 1, gpus_per_switch: 4}
          - {count: 1, sockets: 2, switches_per_socket: 1, gpus_per_switch: 4}
          - {count: 1, sockets: 2, switches_per_socket: 2, gpus_per_switch: 1}
          - {count: 1, gpus_per_node: 3}
        """)
    t = read_native(path)

    def child_levels(node):
        return {t.cells[c].level for c in t.cells[t.nodes[node].cell].children}

    assert child_levels(0) == {Level.GPU}
    assert child_levels(1) == {Level.SOCKET}
    assert {t.cells[g].level for s in t.cells[t.nodes[1].cell].children
            for g in t.cells[s].children} == {Level.GPU}
    assert child_levels(2) == {Level.SOCKET}  # switches of one GPU are no cells
    assert child_levels(3) == {Level.GPU}
    assert [n.num_gpus for n in t.nodes] == [4, 8, 4, 3]
    assert Level.SWITCH not in t.levels


def test_to_networkx(tmp_path):
    t = read_native(write(tmp_path, EXAMPLE))
    g = t.to_networkx()
    assert g.number_of_nodes() == len(t.cells) == 1 + 3 + 5 + 6 + 16 + 32
    assert g.number_of_edges() == len(t.cells) - 1
    assert g.nodes[t.nodes[0].cell]["gpu_type"] == "V100"


def test_load_topology_detects_native(tmp_path):
    path = write(tmp_path, EXAMPLE, "cluster.yml")
    assert load_topology(path).num_gpus == 32
    assert load_topology(str(path)).num_gpus == 32


BASE = "nodes:\n  - count: 2\n"


@pytest.mark.parametrize(("text", "key", "value"), [
    ("nodez:\n  - count: 1\n", "nodez", "nodez"),
    ("name: x\n", "nodes", "missing"),
    ("nodes: []\n", "nodes", "[]"),
    ("- count: 1\n", "top level", "count"),
    ("nodes_per_rack: -1\n" + BASE, "nodes_per_rack", "-1"),
    ("nodes_per_rack: two\n" + BASE, "nodes_per_rack", "two"),
    ("name: ''\n" + BASE, "name", "''"),
    ("nodes:\n  - count: 1\n  - count: 2\n    gpus: 8\n", "nodes[1].gpus", "gpus"),
    ("nodes:\n  - gpu_type: V100\n", "nodes[0].count", "missing"),
    ("nodes:\n  - count: 0\n", "nodes[0].count", "0"),
    ("nodes:\n  - count: four\n", "nodes[0].count", "four"),
    ("nodes:\n  - count: true\n", "nodes[0].count", "True"),
    ("nodes:\n  - count: 1.5\n", "nodes[0].count", "1.5"),
    ("nodes:\n  - count: 1\n  - count: 1\n    sockets: 0\n", "nodes[1].sockets", "0"),
    ("nodes:\n  - count: 1\n    switches_per_socket: -2\n", "nodes[0].switches_per_socket", "-2"),
    ("nodes:\n  - count: 1\n    gpus_per_switch: x\n", "nodes[0].gpus_per_switch", "x"),
    ("nodes:\n  - count: 1\n    gpu_type: 5\n", "nodes[0].gpu_type", "5"),
    ("nodes:\n  - count: 1\n    mem_gb: lots\n", "nodes[0].mem_gb", "lots"),
    ("nodes:\n  - count: 1\n    num_cpus: -4\n", "nodes[0].num_cpus", "-4"),
    ("nodes:\n  - count: 1\n    gpu_mem_gb: .nan\n", "nodes[0].gpu_mem_gb", "nan"),
    ("nodes:\n  - count: 1\n    gpus_per_node: -1\n", "nodes[0].gpus_per_node", "-1"),
    ("nodes:\n  - count: 1\n    gpus_per_node: 0\n    gpu_type: V100\n",
     "nodes[0].gpu_type", "V100"),
    ("nodes:\n  - count: 1\n    gpus_per_switch: 0\n    gpu_mem_gb: 16\n",
     "nodes[0].gpu_mem_gb", "16"),
    ("nodes:\n  - count: 1\n    gpus_per_node: 4\n    sockets: 2\n",
     "nodes[0].gpus_per_node", "4"),
    ("nodes:\n  - 3\n", "nodes[0]", "3"),
    (BASE + "queues:\n  - {name: a, capacity: 0.6}\n  - {name: b, capacity: 0.3}\n",
     "queues", "0.9"),
    (BASE + "queues:\n  - {name: a, capacity: 1.5}\n", "queues[0].capacity", "1.5"),
    (BASE + "queues:\n  - {name: a, capacity: 0}\n", "queues[0].capacity", "0"),
    (BASE + "queues:\n  - {name: a, capacity: half}\n", "queues[0].capacity", "half"),
    (BASE + "queues:\n  - {name: a, capacity: 1, max_capacity: 0.5}\n",
     "queues[0].max_capacity", "0.5"),
    (BASE + "queues:\n  - {name: a, capacity: 1, user_limit_factor: 0}\n",
     "queues[0].user_limit_factor", "0"),
    (BASE + "queues:\n  - {name: a, capacity: 1, weight: 2}\n", "queues[0].weight", "weight"),
    (BASE + "queues:\n  - {capacity: 1}\n", "queues[0].name", "missing"),
    (BASE + "queues:\n  - {name: a, capacity: 0.5}\n  - {name: a, capacity: 0.5}\n",
     "queues[1].name", "'a'"),
    (BASE + "queues:\n  - {name: a, capacity: 1.0}\n  - {name: b}\n",
     "queues[1].capacity", "missing"),
    (BASE + "queues:\n  - name: a\n    capacity: 1\n    queues:\n"
            "      - {name: a1, capacity: 0.7}\n      - {name: a2, capacity: 0.7}\n",
     "queues[0].queues", "1.4"),
    (BASE + "vcs:\n  vc1: {rackk: 1}\n", "vcs.vc1.rackk", "rackk"),
    (BASE + "vcs:\n  vc1: {rack: 1}\n", "vcs.vc1.rack", "rack"),
    (BASE + "vcs:\n  vc1: {node: 0}\n", "vcs.vc1.node", "0"),
    (BASE + "vcs:\n  vc1: {node: many}\n", "vcs.vc1.node", "many"),
    (BASE + "vcs:\n  vc1: {node: 3}\n", "vcs.vc1.node", "3"),
    (BASE + "vcs:\n  vc1: 2\n", "vcs.vc1", "2"),
    (BASE + "vcs: [vc1]\n", "vcs", "vc1"),
])
def test_errors_name_file_key_and_value(tmp_path, text, key, value):
    path = write(tmp_path, text, "bad-topo.yaml")
    with pytest.raises(InvalidTopology) as e:
        read_native(path)
    msg = str(e.value)
    assert "bad-topo.yaml" in msg
    assert key in msg
    assert value in msg
    assert "allowed" in msg


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "name: x\nnodes:\n  - count: 1\n    gpu_type: [V100\n", "broken.yaml")
    with pytest.raises(InvalidTopology) as e:
        read_native(path)
    msg = str(e.value)
    assert "broken.yaml" in msg and "line 5" in msg and "malformed YAML" in msg


def test_unreadable_file(tmp_path):
    with pytest.raises(InvalidTopology, match="missing.yaml"):
        read_native(tmp_path / "missing.yaml")


# --- CPU-only node groups (0 GPUs a node) ---

MIXED = """
name: mixed
nodes:
  - {count: 1, gpus_per_node: 2, num_cpus: 8, mem_gb: 64}
  - {count: 1, gpus_per_switch: 0, num_cpus: 16, mem_gb: 64}
  - {count: 1, gpus_per_node: 0, num_cpus: 32}
"""


def test_cpu_only_groups_have_no_gpus_type_or_gpu_memory(tmp_path):
    t = read_native(write(tmp_path, MIXED))
    assert [n.num_gpus for n in t.nodes] == [2, 0, 0]
    assert [n.gpu_type for n in t.nodes] == ["V100", "", ""]
    assert [n.gpu_mem_gb for n in t.nodes] == [32.0, 0.0, 0.0]
    assert [n.num_cpus for n in t.nodes] == [8.0, 16.0, 32.0]
    assert t.num_gpus == 2 and dict(t.gpu_types) == {"V100": 2}


def test_cpu_only_job_lands_on_the_cpu_node_and_gpu_jobs_never_do(tmp_path):
    from conftest import make_trace

    from schedlab.sim.engine import Simulation
    from schedlab.sim.model import JobSpec

    t = read_native(write(tmp_path, MIXED))
    # c (12 CPUs) best-fits node1 (16 CPUs, no GPU); g1 and g2 (1 GPU, 4 CPUs each) can
    # only go on node0's GPUs; g3 waits for a GPU although node1/node2 have CPUs free
    trace = make_trace(JobSpec("c", 0.0, 0, 100.0, num_cpus=12),
                       *(JobSpec(f"g{i}", 0.0, 1, 50.0, num_cpus=4) for i in (1, 2, 3)))
    r = Simulation(trace, t, "fifo").run()
    starts = r.events[r.events.kind == "start"].set_index("job_id")
    assert starts.loc["c", "detail"] == "node=node1"
    for g in ("g1", "g2", "g3"):
        assert starts.loc[g, "cells"].startswith("node0")
    j = r.jobs.set_index("job_id")
    assert list(j.loc[["c", "g1", "g2", "g3"], "start_time"]) == [0.0, 0.0, 0.0, 50.0]


def test_topology_show_prints_cpu_only_nodes(tmp_path):
    from schedlab.topologies import describe

    out = describe(read_native(write(tmp_path, MIXED)))
    assert "nodes: 1 node of 2 x V100, 2 CPU-only nodes (no GPU)" in out
    assert "node node1  [CPU-only: no GPU, 16 CPUs, 64 GB]" in out
    assert "node node2  [CPU-only: no GPU, 32 CPUs, 512 GB]" in out
