"""Alibaba PAI 2020 ("MLaaS in the Wild", NSDI'22): the machine spec as a Topology.

`pai_machine_spec` (`machine, gpu_type, cap_cpu, cap_mem, cap_gpu`, no header line, or
the shipped `.tar.gz` holding it). The job and task tables are read by
`schedlab.traces.readers.pai`.
"""

from __future__ import annotations

import os
import tarfile
import zlib
from pathlib import Path

from schedlab.sim.errors import InvalidTopology
from schedlab.topologies.node_table import NodeTable, count_field
from schedlab.topologies.tree import Topology

__all__ = ["GPU_MEM_GB", "MACHINE_COLUMNS", "is_pai_machine_spec", "read_pai_machines"]

MACHINE_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
"""Columns of pai_machine_spec (no header line in the file)."""

GPU_MEM_GB = {"V100": 16.0, "V100M32": 32.0, "P100": 16.0, "T4": 16.0}
"""GPU memory of the known PAI models (0 = unknown)."""


def is_pai_machine_spec(path: str | os.PathLike[str]) -> bool:
    """True for `pai_machine_spec*` files (by name)."""
    return "pai_machine_spec" in Path(path).name.lower()


def _read_text(p: Path) -> tuple[str, str]:
    """The spec's text and what messages call it (`archive:member` for a tarball)."""
    label = p.name
    try:
        if not p.name.endswith((".tar.gz", ".tgz", ".tar")):
            return p.read_text(encoding="utf-8"), label
        with tarfile.open(p) as tar:
            member = next((m for m in tar.getmembers() if m.isfile()
                           and m.name.endswith(".csv")), None)
            if member is None:
                raise InvalidTopology(f"{label}: no .csv file inside the archive")
            f = tar.extractfile(member)
            assert f is not None
            return f.read().decode("utf-8"), f"{label}:{member.name}"
    except (OSError, UnicodeDecodeError, EOFError, zlib.error, tarfile.TarError) as exc:
        raise InvalidTopology(f"{label}: cannot read the machine spec: {exc}") from None


def read_pai_machines(path: str | os.PathLike[str], name: str | None = None) -> Topology:
    """Read `pai_machine_spec` (CSV, or the shipped `.tar.gz` holding it) as a Topology.

    One node a machine, no rack level: `gpu_type` (a machine without GPUs has none),
    `cap_cpu` -> `num_cpus`, `cap_mem` -> `mem_gb`, `gpu_mem_gb` from `GPU_MEM_GB`;
    8-GPU machines are 2 sockets x 2 switches x 2 GPUs, others flat.

    Args:
        path: `pai_machine_spec.csv` (header line optional) or `pai_machine_spec.tar.gz`.
        name: Topology name (default: `pai`).

    Returns:
        The topology.

    Raises:
        InvalidTopology: Unreadable file or a bad row, naming file, line, field and value.
    """
    p = Path(path)
    text, label = _read_text(p)
    table = NodeTable(label, "machine", "gpu_type", "machine")
    for line, raw in enumerate(text.splitlines(), start=1):
        fields = [c.strip() for c in raw.split(",")]
        if not raw.strip() or (line == 1 and tuple(fields) == MACHINE_COLUMNS):
            continue
        if len(fields) != len(MACHINE_COLUMNS):
            raise InvalidTopology(f"{label}: line {line}: {raw!r} has {len(fields)} fields; "
                                  f"allowed: {len(MACHINE_COLUMNS)} "
                                  f"({', '.join(MACHINE_COLUMNS)})")
        machine, gtype, cpu_t, mem_t, gpu_t = fields
        table.check_id(line, machine)
        cpus = count_field(label, line, "cap_cpu", cpu_t, integer=False)
        mem = count_field(label, line, "cap_mem", mem_t, integer=False)
        gpus = int(count_field(label, line, "cap_gpu", gpu_t, integer=True))
        table.add(line, machine, gpus, gtype, num_cpus=cpus, mem_gb=mem,
                  gpu_mem_gb=GPU_MEM_GB.get(gtype, 0.0))
    return table.topology(name or "pai", str(p),
                          f"one line a machine ({', '.join(MACHINE_COLUMNS)})")
