"""Choosing victims: which running jobs to stop so a higher-priority job can start.

A preemptive priority policy asks `find_victims` for the few, lowest-priority running
jobs whose GPUs would let a pending job start, and where it would go. Candidates come
from a `VictimPool` ordered by the policy's running keys; every try is a what-if on a
scratch twin of the cluster (`ctx.what_if`), so nothing changes until the policy yields
its Preempt/Suspend decisions. Cheap necessary conditions (a node that could be filled,
enough whole nodes for a large job) are checked before any what-if.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from operator import itemgetter
from typing import Any, Final

import numpy as np
from mypy_extensions import mypyc_attr

from schedlab.sim.cfuncs import bisect_left, bisect_right, insort
from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import MILLI, Unschedulable, job_milli
from schedlab.sim.registry import PLACERS
from schedlab.sim.roles import held_gpus, held_nodes

Key = tuple[Any, ...]


def free_milli(ctx: PolicyContext) -> int:
    """Milli-GPUs free on healthy nodes right now."""
    c = ctx.cluster
    return c.healthy_gpus * MILLI - c.busy_milli



Spans = tuple[tuple[int, int], ...]  # (node, GPUs held there) of a running job
_FIRST: Final = itemgetter(0)
_SECOND: Final = itemgetter(1)
_LAST: Final = itemgetter(-1)


@mypyc_attr(allow_interpreted_subclasses=True)
class VictimPool:
    """Running jobs that may be preempted, ordered by priority key (largest = lowest).

    The entries are a plain sorted list moved by C `bisect`: a pool holds at most the
    running jobs (a few thousand), where an insert's move of the list's tail costs less
    than a `SortedList`'s Python (a policy with fixed running keys adds and removes a job
    at each start and stop). While every key has the same length (every policy's do),
    an entry is the flat tuple (*key, idx), which sorts as (key, idx) does at half the
    comparisons' cost (a nested pair compares its keys twice, for equality and then for
    order); a key of another length turns the pool into (key, idx) pairs for good.
    `spans` caches each candidate's (node, GPUs held) pairs for the victim searches; a
    policy that rebuilds its pool each pass may hand in one dict that outlives the pools
    (an entry is used only while the job holds the same GPUs tuple).
    """

    def __init__(self, entries: list[tuple[Key, int]],
                 spans: dict[int, tuple[tuple[int, ...], Spans]] | None = None) -> None:
        self.keys = {idx: key for key, idx in entries}
        lengths = {len(key) for key, _ in entries}
        # the keys' one length while entries are flat, -1 once they are pairs
        self.width = lengths.pop() if len(lengths) == 1 else (0 if not lengths else -1)
        self.order: list[tuple[Any, ...]] = sorted(
            [(*key, idx) for key, idx in entries] if self.width >= 0 else entries)
        self.spans = {} if spans is None else spans

    def _cut(self, key: Key) -> int:
        """Position of the first entry of strictly lower priority than `key`."""
        w = self.width
        if w < 0:
            return bisect_right(self.order, (key, math.inf))
        if len(key) == w:
            return bisect_right(self.order, key + (math.inf,))
        # a key of another length than the entries': compared as (key, idx) pairs do
        return bisect_right(self.order, (key, math.inf), key=lambda e: (e[:w], e[w]))

    def below(self, key: Key) -> list[tuple[Key, int]]:
        """Entries (key, idx) of strictly lower priority than `key`, highest priority first."""
        got = self.order[self._cut(key):]
        w = self.width
        return got if w < 0 else [(e[:w], e[w]) for e in got]

    def count_below(self, key: Key) -> int:
        """How many entries `below(key)` has."""
        return len(self.order) - self._cut(key)

    def lowest_first(self, key: Key) -> Iterator[int]:
        """Indexes of the entries of `below(key)`, lowest priority first (lazily)."""
        order = self.order
        return map(_SECOND if self.width < 0 else _LAST,
                   islice(reversed(order), len(order) - self._cut(key)))

    def lowest_jobs(self, ctx: PolicyContext, key: Key) -> Iterator[JobState]:
        """The jobs of `lowest_first(key)`, in that order (lazily)."""
        return map(ctx.job_at, self.lowest_first(key))

    def lowest_spans(self, ctx: PolicyContext, key: Key) -> Iterator[tuple[JobState, Spans]]:
        """The jobs of `lowest_jobs(key)` with their spans (`_spans`), in that order."""
        cached = self.spans.get
        for v in self.lowest_jobs(ctx, key):
            got = cached(v.idx)  # `_spans` inlined for its common case: a cached entry
            yield v, got[1] if got is not None and got[0] is v.gpus else _spans(ctx, self, v)

    def lowest(self) -> Key | None:
        """Key of the lowest-priority running job, or None when the pool is empty."""
        if not self.order:
            return None
        last = self.order[-1]
        return last[0] if self.width < 0 else last[:-1]

    def add(self, idx: int, key: Key) -> None:
        """Add (or re-key) a running job (a re-keyed job keeps its cached spans)."""
        self._unlist(idx)
        self.keys[idx] = key
        w = self.width
        if w == len(key):
            insort(self.order, key + (idx,))
            return
        if w == 0 and not self.order:  # the first key sets the entries' length
            self.width = len(key)
            self.order.append(key + (idx,))
            return
        if w >= 0:  # a key of another length: pairs from now on
            self.order = [(e[:w], e[w]) for e in self.order]
            self.width = -1
        insort(self.order, (key, idx))

    def remove(self, idx: int) -> None:
        """Forget a job (it stopped or was preempted), and its cached spans.

        A pool kept for a whole run (fixed running keys) would otherwise keep the spans
        of every job ever read as a candidate (14,404 of them after 200,000 jobs).
        """
        self.spans.pop(idx, None)
        self._unlist(idx)

    def _unlist(self, idx: int) -> None:
        """Take a job's entry out of `keys` and `order`, if it has one."""
        key = self.keys.pop(idx, None)
        if key is not None:
            order = self.order
            del order[bisect_left(order, (key, idx) if self.width < 0 else key + (idx,))]


