"""The cell tree of a GPU cluster: pure data plus queries, no allocation state.

Cells are numbered depth-first, so the GPUs under any cell form one contiguous range
of GPU indices `[gpu_lo, gpu_hi)`; the lowest common cell of a set of GPUs is then the
lowest common ancestor of its smallest and largest index.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schedlab.sim.model import Level
from schedlab.topologies.walk import CellWalk


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A machine: its GPUs (all of one type) and host resources."""

    index: int
    name: str
    gpu_type: str
    num_gpus: int
    num_cpus: float
    mem_gb: float
    gpu_mem_gb: float
    cell: int  # id of the node-level cell
    disk_gb: float = 0.0  # local disk; 0: not modelled
    interconnect: str = "infiniband"  # or "ethernet": the network to other nodes

    @property
    def ethernet(self) -> bool:
        """True when the node reaches other nodes over ethernet (not infiniband)."""
        return self.interconnect == "ethernet"


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the tree; GPUs under it are indices gpu_lo .. gpu_hi - 1."""

    id: int
    level: Level
    name: str
    parent: int  # -1 for the root
    children: tuple[int, ...]
    gpu_lo: int
    gpu_hi: int
    node: int  # node index for cells at or below node level, -1 above
    cell_type: str = ""  # HiveD cell type when read from a HiveD config

    @property
    def num_gpus(self) -> int:
        """GPUs under this cell."""
        return self.gpu_hi - self.gpu_lo


@dataclass
class CellSpec:
    """Nested description of a cell used to build a Topology (builders fill it in)."""

    level: Level
    name: str
    children: list[CellSpec] = field(default_factory=list)
    # at node level: gpu_type, num_cpus, mem_gb, gpu_mem_gb, disk_gb, interconnect
    node: dict[str, Any] | None = None
    cell_type: str = ""


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A tenant queue of the topology's `queues:` section (capacity-style policies)."""

    name: str
    capacity: float
    max_capacity: float = 1.0
    user_limit_factor: float = 1.0
    children: tuple[QueueSpec, ...] = ()
    state: str = "running"  # "stopped": new jobs to it (or to its children) are rejected


