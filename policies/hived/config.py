"""From a Topology to HiveD's cell chains, physical cells and virtual-cluster assignments.

Chains: every top-level physical cell is the root of a chain named after its cell type
(HiveD's `physicalCells[*].cellType`). HiveD configs carry their cell types; a native
topology gets derived ones: a leaf is named after its GPU type and any other cell
`{gpu_type}-{level}-{gpus}` (e.g. `V100-node-8`, `V100-switch-2`), with a `~2`, `~3`...
suffix when two different shapes would share a name. The top cells of a native topology
are the root's children, or their children when a cell mixes shapes (a rack of unlike
nodes), so that every chain is homogeneous as buddy allocation requires.

Virtual clusters, in order of precedence: the `vcs` parameter file, the HiveD config's
`virtualClusters`, the native `vcs:` section, else one VC `default` that owns every top
cell. A native `{vc: {level: count}}` entry is spread over the chains that have that
level, in topology order, each chain taking what it still has room for (aggregate
counting); what no chain has room for lands on the first chain so the safety check names it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schedlab.policies.hived.cells import PCell, VCell
from schedlab.sim.errors import InvalidParameter, InvalidTopology, SimError, did_you_mean
from schedlab.sim.model import Level
from schedlab.topologies.tree import Topology

DEFAULT_VC = "default"


@dataclass(frozen=True, slots=True)
class ChainInfo:
    """The shape of one cell chain: per HiveD level, its cell type and sizes."""

    name: str
    leaf_type: str
    top_level: int
    node_level: int  # HiveD level of the node cells (0 when the chain tops out below)
    types: dict[int, str]  # level -> cell type name
    leaves: dict[int, int]  # level -> leaves per cell
    children: dict[int, int]  # level -> children per cell (0 for leaves)
    topo_levels: dict[int, Level]  # level -> topology level of its cells
    tops: int  # number of top-level cells

    def level_of_type(self, cell_type: str) -> int:
        """The HiveD level of a cell type of this chain (0 when it is not on the chain)."""
        for lv, t in self.types.items():
            if t == cell_type:
                return lv
        return 0

    def pods(self, task_gpus: int, tasks: int) -> list[int]:
        """Leaf counts of the pods of a gang: tasks larger than a node split per node."""
        node = self.leaves.get(self.node_level, self.leaves[self.top_level])
        if task_gpus <= node:
            return [task_gpus] * tasks
        per_task = [node] * (task_gpus // node)
        if task_gpus % node:
            per_task.append(task_gpus % node)
        return per_task * tasks


@dataclass(frozen=True, slots=True)
class VcCells:
    """One virtual cluster: preassigned cells (chain, level, count) and pinned cells."""

    name: str
    cells: tuple[tuple[str, int, int], ...]
    pinned: tuple[tuple[str, int], ...] = ()  # (pinned cell id, topology cell id)


@dataclass
class PhysicalCluster:
    """Every physical cell, indexed; chains and their cells per level."""

    cells: dict[int, PCell]  # topology cell id -> cell
    chains: dict[str, ChainInfo]  # in topology order
    tops: dict[str, list[PCell]]  # chain -> top-level cells
    full: dict[str, dict[int, list[PCell]]]  # chain -> level -> cells
    leaf_of_gpu: list[PCell]
    node_cells: dict[int, PCell]  # topology node index -> node-level cell


# --- cell types and chains ---


def cell_types(topo: Topology) -> tuple[dict[int, str], list[int]]:
    """Cell type per topology cell id (root excluded) and the ids of the top cells."""
    if topo.hived is not None:
        types = {c.id: c.cell_type for c in topo.cells if c.id != topo.root}
        return types, list(topo.cells[topo.root].children)
    return _native_types(topo)


def _native_types(topo: Topology) -> tuple[dict[int, str], list[int]]:
    cells = topo.cells
    sig: dict[int, tuple] = {}
    for c in reversed(cells):  # children have larger ids than their parent
        if c.id == topo.root:
            continue
        if c.level == Level.GPU:
            sig[c.id] = ("gpu", topo.nodes[c.node].gpu_type)
        else:
            sig[c.id] = (c.level, tuple(sig[k] for k in c.children))
    homogeneous: dict[int, bool] = {}
    for c in reversed(cells):
        if c.id == topo.root:
            continue
        kids = c.children
        homogeneous[c.id] = all(homogeneous[k] for k in kids) and len(
            {sig[k] for k in kids}) <= 1
    tops: list[int] = []
    stack = list(reversed(cells[topo.root].children))
    while stack:
        cid = stack.pop()
        if homogeneous[cid]:
            tops.append(cid)
        else:
            stack.extend(reversed(cells[cid].children))
    names: dict[tuple, str] = {}
    taken: set[str] = set()
    types: dict[int, str] = {}
    for top in tops:
        for cid in _subtree(topo, top):
            s = sig[cid]
            name = names.get(s)
            if name is None:
                c = cells[cid]
                gpu_type = topo.nodes[c.node].gpu_type if c.node >= 0 else topo.nodes[
                    topo.gpu_node[c.gpu_lo]].gpu_type
                base = gpu_type if c.level == Level.GPU else (
                    f"{gpu_type}-{c.level.label}-{c.num_gpus}")
                name, k = base, 1
                while name in taken:
                    k += 1
                    name = f"{base}~{k}"
                names[s] = name
                taken.add(name)
            types[cid] = name
    return types, tops


def _subtree(topo: Topology, cid: int) -> list[int]:
    out = []
    stack = [cid]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(reversed(topo.cells[c].children))
    return out


def build_physical(topo: Topology) -> PhysicalCluster:
    """Physical cells of every chain, with HiveD levels, in topology order."""
    types, tops = cell_types(topo)
    cells: dict[int, PCell] = {}
    chains: dict[str, ChainInfo] = {}
    chain_tops: dict[str, list[PCell]] = {}
    full: dict[str, dict[int, list[PCell]]] = {}
    leaf_of_gpu: list[PCell | None] = [None] * topo.num_gpus
    node_cells: dict[int, PCell] = {}
    shapes: dict[str, tuple] = {}
    for top in tops:
        chain = types[top]
        if topo.cells[top].num_gpus == 0:
            continue
        levels = _levels(topo, top)
        root = _build(topo, top, chain, levels, types, cells, leaf_of_gpu, node_cells)
        shape = _shape(topo, top, levels)
        if chain not in chains:
            chains[chain] = _chain_info(topo, top, chain, levels, types)
            shapes[chain] = shape
        elif shape != shapes[chain]:
            raise InvalidTopology(f"{topo.name}: top cell {topo.cells[top].name!r} of type "
                                  f"{chain!r} differs in shape from the other cells of that "
                                  "type; allowed: identical cells per type (HiveD chains)")
        chain_tops.setdefault(chain, []).append(root)
        by_level = full.setdefault(chain, {})
        for c in _walk(root):
            by_level.setdefault(c.level, []).append(c)
    chains = {k: _with_tops(v, len(chain_tops[k])) for k, v in chains.items()}
    leaves = [p for p in leaf_of_gpu if p is not None]
    if len(leaves) != len(leaf_of_gpu):
        raise SimError(f"{topo.name}: some GPUs belong to no chain")
    return PhysicalCluster(cells, chains, chain_tops, full, leaves, node_cells)


def _shape(topo: Topology, cid: int, levels: dict[int, int]) -> tuple:
    c = topo.cells[cid]
    return (levels[cid], tuple(_shape(topo, k, levels) for k in c.children))


def _levels(topo: Topology, top: int) -> dict[int, int]:
    """HiveD level (leaf = 1) of every cell under `top`."""
    out: dict[int, int] = {}
    for cid in reversed(_subtree(topo, top)):
        kids = topo.cells[cid].children
        out[cid] = 1 if not kids else 1 + out[kids[0]]
    return out


def _build(topo: Topology, cid: int, chain: str, levels: dict[int, int],
           types: dict[int, str], cells: dict[int, PCell], leaf_of_gpu: list,
           node_cells: dict[int, PCell]) -> PCell:
    c = topo.cells[cid]
    is_leaf = not c.children
    p = PCell(chain, levels[cid], c.num_gpus, cid, c.name, cid,
              c.node if c.level <= Level.NODE else -1, c.gpu_lo if is_leaf else -1,
              c.level > Level.NODE)
    cells[cid] = p
    if c.level == Level.NODE:
        node_cells[c.node] = p
    if is_leaf:
        leaf_of_gpu[c.gpu_lo] = p
    for k in c.children:
        child = _build(topo, k, chain, levels, types, cells, leaf_of_gpu, node_cells)
        child.parent = p
        p.children.append(child)
    return p


def _walk(cell: PCell) -> list[PCell]:
    out = []
    stack = [cell]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(reversed(c.children))
    return out


def _chain_info(topo: Topology, top: int, chain: str, levels: dict[int, int],
                types: dict[int, str]) -> ChainInfo:
    tnames: dict[int, str] = {}
    leaves: dict[int, int] = {}
    kids: dict[int, int] = {}
    tlevels: dict[int, Level] = {}
    node_level = 0
    cid = top
    while True:
        c = topo.cells[cid]
        lv = levels[cid]
        tnames[lv] = types[cid]
        leaves[lv] = c.num_gpus
        kids[lv] = len(c.children)
        tlevels[lv] = c.level
        if c.level == Level.NODE:
            node_level = lv
        if not c.children:
            break
        cid = c.children[0]
    leaf_type = topo.nodes[topo.gpu_node[topo.cells[top].gpu_lo]].gpu_type
    return ChainInfo(chain, leaf_type, levels[top], node_level, tnames, leaves, kids, tlevels, 0)


def _with_tops(info: ChainInfo, tops: int) -> ChainInfo:
    return ChainInfo(info.name, info.leaf_type, info.top_level, info.node_level, info.types,
                     info.leaves, info.children, info.topo_levels, tops)


# --- virtual clusters ---


def resolve_vcs(topo: Topology, pc: PhysicalCluster, vcs_data: Any = None,
                vcs_source: str = "") -> tuple[dict[str, VcCells], bool]:
    """The VCs of the run and whether they were given (False: the `default` VC)."""
    if vcs_data is not None:
        data = vcs_data
        if isinstance(data, Mapping) and set(data) <= {"virtualClusters", "vcs"} and data:
            data = next(iter(data.values()))
        if not isinstance(data, Mapping) or not data:
            raise InvalidParameter(f"{vcs_source}: got {type(data).__name__}; allowed: a "
                                   "mapping of VC name -> {level: count} or -> "
                                   "{virtualCells: [...], pinnedCells: [...]}")
        out: dict[str, VcCells] = {}
        room = _Room(pc)
        for vc, spec in data.items():
            where = f"{vcs_source}: {vc}"
            if isinstance(spec, Mapping) and set(spec) & {"virtualCells", "pinnedCells"}:
                out[str(vc)] = _hived_form(str(vc), spec, pc, topo, where, InvalidParameter)
            else:
                out[str(vc)] = _level_form(str(vc), spec, pc, room, where, InvalidParameter)
        return out, True
    if topo.hived is not None and topo.hived.get("virtual_clusters"):
        out = {}
        for vc, spec in topo.hived["virtual_clusters"].items():
            cells = [{"cellType": t, "cellNumber": n} for t, n in spec["virtual_cells"]]
            pins = [{"pinnedCellId": p} for p in spec["pinned_cells"]]
            out[vc] = _hived_form(vc, {"virtualCells": cells, "pinnedCells": pins}, pc, topo,
                                  f"{topo.source or topo.name}: virtualClusters.{vc}",
                                  InvalidTopology)
        return out, True
    if topo.vcs and topo.hived is None:
        room = _Room(pc)
        out = {vc: _level_form(vc, spec, pc, room, f"{topo.source or topo.name}: vcs.{vc}",
                               InvalidTopology) for vc, spec in topo.vcs.items()}
        return out, True
    chain_cells = tuple((name, info.top_level, info.tops) for name, info in pc.chains.items())
    return {DEFAULT_VC: VcCells(DEFAULT_VC, chain_cells)}, False


def _hived_form(vc: str, spec: Mapping[str, Any], pc: PhysicalCluster, topo: Topology,
                where: str, err: type[SimError]) -> VcCells:
    cells = []
    for i, item in enumerate(spec.get("virtualCells") or []):
        key = f"{where}.virtualCells[{i}]"
        if not isinstance(item, Mapping) or "cellType" not in item:
            raise err(f"{key}: got {item!r}; allowed: a mapping with cellType and cellNumber")
        dotted = str(item["cellType"])
        number = item.get("cellNumber", 1)
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise err(f"{key}.cellNumber: got {number!r}; allowed: an integer >= 0")
        parts = dotted.split(".")
        info = pc.chains.get(parts[0])
        if info is None:
            raise err(f"{key}.cellType: got {dotted!r}; allowed: a dotted path starting with "
                      f"a chain ({', '.join(pc.chains)}){did_you_mean(parts[0], pc.chains)}")
        for depth, part in enumerate(parts):
            want = info.types.get(info.top_level - depth)
            if part != want:
                raise err(f"{key}.cellType: got {dotted!r}; allowed: each part the child "
                          f"type of the previous one ({part!r} should be {want!r})")
        if number:
            cells.append((info.name, info.top_level - len(parts) + 1, number))
    pins = []
    pinned = (topo.hived or {}).get("pinned", {})
    for i, item in enumerate(spec.get("pinnedCells") or []):
        pid = item.get("pinnedCellId") if isinstance(item, Mapping) else None
        if pid not in pinned:
            raise err(f"{where}.pinnedCells[{i}].pinnedCellId: got {pid!r}; allowed: a "
                      f"pinnedCellId of the physical cells ({', '.join(sorted(pinned)) or 'none'})")
        pins.append((str(pid), pinned[pid]))
    return VcCells(vc, tuple(cells), tuple(pins))


class _Room:
    """Cells per chain and level not yet promised to a VC (fractional, aggregate count)."""

    def __init__(self, pc: PhysicalCluster) -> None:
        self.pc = pc
        self.left = {name: {lv: float(info.tops * info.leaves[info.top_level] / n)
                            for lv, n in info.leaves.items()}
                     for name, info in pc.chains.items()}

    def levels_for(self, level: Level) -> list[tuple[str, int]]:
        """(chain, HiveD level) pairs whose cells are at topology level `level`."""
        out = []
        for name, info in self.pc.chains.items():
            match = [lv for lv, t in info.topo_levels.items() if t == level]
            if match:
                out.append((name, max(match)))
        return out

    def capacity(self, chain: str, level: int) -> int:
        return max(0, math.floor(self.left[chain][level] + 1e-9))

    def take(self, chain: str, level: int, n: int) -> None:
        info = self.pc.chains[chain]
        for lv, leaves in info.leaves.items():
            self.left[chain][lv] -= n * info.leaves[level] / leaves


def _level_form(vc: str, spec: Any, pc: PhysicalCluster, room: _Room, where: str,
                err: type[SimError]) -> VcCells:
    if not isinstance(spec, Mapping) or not spec:
        raise err(f"{where}: got {spec!r}; allowed: a mapping of level name -> cell count")
    cells = []
    for level_name, n in spec.items():
        try:
            level = Level.parse(str(level_name))
        except ValueError:
            raise err(f"{where}.{level_name}: unknown level; allowed: "
                      f"{', '.join(lv.label for lv in Level)}") from None
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise err(f"{where}.{level_name}: got {n!r}; allowed: an integer >= 0")
        options = room.levels_for(level)
        if not options:
            raise err(f"{where}.{level_name}: no cell chain has {level.label} cells")
        left = n
        for chain, lv in options:
            k = min(left, room.capacity(chain, lv))
            if k:
                cells.append((chain, lv, k))
                room.take(chain, lv, k)
                left -= k
        if left:
            chain, lv = options[0]
            cells.append((chain, lv, left))
            room.take(chain, lv, left)
    return VcCells(vc, tuple(cells))


def virtual_tree(vc: str, info: ChainInfo, level: int, name: str, counter: list[int],
                 pinned_id: str = "") -> VCell:
    """A virtual cell of `level` in chain `info` with its full subtree (HiveD's layout)."""
    counter[0] += 1
    cell = VCell(info.name, level, info.leaves[level], counter[0], name, vc, pinned_id)
    for i in range(info.children[level]):
        child = virtual_tree(vc, info, level - 1, f"{name}/{i}", counter, pinned_id)
        child.parent = cell
        cell.children.append(child)
    return cell


def set_preassigned(root: VCell) -> None:
    """Point every cell of a virtual tree at its root (the preassigned cell)."""
    stack = [root]
    while stack:
        c = stack.pop()
        c.preassigned = root
        stack.extend(c.children)
