"""Node failure schedules: the `failures` CSV (node,fail_time,repair_time)."""

from __future__ import annotations

import csv
import math

from schedlab.sim.errors import InvalidParameter
from schedlab.topologies.tree import Topology


def read_failures(path: str, topo: Topology) -> list[tuple[int, float, float]]:
    """Rows of a failure CSV (node,fail_time,repair_time) as (node index, fail, repair)."""
    names = {n.name: n.index for n in topo.nodes}
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        cols = {"node", "fail_time", "repair_time"}
        if not reader.fieldnames or not cols <= set(reader.fieldnames):
            raise InvalidParameter(
                f"failures file {path}: needs columns node,fail_time,repair_time; "
                f"found {reader.fieldnames}"
            )
        for line, row in enumerate(reader, start=2):
            node_text = (row["node"] or "").strip()
            node = names.get(node_text)
            if node is None and node_text.isdigit() and int(node_text) < len(topo.nodes):
                node = int(node_text)
            if node is None:
                raise InvalidParameter(
                    f"failures file {path}, line {line}, column node: {node_text!r} is not a "
                    f"node name or index of topology {topo.name!r} ({len(topo.nodes)} nodes)"
                )
            try:
                fail, repair = float(row["fail_time"]), float(row["repair_time"])
            except (TypeError, ValueError):
                raise InvalidParameter(
                    f"failures file {path}, line {line}: fail_time {row['fail_time']!r} and "
                    f"repair_time {row['repair_time']!r} must be numbers (s)"
                ) from None
            if not (0 <= fail < repair) or math.isinf(repair):
                raise InvalidParameter(
                    f"failures file {path}, line {line}: need 0 <= fail_time < repair_time "
                    f"(finite), got {fail:g} and {repair:g}"
                )
            out.append((node, fail, repair))
    return out
