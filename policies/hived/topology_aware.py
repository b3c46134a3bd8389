"""HiveD's topology-aware scheduler: pods of a gang onto "nodes", then leaves in each node.

Runs on a cluster view (a `NodeIndex`): the node-level cells of a VC's virtual cells (plus its
preassigned cells below node level, each a node of its own) or of a chain's physical
cells. Nodes are ranked as in HiveD's `clusterView.Less`: healthy first, then the most
leaves used at the pod's priority (all priorities when `cross` packing, as inside a VC),
then the fewest used by higher priorities. Pods, smallest first, go greedily to the
first nodes that hold them; a pass that would need a bad node fails. The first pass
treats every used leaf as taken (no preemption); a guaranteed pod that finds no place
tries again treating lower-priority leaves as free. The index keeps the nodes bucketed
by rank and free leaves, updated when a node's usage changes, so a search walks the
fitting nodes in rank order instead of sorting the view; only the second (preempting)
pass, needed only when the view holds lower-priority leaves, scans the whole view.

Inside a node the pod takes the leaves with the lowest common ancestor (HiveD's optimal
affinity): the lowest level with a cell holding enough available leaves, needing the
fewest preemptions, then the tightest such cell, ties to the fullest ancestors. This
best-fit choice replaces HiveD's first-found depth-first search: both reach the optimal
affinity level, ours also keeps whole buddies free for later pods.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar, cast

from schedlab.policies.hived.cells import FREE, OPP, Cell, PCell, VCell
from schedlab.sim.cfuncs import bisect_left, insort

N = TypeVar("N", PCell, VCell)  # the cells of a view: all physical or all virtual


class NodeIndex(Generic[N]):
    """The nodes of one cluster view, bucketed by (rank, free leaves), in view order.

    Buckets are plain sorted lists of view positions and `ranks` a plain sorted list
    (bisect): a view holds at most a few hundred nodes, where a list insert is cheaper
    than a SortedList's bookkeeping, and iteration order is the same.
    """

    def __init__(self, nodes: Sequence[N], cross: bool) -> None:
        # the view's node cells in view order (fixed); a node's `view` is this index
        # and its `vpos` its position here
        self.nodes: list[N] = list(nodes)
        self.cross = cross  # rank by all usage (inside a VC) or opportunistic usage
        # rank -> free leaves -> sorted positions of the nodes with that key, as of
        # `keys` (no empty list or dict is kept)
        self.by_rank: dict[tuple, dict[int, list[int]]] = {}
        self.ranks: list[tuple] = []  # sorted; exactly the keys of `by_rank`
        # per position: the (rank, free leaves) key the node is bucketed under; equal to
        # `_key(node)` for every position not in `stale`
        self.keys: list[tuple[tuple, int]] = []
        self.stale: set[int] = set()  # positions whose bucket may be out of date
        # priority -> leaves used at it over the whole view, always current (no zero counts)
        self.prios: dict[int, int] = {}
        for i, n in enumerate(self.nodes):
            n.view = self
            n.vpos = i
            key = self._key(n)
            self.keys.append(key)
            self._add(i, key)
            for q, k in n.used.items():
                self.prios[q] = self.prios.get(q, 0) + k

    def _key(self, n: Cell) -> tuple[tuple, int]:
        used = n.used
        total = sum(used.values()) if used else 0
        if self.cross:
            rank: tuple = (-total,)
        else:
            opp = used.get(OPP, 0)
            rank = (-opp, total - opp)
        return rank, n.total - total

    def _add(self, i: int, key: tuple[tuple, int]) -> None:
        rank, free = key
        by_free = self.by_rank.get(rank)
        if by_free is None:
            by_free = self.by_rank[rank] = {}
            insort(self.ranks, rank)
        lst = by_free.get(free)
        if lst is None:
            by_free[free] = [i]
        else:
            insort(lst, i)

    def _remove(self, i: int, key: tuple[tuple, int]) -> None:
        rank, free = key
        by_free = self.by_rank[rank]
        lst = by_free[free]
        if len(lst) == 1:
            del by_free[free]
            if not by_free:
                del self.by_rank[rank]
                del self.ranks[bisect_left(self.ranks, rank)]
        else:
            del lst[bisect_left(lst, i)]

    def changed(self, node: Cell, prio: int, delta: int) -> None:
        """A leaf under `node` changed usage at `prio` by `delta` (re-bucketed lazily)."""
        prios = self.prios
        k = prios.get(prio, 0) + delta
        if k:
            prios[prio] = k
        else:
            del prios[prio]
        self.stale.add(node.vpos)

    def _flush(self) -> None:
        nodes = self.nodes
        keys = self.keys
        for i in self.stale:
            new = self._key(nodes[i])
            old = keys[i]
            if new != old:
                self._remove(i, old)
                self._add(i, new)
                keys[i] = new
        self.stale.clear()

    def fitting(self, smallest: int) -> Iterator[N]:
        """Nodes with at least `smallest` free leaves, in HiveD's rank order (health aside)."""
        if self.stale:
            self._flush()
        nodes = self.nodes
        by_rank = self.by_rank
        for rank in self.ranks:
            by_free = by_rank[rank]
            if len(by_free) == 1:  # usual when nodes are alike: free leaves follow rank
                ((free, lst),) = by_free.items()
                if free >= smallest:
                    for i in lst:
                        yield nodes[i]
                continue
            lists = [lst for free, lst in by_free.items() if free >= smallest]
            if len(lists) == 1:
                for i in lists[0]:
                    yield nodes[i]
            elif lists:
                for i in heapq.merge(*lists):
                    yield nodes[i]


