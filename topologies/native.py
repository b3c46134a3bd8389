"""Reader of schedlab's native topology YAML (docs/contract.md#sec-3) and helpers the readers share.

Structure inside a node: a socket or switch cell is omitted when it would hold exactly the
same GPUs as its parent (it would be an only child) or as its only child. So a node with
1 socket has no socket level, a socket with 1 switch has no switch level, and a switch of
1 GPU is no cell of its own. Nodes are named `node{i}` (i counts from 0 over all groups, in
file order), racks `rack{r}`, and cells inside a node `node{i}/socket{s}`,
`node{i}/switch{w}` and `node{i}/gpu{g}` (s, w, g count within the node).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from schedlab.sim.errors import InvalidTopology, SimError, did_you_mean
from schedlab.sim.model import Level
from schedlab.topologies.tree import CellSpec, QueueSpec, Topology

TOP_KEYS = ("name", "nodes_per_rack", "nodes", "vcs", "queues")
GROUP_KEYS = (
    "count", "gpu_type", "sockets", "switches_per_socket", "gpus_per_switch",
    "gpus_per_node", "num_cpus", "mem_gb", "gpu_mem_gb", "disk_gb", "interconnect",
)
GROUP_DEFAULTS: dict[str, Any] = {
    "gpu_type": "V100", "sockets": 2, "switches_per_socket": 2, "gpus_per_switch": 2,
    "num_cpus": 64, "mem_gb": 512, "gpu_mem_gb": 32, "disk_gb": 0,
    "interconnect": "infiniband",
}
INTERCONNECTS = ("infiniband", "ethernet")
QUEUE_KEYS = ("name", "capacity", "max_capacity", "user_limit_factor", "state", "queues")
QUEUE_STATES = ("running", "stopped")
CAPACITY_TOLERANCE = 1e-6

# --- helpers shared by the readers (native, HiveD, machine list) ---


def bad_value(file: str | Path, key: str, value: Any, allowed: str) -> InvalidTopology:
    """Error naming the file, the key path, the bad value and what is allowed."""
    return InvalidTopology(f"{file}: {key}: got {value!r}; allowed: {allowed}")


def load_yaml(path: str | Path, what: str = "topology file",
              error: type[SimError] = InvalidTopology) -> Any:
    """Parse a YAML file; unreadable or malformed files raise `error` naming it and the line.

    `what` names the kind of file in the message (a topology, a quota file, ...).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read {what}: {e}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise error(f"{path}: {where}malformed YAML in {what}: {problem}") from None


def check_keys(file: str | Path, data: dict[str, Any], allowed: Iterable[str], where: str) -> None:
    """Reject keys of `data` that are not in `allowed`, with a close match when there is one."""
    allowed = list(allowed)
    for key in data:
        if key not in allowed:
            path = f"{where}.{key}" if where else str(key)
            raise InvalidTopology(
                f"{file}: {path}: unknown key {key!r}{did_you_mean(str(key), allowed)}; "
                f"allowed: {', '.join(allowed)}"
            )


def require_mapping(file: str | Path, value: Any, key: str) -> dict[str, Any]:
    """Return `value` if it is a mapping, else raise naming the key."""
    if not isinstance(value, dict):
        raise bad_value(file, key, value, "a mapping")
    return value


def require_list(file: str | Path, value: Any, key: str, *, empty: bool = False) -> list[Any]:
    """Return `value` if it is a list (non-empty unless `empty`), else raise naming the key."""
    if not isinstance(value, list) or (not value and not empty):
        raise bad_value(file, key, value, "a list" if empty else "a non-empty list")
    return value


def require_int(file: str | Path, value: Any, key: str, minimum: int = 1) -> int:
    """Return `value` if it is an integer >= minimum (booleans are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad_value(file, key, value, f"an integer >= {minimum}")
    return value


def require_number(
    file: str | Path, value: Any, key: str, *, low: float = 0.0, low_open: bool = False,
    high: float = math.inf,
) -> float:
    """Return `value` as float if it is a finite number in [low, high] (or (low, high])."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and value <= high
    if not ok:
        lo = f"> {low:g}" if low_open else f">= {low:g}"
        rng = f"in ({low:g}, {high:g}]" if low_open else f"in [{low:g}, {high:g}]"
        raise bad_value(file, key, value, f"a number {rng if high < math.inf else lo}")
    return float(value)


