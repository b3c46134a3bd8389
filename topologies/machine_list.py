"""Reader of the Philly trace's `cluster_machine_list` (machineId, number of GPUs, GPU memory).

The list gives no GPU model, CPUs, host memory or racks. GPU type is assumed from GPU
memory (12 GB -> `K80`, 24 GB -> `P40`, other sizes -> `GPU-{mem}GB`); num_cpus and
mem_gb are 0 (unknown); there is no rack level. Inside a machine: 8 GPUs are 2 sockets x
2 PCIe switches x 2 GPUs, 4 GPUs are 2 switches x 2 GPUs, other counts sit directly
under the node (so a 2-GPU machine is one switch, which is no level of its own).
"""

from __future__ import annotations

import re
from pathlib import Path

from schedlab.sim.errors import InvalidTopology
from schedlab.sim.model import Level
from schedlab.topologies.native import node_cell
from schedlab.topologies.tree import CellSpec, Topology

HEADER = ("machineId", "number of GPUs", "single GPU mem")
GPU_TYPE_BY_MEM = {12.0: "K80", 24.0: "P40"}
SHAPES = {8: (2, 2, 2), 4: (1, 2, 2)}  # GPUs -> sockets, switches per socket, GPUs/switch
_MEM = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*GB$")


def is_philly_machine_list(path: str | Path) -> bool:
    """True when the file starts with the machine list header."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return False
    return tuple(p.strip() for p in first.split(",")) == HEADER


def gpu_type_for_memory(mem_gb: float) -> str:
    """The assumed GPU model of a Philly machine from its GPU memory."""
    return GPU_TYPE_BY_MEM.get(mem_gb, f"GPU-{mem_gb:g}GB")


def read_philly_machine_list(
    path: str | Path, name: str = "philly", *, source: str | None = None
) -> Topology:
    """Read a Philly `cluster_machine_list` CSV into a Topology of one node per machine."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidTopology(f"{path}: cannot read machine list: {e}") from None
    if not lines or tuple(p.strip() for p in lines[0].split(",")) != HEADER:
        got = lines[0] if lines else ""
        raise InvalidTopology(f"{path}: line 1: header {got!r}; allowed: "
                              f"{', '.join(HEADER)!r}")
    nodes: list[CellSpec] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = [p.strip() for p in line.split(",")]
        if len(fields) != len(HEADER):
            raise InvalidTopology(f"{path}: line {lineno}: {line!r} has {len(fields)} fields; "
                                  f"allowed: {len(HEADER)} ({', '.join(HEADER)})")
        machine, gpus_text, mem_text = fields

        def bad(column: str, value: str, allowed: str, lineno: int = lineno) -> InvalidTopology:
            return InvalidTopology(f"{path}: line {lineno}: {column}: got {value!r}; "
                                   f"allowed: {allowed}")

        if not machine:
            raise bad(HEADER[0], machine, "a non-empty machine id")
        if machine in seen:
            raise bad(HEADER[0], machine, f"a machine id not used before (line {seen[machine]})")
        seen[machine] = lineno
        if not gpus_text.isdigit() or int(gpus_text) < 1:
            raise bad(HEADER[1], gpus_text, "an integer >= 1")
        m = _MEM.match(mem_text)
        if m is None or float(m.group(1)) <= 0:
            raise bad(HEADER[2], mem_text, "a positive size in GB such as 12GB")
        gpus, mem = int(gpus_text), float(m.group(1))
        attrs = {"gpu_type": gpu_type_for_memory(mem), "num_cpus": 0.0, "mem_gb": 0.0,
                 "gpu_mem_gb": mem}
        nodes.append(node_cell(machine, attrs, *SHAPES.get(gpus, (1, 1, gpus))))
    if not nodes:
        raise InvalidTopology(f"{path}: no machines after the header; allowed: one line a "
                              "machine")
    return Topology(name, CellSpec(Level.CLUSTER, name, nodes), source=str(source or path))