def schedule(index: NodeIndex[N], pods: Sequence[int], prio: int) -> list[list[N]] | str:
    """Leaves for each pod (pods sorted by size), or why the gang does not fit."""
    pods = sorted(pods)
    used_prio = OPP
    picked = find_nodes_indexed(index, pods)
    if isinstance(picked, str) and prio > OPP and any(q < prio for q in index.prios):
        used_prio = prio
        picked = find_nodes(index.nodes, pods, prio, index.cross)
    if isinstance(picked, str):
        return picked
    if len(pods) == 1:
        return [pick_leaves(picked[0], pods[0], used_prio, set())]
    taken: dict[int, set[int]] = {}
    out: list[list[N]] = []
    for n, node in zip(pods, picked, strict=True):
        seen = taken.setdefault(id(node), set())
        leaves = pick_leaves(node, n, used_prio, seen)
        seen.update(id(c) for c in leaves)
        out.append(leaves)
    return out


def _stats(node: Cell, prio: int, cross: bool) -> tuple[int, int, int]:
    """(leaves used at the same priority, at higher ones, leaves free at `prio`)."""
    used = node.used
    if not used:
        return 0, 0, node.total
    same = used.get(prio, 0)
    higher = 0
    free = node.total
    for q, k in used.items():
        if cross:
            if q != prio:
                same += k
        elif q > prio:
            higher += k
        if q >= prio:
            free -= k
    return same, higher, free


def find_nodes_indexed(index: NodeIndex[N], pods: Sequence[int]) -> list[N] | str:
    """HiveD's findNodesForPods for the no-preemption pass, walking only fitting nodes.

    Bad nodes rank after every healthy one in HiveD, so skipping them and going on is
    the same walk; a gang that healthy nodes cannot hold fails.
    """
    picked: list[N] = []
    k = 0
    bad: N | None = None
    for node in index.fitting(pods[0]):
        if not node.healthy:
            bad = bad or node
            continue
        free = node.total - (sum(node.used.values()) if node.used else 0)
        acc = 0
        while k < len(pods) and free - acc >= pods[k]:
            picked.append(node)
            acc += pods[k]
            k += 1
        if k == len(pods):
            return picked
    if bad is not None:
        return f"have to use at least one bad node {bad.name}"
    return "insufficient capacity"


def find_nodes(nodes: Sequence[N], pods: Sequence[int], prio: int, cross: bool
               ) -> list[N] | str:
    """The node of each pod (pods sorted ascending), or a reason (HiveD's findNodesForPods)."""
    smallest = pods[0]
    ranked = []
    for i, node in enumerate(nodes):
        same, higher, free = _stats(node, prio, cross)
        if free >= smallest:
            ranked.append((not node.healthy, -same, higher, i, free))
    if not ranked:
        return "insufficient capacity"
    if len(pods) == 1:
        best = min(ranked)
        if best[0]:
            return f"have to use at least one bad node {nodes[best[3]].name}"
        return [nodes[best[3]]]
    ranked.sort()
    picked: list[N] = []
    k = 0
    for bad, _same, _higher, i, free in ranked:
        acc = 0
        while k < len(pods) and free - acc >= pods[k]:
            if bad:
                return f"have to use at least one bad node {nodes[i].name}"
            picked.append(nodes[i])
            acc += pods[k]
            k += 1
        if k == len(pods):
            return picked
    return "insufficient capacity"


