"""Alibaba GPU cluster trace v2023 ("openb", FGD, USENIX ATC'23): the node list as a Topology.

Node list (`sn, cpu_milli, memory_mib, gpu, model`): one node a row. The pod list (the
jobs) is read by `schedlab.traces.readers.openb`.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from schedlab.sim.errors import InvalidTopology
from schedlab.topologies.node_table import NodeTable, bad_field, count_field
from schedlab.topologies.tree import Topology

__all__ = ["GPU_MEM_GB", "NODE_COLUMNS", "is_openb_node_list", "read_openb_nodes"]

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
"""Columns of openb_node_list_*.csv."""

GPU_MEM_GB = {"V100M16": 16.0, "V100M32": 32.0, "P100": 16.0, "T4": 16.0, "A10": 24.0}
"""GPU memory of the disclosed models (G1-G3 are undisclosed: 0 = unknown)."""


def is_openb_node_list(path: str | os.PathLike[str]) -> bool:
    """True when the file's header is the openb node list's."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return False
    return tuple(c.strip() for c in first.split(",")) == NODE_COLUMNS


def read_openb_nodes(path: str | os.PathLike[str], name: str | None = None) -> Topology:
    """Read an openb node list as a Topology: one node a row, no rack level.

    GPU type = `model` (a node without GPUs has none); `num_cpus = cpu_milli / 1000`,
    `mem_gb = memory_mib / 1024`; `gpu_mem_gb` from `GPU_MEM_GB` (0 when undisclosed);
    8-GPU nodes are 2 sockets x 2 switches x 2 GPUs, 4-GPU nodes 2 switches x 2 GPUs,
    others flat (the trace does not give the intra-node layout). Blank lines are skipped.

    Args:
        path: `openb_node_list_*.csv`.
        name: Topology name (default: the file name without suffixes).

    Returns:
        The topology.

    Raises:
        InvalidTopology: Wrong header or a bad row, naming file, line, field and value.
    """
    p = Path(path)
    label = p.name
    try:
        rows = list(csv.reader(io.StringIO(p.read_text(encoding="utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InvalidTopology(f"{label}: cannot be read as CSV: {exc}") from None
    header = tuple(c.strip() for c in rows[0]) if rows else ()
    if header != NODE_COLUMNS:
        raise InvalidTopology(f"{label}: line 1: header {', '.join(header)!r}; "
                              f"allowed: {', '.join(NODE_COLUMNS)!r}")
    table = NodeTable(label, "sn", "model", "node")
    for line, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(NODE_COLUMNS):
            raise bad_field(label, line, "(line)", ",".join(row),
                            f"{len(NODE_COLUMNS)} fields ({', '.join(NODE_COLUMNS)})")
        sn, cpu, mem, gpu, model = (c.strip() for c in row)
        table.check_id(line, sn)
        cpus = count_field(label, line, "cpu_milli", cpu, integer=False)
        mem_mib = count_field(label, line, "memory_mib", mem, integer=False)
        gpus = int(count_field(label, line, "gpu", gpu, integer=True))
        table.add(line, sn, gpus, model, num_cpus=cpus / 1000.0, mem_gb=mem_mib / 1024.0,
                  gpu_mem_gb=GPU_MEM_GB.get(model, 0.0) if gpus else 0.0)
    return table.topology(name or _stem(p), str(p), "one line a node after the header")


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or path.name