def require_name(file: str | Path, value: Any, key: str) -> str:
    """Return `value` if it is a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise bad_value(file, key, value, "a non-empty string")
    return value


def require_choice(file: str | Path, value: Any, key: str, allowed: tuple[str, ...]) -> str:
    """Return `value` if it is one of `allowed` (case-insensitive), in lowercase."""
    t = value.strip().lower() if isinstance(value, str) else None
    if t not in allowed:
        raise bad_value(file, key, value, f"one of {', '.join(allowed)}"
                                          f"{did_you_mean(str(value), list(allowed))}")
    return t


def walk_specs(spec: CellSpec) -> Iterator[CellSpec]:
    """Cell specs depth-first in the order Topology numbers them (index = cell id)."""
    stack = [spec]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(reversed(s.children))


# --- node structure ---


def node_cell(
    name: str, attrs: dict[str, Any], sockets: int, switches_per_socket: int,
    gpus_per_switch: int,
) -> CellSpec:
    """A node cell with sockets/switches/GPUs, omitting levels that add no information."""
    gpus_per_socket = switches_per_socket * gpus_per_switch
    use_socket = sockets > 1 and gpus_per_socket > 1
    use_switch = switches_per_socket > 1 and gpus_per_switch > 1
    counter = {"gpu": 0, "switch": 0}

    def gpus(n: int) -> list[CellSpec]:
        out = [CellSpec(Level.GPU, f"{name}/gpu{counter['gpu'] + k}") for k in range(n)]
        counter["gpu"] += n
        return out

    def socket_children() -> list[CellSpec]:
        if not use_switch:
            return gpus(gpus_per_socket)
        out = []
        for _ in range(switches_per_socket):
            out.append(CellSpec(Level.SWITCH, f"{name}/switch{counter['switch']}",
                                gpus(gpus_per_switch)))
            counter["switch"] += 1
        return out

    if use_socket:
        children = [CellSpec(Level.SOCKET, f"{name}/socket{s}", socket_children())
                    for s in range(sockets)]
    else:
        children = [c for _ in range(sockets) for c in socket_children()]
    return CellSpec(Level.NODE, name, children, node=dict(attrs))


# --- the native format ---


def read_native(path: str | Path) -> Topology:
    """Read a native topology YAML file (docs/contract.md#sec-3) into a Topology."""
    return native_from_dict(load_yaml(path), path)


def native_from_dict(data: Any, file: str | Path, *, source: str | None = None) -> Topology:
    """Build a Topology from the parsed native YAML of `file` (used in error messages)."""
    if not isinstance(data, dict):
        raise bad_value(file, "(top level)", data, "a mapping with at least `nodes:`")
    check_keys(file, data, TOP_KEYS, "")
    name = require_name(file, data.get("name", Path(file).stem), "name")
    per_rack = require_int(file, data.get("nodes_per_rack", 0), "nodes_per_rack", minimum=0)
    if "nodes" not in data:
        raise InvalidTopology(f"{file}: nodes: missing; allowed: a non-empty list of node groups")
    groups = require_list(file, data["nodes"], "nodes")
    nodes: list[CellSpec] = []
    for g, group in enumerate(groups):
        nodes.extend(_group_nodes(file, group, f"nodes[{g}]", len(nodes)))
    if per_rack:
        top = [CellSpec(Level.RACK, f"rack{r}", nodes[i:i + per_rack])
               for r, i in enumerate(range(0, len(nodes), per_rack))]
    else:
        top = nodes
    root = CellSpec(Level.CLUSTER, name, top)
    vcs = _vcs(file, data.get("vcs"), root)
    queues = parse_queues(file, data["queues"], "queues", set()) if data.get("queues") else ()
    return Topology(name, root, vcs=vcs, queues=queues, source=str(source or file))


def _group_nodes(file: str | Path, group: Any, where: str, first: int) -> list[CellSpec]:
    group = require_mapping(file, group, where)
    check_keys(file, group, GROUP_KEYS, where)
    if "count" not in group:
        raise InvalidTopology(f"{file}: {where}.count: missing; allowed: an integer >= 1")
    count = require_int(file, group["count"], f"{where}.count")
    g = {**GROUP_DEFAULTS, **group}
    if "gpus_per_node" in group:
        shape = [k for k in ("sockets", "switches_per_socket", "gpus_per_switch") if k in group]
        if shape:
            raise bad_value(file, f"{where}.gpus_per_node", group["gpus_per_node"],
                            f"either gpus_per_node or {'/'.join(shape)}, not both")
        dims: tuple[int, ...] = (
            1, 1, require_int(file, group["gpus_per_node"], f"{where}.gpus_per_node", 0))
    else:
        dims = tuple(require_int(file, g[k], f"{where}.{k}", 0 if k == "gpus_per_switch" else 1)
                     for k in ("sockets", "switches_per_socket", "gpus_per_switch"))
    cpu_only = dims[2] == 0  # a CPU-only node group: no GPU type, no GPU memory
    for key in ("gpu_type", "gpu_mem_gb"):
        if cpu_only and key in group:
            raise bad_value(file, f"{where}.{key}", group[key],
                            "nothing: a group of 0-GPU (CPU-only) nodes has no GPUs")
    gpu_type = "" if cpu_only else require_name(file, g["gpu_type"], f"{where}.gpu_type")
    attrs: dict[str, Any] = {"gpu_type": gpu_type}
    for key in ("num_cpus", "mem_gb", "gpu_mem_gb", "disk_gb"):
        attrs[key] = 0.0 if cpu_only and key == "gpu_mem_gb" else require_number(
            file, g[key], f"{where}.{key}")
    attrs["interconnect"] = require_choice(file, g["interconnect"], f"{where}.interconnect",
                                           INTERCONNECTS)
    return [node_cell(f"node{first + i}", attrs, *dims) for i in range(count)]


def _vcs(file: str | Path, data: Any, root: CellSpec) -> dict[str, dict[str, Any]]:
    if data is None:
        return {}
    data = require_mapping(file, data, "vcs")
    counts: dict[Level, int] = {}
    for s in walk_specs(root):
        counts[s.level] = counts.get(s.level, 0) + 1
    present = ", ".join(lv.label for lv in sorted(counts))
    out: dict[str, dict[str, Any]] = {}
    for vc, quota in data.items():
        vc_name = require_name(file, vc, f"vcs.{vc}")
        quota = require_mapping(file, quota, f"vcs.{vc}")
        if not quota:
            raise bad_value(file, f"vcs.{vc}", quota, "a mapping of level name -> cell count")
        cells: dict[str, int] = {}
        for level_name, n in quota.items():
            key = f"vcs.{vc}.{level_name}"
            try:
                level = Level.parse(str(level_name))
            except ValueError:
                level = None
            if level is None or level not in counts:
                raise bad_value(file, key, level_name,
                                f"a level of this topology: {present}"
                                f"{did_you_mean(str(level_name), [lv.label for lv in counts])}")
            n = require_int(file, n, key)
            if n > counts[level]:
                raise bad_value(file, key, n, f"at most {counts[level]} (cells at level "
                                              f"{level.label} in this topology)")
            cells[level.label] = n
        out[vc_name] = cells
    return out


def parse_queues(
    file: str | Path, items: Any, where: str, seen: set[str]
) -> tuple[QueueSpec, ...]:
    """Validate a `queues:` list (hierarchical) into QueueSpecs; errors name file and key."""
    items = require_list(file, items, where)
    rows: list[dict[str, Any]] = []
    for i, q in enumerate(items):
        key = f"{where}[{i}]"
        q = require_mapping(file, q, key)
        check_keys(file, q, QUEUE_KEYS, key)
        if "name" not in q:
            raise InvalidTopology(f"{file}: {key}.name: missing; allowed: a non-empty string")
        name = require_name(file, q["name"], f"{key}.name")
        if name in seen:
            raise bad_value(file, f"{key}.name", name, "a queue name not used elsewhere")
        seen.add(name)
        row: dict[str, Any] = {"key": key, "name": name}
        if q.get("capacity") is not None:
            row["capacity"] = require_number(file, q["capacity"], f"{key}.capacity",
                                             low_open=True, high=1.0)
        row["max_capacity"] = require_number(file, q.get("max_capacity", 1.0),
                                             f"{key}.max_capacity", low_open=True, high=1.0)
        row["user_limit_factor"] = require_number(
            file, q.get("user_limit_factor", 1.0), f"{key}.user_limit_factor", low_open=True)
        row["state"] = require_choice(file, q.get("state", "running"), f"{key}.state",
                                      QUEUE_STATES)
        kids = q.get("queues")
        row["children"] = (parse_queues(file, kids, f"{key}.queues", seen)
                           if kids is not None else ())
        rows.append(row)
    _default_capacities(file, rows, where)
    out = []
    for r in rows:
        if r["max_capacity"] < r["capacity"]:
            raise bad_value(file, f"{r['key']}.max_capacity", r["max_capacity"],
                            f"a number >= capacity ({r['capacity']:g}) and <= 1")
        out.append(QueueSpec(r["name"], r["capacity"], r["max_capacity"],
                             r["user_limit_factor"], r["children"], r["state"]))
    return tuple(out)


def _default_capacities(file: str | Path, rows: list[dict[str, Any]], where: str) -> None:
    """Queues without `capacity` share what their siblings leave equally; the sum must be 1."""
    given = sum(r["capacity"] for r in rows if "capacity" in r)
    missing = [r for r in rows if "capacity" not in r]
    if missing:
        rest = 1.0 - given
        if rest <= CAPACITY_TOLERANCE:
            raise InvalidTopology(
                f"{file}: {missing[0]['key']}.capacity: missing, and sibling queues already "
                f"sum to {given:g}; allowed: capacities of sibling queues summing to 1")
        for r in missing:
            r["capacity"] = rest / len(missing)
    total = sum(r["capacity"] for r in rows)
    if abs(total - 1.0) > CAPACITY_TOLERANCE:
        parts = ", ".join(f"{r['name']}={r['capacity']:g}" for r in rows)
        raise InvalidTopology(
            f"{file}: {where}[*].capacity: sibling queue capacities sum to {total:g} ({parts}); "
            f"allowed: a sum of 1 (within {CAPACITY_TOLERANCE:g})")
