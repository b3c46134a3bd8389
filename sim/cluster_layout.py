"""The fixed shape of a topology as the cluster state indexes it, computed once per run.

Which cells lie inside each node (depth first), the ancestors of each cell up to its
node, the chain of cells whose free counts key a cell in the tightest-cell index, every
GPU's path to the root, and per GPU type the levels of GPU-parent cells and the largest
node. None of it changes during a run, so the live state, its scratch twin and the empty
state used for feasibility checks share one layout. (It also memoises, per host request,
whether any node could ever hold it: a pure function of the topology.)
"""

from __future__ import annotations

from schedlab.sim.model import Level
from schedlab.topologies.tree import Topology


class KeyCodec:
    """Tightest-cell index keys, tuples of small non-negative ints, coded as one int each.

    Element i of a key becomes digit i (value + 1, `bits` bits each, the first element
    the most significant) of `width` digits; the digits a shorter key lacks are 0. So
    codes compare exactly as their keys do, keys of different lengths included (a key
    that is a prefix of another is the smaller, as its missing digits are 0), and a
    bisect compares one int instead of a tuple element by element.
    """

    def __init__(self, bits: int, width: int) -> None:
        self.bits = bits
        self.width = width
        self.mask = (1 << bits) - 1

    def digit(self, value: int, i: int) -> int:
        """Element i of a key, at its place in the code."""
        return (value + 1) << (self.bits * (self.width - 1 - i))

    def probe(self, n: int) -> int:
        """The code of the key (n,): the first code at least it is the first key >= (n,)."""
        return self.digit(n, 0)

    def encode(self, key: tuple[int, ...]) -> int:
        """The code of a key."""
        code = 0
        for i, v in enumerate(key):
            code += self.digit(v, i)
        return code

    def decode(self, code: int) -> tuple[int, ...]:
        """The key of a code."""
        out: list[int] = []
        bits, mask = self.bits, self.mask
        for i in range(self.width - 1, -1, -1):
            d = (code >> (bits * i)) & mask
            if not d:
                break
            out.append(d - 1)
        return tuple(out)

    def last(self, code: int) -> int:
        """The last element of a code's key (the cell id in the index)."""
        bits, mask = self.bits, self.mask
        while not code & mask:
            code >>= bits
        return (code & mask) - 1


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
        # index keys as ints (`KeyCodec`): one digit per key element, wide enough for a
        # cell id or a free count, as many digits as the longest key
        longest = max((len(ch) + 1 for ch in self.chain.values()), default=1)
        widest = max(len(cells), max((c.num_gpus for c in cells), default=0) + 1)
        self.codec = KeyCodec(widest.bit_length(), longest)
        # per indexed cell: the digit of its id, the constant part of its key's code
        self.code_tail: dict[int, int] = {
            c: self.codec.digit(c, len(ch)) for c, ch in self.chain.items()}
        self.gpu_parent_levels: dict[str, tuple[Level, ...]] = {}
        for t in topo.gpu_types:
            lv = {cells[cells[g].parent].level for g in topo.gpu_cells
                  if topo.nodes[cells[g].node].gpu_type == t}
            self.gpu_parent_levels[t] = tuple(sorted(lv))
        self.node_cell: tuple[int, ...] = tuple(n.cell for n in topo.nodes)
        # per cell: (first GPU, end) when its children are exactly its GPUs (a GPU
        # parent, where one GPU is the first free one), else (0, 0)
        self.gpu_span: list[tuple[int, int]] = [
            (c.gpu_lo, c.gpu_hi) if c.level > Level.GPU and c.gpu_hi > c.gpu_lo
            and c.gpu_hi - c.gpu_lo == len(c.children) else (0, 0) for c in cells]
        self.gpu_path: tuple[tuple[int, ...], ...] = tuple(
            tuple(topo.ancestors(c)) for c in topo.gpu_cells)
        self.gpu_type: tuple[str, ...] = tuple(topo.nodes[n].gpu_type for n in topo.gpu_node)
        self.max_node_gpus: dict[str, int] = {}
        for n in topo.nodes:
            if n.num_gpus:
                t = n.gpu_type
                self.max_node_gpus[t] = max(self.max_node_gpus.get(t, 0), n.num_gpus)
        self._topo = topo
        self._host_never: dict[tuple[float, float, float], str] = {}

    def host_capacity_shortfall(self, cpus: float, mem: float, disk: float) -> str:
        """'' when some node has the capacity for these host resources, else why none has.

        A capacity of 0 is unmodelled (never a constraint). O(nodes) once per request.
        """
        key = (cpus, mem, disk)
        why = self._host_never.get(key)
        if why is not None:
            return why

        def fits(cap: float, need: float) -> bool:
            return need <= 0 or cap <= 0 or cap >= need - 1e-9

        nodes = self._topo.nodes
        why = ""
        if not any(fits(n.num_cpus, cpus) and fits(n.mem_gb, mem) and fits(n.disk_gb, disk)
                   for n in nodes):
            ask = ", ".join(f"{v:g} {unit}" for v, unit in (
                (cpus, "CPUs"), (mem, "GB memory"), (disk, "GB disk")) if v > 0)
            most = ", ".join(f"{max((getattr(n, a) for n in nodes), default=0):g} {unit}"
                             for v, a, unit in ((cpus, "num_cpus", "CPUs"),
                                                (mem, "mem_gb", "GB memory"),
                                                (disk, "disk_gb", "GB disk")) if v > 0)
            why = (f"needs {ask} on one node; no node has all of it (the most any node "
                   f"has: {most})")
        if len(self._host_never) < 10_000:
            self._host_never[key] = why
        return why

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
