"""Reader of HiveD's own scheduler config (`physicalCluster` + `virtualClusters`), read as is.

Levels: a leaf cell type (a `childCellType` that is not defined in `cellTypes`) is a GPU and
names the node's gpu_type; the `isNodeLevel` type is NODE; between node and leaf, one
intermediate type is SWITCH, two are SWITCH (lower) and SOCKET (upper), more than two (forged
hierarchies such as DGX-2 2/4/8-GPU cells) are all SWITCH except the top one, SOCKET; every
type above the node is RACK; a synthetic root named after the file holds all
`physicalCells` as CLUSTER. Children not listed are inferred as in HiveD
(`pkg/api/config.go`): default address `parent_default * childCellNumber + i`, restarting at
0 below a node. Node names are node cellAddresses (a node without one gets its full HiveD
default address, e.g. `3/0`); above-node cells are named by their full HiveD address and
cells below a node `{node}/{address below the node}`. Note that HiveD lets one machine host
cells of several leaf types (same address in two physical cells): each becomes its own node.
`kubeApiServerAddress` and the other scheduler settings are ignored; `skuTypes` (cpu and
memory per GPU) give node num_cpus and mem_gb (memory in GiB).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from schedlab.sim.errors import InvalidTopology, did_you_mean
from schedlab.sim.model import Level
from schedlab.topologies.native import (
    bad_value,
    check_keys,
    load_yaml,
    require_int,
    require_list,
    require_mapping,
    require_name,
    require_number,
    walk_specs,
)
from schedlab.topologies.tree import CellSpec, Topology

TOP_KEYS = (
    "physicalCluster", "virtualClusters", "kubeApiServerAddress", "kubeConfigFilePath",
    "webServerAddress", "forcePodBindThreshold", "waitingPodSchedulingBlockMilliSec",
    "quotaExcludeVCs",
)
PC_KEYS = ("cellTypes", "physicalCells", "skuTypes")
TYPE_KEYS = ("childCellType", "childCellNumber", "isNodeLevel")
CELL_KEYS = ("cellType", "cellAddress", "cellChildren", "pinnedCellId")
SKU_KEYS = ("gpu", "cpu", "memory")
VC_KEYS = ("virtualCells", "pinnedCells")
VCELL_KEYS = ("cellType", "cellNumber")
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?\s*$")
_UNITS = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
          "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}


def read_hived(path: str | Path) -> Topology:
    """Read a HiveD scheduler config YAML into a Topology (with `hived` and `vcs` filled)."""
    return hived_from_dict(load_yaml(path), path)


def hived_from_dict(data: Any, file: str | Path, *, source: str | None = None) -> Topology:
    """Build a Topology from the parsed HiveD config of `file` (used in error messages)."""
    data = require_mapping(file, data, "(top level)")
    check_keys(file, data, TOP_KEYS, "")
    if "physicalCluster" not in data:
        raise InvalidTopology(f"{file}: physicalCluster: missing; allowed: a mapping with "
                              "cellTypes and physicalCells")
    pc = require_mapping(file, data["physicalCluster"], "physicalCluster")
    check_keys(file, pc, PC_KEYS, "physicalCluster")
    skus = _sku_types(file, pc.get("skuTypes"))
    types = _cell_types(file, pc.get("cellTypes"), skus)
    raw_cells = require_list(file, pc.get("physicalCells"), "physicalCluster.physicalCells")
    name = Path(file).stem
    builder = _Builder(file, types, skus)
    tops = [builder.top_cell(raw, i) for i, raw in enumerate(raw_cells)]
    root = CellSpec(Level.CLUSTER, name, tops)
    ids = {id(s): i for i, s in enumerate(walk_specs(root))}
    pinned = {pid: ids[id(spec)] for pid, spec in builder.pinned.items()}
    top_types = {raw["cellType"] for raw in raw_cells}
    vcs = _virtual_clusters(file, data.get("virtualClusters"), types, top_types, pinned)
    hived = {
        "cell_types": types,
        "physical_cells": raw_cells,
        "virtual_clusters": vcs,
        "pinned": pinned,
    }
    return Topology(name, root, vcs={vc: dict(v) for vc, v in vcs.items()}, hived=hived,
                    source=str(source or file))


def memory_gb(text: Any) -> float:
    """GiB in a Kubernetes quantity such as `8192Mi` (a bare number is bytes)."""
    m = _QUANTITY.match(str(text)) if not isinstance(text, bool) else None
    if m is None:
        raise ValueError(text)
    return float(m.group(1)) * _UNITS[m.group(2)] / 2**30


def _sku_types(file: str | Path, data: Any) -> dict[str, dict[str, float]]:
    """Per-GPU cpu and memory (GiB) of each leaf type from `skuTypes`."""
    if data is None:
        return {}
    data = require_mapping(file, data, "physicalCluster.skuTypes")
    out = {}
    for leaf, sku in data.items():
        key = f"physicalCluster.skuTypes.{leaf}"
        sku = require_mapping(file, sku, key)
        check_keys(file, sku, SKU_KEYS, key)
        gpus = require_int(file, sku.get("gpu", 1), f"{key}.gpu")
        cpu = require_number(file, sku.get("cpu", 0), f"{key}.cpu")
        try:
            mem = memory_gb(sku.get("memory", 0))
        except ValueError:
            raise bad_value(file, f"{key}.memory", sku.get("memory"),
                            "a memory quantity such as 8192Mi, 16Gi or 8G") from None
        out[str(leaf)] = {"cpu": cpu / gpus, "mem_gb": mem / gpus}
    return out


def _cell_types(
    file: str | Path, data: Any, skus: dict[str, dict[str, float]]
) -> dict[str, dict[str, Any]]:
    """Parse `cellTypes`, add the leaf types, and reject cycles and unknown leaves."""
    data = require_mapping(file, data, "physicalCluster.cellTypes")
    types: dict[str, dict[str, Any]] = {}
    for name, spec in data.items():
        key = f"physicalCluster.cellTypes.{name}"
        spec = require_mapping(file, spec, key)
        check_keys(file, spec, TYPE_KEYS, key)
        child = require_name(file, spec.get("childCellType"), f"{key}.childCellType")
        number = require_int(file, spec.get("childCellNumber"), f"{key}.childCellNumber")
        node = spec.get("isNodeLevel", False)
        if not isinstance(node, bool):
            raise bad_value(file, f"{key}.isNodeLevel", node, "true or false")
        types[str(name)] = {"child": child, "number": number, "is_node_level": node}
    leaves = sorted({t["child"] for t in types.values()} - set(types))
    for leaf in leaves:
        if skus and leaf not in skus:
            parent = next(n for n, t in types.items() if t["child"] == leaf)
            known = sorted(set(types) | set(skus))
            raise InvalidTopology(
                f"{file}: physicalCluster.cellTypes.{parent}.childCellType: unknown cell type "
                f"{leaf!r}{did_you_mean(leaf, known)}; allowed: a type of cellTypes or a leaf "
                f"type of skuTypes ({', '.join(sorted(skus))})")
    for name in types:
        seen = [name]
        t = types[name]["child"]
        while t in types:
            if t in seen:
                cycle = " -> ".join([*seen[seen.index(t):], t])
                raise InvalidTopology(
                    f"{file}: physicalCluster.cellTypes.{seen[-1]}.childCellType: {t!r} closes "
                    f"the cycle {cycle}; allowed: cell types forming a forest that ends at "
                    "leaf types")
            seen.append(t)
            t = types[t]["child"]
    for leaf in leaves:
        types[leaf] = {"child": None, "number": 0, "is_node_level": False}
    return types


def _chain(types: dict[str, dict[str, Any]], name: str) -> list[str]:
    """The type chain from `name` down to its leaf type (inclusive)."""
    out = [name]
    while types[out[-1]]["child"] is not None:
        out.append(types[out[-1]]["child"])
    return out


def _below_node_levels(n: int) -> list[Level]:
    """Levels of the `n` intermediate types between node and leaf, bottom up."""
    if n == 0:
        return []
    if n == 1:
        return [Level.SWITCH]
    return [Level.SWITCH] * (n - 1) + [Level.SOCKET]


class _Builder:
    """Turns physical cell specs into CellSpecs, inferring omitted children and addresses."""

    def __init__(self, file: str | Path, types: dict[str, dict[str, Any]],
                 skus: dict[str, dict[str, float]]) -> None:
        self.file = file
        self.types = types
        self.skus = skus
        self.pinned: dict[str, CellSpec] = {}
        self.pinned_key: dict[str, str] = {}

    def top_cell(self, raw: Any, index: int) -> CellSpec:
        key = f"physicalCluster.physicalCells[{index}]"
        raw = require_mapping(self.file, raw, key)
        ctype = raw.get("cellType")
        if ctype not in self.types or self.types[ctype]["child"] is None:
            defined = [t for t, v in self.types.items() if v["child"] is not None]
            raise bad_value(self.file, f"{key}.cellType", ctype,
                            f"a type defined in cellTypes{did_you_mean(str(ctype), defined)}")
        chain = _chain(self.types, ctype)
        nodes = [t for t in chain if self.types[t]["is_node_level"]]
        if len(nodes) != 1:
            problem = "has no isNodeLevel type" if not nodes else "has several node levels"
            raise InvalidTopology(
                f"{self.file}: {key}.cellType: {ctype!r}: its chain {' -> '.join(chain)} "
                f"{problem}; allowed: exactly one type with isNodeLevel: true on the chain")
        return self._cell(raw, ctype, key, index, "", None, [])

    def _cell(self, raw: Any, ctype: str, key: str, default: int, prefix: str,
              node: str | None, below: list[str]) -> CellSpec:
        """Build one cell; `node` is the enclosing node's name, `below` the path under it."""
        raw = {} if raw is None else require_mapping(self.file, raw, key)
        check_keys(self.file, raw, CELL_KEYS, key)
        if raw.get("cellType") not in (None, ctype):
            raise bad_value(self.file, f"{key}.cellType", raw["cellType"],
                            f"{ctype!r} (the childCellType of the parent), or omitted")
        addr = raw.get("cellAddress")
        if addr is not None and (isinstance(addr, bool | dict | list) or str(addr) == ""):
            raise bad_value(self.file, f"{key}.cellAddress", addr, "a string or number")
        own = str(default) if addr is None else str(addr)
        full = prefix + own
        spec_type = self.types[ctype]
        if spec_type["child"] is None:
            level, name = Level.GPU, f"{node}/{'/'.join([*below, own])}"
        elif spec_type["is_node_level"]:
            level, name = Level.NODE, (full if addr is None else own)
        elif node is None:
            level, name = Level.RACK, full
        else:  # inside a node; the real level is set by _levels_below_node
            level, name = Level.SWITCH, f"{node}/{'/'.join([*below, own])}"
        spec = CellSpec(level, name, cell_type=ctype)
        self._pin(raw, key, spec)
        if spec_type["child"] is not None:
            sub_node, sub_below = node, below
            if level == Level.NODE:
                sub_node, sub_below, default = name, [], 0
            elif node is not None:
                sub_below = [*below, own]
            spec.children = self._children(raw, spec_type, key, default, full + "/",
                                           sub_node, sub_below)
        if level == Level.NODE:
            self._levels_below_node(spec)
            spec.node = self._node_attrs(spec, ctype)
        return spec

    def _children(self, raw: dict[str, Any], t: dict[str, Any], key: str, default: int,
                  prefix: str, node: str | None, below: list[str]) -> list[CellSpec]:
        listed = raw.get("cellChildren")
        listed = [] if listed is None else require_list(self.file, listed,
                                                        f"{key}.cellChildren", empty=True)
        if len(listed) > t["number"]:
            raise InvalidTopology(
                f"{self.file}: {key}.cellChildren: {len(listed)} children listed; allowed: at "
                f"most childCellNumber = {t['number']} children of type {t['child']!r}")
        taken = {str(c["cellAddress"]) for c in listed
                 if isinstance(c, dict) and c.get("cellAddress") is not None}
        out = []
        for i in range(t["number"]):
            child = listed[i] if i < len(listed) else None
            d = default * t["number"] + i
            if i >= len(listed):  # not listed: inferred, at a free default address
                while str(d) in taken:
                    d += 1
                taken.add(str(d))
            out.append(self._cell(child, t["child"], f"{key}.cellChildren[{i}]", d, prefix,
                                  node, below))
        return out

    def _levels_below_node(self, node: CellSpec) -> None:
        """Relabel the intermediate cells under a node by depth (contract.md#sec-3 level rules)."""
        depth = len(_chain(self.types, node.cell_type)) - 2
        levels = _below_node_levels(depth)  # bottom up; index 0 is just above the GPUs

        def relabel(spec: CellSpec, d: int) -> None:
            for ch in spec.children:
                if ch.level != Level.GPU:
                    ch.level = levels[depth - d]
                    relabel(ch, d + 1)

        relabel(node, 1)

    def _node_attrs(self, node: CellSpec, ctype: str) -> dict[str, Any]:
        leaf = _chain(self.types, ctype)[-1]
        gpus = sum(1 for s in walk_specs(node) if s.level == Level.GPU)
        sku = self.skus.get(leaf, {"cpu": 0.0, "mem_gb": 0.0})
        return {"gpu_type": leaf, "num_cpus": sku["cpu"] * gpus,
                "mem_gb": sku["mem_gb"] * gpus, "gpu_mem_gb": 0.0}

    def _pin(self, raw: dict[str, Any], key: str, spec: CellSpec) -> None:
        pid = raw.get("pinnedCellId")
        if pid is None:
            return
        pid = require_name(self.file, pid, f"{key}.pinnedCellId")
        if pid in self.pinned:
            raise bad_value(self.file, f"{key}.pinnedCellId", pid,
                            f"an id not already used (also at {self.pinned_key[pid]})")
        self.pinned[pid] = spec
        self.pinned_key[pid] = key