@mypyc_attr(allow_interpreted_subclasses=True)
class ArrayPool(VictimPool):
    """A `VictimPool` of keys (rem, 0, sub), given as columns in any order.

    For a policy that recomputes every running key each pass (srtf): no key tuple, dict
    entry or sorted-list insert per running job. The columns are put in the pool's order
    (((rem, 0, sub), idx), as `VictimPool` sorts) once, by one `np.lexsort` (of two
    columns when the caller has a `tie` column ranking the entries as (sub, idx) do),
    and only the lists the searches read are built from them: the rems (to bisect) and,
    when the caller has them at hand, the `entries`: each entry's running job (whose
    `idx` and `spec.submit_time` are its idx and sub) with what `_spans` gives for it
    now. The other lists are built on first need. A search reads only the entries it
    visits. A removal (a victim stopped in this pass) deletes its entry from the lists.
    `add` turns it into a plain pool first.
    """

    def __init__(self, rem: Sequence[float] | np.ndarray, sub: Sequence[float] | np.ndarray,
                 idx: Sequence[int] | np.ndarray,
                 spans: dict[int, tuple[tuple[int, ...], Spans]] | None = None,
                 entries: Sequence[tuple[JobState, Spans]] | np.ndarray | None = None,
                 tie: np.ndarray | None = None) -> None:
        self.spans = {} if spans is None else spans
        rem_a, sub_a, idx_a = (np.asarray(rem, dtype=float), np.asarray(sub, dtype=float),
                               np.asarray(idx, dtype=np.int64))
        order = np.lexsort((idx_a, sub_a, rem_a) if tie is None else (tie, rem_a))
        self._rem: list[float] = rem_a[order].tolist()
        self._pairs: list[tuple[JobState, Spans]] | None = None
        self._subs: list[float] | None = None  # built from the jobs on first need
        self._ids: list[int] | None = None  # likewise
        if entries is None:
            self._subs, self._ids = sub_a[order].tolist(), idx_a[order].tolist()
        elif isinstance(entries, np.ndarray):
            self._pairs = entries[order].tolist()
        else:  # (a list of pairs would make a 2-D array)
            self._pairs = [entries[i] for i in order.tolist()]
        self._plain = False

    @property
    def _sub(self) -> list[float]:
        """The subs in the pool's order (from the jobs, when handed in, on first need)."""
        if self._subs is None:
            assert self._pairs is not None
            self._subs = [v.spec.submit_time for v, _ in self._pairs]
        return self._subs

    @property
    def _idx(self) -> list[int]:
        """The indexes in the pool's order (from the jobs, when handed in, on first need)."""
        if self._ids is None:
            assert self._pairs is not None
            self._ids = [v.idx for v, _ in self._pairs]
        return self._ids

    def _start(self, key: Key) -> int:
        """Position of the first entry of strictly lower priority than `key`."""
        if len(key) == 3 and key[1] == 1:  # (rem, 1, sub) sorts after every (rem, 0, .)
            return bisect_right(self._rem, key[0])
        rem, sub = self._rem, self._sub
        return bisect_right(range(len(rem)), key, key=lambda i: (rem[i], 0, sub[i]))

    def below(self, key: Key) -> list[tuple[Key, int]]:
        """Entries of strictly lower priority than `key`, highest priority first."""
        if self._plain:
            return super().below(key)
        rem, sub, idx = self._rem, self._sub, self._idx
        return [((rem[i], 0, sub[i]), idx[i]) for i in range(self._start(key), len(rem))]

    def count_below(self, key: Key) -> int:
        """How many entries `below(key)` has."""
        if self._plain:
            return super().count_below(key)
        return len(self._rem) - self._start(key)

    def lowest_first(self, key: Key) -> Iterator[int]:
        """Indexes of the entries of `below(key)`, lowest priority first (lazily)."""
        if self._plain:
            return super().lowest_first(key)
        return reversed(self._idx[self._start(key):])

    def lowest_jobs(self, ctx: PolicyContext, key: Key) -> Iterator[JobState]:
        """The jobs of `lowest_first(key)`, in that order (lazily).

        From the entries handed in: a slice read backwards, with no Python step per job
        (the searches read tens of victims per call).
        """
        if self._plain or self._pairs is None:
            return super().lowest_jobs(ctx, key)
        return map(_FIRST, reversed(self._pairs[self._start(key):]))

    def lowest_spans(self, ctx: PolicyContext, key: Key) -> Iterator[tuple[JobState, Spans]]:
        """The jobs of `lowest_jobs(key)` with their spans, in that order (lazily).

        The entries handed in: a slice read backwards.
        """
        if self._plain or self._pairs is None:
            return super().lowest_spans(ctx, key)
        return reversed(self._pairs[self._start(key):])

    def lowest(self) -> Key | None:
        """Key of the lowest-priority running job, or None when the pool is empty."""
        if self._plain:
            return super().lowest()
        if not self._rem:
            return None
        if self._subs is None:
            assert self._pairs is not None
            return (self._rem[-1], 0, self._pairs[-1][0].spec.submit_time)
        return (self._rem[-1], 0, self._subs[-1])

    def add(self, idx: int, key: Key) -> None:
        """Add (or re-key) a running job (the pool becomes a plain one)."""
        if not self._plain:
            rem, sub = self._rem, self._sub
            VictimPool.__init__(self, [((rem[i], 0, sub[i]), j) for i, j in enumerate(self._idx)],
                                self.spans)
            self._plain = True
        super().add(idx, key)

    def remove(self, idx: int) -> None:
        """Forget a job (it stopped or was preempted): its entry leaves every list.

        Looked for from the lowest-priority end, where the victims are.
        """
        if self._plain:
            super().remove(idx)
            return
        if self._ids is not None:
            ids = self._ids
            p = next((p for p in range(len(ids) - 1, -1, -1) if ids[p] == idx), -1)
        else:
            assert self._pairs is not None
            pairs = self._pairs
            p = next((p for p in range(len(pairs) - 1, -1, -1) if pairs[p][0].idx == idx), -1)
        if p < 0:
            return
        for lst in (self._rem, self._subs, self._ids, self._pairs):
            if lst is not None:
                del lst[p]


