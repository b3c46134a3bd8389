"""Cluster state: the only mutable allocation state of a run.

GPU capacity is counted in milli-GPUs (1000 = one whole GPU) so fractional jobs
(`gpu_share`) can share a GPU without float drift. Every change updates the cached
counts of the touched cells and their ancestors, and the indexes placers query:

* `level_index[(gpu_type, level)]`: sorted keys of cells with at least one whole free
  GPU, key = (free of the cell, free of each ancestor up to its node, cell id), so the
  first key >= (n,) is the tightest cell that fits n GPUs, ties broken by the fullest
  switch, socket, node;
* `node_buckets[gpu_type][k]`: sorted node indices with exactly k whole free GPUs;
* `partial[gpu_type]`: sorted (free milli, gpu) of GPUs that are shared but not full.

Aggregates for metrics (busy milli-GPUs, free GPUs inside fully free nodes, the FGD sum)
are updated from the nodes that changed, never recomputed over the whole cluster.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator

from sim.errors import InvalidDecision
from sim.model import Level
from topologies.tree import Topology

MILLI = 1000


class ClusterState:
    """Free/used GPU capacity, host resources and health of one topology."""

    def __init__(
        self, topo: Topology, fgd: Callable[[int, int, tuple[int, ...]], float] | None = None
    ) -> None:
        self.topo = topo
        cells = topo.cells
        self.gpu_free: list[int] = [MILLI] * topo.num_gpus
        self.gpu_holders: list[dict[int, int]] = [{} for _ in range(topo.num_gpus)]
        self.cell_free: list[int] = [c.num_gpus for c in cells]
        self.node_cpu_free: list[float] = [n.num_cpus for n in topo.nodes]
        self.node_mem_free: list[float] = [n.mem_gb for n in topo.nodes]
        self.node_up: list[bool] = [True] * len(topo.nodes)
        # cells inside each node, in depth-first order (the node cell first)
        self._node_cells: list[tuple[int, ...]] = []
        self._anc_in_node: dict[int, tuple[int, ...]] = {}
        for n in topo.nodes:
            inside = [n.cell]
            stack = list(reversed(cells[n.cell].children))
            while stack:
                c = stack.pop()
                inside.append(c)
                stack.extend(reversed(cells[c].children))
            self._node_cells.append(tuple(inside))
            for c in inside:
                anc = []
                p = cells[c].parent
                while c != n.cell and p >= 0:
                    anc.append(p)
                    if p == n.cell:
                        break
                    p = cells[p].parent
                self._anc_in_node[c] = tuple(anc)
        # cells indexed per node: those above GPU level holding GPUs. A GPU is never indexed:
        # the tightest single GPU is a free GPU of the tightest GPU-parent cell.
        self._indexed: list[tuple[int, ...]] = [
            tuple(c for c in inside if cells[c].level > Level.GPU and cells[c].num_gpus)
            for inside in self._node_cells
        ]
        self._chain: dict[int, tuple[int, ...]] = {
            c: (c, *self._anc_in_node[c]) for inside in self._indexed for c in inside
        }
        self._level_of: list[Level] = [c.level for c in cells]
        self.gpu_parent_levels: dict[str, tuple[Level, ...]] = {}
        for t in topo.gpu_types:
            lv = {cells[cells[g].parent].level for g in topo.gpu_cells
                  if topo.nodes[cells[g].node].gpu_type == t}
            self.gpu_parent_levels[t] = tuple(sorted(lv))
        self._node_partial: list[int] = [0] * len(topo.nodes)
        self._above_node: dict[int, tuple[int, ...]] = {
            n.index: tuple(topo.ancestors(n.cell)[1:]) for n in topo.nodes
        }
        self.level_index: dict[tuple[str, Level], list[tuple[int, ...]]] = {}
        self._key: dict[int, tuple[int, ...]] = {}
        max_gpn = max((n.num_gpus for n in topo.nodes), default=0)
        self.node_buckets: dict[str, list[list[int]]] = {
            t: [[] for _ in range(max_gpn + 1)] for t in topo.gpu_types
        }
        self.partial: dict[str, list[tuple[int, int]]] = {t: [] for t in topo.gpu_types}
        self.max_node_gpus: dict[str, int] = {}
        for n in topo.nodes:
            if n.num_gpus:
                t = n.gpu_type
                self.max_node_gpus[t] = max(self.max_node_gpus.get(t, 0), n.num_gpus)
        for n in topo.nodes:
            if n.num_gpus:
                self.node_buckets[n.gpu_type][n.num_gpus].append(n.index)
            for c in self._indexed[n.index]:
                self._refresh_key(c, n.gpu_type)
        # aggregates
        self.total_gpus = topo.num_gpus
        self.healthy_gpus = topo.num_gpus
        self.free_whole = topo.num_gpus  # whole free GPUs on healthy nodes
        self.free_by_type: dict[str, int] = dict(topo.gpu_types)
        self._gpu_type: tuple[str, ...] = tuple(topo.nodes[n].gpu_type for n in topo.gpu_node)
        self.busy_milli = 0
        self.free_in_free_nodes = sum(n.num_gpus for n in topo.nodes)
        self._fgd = fgd
        self._node_fgd: list[float] = [0.0] * len(topo.nodes)
        self.fgd_sum = 0.0
        if fgd is not None:
            for n in topo.nodes:
                self._node_fgd[n.index] = fgd(n.num_gpus, n.num_gpus, ())
            self.fgd_sum = sum(self._node_fgd)

    # --- index maintenance ---

    def _refresh_key(self, c: int, gpu_type: str) -> None:
        old = self._key.get(c)
        cf = self.cell_free
        new = (*map(cf.__getitem__, self._chain[c]), c) if cf[c] > 0 else None
        if old == new:
            return
        lst = self.level_index.setdefault((gpu_type, self._level_of[c]), [])
        if old is not None:
            del lst[bisect_left(lst, old)]
        if new is None:
            self._key.pop(c, None)
        else:
            insort(lst, new)
            self._key[c] = new

    def _node_changed(self, node: int, old_free: int) -> None:
        topo = self.topo
        spec = topo.nodes[node]
        new_free = self.cell_free[spec.cell]
        if new_free != old_free:
            bucket = self.node_buckets[spec.gpu_type]
            old_b = bucket[old_free]
            del old_b[bisect_left(old_b, node)]
            insort(bucket[new_free], node)
            if old_free == spec.num_gpus:
                self.free_in_free_nodes -= spec.num_gpus
            if new_free == spec.num_gpus:
                self.free_in_free_nodes += spec.num_gpus
        gpu_type = spec.gpu_type
        for c in self._indexed[node]:
            self._refresh_key(c, gpu_type)
        if self._fgd is not None:
            partial: tuple[int, ...] = ()
            if self._node_partial[node]:
                cell = topo.cells[spec.cell]
                gf = self.gpu_free
                partial = tuple(gf[g] for g in range(cell.gpu_lo, cell.gpu_hi)
                                if 0 < gf[g] < MILLI)
            v = self._fgd(spec.num_gpus, new_free, partial) if self.node_up[node] else 0.0
            self.fgd_sum += v - self._node_fgd[node]
            self._node_fgd[node] = v

    def _set_partial(self, g: int, old: int, new: int) -> None:
        node = self.topo.gpu_node[g]
        lst = self.partial[self.topo.nodes[node].gpu_type]
        if 0 < old < MILLI:
            del lst[bisect_left(lst, (old, g))]
            self._node_partial[node] -= 1
        if 0 < new < MILLI:
            insort(lst, (new, g))
            self._node_partial[node] += 1

    # --- allocation ---

    def allocate(self, job: int, gpus: Iterable[int], milli: int, cpus: float = 0.0,
                 mem: float = 0.0) -> None:
        """Take `milli` of each GPU in `gpus` for `job`, all or nothing."""
        gpus = tuple(gpus)
        if len(set(gpus)) != len(gpus):
            raise InvalidDecision(f"job index {job}: a GPU is listed twice in {gpus}")
        for g in gpus:
            if not 0 <= g < self.total_gpus:
                raise InvalidDecision(f"GPU {g} does not exist (0..{self.total_gpus - 1})")
            if self.gpu_free[g] < milli:
                raise InvalidDecision(
                    f"GPU {g} ({self.topo.cells[self.topo.gpu_cells[g]].name}) has "
                    f"{self.gpu_free[g] / MILLI:g} free, job needs {milli / MILLI:g}"
                )
            if not self.node_up[self.topo.gpu_node[g]]:
                raise InvalidDecision(f"GPU {g} is on a failed node")
        self._apply(job, gpus, -milli, cpus, mem)

    def release(self, job: int, gpus: Iterable[int], milli: int, cpus: float = 0.0,
                mem: float = 0.0) -> None:
        """Give back what `allocate` took for `job`."""
        self._apply(job, tuple(gpus), milli, -cpus, -mem)

    def _apply(self, job: int, gpus: tuple[int, ...], delta: int, cpus: float,
               mem: float) -> None:
        topo = self.topo
        cells = topo.cells
        gnode = topo.gpu_node
        touched: dict[int, int] = {}
        per_node: dict[int, int] = {}
        for g in gpus:
            n = gnode[g]
            if n not in touched:
                touched[n] = self.cell_free[topo.nodes[n].cell]
            per_node[n] = per_node.get(n, 0) + 1
            old = self.gpu_free[g]
            new = old + delta
            self.gpu_free[g] = new
            holders = self.gpu_holders[g]
            if delta < 0:
                holders[job] = holders.get(job, 0) - delta
            else:
                left = holders.get(job, 0) - delta
                if left < 0:
                    raise InvalidDecision(f"job index {job} releases GPU {g} it does not hold")
                if left:
                    holders[job] = left
                else:
                    holders.pop(job, None)
            self.busy_milli -= delta
            if (old == MILLI) != (new == MILLI):
                step = 1 if new == MILLI else -1
                self.free_whole += step
                self.free_by_type[self._gpu_type[g]] += step
                c = topo.gpu_cells[g]
                while c >= 0:
                    self.cell_free[c] += step
                    c = cells[c].parent
            if (0 < old < MILLI) or (0 < new < MILLI):
                self._set_partial(g, old, new)
        if gpus and (cpus or mem):
            share = 1.0 / len(gpus)
            for n, k in per_node.items():
                self.node_cpu_free[n] -= cpus * share * k
                self.node_mem_free[n] -= mem * share * k
        for n, old_free in touched.items():
            self._node_changed(n, old_free)

    # --- queries used by placers and metrics ---

    def best_cell(self, gpu_type: str, level: Level, n: int) -> tuple[int, ...] | None:
        """Key of the tightest cell at `level` of `gpu_type` with >= n whole free GPUs."""
        lst = self.level_index.get((gpu_type, level))
        if not lst:
            return None
        i = bisect_left(lst, (n,))
        return lst[i] if i < len(lst) else None

    def cells_fitting(self, gpu_type: str, level: Level, n: int) -> Iterator[tuple[int, ...]]:
        """Keys of cells at `level` with >= n whole free GPUs, tightest first."""
        lst = self.level_index.get((gpu_type, level))
        if not lst:
            return
        for i in range(bisect_left(lst, (n,)), len(lst)):
            yield lst[i]

    def free_gpus_in(self, cell: int) -> list[int]:
        """Whole free GPU indices under `cell`, in index order (bounded by the cell size)."""
        c = self.topo.cells[cell]
        gf = self.gpu_free
        return [g for g in range(c.gpu_lo, c.gpu_hi) if gf[g] == MILLI]

    def node_fits_host(self, node: int, cpus: float, mem: float) -> bool:
        """True when `node` has `cpus` and `mem` free (a zero capacity means unmodelled)."""
        spec = self.topo.nodes[node]
        if cpus > 0 and spec.num_cpus > 0 and self.node_cpu_free[node] < cpus - 1e-9:
            return False
        return not (mem > 0 and spec.mem_gb > 0 and self.node_mem_free[node] < mem - 1e-9)

    @property
    def fragmentation(self) -> float:
        """1 - (free GPUs inside fully free nodes) / (free GPUs); 0 when none is free."""
        if self.free_whole <= 0:
            return 0.0
        return 1.0 - self.free_in_free_nodes / self.free_whole

    @property
    def fragmentation_fgd(self) -> float:
        """Expected fraction of free GPU capacity unusable by a typical job (FGD)."""
        free = self.healthy_gpus * MILLI - self.busy_milli
        if self._fgd is None or free <= 0:
            return 0.0
        return min(1.0, max(0.0, self.fgd_sum * MILLI / free))
