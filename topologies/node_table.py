"""Shared pieces of the node-table topology readers (Alibaba openb node list, PAI spec).

A node table is one node a line: an id, CPUs, memory, a GPU count and a GPU model.
Errors name the file, the line, the field, the value and what is allowed.
"""

from __future__ import annotations

from schedlab.sim.errors import InvalidTopology
from schedlab.sim.model import Level
from schedlab.topologies.native import node_cell
from schedlab.topologies.tree import CellSpec, Topology

SHAPES = {8: (2, 2, 2), 4: (1, 2, 2)}
"""GPUs -> (sockets, switches per socket, GPUs per switch); other counts sit flat."""


def bad_field(label: str, line: int, field: str, value: str, allowed: str) -> InvalidTopology:
    """'FILE: line L: FIELD: got 'V'; allowed: A'."""
    return InvalidTopology(f"{label}: line {line}: {field}: got {value!r}; allowed: {allowed}")


def count_field(label: str, line: int, field: str, text: str, *, integer: bool) -> float:
    """A finite number >= 0 (an integer when `integer`), or InvalidTopology."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not (0 <= v < float("inf")) or (integer and v != int(v)):
        raise bad_field(label, line, field, text, "an integer >= 0" if integer else
                        "a number >= 0")
    return v


class NodeTable:
    """Collects the nodes of a table, checking ids are unique and GPU nodes have a model."""

    def __init__(self, label: str, id_field: str, type_field: str, what: str) -> None:
        self.label = label
        self.id_field = id_field
        self.type_field = type_field
        self.what = what
        self.nodes: list[CellSpec] = []
        self.seen: dict[str, int] = {}

    def check_id(self, line: int, ident: str) -> None:
        """A node id must be non-empty and not used on an earlier line."""
        if not ident:
            raise bad_field(self.label, line, self.id_field, ident, f"a non-empty {self.what} id")
        if ident in self.seen:
            raise bad_field(self.label, line, self.id_field, ident,
                            f"a {self.what} id not used before (line {self.seen[ident]})")
        self.seen[ident] = line

    def add(self, line: int, ident: str, gpus: int, gpu_type: str, *, num_cpus: float,
            mem_gb: float, gpu_mem_gb: float) -> None:
        """One node (its id checked already); a node without GPUs has no GPU type."""
        if gpus and not gpu_type:
            raise bad_field(self.label, line, self.type_field, gpu_type,
                            f"a GPU {'model' if self.type_field == 'model' else 'type'} for a "
                            f"{self.what} with GPUs")
        attrs = {"gpu_type": gpu_type if gpus else "", "num_cpus": num_cpus, "mem_gb": mem_gb,
                 "gpu_mem_gb": gpu_mem_gb}
        self.nodes.append(node_cell(ident, attrs, *SHAPES.get(gpus, (1, 1, gpus))))

    def topology(self, name: str, source: str, empty: str) -> Topology:
        """The nodes under one cluster cell (no rack level); `empty` says what was expected."""
        if not self.nodes:
            raise InvalidTopology(f"{self.label}: no {self.what}s; allowed: {empty}")
        return Topology(name, CellSpec(Level.CLUSTER, name, self.nodes), source=source)
