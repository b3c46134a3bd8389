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
from typing import Any

from sortedcontainers import SortedList

from sim.context import SchedContext
from sim.jobstate import JobState
from sim.model import MILLI, Unschedulable, job_milli
from sim.registry import PLACERS

Key = tuple[Any, ...]


def free_milli(ctx: SchedContext) -> int:
    """Milli-GPUs free on healthy nodes right now."""
    c = ctx.cluster
    return c.healthy_gpus * MILLI - c.busy_milli



class VictimPool:
    """Running jobs that may be preempted, ordered by priority key (largest = lowest)."""

    def __init__(self, entries: list[tuple[Key, int]]) -> None:
        self.keys = {idx: key for key, idx in entries}
        self.order = SortedList(entries)

    def below(self, key: Key) -> list[tuple[Key, int]]:
        """Entries of strictly lower priority than `key`, highest priority first."""
        return list(self.order.islice(self.order.bisect_right((key, math.inf))))

    def lowest(self) -> Key | None:
        """Key of the lowest-priority running job, or None when the pool is empty."""
        return self.order[-1][0] if self.order else None

    def add(self, idx: int, key: Key) -> None:
        """Add (or re-key) a running job."""
        self.remove(idx)
        self.keys[idx] = key
        self.order.add((key, idx))

    def remove(self, idx: int) -> None:
        """Forget a job (it stopped or was preempted)."""
        key = self.keys.pop(idx, None)
        if key is not None:
            self.order.remove((key, idx))


def _what_if(ctx: SchedContext, job: JobState, chosen: list[JobState]
             ) -> tuple[list[JobState], tuple[int, ...]] | None:
    """Where `job` goes if `chosen` stop; only the victims holding a chosen GPU stop.

    A job asking for CPUs, memory or disk stops every victim on the placement's nodes
    (the what-if counted their host share as free there).
    """
    got = ctx.place_if_freed(job, chosen)
    if isinstance(got, Unschedulable):
        return None
    s = job.spec
    if s.num_cpus > 0 or s.mem_gb > 0 or s.disk_gb > 0:
        gnode = ctx.topology.gpu_node
        nodes = {gnode[g] for g in got}
        return [v for v in chosen if any(gnode[g] in nodes for g in v.gpus)], got
    used = set(got)
    return [v for v in chosen if used.intersection(v.gpus)], got


def _one_node_victims(ctx: SchedContext, job: JobState, cands: list[JobState]
                      ) -> list[JobState] | None:
    """Lowest-priority victims that, with the free GPUs there, fill one node for `job`.

    For a one-task job that fits a node. Victims are added lowest priority first, each to
    the nodes it runs on; the first node whose free plus freed capacity covers it wins.
    """
    spec = job.spec
    topo, cluster = ctx.topology, ctx.cluster
    milli = job_milli(spec)
    need = spec.num_gpus * MILLI if milli == MILLI else milli
    have: dict[int, int] = {}
    picked: dict[int, list[JobState]] = {}
    for v in reversed(cands):
        for node in dict.fromkeys(topo.gpu_node[g] for g in v.gpus):
            if node not in have:
                if milli == MILLI:
                    have[node] = cluster.cell_free[topo.nodes[node].cell] * MILLI
                else:  # a fraction fits a free GPU or the largest partial one
                    have[node] = MILLI if cluster.cell_free[topo.nodes[node].cell] else 0
                picked[node] = []
            held = sum(1 for g in v.gpus if topo.gpu_node[g] == node)
            have[node] += held * v.milli if milli == MILLI else v.milli
            picked[node].append(v)
            if have[node] >= need:
                return picked[node]
    return None


def _fewest_nodes(ctx: SchedContext) -> bool:
    """Whether the engine's placer puts a job larger than a node on the fewest nodes."""
    return ctx.params.get("placer") in ("consolidated", "fgd")


def _spreads(ctx: SchedContext) -> bool:
    """Whether the engine's placer may spread a job that fits a node over several."""
    return bool(getattr(PLACERS.get(ctx.params.get("placer", "consolidated")), "spread", True))


def _nodes_could_hold(ctx: SchedContext, job: JobState, cands: list[JobState]) -> bool:
    """Whether a big job could fit on the fewest nodes if every candidate victim stopped.

    For a one-task whole-GPU job larger than a node under a placer that uses at most
    ceil(n / node size) nodes (consolidated): those nodes, with the free GPUs and every
    GPU that only candidates hold, must hold n. A necessary condition, checked before
    asking the placer what-if (which moves the victims out and back).
    """
    spec = job.spec
    if spec.num_tasks != 1 or job_milli(spec) != MILLI:
        return True
    cluster, topo = ctx.cluster, ctx.topology
    ids = {v.idx for v in cands}
    freed: dict[int, set[int]] = {}  # node -> GPUs the candidates would free
    for v in cands:
        for g in v.gpus:
            if v.milli == MILLI or all(h in ids for h in cluster.gpu_holders[g]):
                freed.setdefault(topo.gpu_node[g], set()).add(g)
    for t in ([spec.gpu_type] if spec.gpu_type else sorted(topo.gpu_types)):
        size = cluster.max_node_gpus.get(t, 0)
        if not size:
            continue
        k = -(-spec.num_gpus // size)
        best = [len(gs) + cluster.cell_free[topo.nodes[n].cell]
                for n, gs in freed.items() if topo.nodes[n].gpu_type == t]
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


def _by_count(ctx: SchedContext, job: JobState, cands: list[JobState]) -> list[JobState]:
    """Lowest-priority victims whose GPUs, with the free ones, cover the request by count."""
    need = job.spec.num_gpus * job_milli(job.spec)
    acc = free_milli(ctx)
    chosen: list[JobState] = []
    for v in reversed(cands):
        if acc >= need:
            break
        chosen.append(v)
        acc += len(v.gpus) * v.milli
    return chosen if acc >= need else []


def find_victims(ctx: SchedContext, job: JobState, key: Key, pool: VictimPool
                 ) -> tuple[list[JobState], tuple[int, ...]] | None:
    """Few, lowest-priority running jobs whose GPUs would let `job` start, and where.

    Tried in turn, each by asking the placer what-if: for a job that fits a node, the
    lowest-priority victims that fill one node; then the lowest-priority victims whose
    GPUs plus the free ones cover the request by count; for a job larger than a node,
    last, every lower-priority job. Only the victims holding a GPU of the placement found
    are stopped.
    """
    entries = pool.below(key)
    if not entries:
        return None
    cands = [ctx.job_at(idx) for _, idx in entries]  # highest priority first
    spec = job.spec
    local: list[JobState] | None = None
    if spec.num_tasks == 1 and spec.num_gpus <= ctx.topology.max_node_gpus:
        local = _one_node_victims(ctx, job, cands)
        if local is not None:
            got = _what_if(ctx, job, local)
            if got is not None:
                return got
    if local is None and spec.num_tasks == 1 and spec.num_gpus <= ctx.topology.max_node_gpus \
            and not _spreads(ctx):
        return None  # no node can be filled, and the placer never spreads such a job
    if spec.num_gpus > ctx.topology.max_node_gpus and _fewest_nodes(ctx) \
            and not _nodes_could_hold(ctx, job, cands):
        return None  # even every lower-priority job stopping leaves too few whole nodes
    counted = _by_count(ctx, job, cands)
    if not counted:
        return None
    if counted != local:
        got = _what_if(ctx, job, counted)
        if got is not None:
            return got
    if local is None and len(counted) < len(cands) and spec.num_gpus > \
            ctx.topology.max_node_gpus:
        return _what_if(ctx, job, cands)
    return None