def _virtual_clusters(
    file: str | Path, data: Any, types: dict[str, dict[str, Any]], top_types: set[str],
    pinned: dict[str, int],
) -> dict[str, dict[str, Any]]:
    """Parse `virtualClusters`: virtual cells as (dotted type, count), pinned cell ids."""
    if data is None:
        return {}
    data = require_mapping(file, data, "virtualClusters")
    out: dict[str, dict[str, Any]] = {}
    used: dict[str, str] = {}
    for vc, spec in data.items():
        key = f"virtualClusters.{vc}"
        spec = {} if spec is None else require_mapping(file, spec, key)
        check_keys(file, spec, VC_KEYS, key)
        cells = []
        vlist = spec.get("virtualCells")
        for i, cell in enumerate([] if vlist is None else require_list(
                file, vlist, f"{key}.virtualCells", empty=True)):
            ckey = f"{key}.virtualCells[{i}]"
            cell = require_mapping(file, cell, ckey)
            check_keys(file, cell, VCELL_KEYS, ckey)
            dotted = require_name(file, cell.get("cellType"), f"{ckey}.cellType")
            _check_dotted(file, dotted, f"{ckey}.cellType", types, top_types)
            # HiveD accepts 0 (no cells of that type; its own tests use it)
            cells.append((dotted, require_int(file, cell.get("cellNumber"),
                                              f"{ckey}.cellNumber", minimum=0)))
        pins = []
        plist = spec.get("pinnedCells")
        for i, pin in enumerate([] if plist is None else require_list(
                file, plist, f"{key}.pinnedCells", empty=True)):
            pkey = f"{key}.pinnedCells[{i}]"
            pin = require_mapping(file, pin, pkey)
            check_keys(file, pin, ("pinnedCellId",), pkey)
            pid = pin.get("pinnedCellId")
            if pid not in pinned:
                raise bad_value(file, f"{pkey}.pinnedCellId", pid,
                                "a pinnedCellId defined in physicalCells"
                                f"{did_you_mean(str(pid), pinned)} "
                                f"(defined: {', '.join(sorted(pinned)) or 'none'})")
            if pid in used:
                raise bad_value(file, f"{pkey}.pinnedCellId", pid,
                                f"a pinned cell referenced once (also at {used[pid]})")
            used[pid] = pkey
            pins.append(pid)
        out[str(vc)] = {"virtual_cells": cells, "pinned_cells": pins}
    return out


def _check_dotted(file: str | Path, dotted: str, key: str, types: dict[str, dict[str, Any]],
                  top_types: set[str]) -> None:
    """A virtual cell type: a physicalCells top type, then each next part its child type."""
    parts = dotted.split(".")
    if parts[0] not in top_types:
        raise bad_value(file, key, dotted, "a dotted path starting with a cellType used in "
                        f"physicalCells ({', '.join(sorted(top_types))})"
                        f"{did_you_mean(parts[0], top_types)}")
    for parent, part in zip(parts, parts[1:], strict=False):
        child = types[parent]["child"]
        if part != child:
            raise bad_value(file, key, dotted, f"{parent!r} followed by its childCellType "
                            f"{child!r}, not {part!r}")
