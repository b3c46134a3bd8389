"""The fixed shape of a topology as the cluster state indexes it, computed once per run.

Which cells lie inside each node (depth first), the ancestors of each cell up to its
node, the chain of cells whose free counts key a cell in the tightest-cell index, every
GPU's path to the root, and per GPU type the levels of GPU-parent cells and the largest
node. None of it changes during a run, so the live state, its scratch twin and the empty
state used for feasibility checks share one layout.
"""

from __future__ import annotations

from sim.model import Level
from topologies.tree import Topology


class ClusterLayout:
    """Per-topology lookup tables of `ClusterState` (read-only after construction)."""

    def __init__(self, topo: Topology) -> None:
        cells = topo.cells
        node_cells: list[tuple[int, ...]] = []
        anc_in_node: dict[int, tuple[int, ...]] = {}
        for n in topo.nodes:
            inside = [n.cell]
            stack = list(reversed(cells[n.cell].children))
            while stack:
                c = stack.pop()
                inside.append(c)
                stack.extend(reversed(cells[c].children))
            node_cells.append(tuple(inside))
            for c in inside:
                anc_in_node[c] = self._ancestors_in_node(topo, c, n.cell)
        # cells indexed per node: those above GPU level holding GPUs. A GPU is never
        # indexed: the tightest single GPU is a free GPU of the tightest GPU-parent cell.
        self.indexed: tuple[tuple[int, ...], ...] = tuple(
            tuple(c for c in inside if cells[c].level > Level.GPU and cells[c].num_gpus)
            for inside in node_cells)
        self.chain: dict[int, tuple[int, ...]] = {
            c: (c, *anc_in_node[c]) for inside in self.indexed for c in inside}
        self.gpu_parent_levels: dict[str, tuple[Level, ...]] = {}
        for t in topo.gpu_types:
            lv = {cells[cells[g].parent].level for g in topo.gpu_cells
                  if topo.nodes[cells[g].node].gpu_type == t}
            self.gpu_parent_levels[t] = tuple(sorted(lv))
        self.node_cell: tuple[int, ...] = tuple(n.cell for n in topo.nodes)
        self.gpu_path: tuple[tuple[int, ...], ...] = tuple(
            tuple(topo.ancestors(c)) for c in topo.gpu_cells)
        self.gpu_type: tuple[str, ...] = tuple(topo.nodes[n].gpu_type for n in topo.gpu_node)
        self.max_node_gpus: dict[str, int] = {}
        for n in topo.nodes:
            if n.num_gpus:
                t = n.gpu_type
                self.max_node_gpus[t] = max(self.max_node_gpus.get(t, 0), n.num_gpus)

    @staticmethod
    def _ancestors_in_node(topo: Topology, cell: int, node_cell: int) -> tuple[int, ...]:
        """Ancestors of `cell` up to and including its node cell (none for the node)."""
        cells = topo.cells
        out = []
        c, p = cell, cells[cell].parent
        while c != node_cell and p >= 0:
            out.append(p)
            if p == node_cell:
                break
            p = cells[p].parent
        return tuple(out)