def gpu_spans(gpu_node: Sequence[int], gpus: Iterable[int]) -> Spans:
    """(node, GPUs of `gpus` there) in the order of `gpus`; `gpu_node`: the topology's."""
    held: dict[int, int] = {}
    for g in gpus:
        n = gpu_node[g]
        held[n] = held.get(n, 0) + 1
    return tuple(held.items())


def _spans(ctx: PolicyContext, pool: VictimPool, v: JobState) -> Spans:
    """(node, GPUs `v` holds there) in the order of `v.gpus`, cached in `pool.spans`."""
    got = pool.spans.get(v.idx)
    if got is not None and got[0] is v.gpus:
        return got[1]
    out = gpu_spans(ctx.topology.gpu_node, v.gpus)
    pool.spans[v.idx] = (v.gpus, out)
    return out


def _what_if(ctx: PolicyContext, job: JobState, chosen: list[JobState]
             ) -> tuple[list[JobState], tuple[int, ...]] | None:
    """Where `job` goes if `chosen` stop; only the victims holding a chosen GPU stop.

    A job asking for CPUs, memory or disk stops every victim on the placement's nodes
    (the what-if counted their host share as free there). What a victim holds is all it
    holds: the non-gang tasks of a job with roles too, which the what-if freed with it
    (`schedlab.sim.roles.held_gpus`).
    """
    got = ctx.place_if_freed(job, chosen)
    if isinstance(got, Unschedulable):
        return None
    s = job.spec
    if s.num_cpus > 0 or s.mem_gb > 0 or s.disk_gb > 0:
        gnode = ctx.topology.gpu_node
        nodes = {gnode[g] for g in got}
        return [v for v in chosen if not nodes.isdisjoint(held_nodes(v, gnode))], got
    used = set(got)
    return [v for v in chosen if not used.isdisjoint(held_gpus(v))], got


