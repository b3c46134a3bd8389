"""Cluster state: the only mutable allocation state of a run.

GPU capacity is counted in milli-GPUs (1000 = one whole GPU) so fractional jobs
(`gpu_share`) can share a GPU without float drift. Every change updates the cached
counts of the touched cells and their ancestors, and the indexes placers query:

* `level_index[(gpu_type, level)]`: sorted keys of cells with at least one whole free
  GPU, key = (free of the cell, free of each ancestor up to its node, cell id), so the
  first key >= (n,) is the tightest cell that fits n GPUs, ties broken by the fullest
  switch, socket, node. The lists hold each key coded as one int that compares as the
  key does (`index_codes`, `schedlab.sim.cluster_layout.KeyCodec`): a bisect then compares ints,
  not tuples element by element. It is re-keyed lazily, list by list: a change marks its
  node in each list holding cells of it (only when the node's whole free GPUs moved:
  otherwise no key of it changed) and a list re-keys its marked nodes when it is next
  read (`index_codes`), so a node allocated and released several times between two
  placements (finishes, what-ifs on the twin) is re-keyed once, and a list no placement
  reads (the sockets' and nodes' of 8-GPU machines under single-GPU jobs) waits;
* `node_buckets[gpu_type][k]`: sorted node indices with exactly k whole free GPUs;
* `partial[gpu_type]`: sorted (free milli, gpu) of GPUs that are shared but not full.

Host resources (CPUs, memory, local disk) are free amounts per node; a node capacity of 0
means the resource is not modelled there (never a constraint). A job with GPUs holds its
host resources on its GPUs' nodes, split in proportion to its GPUs on each; a CPU-only job
holds them on one node (`allocate_host`). CPU-only placement reads `host_nodes`: nodes up,
by free CPUs, from a sorted index built on the first such question and then refreshed
only for the nodes whose host resources or health changed since (so runs without CPU-only
jobs never pay for it).

A drained node (`drain_node`) looks full: whatever of it is free, GPUs (milli) and host
resources, is held by the drain (holder `_DRAIN`), and whatever its jobs give back is
taken by the drain at once, so no placement can land on it while its jobs run on; the
drained share counts neither busy nor free; `undrain_node` gives it all back.

Aggregates for metrics (busy milli-GPUs, free GPUs inside fully free nodes, the FGD sum)
are updated from the nodes that changed, never recomputed over the whole cluster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from mypy_extensions import mypyc_attr

from schedlab.sim.cfuncs import bisect_left, insort
from schedlab.sim.cluster_layout import ClusterLayout
from schedlab.sim.errors import InvalidDecision
from schedlab.sim.model import MILLI, Level, job_milli
from schedlab.topologies.tree import Topology

__all__ = ["MILLI", "ClusterState", "job_milli"]


_DOWN: Final = -2  # holder id of the GPUs of a failed node
_DRAIN: Final = -3  # holder id of the free share of a drained node
_DRAIN_OPS: Final = frozenset({"_take_drain", "_give_drain"})
# no host share held (CPUs, memory, disk); not Final: compiled in its own extension,
# a Final tuple of the same name and value as the engine's was read back unset
_NO_HOST = (0.0, 0.0, 0.0)
# an indexed cell, the cells whose free counts key it (itself, then its ancestors up to
# its node) and the digit of its id in its key's code (`ClusterLayout.code_tail`)
_Entry = tuple[int, tuple[int, ...], int]
_LOG_LIMIT: Final = 20_000  # live changes kept for the scratch twin before it is dropped instead


def _cancelled(log: list[tuple[str, tuple[Any, ...]]]) -> set[int] | None:
    """Positions of logged GPU changes the twin need not make (None: none).

    Each allocation the same job released again (same GPUs, same share) later in the
    log, and that release: such a pair leaves every count, holder and index as it found
    it (integer milli-GPUs; the holders of a GPU keep their order), so skipping it gives
    the twin the state a full replay would. Pairs with host resources are replayed
    (float sums need not come back exactly). Between two what-ifs about half the changes
    are such pairs: jobs that started and ended in between.
    """
    open_: dict[tuple[Any, ...], int] = {}
    skip: set[int] | None = None
    for i, (name, args) in enumerate(log):
        if name in _DRAIN_OPS:  # a drain took what was free then: no pair spans it
            open_.clear()
        elif name == "allocate":
            if not (args[3] or args[4] or args[5]):
                open_[args[:3]] = i
        elif name == "release" and not (args[3] or args[4] or args[5]):
            j = open_.pop(args[:3], -1)
            if j >= 0:
                if skip is None:
                    skip = set()
                skip.add(j)
                skip.add(i)
    return skip


@mypyc_attr(allow_interpreted_subclasses=True)
class ClusterState:
    """Free/used GPU capacity, host resources and health of one topology."""

    def __init__(
        self, topo: Topology, fgd: Callable[[int, int, tuple[int, ...]], float] | None = None,
        layout: ClusterLayout | None = None,
    ) -> None:
        self.topo = topo
        self.layout = lay = layout or ClusterLayout(topo)
        cells = topo.cells
        self.gpu_free: list[int] = [MILLI] * topo.num_gpus
        self.gpu_holders: list[dict[int, int]] = [{} for _ in range(topo.num_gpus)]
        self.cell_free: list[int] = [c.num_gpus for c in cells]
        self.node_cpu_free: list[float] = [n.num_cpus for n in topo.nodes]
        self.node_mem_free: list[float] = [n.mem_gb for n in topo.nodes]
        self.node_disk_free: list[float] = [n.disk_gb for n in topo.nodes]
        # CPU-only jobs holding host resources of each node: job -> (cpus, mem, disk), or
        # (cpus, mem, disk, takes) for the CPU-only tasks of a job with roles (`take_host`)
        self.host_jobs: list[dict[int, tuple[float, ...]]] = [
            {} for _ in topo.nodes]
        # CPU-only placement index (see `host_nodes`), built on first use
        self._host_index: tuple[list[tuple[float, int]], list[tuple[float, int]]] | None = None
        self._host_key: list[tuple[float, int] | None] = []
        self._host_dirty: set[int] | None = None
        self.node_up: list[bool] = [True] * len(topo.nodes)
        self.nodes_down = 0  # failed nodes (with or without GPUs)
        self.drained: list[bool] = [False] * len(topo.nodes)  # see `drain_node`
        self.nodes_drained = 0
        self.drained_milli = 0  # milli-GPUs the drains hold
        self._drain_host: list[tuple[float, float, float]] = [_NO_HOST] * len(topo.nodes)
        self.gpu_parent_levels = lay.gpu_parent_levels
        self.max_node_gpus = lay.max_node_gpus
        self._node_partial: list[int] = [0] * len(topo.nodes)
        self._node_cell = lay.node_cell
        self._node_gpus: list[int] = [n.num_gpus for n in topo.nodes]
        self._gpu_path = lay.gpu_path
        self._gpu_type = lay.gpu_type
        # the tightest-cell index, its keys coded as ints (`schedlab.sim.cluster_layout.KeyCodec`):
        # one sorted list of codes per (GPU type, level), by list id
        self._list_id: dict[tuple[str, Level], int] = {}
        self._codes: list[list[int]] = []
        self.codec = lay.codec
        max_gpn = max((n.num_gpus for n in topo.nodes), default=0)
        self.node_buckets: dict[str, list[list[int]]] = {
            t: [[] for _ in range(max_gpn + 1)] for t in topo.gpu_types
        }
        self.partial: dict[str, list[tuple[int, int]]] = {t: [] for t in topo.gpu_types}
        # per node: the buckets of its GPU type (a node without GPUs never moves in them)
        self._node_bucket: list[list[list[int]]] = [
            self.node_buckets.get(n.gpu_type, []) for n in topo.nodes]
        self._keys: list[int] = [-1] * len(cells)  # each cell's code in the index, or -1
        # per index list: the nodes whose cells in it have stale keys, re-keyed when that
        # list is next read; so a node changed several times between two placements is
        # re-keyed once, and only in the lists placements read
        self._dirty: list[set[int]] = []
        # per index list and node: (cell, the chain of cells whose free counts key it,
        # the digit of its id) of each of the node's cells in it: its key is
        # (*those counts, cell)
        self._entries: list[list[list[_Entry]]] = []
        self._node_dirty: list[tuple[set[int], ...]] = []  # per node: its lists' dirty sets
        for n in topo.nodes:
            if n.num_gpus:
                self.node_buckets[n.gpu_type][n.num_gpus].append(n.index)
            lists: list[int] = []
            for c in lay.indexed[n.index]:
                lk = (n.gpu_type, cells[c].level)
                i = self._list_id.get(lk)
                if i is None:
                    i = self._list_id[lk] = len(self._codes)
                    self._codes.append([])
                    self._dirty.append(set())
                    self._entries.append([[] for _ in topo.nodes])
                self._entries[i][n.index].append((c, lay.chain[c], lay.code_tail[c]))
                if i not in lists:
                    lists.append(i)
            self._node_dirty.append(tuple(self._dirty[i] for i in lists))
            for i in lists:
                self._dirty[i].add(n.index)
        self._flush_keys()
        # aggregates
        self.total_gpus = topo.num_gpus
        self.healthy_gpus = topo.num_gpus
        self.free_whole = topo.num_gpus  # whole free GPUs on healthy nodes
        self.free_by_type: dict[str, int] = dict(topo.gpu_types)
        self.busy_milli = 0
        self.free_in_free_nodes = sum(n.num_gpus for n in topo.nodes)
        self._fgd = fgd
        # the metric's own memo, read without a call when it has one (FgdMetric)
        self._fgd_memo: dict[tuple[int, int, tuple[int, ...]], float] | None = getattr(
            fgd, "memo", None)
        self._node_fgd: list[float] = [0.0] * len(topo.nodes)
        # per node: the FGD of its state with k whole GPUs free and none shared, at index
        # k (NaN until first asked), one list shared by the nodes of one capacity: the
        # common state read by index, not by a memo keyed on a new tuple per change
        self._fgd_whole: list[list[float]] = []
        if fgd is not None:
            by_cap: dict[int, list[float]] = {}
            for n in topo.nodes:
                if n.num_gpus not in by_cap:
                    by_cap[n.num_gpus] = [math.nan] * (n.num_gpus + 1)
                self._fgd_whole.append(by_cap[n.num_gpus])
        self.fgd_sum = 0.0
        if fgd is not None:
            for n in topo.nodes:
                self._node_fgd[n.index] = fgd(n.num_gpus, n.num_gpus, ())
            self.fgd_sum = sum(self._node_fgd)
        self._watchers: list[set[int]] = []
        self.version = 0  # grows on every change: equal versions mean an unchanged state
        # what-ifs run on a scratch twin, never on this state (see `sandbox`)
        self._twin: ClusterState | None = None
        self._log: list[tuple[str, tuple[Any, ...]]] = []  # changes the twin has not seen
        self._undo: list[tuple[str, tuple[Any, ...]]] | None = None  # set on a twin in use

    def watch(self) -> set[int]:
        """A set the cluster adds each node to whenever its state changes (GPUs, CPUs, health).

        Starts with every node. A placer that keeps its own per-node index reads and
        clears it instead of re-reading the whole cluster on each call.
        """
        s = set(range(len(self.topo.nodes)))
        self._watchers.append(s)
        return s

    @property
    def level_index(self) -> dict[tuple[str, Level], list[tuple[int, ...]]]:
        """The tightest-cell index (see the module doc), as keys, now (a copy)."""
        self._flush_keys()
        decode = self.codec.decode
        return {lk: [decode(k) for k in self._codes[i]] for lk, i in self._list_id.items()}

    def index_list(self, gpu_type: str, level: Level) -> list[tuple[int, ...]] | None:
        """One list of `level_index` (None when the type has no such cells), now (a copy)."""
        lst = self.index_codes(gpu_type, level)
        if lst is None:
            return None
        decode = self.codec.decode
        return [decode(k) for k in lst]

    def index_codes(self, gpu_type: str, level: Level) -> list[int] | None:
        """One list of the index as it is kept: its keys' codes, sorted, up to date.

        The live list (read it, never change it): `codec.probe(n)` bisects it to the
        first cell with n free, `codec.last(code)` is a code's cell. None when the type
        has no cells at that level.
        """
        i = self._list_id.get((gpu_type, level))
        if i is None:
            return None
        if self._dirty[i]:
            self._flush_list(i)
        return self._codes[i]

    # --- index maintenance ---

    def _flush_list(self, i: int) -> None:
        """Re-key the cells of index list `i` on the nodes changed since it was read."""
        dirty = self._dirty[i]
        entries = self._entries[i]
        lst = self._codes[i]
        cf = self.cell_free
        keys = self._keys
        bits = self.codec.bits
        top = bits * (self.codec.width - 1)
        for node in dirty:
            for c, chain, tail in entries[node]:
                old = keys[c]
                if cf[c] > 0:
                    new = tail
                    sh = top
                    for a in chain:
                        new += (cf[a] + 1) << sh
                        sh -= bits
                    if new == old:
                        continue
                    keys[c] = new
                    if old < 0:
                        insort(lst, new)
                        continue
                    at = bisect_left(lst, old)
                    # still between the same neighbours (nearly half the re-keys of full
                    # Philly under fifo): the new code takes the old one's place; else
                    # it moves, on the side of its old place it lies on
                    if new > old:
                        if at + 1 == len(lst) or lst[at + 1] > new:
                            lst[at] = new
                        else:
                            del lst[at]
                            insort(lst, new, at)
                    elif at == 0 or lst[at - 1] < new:
                        lst[at] = new
                    else:
                        del lst[at]
                        insort(lst, new, 0, at)
                elif old >= 0:
                    del lst[bisect_left(lst, old)]
                    keys[c] = -1
        dirty.clear()

    def _flush_keys(self) -> None:
        """Bring every index list up to date."""
        for i, dirty in enumerate(self._dirty):
            if dirty:
                self._flush_list(i)

    def _node_changed(self, node: int, old_free: int) -> None:
        if self._watchers:
            for w in self._watchers:
                w.add(node)
        new_free = self.cell_free[self._node_cell[node]]
        cap = self._node_gpus[node]
        if new_free != old_free:
            bucket = self._node_bucket[node]
            old_b = bucket[old_free]
            del old_b[bisect_left(old_b, node)]
            insort(bucket[new_free], node)
            if old_free == cap:
                self.free_in_free_nodes -= cap
            if new_free == cap:
                self.free_in_free_nodes += cap
            # every whole-GPU change moves the node's own count, so an unchanged node
            # count means no cell of the node changed: its keys stay as they are
            for dirty in self._node_dirty[node]:
                dirty.add(node)
        fgd = self._fgd
        if fgd is not None:
            if self.node_up[node] and not self._node_partial[node]:
                whole = self._fgd_whole[node]
                v = whole[new_free]
                if v != v:  # not asked yet
                    v = whole[new_free] = fgd(cap, new_free, ())
                self.fgd_sum += v - self._node_fgd[node]
                self._node_fgd[node] = v
                return
            partial: tuple[int, ...] = ()
            if self._node_partial[node]:
                cell = self.topo.cells[self._node_cell[node]]
                gf = self.gpu_free
                partial = tuple(gf[g] for g in range(cell.gpu_lo, cell.gpu_hi)
                                if 0 < gf[g] < MILLI)
            if not self.node_up[node]:
                v = 0.0
            else:
                memo = self._fgd_memo
                key = (cap, new_free, partial)
                got = memo.get(key) if memo is not None else None
                v = fgd(cap, new_free, partial) if got is None else got
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
                 mem: float = 0.0, disk: float = 0.0) -> None:
        """Take `milli` of each GPU in `gpus` for `job`, all or nothing.

        `cpus`, `mem` and `disk` (the job's totals) are taken from the GPUs' nodes in
        proportion to the job's GPUs on each; `check_host` validates them beforehand.
        """
        gpus = tuple(gpus)
        if len(gpus) > 1 and len(set(gpus)) != len(gpus):
            raise InvalidDecision(f"job index {job}: a GPU is listed twice in {gpus}")
        gf = self.gpu_free
        up = self.node_up
        gnode = self.topo.gpu_node
        total = self.total_gpus
        for g in gpus:
            if not 0 <= g < total:
                raise InvalidDecision(f"GPU {g} does not exist (0..{total - 1})")
            if gf[g] < milli:
                raise InvalidDecision(
                    f"GPU {g} ({self.topo.cells[self.topo.gpu_cells[g]].name}) has "
                    f"{gf[g] / MILLI:g} free, job needs {milli / MILLI:g}"
                )
            if not up[gnode[g]]:
                raise InvalidDecision(f"GPU {g} is on a failed node")
        self._apply(job, gpus, -milli, cpus, mem, disk)
        if self._undo is None and self._twin is None:
            self.version += 1  # nobody to log the change for (`_changed`)
        else:
            self._changed("release", (job, gpus, milli, cpus, mem, disk),
                          ("allocate", (job, gpus, milli, cpus, mem, disk)))

    def release(self, job: int, gpus: Iterable[int], milli: int, cpus: float = 0.0,
                mem: float = 0.0, disk: float = 0.0) -> None:
        """Give back what `allocate` took for `job`."""
        gpus = tuple(gpus)
        holders = self.gpu_holders
        for g in gpus:
            if holders[g].get(job, 0) < milli:
                raise InvalidDecision(f"job index {job} releases GPU {g} it does not hold")
        self._apply(job, gpus, milli, -cpus, -mem, -disk)
        if self._undo is None and self._twin is None:
            self.version += 1  # nobody to log the change for (`_changed`)
        else:
            self._changed("allocate", (job, gpus, milli, cpus, mem, disk),
                          ("release", (job, gpus, milli, cpus, mem, disk)))
        if self.nodes_drained:  # what a drained node's job gave back stays drained
            gnode = self.topo.gpu_node
            for n in sorted({gnode[g] for g in gpus}):
                if self.drained[n]:
                    self.absorb_drain(n)

    def check_host(self, gpus: tuple[int, ...], cpus: float, mem: float, disk: float,
                   what: str = "job") -> None:
        """Raise InvalidDecision unless the GPUs' nodes have the job's host share free."""
        if not gpus or not (cpus > 0 or mem > 0 or disk > 0):
            return
        gnode = self.topo.gpu_node
        per_node: dict[int, int] = {}
        for g in gpus:
            if 0 <= g < self.total_gpus:
                n = gnode[g]
                per_node[n] = per_node.get(n, 0) + 1
        share = 1.0 / len(gpus)
        for n, k in per_node.items():
            why = self.host_shortfall(n, cpus * share * k, mem * share * k, disk * share * k)
            if why:
                raise InvalidDecision(f"{what}: node {self.topo.nodes[n].name} {why}")

    def allocate_host(self, job: int, node: int, cpus: float, mem: float,
                      disk: float) -> None:
        """Take CPUs, memory and disk of one node for a CPU-only job (validated)."""
        if not 0 <= node < len(self.topo.nodes):
            raise InvalidDecision(f"node {node} does not exist (0..{len(self.topo.nodes) - 1})")
        name = self.topo.nodes[node].name
        if not self.node_up[node]:
            raise InvalidDecision(f"node {name} is failed")
        if self.drained[node]:
            raise InvalidDecision(f"node {name} is drained")
        if job in self.host_jobs[node]:
            raise InvalidDecision(f"job index {job} already holds host resources of {name}")
        why = self.host_shortfall(node, cpus, mem, disk)
        if why:
            raise InvalidDecision(f"node {name} {why}")
        self._host_apply(node, -cpus, -mem, -disk)
        self.host_jobs[node][job] = (cpus, mem, disk)
        args = (job, node, cpus, mem, disk)
        self._changed("release_host", args, ("allocate_host", args))

    def release_host(self, job: int, node: int, cpus: float, mem: float,
                     disk: float) -> None:
        """Give back what `allocate_host` took for `job`."""
        if self.host_jobs[node].pop(job, None) is None:
            raise InvalidDecision(f"job index {job} releases host resources of node "
                                  f"{self.topo.nodes[node].name} it does not hold")
        self._host_apply(node, cpus, mem, disk)
        args = (job, node, cpus, mem, disk)
        self._changed("allocate_host", args, ("release_host", args))
        if self.drained[node]:
            self.absorb_drain(node)

    def take_host(self, job: int, node: int, cpus: float, mem: float, disk: float) -> None:
        """Add to a job's host holding on one node (tasks of a job with roles, validated).

        Unlike `allocate_host`, a job may take several times on the same node (two CPU-only
        tasks there); `give_host` gives back one such take.
        """
        if not 0 <= node < len(self.topo.nodes):
            raise InvalidDecision(f"node {node} does not exist (0..{len(self.topo.nodes) - 1})")
        name = self.topo.nodes[node].name
        if not self.node_up[node]:
            raise InvalidDecision(f"node {name} is failed")
        if self.drained[node]:
            raise InvalidDecision(f"node {name} is drained")
        why = self.host_shortfall(node, cpus, mem, disk)
        if why:
            raise InvalidDecision(f"node {name} {why}")
        self._host_apply(node, -cpus, -mem, -disk)
        held = self.host_jobs[node]
        c, m, d, k = held.get(job, (0.0, 0.0, 0.0, 0))
        held[job] = (c + cpus, m + mem, d + disk, k + 1)
        args = (job, node, cpus, mem, disk)
        self._changed("give_host", args, ("take_host", args))

    def give_host(self, job: int, node: int, cpus: float, mem: float, disk: float) -> None:
        """Give back one `take_host` of `job` on `node`."""
        held = self.host_jobs[node]
        got = held.get(job)
        if got is None:
            raise InvalidDecision(f"job index {job} releases host resources of node "
                                  f"{self.topo.nodes[node].name} it does not hold")
        c, m, d, k = got
        if k <= 1:
            del held[job]
        else:
            held[job] = (c - cpus, m - mem, d - disk, k - 1)
        self._host_apply(node, cpus, mem, disk)
        args = (job, node, cpus, mem, disk)
        self._changed("take_host", args, ("give_host", args))
        if self.drained[node]:
            self.absorb_drain(node)

    def _host_apply(self, node: int, cpus: float, mem: float, disk: float) -> None:
        self.node_cpu_free[node] += cpus
        self.node_mem_free[node] += mem
        self.node_disk_free[node] += disk
        for w in self._watchers:
            w.add(node)
        if self._host_dirty is not None:
            self._host_dirty.add(node)

    def _changed(self, undo: str, args: tuple[Any, ...], redo: tuple[str, tuple[Any, ...]]
                 ) -> None:
        """Count a change; log it for the twin, or for rollback when this is a twin in use."""
        self.version += 1
        if self._undo is not None:
            self._undo.append((undo, args))
        elif self._twin is not None:
            self._log.append(redo)
            if len(self._log) > _LOG_LIMIT:  # cheaper to clone again when next needed
                self._twin = None
                self._log.clear()

    def _apply(self, job: int, gpus: tuple[int, ...], delta: int, cpus: float,
               mem: float, disk: float = 0.0) -> None:
        gnode = self.topo.gpu_node
        node_cell = self._node_cell
        cf = self.cell_free
        gf = self.gpu_free
        paths = self._gpu_path
        all_holders = self.gpu_holders
        gtype = self._gpu_type
        by_type = self.free_by_type
        first = -1  # the first node touched and its whole free GPUs before
        first_free = 0
        more: dict[int, int] | None = None  # the others (a job spread over nodes)
        whole = 0  # change of free_whole
        for g in gpus:
            n = gnode[g]
            if n != first:
                if first < 0:
                    first = n
                    first_free = cf[node_cell[n]]
                elif more is None:
                    more = {n: cf[node_cell[n]]}
                elif n not in more:
                    more[n] = cf[node_cell[n]]
            old = gf[g]
            new = old + delta
            gf[g] = new
            holders = all_holders[g]
            left = holders.get(job, 0) - delta
            if left:
                holders[job] = left
            else:
                del holders[job]
            if (old == MILLI) != (new == MILLI):
                step = 1 if new == MILLI else -1
                whole += step
                by_type[gtype[g]] += step
                for c in paths[g]:
                    cf[c] += step
            if (0 < old < MILLI) or (0 < new < MILLI):
                self._set_partial(g, old, new)
        self.free_whole += whole
        self.busy_milli -= delta * len(gpus)
        if gpus and (cpus or mem or disk):
            per_node: dict[int, int] = {}
            for g in gpus:
                n = gnode[g]
                per_node[n] = per_node.get(n, 0) + 1
            share = 1.0 / len(gpus)
            for n, k in per_node.items():
                self.node_cpu_free[n] -= cpus * share * k
                self.node_mem_free[n] -= mem * share * k
                self.node_disk_free[n] -= disk * share * k
            if self._host_dirty is not None:
                self._host_dirty.update(per_node)
        if first >= 0:
            self._node_changed(first, first_free)
        if more is not None:
            for n, old_free in more.items():
                self._node_changed(n, old_free)

    # --- health ---

    def fail_node(self, node: int) -> None:
        """Take a node out of the healthy pool; it must hold no job's GPUs or host share."""
        if not self.node_up[node]:
            return
        cell = self.topo.cells[self.topo.nodes[node].cell]
        gpus = tuple(range(cell.gpu_lo, cell.gpu_hi))
        for g in gpus:
            if self.gpu_holders[g]:
                raise InvalidDecision(f"node {node} fails while GPU {g} is held")
        if self.host_jobs[node]:
            raise InvalidDecision(f"node {node} fails while CPU-only jobs run on it")
        self._apply(_DOWN, gpus, -MILLI, 0.0, 0.0)
        self.node_up[node] = False
        self.nodes_down += 1
        if self._host_dirty is not None:
            self._host_dirty.add(node)
        self.busy_milli -= MILLI * len(gpus)
        self.healthy_gpus -= len(gpus)
        self._node_changed(node, 0)
        self._changed("repair_node", (node,), ("fail_node", (node,)))

    def repair_node(self, node: int) -> None:
        """Return a failed node's GPUs to the healthy pool."""
        if self.node_up[node]:
            return
        cell = self.topo.cells[self.topo.nodes[node].cell]
        gpus = tuple(range(cell.gpu_lo, cell.gpu_hi))
        self.node_up[node] = True
        self.nodes_down -= 1
        if self._host_dirty is not None:
            self._host_dirty.add(node)
        self._apply(_DOWN, gpus, MILLI, 0.0, 0.0)
        self.busy_milli += MILLI * len(gpus)
        self.healthy_gpus += len(gpus)
        self._changed("fail_node", (node,), ("repair_node", (node,)))

    # --- drains: a node that takes no new placement while its jobs run on ---

    def drain_node(self, node: int) -> None:
        """Drain a node: its free share and all it gets back are held, until `undrain_node`."""
        if self.drained[node]:
            return
        self._mark_drain(node, True)
        self.absorb_drain(node)

    def undrain_node(self, node: int) -> None:
        """Give a drained node's held share back to the pool."""
        if not self.drained[node]:
            return
        self.give_back_drain(node)
        self._mark_drain(node, False)

    def give_back_drain(self, node: int) -> None:
        """Free what the drain of `node` holds (it stays drained; before a failure)."""
        cell = self.topo.cells[self.topo.nodes[node].cell]
        held = tuple((g, m) for g in range(cell.gpu_lo, cell.gpu_hi)
                     if (m := self.gpu_holders[g].get(_DRAIN, 0)))
        host = self._drain_host[node]
        if held or host != _NO_HOST:
            self._give_drain(node, held, host)

    def absorb_drain(self, node: int) -> None:
        """The drain of `node` takes what is free on it now (GPUs and host resources)."""
        if not self.node_up[node]:
            return  # a failed node holds nothing to give (its GPUs are down)
        cell = self.topo.cells[self.topo.nodes[node].cell]
        gf = self.gpu_free
        held = tuple((g, gf[g]) for g in range(cell.gpu_lo, cell.gpu_hi) if gf[g] > 0)
        host = (max(self.node_cpu_free[node], 0.0), max(self.node_mem_free[node], 0.0),
                max(self.node_disk_free[node], 0.0))
        if held or host != _NO_HOST:
            self._take_drain(node, held, host)

    def _mark_drain(self, node: int, on: bool) -> None:
        self.drained[node] = on
        self.nodes_drained += 1 if on else -1
        if self._host_dirty is not None:
            self._host_dirty.add(node)
        self._changed("_mark_drain", (node, not on), ("_mark_drain", (node, on)))

    def _take_drain(self, node: int, held: tuple[tuple[int, int], ...],
                    host: tuple[float, float, float]) -> None:
        for g, m in held:
            self._apply(_DRAIN, (g,), -m, 0.0, 0.0)
            self.busy_milli -= m  # drained is not busy, nor free
            self.drained_milli += m
        if host != _NO_HOST:
            c, m_, d = self._drain_host[node]
            self._drain_host[node] = (c + host[0], m_ + host[1], d + host[2])
            self._host_apply(node, -host[0], -host[1], -host[2])
        self._changed("_give_drain", (node, held, host), ("_take_drain", (node, held, host)))

    def _give_drain(self, node: int, held: tuple[tuple[int, int], ...],
                    host: tuple[float, float, float]) -> None:
        for g, m in held:
            self._apply(_DRAIN, (g,), m, 0.0, 0.0)
            self.busy_milli += m
            self.drained_milli -= m
        if host != _NO_HOST:
            c, m_, d = self._drain_host[node]
            left = (c - host[0], m_ - host[1], d - host[2])
            self._drain_host[node] = _NO_HOST if left == _NO_HOST else left
            self._host_apply(node, host[0], host[1], host[2])
        self._changed("_take_drain", (node, held, host), ("_give_drain", (node, held, host)))

    # --- what-ifs: a scratch twin, so that questions never change the live state ---

    @contextmanager
    def sandbox(self) -> Iterator[ClusterState]:
        """A scratch copy of this state to change freely; every change is undone on exit.

        Placers place gangs task by task on it and policies ask what-ifs (`ctx.what_if`)
        on it. The twin is built once and then kept current from a log of this state's
        changes, so a sandbox costs the changes since the last one, not a copy of the
        cluster. Inside a sandbox, `sandbox()` of the twin nests (rolled back to its mark).
        """
        scratch, mark = self.open_sandbox()
        try:
            yield scratch
        finally:
            scratch.close_sandbox(mark)

    def open_sandbox(self) -> tuple[ClusterState, int]:
        """`sandbox` without a context manager, for hot paths: (scratch, mark).

        The caller must `scratch.close_sandbox(mark)` in a `finally`.
        """
        if self._undo is not None:  # this is a twin in use: nest
            return self, len(self._undo)
        twin = self._synced_twin()
        twin._undo = []
        return twin, -1

    def close_sandbox(self, mark: int) -> None:
        """Undo every change made since `open_sandbox` gave this scratch state and `mark`."""
        if mark >= 0:
            self._rollback(mark)
        else:
            self._rollback(0)
            self._undo = None

    def _synced_twin(self) -> ClusterState:
        twin = self._twin
        if twin is None:
            twin = self._twin = self._clone()
        else:
            log = self._log
            skip = _cancelled(log) if len(log) > 1 else None
            for i, (name, args) in enumerate(log):
                if skip is None or i not in skip:
                    twin._replay(name, args)
            if skip:  # as if made: the twin's versions are those of a full replay
                twin.version += len(skip)
        self._log.clear()
        return twin

    def _rollback(self, mark: int) -> None:
        undo = self._undo
        assert undo is not None
        while len(undo) > mark:
            name, args = undo.pop()
            if not self._replay(name, args):
                undo.pop()  # the undoing change logged itself

    def _replay(self, name: str, args: tuple[Any, ...]) -> bool:
        """Make a logged change again (the twin's sync, a rollback); True if unlogged.

        A GPU change was checked when it was first made, and this state holds the same
        as that one did then, so it goes straight to `_apply` and only counts (no log:
        the caller keeps its own). Other changes are made by name and log themselves.
        """
        if name == "allocate":
            self._apply(args[0], args[1], -args[2], args[3], args[4], args[5])
        elif name == "release":
            self._apply(args[0], args[1], args[2], -args[3], -args[4], -args[5])
        else:
            getattr(self, name)(*args)
            return False
        self.version += 1
        return True

    def _clone(self) -> ClusterState:
        """A fresh state of the same topology holding exactly what this one holds."""
        twin = ClusterState(self.topo, layout=self.layout)
        for n, up in enumerate(self.node_up):
            if not up:
                twin.fail_node(n)
        holdings: dict[int, dict[int, list[int]]] = {}
        for g, holders in enumerate(self.gpu_holders):
            for job, milli in holders.items():
                if job != _DOWN and job != _DRAIN:
                    holdings.setdefault(job, {}).setdefault(milli, []).append(g)
        for job in sorted(holdings):
            for milli, gpus in holdings[job].items():
                twin.allocate(job, gpus, milli)
        twin.node_cpu_free = list(self.node_cpu_free)
        twin.node_mem_free = list(self.node_mem_free)
        twin.node_disk_free = list(self.node_disk_free)
        twin.host_jobs = [dict(h) for h in self.host_jobs]
        if self.nodes_drained:
            for n, on in enumerate(self.drained):
                if on:
                    twin._mark_drain(n, True)
                    cell = self.topo.cells[self.topo.nodes[n].cell]
                    held = tuple((g, m) for g in range(cell.gpu_lo, cell.gpu_hi)
                                 if (m := self.gpu_holders[g].get(_DRAIN, 0)))
                    for g, m in held:  # host resources: copied above
                        twin._apply(_DRAIN, (g,), -m, 0.0, 0.0)
                        twin.busy_milli -= m
                        twin.drained_milli += m
            twin._drain_host = list(self._drain_host)
        twin.version = 0
        return twin

    def jobs_on_node(self, node: int) -> list[int]:
        """Indices of the jobs holding GPUs of `node` or (CPU-only) its host share, sorted."""
        cell = self.topo.cells[self.topo.nodes[node].cell]
        held: set[int] = set(self.host_jobs[node])
        for g in range(cell.gpu_lo, cell.gpu_hi):
            held.update(self.gpu_holders[g])
        held.discard(_DOWN)
        held.discard(_DRAIN)
        return sorted(held)

    # --- queries used by placers and metrics ---

    def best_cell(self, gpu_type: str, level: Level, n: int) -> tuple[int, ...] | None:
        """Key of the tightest cell at `level` of `gpu_type` with >= n whole free GPUs."""
        lst = self.index_codes(gpu_type, level)
        if not lst:
            return None
        i = bisect_left(lst, self.codec.probe(n))
        return self.codec.decode(lst[i]) if i < len(lst) else None

    def cells_fitting(self, gpu_type: str, level: Level, n: int) -> Iterator[tuple[int, ...]]:
        """Keys of cells at `level` with >= n whole free GPUs, tightest first.

        The index is brought up to date before each key is read, so a caller changing
        the state while iterating sees it as it is at each step.
        """
        li = self._list_id.get((gpu_type, level))
        if li is None:
            return
        lst, dirty = self._codes[li], self._dirty[li]
        if dirty:
            self._flush_list(li)
        if not lst:
            return
        decode = self.codec.decode
        for i in range(bisect_left(lst, self.codec.probe(n)), len(lst)):
            if dirty:
                self._flush_list(li)
            yield decode(lst[i])

    def free_gpus_in(self, cell: int) -> list[int]:
        """Whole free GPU indices under `cell`, in index order (bounded by the cell size)."""
        c = self.topo.cells[cell]
        gf = self.gpu_free
        return [g for g in range(c.gpu_lo, c.gpu_hi) if gf[g] == MILLI]

    def node_fits_host(self, node: int, cpus: float, mem: float, disk: float = 0.0) -> bool:
        """True when `node` has `cpus`, `mem` and `disk` free (capacity 0: unmodelled)."""
        spec = self.topo.nodes[node]
        if cpus > 0 and spec.num_cpus > 0 and self.node_cpu_free[node] < cpus - 1e-9:
            return False
        if mem > 0 and spec.mem_gb > 0 and self.node_mem_free[node] < mem - 1e-9:
            return False
        return not (disk > 0 and spec.disk_gb > 0 and self.node_disk_free[node] < disk - 1e-9)

    def host_shortfall(self, node: int, cpus: float, mem: float, disk: float) -> str:
        """'' when `node` has the host resources free, else what it lacks ('has 2 CPUs ...')."""
        if self.node_fits_host(node, cpus, mem, disk):
            return ""
        spec = self.topo.nodes[node]
        out = []
        for need, cap, free, unit in ((cpus, spec.num_cpus, self.node_cpu_free, "CPUs"),
                                      (mem, spec.mem_gb, self.node_mem_free, "GB memory"),
                                      (disk, spec.disk_gb, self.node_disk_free, "GB disk")):
            if need > 0 and cap > 0 and free[node] < need - 1e-9:
                out.append(f"has {max(0.0, free[node]):g} {unit} free, the job needs {need:g}")
        return "; ".join(out)

    def host_nodes(self, cpus: float) -> Iterator[int]:
        """Healthy nodes with at least `cpus` free, in the order of CPU-only placement.

        Nodes without GPUs first, then nodes with GPUs; in each, the least free CPUs first
        (best fit), nodes whose CPUs are not modelled last. Costs O(log nodes) to the
        first, plus the nodes changed since the previous call; stops when the caller does.
        """
        index = self._host_index
        if index is None:
            index = self._build_host_index()
        else:
            self._refresh_host_index()
        lo = (cpus - 1e-9, -1)
        for lst in index:
            for i in range(bisect_left(lst, lo), len(lst)):
                yield lst[i][1]

    def _build_host_index(self) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
        index: tuple[list[tuple[float, int]], list[tuple[float, int]]] = ([], [])
        self._host_index = index
        self._host_key = [None] * len(self.topo.nodes)
        self._host_dirty = set(range(len(self.topo.nodes)))
        self._refresh_host_index()
        return index

    def _refresh_host_index(self) -> None:
        dirty = self._host_dirty
        index = self._host_index
        if not dirty or index is None:
            return
        nodes = self.topo.nodes
        keys = self._host_key
        for n in dirty:
            spec = nodes[n]
            lst = index[1 if spec.num_gpus else 0]
            old = keys[n]
            new = None
            if self.node_up[n] and not self.drained[n]:
                new = (self.node_cpu_free[n] if spec.num_cpus > 0 else math.inf, n)
            if new == old:
                continue
            if old is not None:
                del lst[bisect_left(lst, old)]
            if new is not None:
                insort(lst, new)
            keys[n] = new
        dirty.clear()

    def host_capacity_shortfall(self, cpus: float, mem: float, disk: float) -> str:
        """'' when some node could hold these host resources when empty, else why not."""
        return self.layout.host_capacity_shortfall(cpus, mem, disk)

    @property
    def fragmentation(self) -> float:
        """1 - (free GPUs inside fully free nodes) / (free GPUs); 0 when none is free.

        GPUs of failed nodes are neither free nor busy: they count in neither term.
        """
        if self.free_whole <= 0:
            return 0.0
        return 1.0 - self.free_in_free_nodes / self.free_whole

    @property
    def fragmentation_fgd(self) -> float:
        """Expected fraction of free GPU capacity unusable by a typical job (FGD)."""
        free = self.healthy_gpus * MILLI - self.busy_milli - self.drained_milli
        if self._fgd is None or free <= 0:
            return 0.0
        return min(1.0, max(0.0, self.fgd_sum * MILLI / free))