class Topology:
    """An immutable cell tree with node attributes, virtual clusters and queues.

    `walk` (`schedlab.topologies.walk.CellWalk`) answers the locality queries below on flat
    lists, compiled with the engine; callers on a hot path may call it directly.
    """

    def __init__(
        self,
        name: str,
        root: CellSpec,
        *,
        vcs: dict[str, dict[str, Any]] | None = None,
        queues: tuple[QueueSpec, ...] = (),
        hived: dict[str, Any] | None = None,
        source: str = "",
    ) -> None:
        self.name = name
        self.source = source
        self.vcs: dict[str, dict[str, Any]] = dict(vcs or {})
        self.queues = queues
        self.hived = hived  # parsed HiveD structures, kept for the hived policy
        cells: list[Cell] = []
        nodes: list[NodeSpec] = []
        gpu_cells: list[int] = []
        self._build(root, -1, cells, nodes, gpu_cells)
        self.cells: tuple[Cell, ...] = tuple(cells)
        self.nodes: tuple[NodeSpec, ...] = tuple(nodes)
        self.gpu_cells: tuple[int, ...] = tuple(gpu_cells)
        self.root = 0
        self.num_gpus = len(gpu_cells)
        self.gpu_node: tuple[int, ...] = tuple(cells[c].node for c in gpu_cells)
        self.levels: tuple[Level, ...] = tuple(sorted({c.level for c in cells}))
        self.gpu_types: dict[str, int] = dict(
            sorted(Counter(self.nodes[n].gpu_type for n in self.gpu_node).items())
        )
        self._max_gpus_at: dict[Level, int] = {}
        for c in cells:
            self._max_gpus_at[c.level] = max(self._max_gpus_at.get(c.level, 0), c.num_gpus)
        self.max_node_gpus = max((n.num_gpus for n in nodes), default=0)
        self.has_ethernet = any(n.ethernet for n in nodes)
        # the lowest-common-cell walk and best levels on flat lists (compiled)
        self.walk = CellWalk(
            self.gpu_cells, [c.gpu_hi for c in cells], [c.parent for c in cells],
            [c.level for c in cells], self._best_levels(), self.levels[-1])

    def _build(
        self,
        spec: CellSpec,
        parent: int,
        cells: list[Cell],
        nodes: list[NodeSpec],
        gpu_cells: list[int],
        node: int = -1,
    ) -> int:
        cid = len(cells)
        cells.append(None)  # type: ignore[arg-type]  # placeholder, filled below
        lo = len(gpu_cells)
        if spec.level == Level.NODE:
            node = len(nodes)
            nodes.append(None)  # type: ignore[arg-type]
        if spec.level == Level.GPU:
            gpu_cells.append(cid)
        kids = tuple(self._build(ch, cid, cells, nodes, gpu_cells, node) for ch in spec.children)
        cells[cid] = Cell(
            cid, spec.level, spec.name, parent, kids, lo, len(gpu_cells),
            node if spec.level <= Level.NODE else -1, spec.cell_type,
        )
        if spec.level == Level.NODE:
            attrs = spec.node or {}
            types = attrs.get("gpu_type", "")
            nodes[node] = NodeSpec(
                node, spec.name, str(types), len(gpu_cells) - lo,
                float(attrs.get("num_cpus", 0)), float(attrs.get("mem_gb", 0)),
                float(attrs.get("gpu_mem_gb", 0)), cid, float(attrs.get("disk_gb", 0)),
                str(attrs.get("interconnect", "infiniband")),
            )
        return cid

    # --- queries ---

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}, nodes={len(self.nodes)}, gpus={self.num_gpus}, "
            f"types={self.gpu_types})"
        )

    def lowest_common_cell(self, gpus: tuple[int, ...] | list[int]) -> int:
        """Id of the lowest cell that holds every GPU of `gpus` (non-empty)."""
        return self.walk.lowest_common_cell(gpus)

    def lowest_common_level(self, gpus: tuple[int, ...] | list[int]) -> Level:
        """Level of the lowest cell holding all of `gpus` (GPU for a single GPU)."""
        return self.walk.lowest_common_level(gpus)

    def best_level(self, num_gpus: int) -> Level:
        """The lowest level of this topology at which one cell holds `num_gpus` GPUs."""
        return self.walk.best_level(num_gpus)

    def _best_levels(self) -> list[Level]:
        """`best_level(n)` for n = 0 .. num_gpus, in one pass over the levels.

        Level by level from the lowest, each GPU count up to the level's largest cell
        that no lower level's cells reach gets that level.
        """
        best: list[Level] = []
        for lv in self.levels:
            while len(best) <= min(self._max_gpus_at.get(lv, 0), self.num_gpus):
                best.append(lv)
        while len(best) <= self.num_gpus:  # a count past every cell: the top level
            best.append(self.levels[-1])
        return best

    def ancestors(self, cell: int) -> list[int]:
        """Cell ids from `cell` (included) up to the root."""
        out = []
        while cell >= 0:
            out.append(cell)
            cell = self.cells[cell].parent
        return out

    def node_of_gpu(self, gpu: int) -> NodeSpec:
        """The node holding GPU index `gpu`."""
        return self.nodes[self.gpu_node[gpu]]

    def level_counts(self) -> dict[str, int]:
        """Number of cells per level name, bottom up."""
        counts = Counter(c.level for c in self.cells)
        return {lv.label: counts[lv] for lv in sorted(counts)}

    def to_networkx(self) -> Any:
        """The cell tree as a networkx DiGraph (parent -> child) with cell attributes."""
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        for c in self.cells:
            attrs: dict[str, Any] = {
                "level": c.level.label, "name": c.name, "num_gpus": c.num_gpus,
            }
            if c.cell_type:
                attrs["cell_type"] = c.cell_type
            if c.level == Level.NODE:
                n = self.nodes[c.node]
                attrs.update(gpu_type=n.gpu_type, num_cpus=n.num_cpus, mem_gb=n.mem_gb,
                             gpu_mem_gb=n.gpu_mem_gb, disk_gb=n.disk_gb,
                             interconnect=n.interconnect)
            g.add_node(c.id, **attrs)
            if c.parent >= 0:
                g.add_edge(c.parent, c.id)
        return g