def _one_node_victims(ctx: PolicyContext, job: JobState,
                      lowest: Callable[[], Iterable[tuple[JobState, Spans]]]
                      ) -> list[JobState] | None:
    """Lowest-priority victims that, with the free GPUs there, fill one node for `job`.

    For a one-task job that fits a node. Victims (`lowest()`: lowest priority first,
    with their spans) are added in turn, each to the nodes it runs on; the first node
    whose free plus freed capacity covers it wins, with the victims added to it so far.
    Reads only the victims it adds; only the count of each node is kept as it goes (most
    searches fail, having read every victim), and the winner's victims are read again
    (`_on_node`).
    """
    spec = job.spec
    cell_free, nodes = ctx.cluster.cell_free, ctx.topology.nodes
    milli = job_milli(spec)
    have: dict[int, int] = {}  # node -> free plus freed milli-GPUs, once a victim is there
    if milli == MILLI:
        need = spec.num_gpus * MILLI
        for v, spans in lowest():
            m = v.milli
            for node, held in spans:
                h = have.get(node)
                if h is None:
                    h = cell_free[nodes[node].cell] * MILLI
                h += held * m
                if h >= need:
                    return _on_node(lowest(), v, node)
                have[node] = h
        return None
    for v, spans in lowest():  # a fraction fits a free GPU or the largest partial one
        m = v.milli
        for node, _ in spans:
            h = have.get(node)
            if h is None:
                h = MILLI if cell_free[nodes[node].cell] else 0
            h += m
            if h >= milli:
                return _on_node(lowest(), v, node)
            have[node] = h
    return None


def _on_node(lowest: Iterable[tuple[JobState, Spans]], last: JobState, node: int
             ) -> list[JobState]:
    """The victims of `lowest` up to `last` (included) that run on `node`, in that order."""
    out: list[JobState] = []
    for v, spans in lowest:
        if any(n == node for n, _ in spans):
            out.append(v)
        if v is last:
            break
    return out


def _fewest_nodes(ctx: PolicyContext) -> bool:
    """Whether the engine's placer puts a job larger than a node on the fewest nodes."""
    return ctx.params.get("placer") in ("consolidated", "fgd")


def _spreads(ctx: PolicyContext) -> bool:
    """Whether the engine's placer may spread a job that fits a node over several."""
    return bool(getattr(PLACERS.get(ctx.params.get("placer", "consolidated")), "spread", True))


