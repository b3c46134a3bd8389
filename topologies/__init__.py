"""Cluster topologies: the cell tree, its readers and presets.

Readers: native YAML, HiveD YAML, the Philly machine list, the Alibaba openb node list
and the PAI machine spec. This package does not import `schedlab.traces` (nor pandas).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from schedlab.sim.errors import InvalidTopology, UnknownName, unknown_name_message
from schedlab.sim.model import Level
from schedlab.topologies.hived import TOP_KEYS as HIVED_KEYS
from schedlab.topologies.hived import hived_from_dict, read_hived
from schedlab.topologies.machine_list import is_philly_machine_list, read_philly_machine_list
from schedlab.topologies.native import load_yaml, native_from_dict, read_native
from schedlab.topologies.openb import is_openb_node_list, read_openb_nodes
from schedlab.topologies.pai import is_pai_machine_spec, read_pai_machines
from schedlab.topologies.presets import PRESETS, load_preset, preset_names
from schedlab.topologies.slurm_conf import is_slurm_conf, read_slurm_conf_topology
from schedlab.topologies.tree import Cell, CellSpec, NodeSpec, QueueSpec, Topology

__all__ = [
    "Cell", "CellSpec", "NodeSpec", "QueueSpec", "Topology", "describe", "load_preset",
    "load_topology", "preset_names", "read_hived", "read_native", "read_openb_nodes",
    "read_pai_machines", "read_philly_machine_list", "read_topology_file",
]

YAML_SUFFIXES = (".yaml", ".yml")


def load_topology(source: str | Path) -> Topology:
    """A topology from a preset name, a native or HiveD YAML file, or a Philly machine list."""
    if isinstance(source, str) and source in PRESETS:
        return load_preset(source)
    path = Path(source)
    if path.is_file():
        return read_topology_file(path)
    text = str(source)
    if isinstance(source, Path) or "/" in text or "\\" in text or path.suffix:
        raise InvalidTopology(f"{text}: topology file not found; allowed: an existing .yaml "
                              f"file, a machine list, or a preset ({', '.join(preset_names())})")
    raise UnknownName(unknown_name_message("topology", text, preset_names())
                      + " (or give the path of a topology file)")


def read_topology_file(path: str | Path) -> Topology:
    """Read a topology file, detecting its format (HiveD by `physicalCluster` & co. keys)."""
    path = Path(path)
    if path.suffix.lower() in YAML_SUFFIXES:
        data = load_yaml(path)
        if isinstance(data, dict) and any(k in data for k in HIVED_KEYS):
            return hived_from_dict(data, path)
        return native_from_dict(data, path)
    if is_philly_machine_list(path):
        return read_philly_machine_list(path, path.stem)
    if is_openb_node_list(path):
        return read_openb_nodes(path)
    if is_pai_machine_spec(path):
        return read_pai_machines(path)
    if is_slurm_conf(path):
        return read_slurm_conf_topology(path)
    raise InvalidTopology(f"{path}: unrecognized topology file; allowed: a .yaml/.yml file "
                          "(native or HiveD), a Philly machine list (header 'machineId, "
                          "number of GPUs, single GPU mem'), an Alibaba openb node list or "
                          "a PAI machine spec table or a slurm.conf with NodeName lines")


def describe(topology: Topology) -> str:
    """Text for `schedlab topology show`: totals, levels, node kinds, VCs, queues, cell tree."""
    t = topology
    lines = [f"topology {t.name}  (source: {t.source or '-'})"]
    cpus = sum(n.num_cpus for n in t.nodes)
    mem = sum(n.mem_gb for n in t.nodes)
    lines.append(f"totals: {_plural(len(t.nodes), 'node')}, {_plural(t.num_gpus, 'GPU')}, "
                 f"{cpus:g} CPUs, "
                 f"{mem:g} GB memory")
    counts = t.level_counts()
    lines.append("levels: " + ", ".join(f"{k} {v}" for k, v in reversed(counts.items())))
    kinds = Counter((n.gpu_type, n.num_gpus) for n in t.nodes)
    lines.append("nodes: " + ", ".join(
        f"{_plural(c, 'node')} of {g} x {ty or '(none)'}" if g else
        f"{_plural(c, 'CPU-only node')} (no GPU)" for (ty, g), c in kinds.items()))
    lines.append("gpu types: " + ", ".join(f"{ty} {c}" for ty, c in t.gpu_types.items()))
    if t.vcs:
        lines.append("virtual clusters:")
        lines.extend(f"  {vc}: {_describe_vc(q)}" for vc, q in t.vcs.items())
    if t.queues:
        lines.append("queues:")
        lines.extend(_describe_queues(t.queues, "  "))
    lines.append("cells:")
    lines.extend(_describe_tree(t))
    return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _describe_vc(quota: dict) -> str:
    if "virtual_cells" in quota:  # HiveD
        parts = [f"{n} x {ty}" for ty, n in quota["virtual_cells"]]
        if quota.get("pinned_cells"):
            parts.append("pinned " + ", ".join(quota["pinned_cells"]))
        return "; ".join(parts) or "(empty)"
    return ", ".join(f"{level} {n}" for level, n in quota.items())


def _describe_queues(queues: tuple[QueueSpec, ...], indent: str) -> list[str]:
    out = []
    for q in queues:
        stopped = ", stopped" if q.state == "stopped" else ""
        out.append(f"{indent}{q.name}: capacity {q.capacity:g}, max {q.max_capacity:g}, "
                   f"user limit factor {q.user_limit_factor:g}{stopped}")
        out.extend(_describe_queues(q.children, indent + "  "))
    return out


def _describe_tree(t: Topology) -> list[str]:
    """Indented cell tree; identical siblings are shown once with their count."""
    sig: dict[int, int] = {}
    interned: dict[tuple, int] = {}
    for c in reversed(t.cells):  # children have larger ids than their parent
        node = t.nodes[c.node] if c.level == Level.NODE else None
        key = (c.level, c.cell_type, c.num_gpus,
               (node.gpu_type, node.num_cpus, node.mem_gb, node.gpu_mem_gb, node.disk_gb,
                node.interconnect) if node else None,
               tuple(sig[k] for k in c.children))
        sig[c.id] = interned.setdefault(key, len(interned))
    out: list[str] = []

    def label(c: Cell) -> str:
        kind = f" ({c.cell_type})" if c.cell_type else ""
        if c.level == Level.NODE:
            n = t.nodes[c.node]
            extra = (f", {n.disk_gb:g} GB disk" if n.disk_gb else "") + (
                ", ethernet" if n.ethernet else "")
            if not n.num_gpus:
                return (f"node {c.name}{kind}  [CPU-only: no GPU, {n.num_cpus:g} CPUs, "
                        f"{n.mem_gb:g} GB{extra}]")
            return (f"node {c.name}{kind}  [{n.num_gpus} x {n.gpu_type}, {n.num_cpus:g} CPUs, "
                    f"{n.mem_gb:g} GB, {n.gpu_mem_gb:g} GB/GPU{extra}]")
        return f"{c.level.label} {c.name}{kind}  [{c.num_gpus} GPUs]"

    def show(cid: int, indent: str) -> None:
        c = t.cells[cid]
        out.append(indent + label(c))
        groups: dict[int, list[int]] = {}
        for k in c.children:
            groups.setdefault(sig[k], []).append(k)
        for members in groups.values():
            first, last = t.cells[members[0]], t.cells[members[-1]]
            if first.level == Level.GPU:
                span = first.name if len(members) == 1 else f"{first.name} .. {last.name}"
                kind = f" ({first.cell_type})" if first.cell_type else ""
                out.append(f"{indent}  gpu x{len(members)}{kind}  {span}")
                continue
            show(first.id, indent + "  ")
            if len(members) > 1:
                rest = [t.cells[k].name for k in members[1:]]
                names = ", ".join(rest) if len(rest) <= 2 else f"{rest[0]}, ..., {rest[-1]}"
                plural = "s" if len(rest) > 1 else ""
                out.append(f"{indent}  ... x {len(rest)} identical {first.level.label}{plural}"
                           f" ({names})")

    show(t.root, "")
    return out