def pick_leaves(node: N, n: int, prio: int, taken: set[int]) -> list[N]:
    """`n` leaves of `node` with the lowest common ancestor (free before preemptible)."""
    # the walks below are typed on `Cell` (mypyc cannot expand the constrained N through
    # `Self`-typed attributes); a node's leaves are cells of its own class
    return cast("list[N]", _pick(node, n, prio, taken))


def _pick(node: Cell, n: int, prio: int, taken: set[int]) -> list[Cell]:
    if not node.used and not taken:  # an idle node: its leftmost smallest cell that fits
        cell = node
        while cell.children and cell.children[0].total >= n:
            cell = cell.children[0]
        return cell.leaves()[:n]
    if n == 1 and prio == OPP and not taken:
        return [_pick_one_free(node)]
    return _pick_walk(node, n, prio, taken)


def _pick_walk(node: Cell, n: int, prio: int, taken: set[int]) -> list[Cell]:
    """`pick_leaves` by a walk of the node's cells counting available leaves."""
    # (module-level helpers, not closures: compiled, a closure the function's frame
    # holds would be a reference cycle per call, freed only by the cyclic collector)
    avail: dict[int, tuple[int, int]] = {}
    by_level: dict[int, list[Cell]] = {}
    _walk(node, prio, taken, avail, by_level)
    for level in sorted(by_level):
        fits = [c for c in by_level[level] if sum(avail[id(c)]) >= n]
        if fits:
            best = min(fits, key=lambda c: _fit_key(c, n, avail))
            return sorted(_take(best, n, avail), key=lambda c: c.order)
    raise AssertionError(f"node {node.name} cannot hold {n} leaves")  # find_nodes checked


def _walk(c: Cell, prio: int, taken: set[int], avail: dict[int, tuple[int, int]],
          by_level: dict[int, list[Cell]]) -> tuple[int, int]:
    """(free, preemptible) leaves under `c`, noted in `avail` for every cell walked."""
    if not c.children:
        if id(c) in taken:
            fq = (0, 0)
        elif c.prio == FREE:
            fq = (1, 0)
        elif c.prio < prio:
            fq = (0, 1)
        else:
            fq = (0, 0)
    else:
        f = q = 0
        for ch in c.children:
            a, b = _walk(ch, prio, taken, avail, by_level)
            f += a
            q += b
        fq = (f, q)
    avail[id(c)] = fq
    by_level.setdefault(c.level, []).append(c)
    return fq


def _fit_key(c: Cell, k: int, avail: dict[int, tuple[int, int]]) -> tuple:
    """Rank of a cell for `k` leaves: fewest preemptions, tightest, fullest ancestors."""
    f, q = avail[id(c)]
    up: list[int] = []
    p = c.parent
    while p is not None and id(p) in avail:
        up.append(sum(avail[id(p)]))
        p = p.parent
    return (max(0, k - f), f + q, *up, c.order)


def _pick_one_free(node: Cell) -> Cell:
    """`pick_leaves(node, 1, OPP, set())` without the walk (one free leaf, tightest first).

    The free leaf whose ancestors (parent first, up to the node) hold the fewest free
    leaves, then the lowest order. At OPP no leaf is preemptible, so a cell's available
    leaves are its free ones, which its usage counts give (`total` minus those used).
    """
    best = node
    best_key: tuple | None = None
    for leaf in node.leaf_cells():
        if leaf.prio != FREE:
            continue
        up: list[int] = []
        c = leaf
        while c is not node:
            p = c.parent
            assert p is not None  # `node` is an ancestor of its leaves
            c = p
            used = c.used
            up.append(c.total - sum(used.values()) if used else c.total)
        key = (*up, leaf.order)
        if best_key is None or key < best_key:
            best = leaf
            best_key = key
    if best_key is None:
        raise AssertionError(f"node {node.name} has no free leaf")  # find_nodes checked
    return best


def _take(cell: Cell, n: int, avail: dict[int, tuple[int, int]]) -> list[Cell]:
    if not cell.children:
        return [cell]
    kids = [c for c in cell.children if sum(avail[id(c)]) > 0]
    fits = [c for c in kids if sum(avail[id(c)]) >= n]
    if fits:
        return _take(min(fits, key=lambda c: _fit_key(c, n, avail)), n, avail)
    out: list[Cell] = []
    for c in sorted(kids, key=lambda c: (-avail[id(c)][0], -sum(avail[id(c)]), c.order)):
        k = min(sum(avail[id(c)]), n - len(out))
        out.extend(_take(c, k, avail))
        if len(out) == n:
            break
    return out