def _nodes_could_hold(ctx: PolicyContext, job: JobState,
                      victims: Iterable[tuple[JobState, Spans]]) -> bool:
    """Whether a big job could fit on the fewest nodes if every candidate victim stopped.

    For a one-task whole-GPU job larger than a node under a placer that uses at most
    ceil(n / node size) nodes (consolidated): those nodes, with the free GPUs and every
    GPU that only candidates hold, must hold n. A necessary condition, checked before
    asking the placer what-if (which moves the victims out and back). A victim holding
    whole GPUs holds them alone, so its GPUs count by node (its cached spans); only
    shared GPUs are checked one by one.
    """
    spec = job.spec
    if spec.num_tasks != 1 or job_milli(spec) != MILLI:
        return True
    cluster, topo = ctx.cluster, ctx.topology
    freed: dict[int, int] = {}  # node -> GPUs the candidates would free
    shared: list[JobState] = []
    get = freed.get
    for v, spans in victims:
        if v.milli == MILLI:
            for n, held in spans:
                freed[n] = get(n, 0) + held
        else:
            shared.append(v)
    if shared:
        ids = {v.idx for v in shared}
        gnode, holders = topo.gpu_node, cluster.gpu_holders
        gone = {g for v in shared for g in v.gpus if all(h in ids for h in holders[g])}
        for g in gone:
            freed[gnode[g]] = freed.get(gnode[g], 0) + 1
    for t in ([spec.gpu_type] if spec.gpu_type else sorted(topo.gpu_types)):
        size = cluster.max_node_gpus.get(t, 0)
        if not size:
            continue
        k = -(-spec.num_gpus // size)
        best = [c + cluster.cell_free[topo.nodes[n].cell]
                for n, c in freed.items() if topo.nodes[n].gpu_type == t]
        buckets = cluster.node_buckets[t]
        more = 0  # the k nodes with most free GPUs and no candidate
        for f in range(len(buckets) - 1, 0, -1):
            for n in buckets[f]:
                if n not in freed:
                    best.append(f)
                    more += 1
                    if more >= k:
                        break
            if more >= k:
                break
        if sum(sorted(best, reverse=True)[:k]) >= spec.num_gpus:
            return True
    return False


def _by_count(ctx: PolicyContext, job: JobState, lowest: Iterable[JobState]) -> list[JobState]:
    """Lowest-priority victims whose GPUs, with the free ones, cover the request by count.

    `lowest`: the candidates, lowest priority first; read only as far as needed.
    """
    need = job.spec.num_gpus * job_milli(job.spec)
    acc = free_milli(ctx)
    chosen: list[JobState] = []
    if acc >= need:
        return chosen
    for v in lowest:
        chosen.append(v)
        acc += len(v.gpus) * v.milli
        if acc >= need:
            return chosen
    return []


def find_victims(ctx: PolicyContext, job: JobState, key: Key, pool: VictimPool
                 ) -> tuple[list[JobState], tuple[int, ...]] | None:
    """Few, lowest-priority running jobs whose GPUs would let `job` start, and where.

    Tried in turn, each by asking the placer what-if: for a job that fits a node, the
    lowest-priority victims that fill one node; then the lowest-priority victims whose
    GPUs plus the free ones cover the request by count; for a job larger than a node,
    last, every lower-priority job. Only the victims holding a GPU of the placement found
    are stopped. The first two read the pool from its lowest-priority end only as far as
    they need (not every running job per call).
    """
    n_below = pool.count_below(key)
    if not n_below:
        return None
    job_at = ctx.job_at

    def lowest() -> Iterator[JobState]:
        return pool.lowest_jobs(ctx, key)

    def lowest_spans() -> Iterator[tuple[JobState, Spans]]:
        return pool.lowest_spans(ctx, key)

    spec = job.spec
    max_node = ctx.topology.max_node_gpus
    local: list[JobState] | None = None
    fits = spec.num_gpus <= max_node and spec.num_tasks == 1  # in one node
    if fits:
        local = _one_node_victims(ctx, job, lowest_spans)
        if local is not None:
            got = _what_if(ctx, job, local)
            if got is not None:
                return got
    if local is None and fits and not _spreads(ctx):
        return None  # no node can be filled, and the placer never spreads such a job
    # two necessary conditions, the cheaper first (both read the candidates; most big
    # jobs that fail fail by count)
    counted = _by_count(ctx, job, lowest())
    if not counted:
        return None
    fewest = spec.num_gpus > max_node and _fewest_nodes(ctx)
    if fewest and not _nodes_could_hold(ctx, job, lowest_spans()):
        return None  # even every lower-priority job stopping leaves too few whole nodes
    # the same necessary condition for the victims counted: when they leave too few
    # whole nodes, their what-if (which moves them out and back) would fail
    if counted != local and not (fewest and not _nodes_could_hold(
            ctx, job, [(v, _spans(ctx, pool, v)) for v in counted])):
        got = _what_if(ctx, job, counted)
        if got is not None:
            return got
    if local is None and len(counted) < n_below and spec.num_gpus > max_node:
        return _what_if(ctx, job, [job_at(idx) for _, idx in pool.below(key)])
    return None
