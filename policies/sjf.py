"""Shortest job first and shortest remaining time first: oracle baselines that know durations.

Both read each job's `duration` (ideal seconds) from the trace, as an oracle would.
`sjf` never preempts: pending jobs start shortest first, and a job that does not fit is
skipped, not waited for (Tiresias' simulator schedules its `shortest` baselines the same
way). `srtf` preempts: a pending job whose remaining work is smaller than a running job's
takes that job's GPUs when it needs them (`stop`: suspend, i.e. checkpoint then stop, by
default; `preempt` loses the work since the job's last checkpoint). With `weight=gpus`
the size is GPU-seconds (duration x GPUs), as in Tiresias' `shortest-gpu`.

This module also holds the machinery every priority-ordered policy shares (SJF, SRTF,
Tiresias, Themis): a feed of the jobs whose state changed since the last pass (from the
engine's `notify` hook), an ordered index of the pending jobs updated from that feed
instead of re-sorted each pass, and the preemptive walk that starts jobs in priority
order and takes GPUs from strictly lower-priority running jobs when the placer says
preemption could help.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from sortedcontainers import SortedList

from policies.base import Policy
from sim.jobstate import PENDING, RUNNING, JobState
from sim.model import MILLI, Decision, JobSpec, Preempt, Start, Suspend, Unschedulable, job_milli
from sim.params import Param, as_choice
from sim.registry import PLACERS

if TYPE_CHECKING:
    from sim.engine import SchedContext

Key = tuple[Any, ...]


class JobFeed:
    """The jobs whose status may have changed since the last call, oldest change first.

    Fed by the engine's `Policy.notify` hook, so a pass costs the number of changes, not
    the size of the queue. The hook fires while the engine is still applying a change,
    so jobs are only noted there and read at the next pass. A job released by its last
    dependency finishing is noted with that finish (it has no event of its own).
    """

    def __init__(self) -> None:
        self._dirty: dict[int, None] = {}

    def note(self, job: JobState, kind: str) -> None:
        """Remember a job that had an event (and its dependents, on a finish)."""
        self._dirty[job.idx] = None
        if kind == "finish":
            for d in job.dependents:
                self._dirty[d] = None

    def changed(self, ctx: SchedContext) -> list[JobState]:
        """Jobs noted since the last call (each once, in the order first noted)."""
        if not self._dirty:
            return []
        out = [ctx.job_at(i) for i in self._dirty]
        self._dirty.clear()
        return out


def request_class(spec: JobSpec) -> tuple:
    """Jobs with equal requests fit or fail to fit in exactly the same cluster state."""
    return (spec.num_gpus, spec.task_gpus, spec.gpu_type, spec.gpu_share, spec.num_cpus,
            spec.mem_gb)


def free_milli(ctx: SchedContext) -> int:
    """Milli-GPUs free on healthy nodes right now."""
    c = ctx.cluster
    return c.healthy_gpus * MILLI - c.busy_milli


def cpu_only_pending(ctx: SchedContext) -> list[JobState]:
    """Pending jobs that ask for no GPU (they can start at once), via the request classes."""
    out: list[JobState] = []
    for lst in ctx.pending_classes().values():
        if lst and ctx.job_at(lst[0][1]).spec.num_gpus == 0:
            out.extend(ctx.job_at(k[1]) for k in lst)
    out.sort(key=lambda j: (j.spec.submit_time, j.idx))
    return out


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
    """Where `job` goes if `chosen` stop; only the victims holding a chosen GPU stop."""
    got = ctx.place_if_freed(job, chosen)
    if isinstance(got, Unschedulable):
        return None
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


def priority_walk(
    ctx: SchedContext,
    queue: SortedList,
    pool: Callable[[], VictimPool] | None,
    *,
    on_start: Callable[[JobState], None],
    on_stop: Callable[[JobState], None],
    stop: str = "preempt",
    reason: str = "",
    classes: Mapping[tuple, int] | None = None,
) -> Iterator[Decision]:
    """Start pending jobs of `queue` ((key, idx), smallest key first) in order.

    A job that cannot be placed takes the GPUs of strictly lower-priority jobs of `pool`
    (built on first need; None: never preempt). A request class that failed is skipped
    for the rest of the pass (starts only use up GPUs), unless a preemption freed more
    GPUs than the job took; the walk stops early once nothing is free and no
    lower-priority victim is left, or once every request class in `queue` (counts in
    `classes`, when given) has failed. `on_start` / `on_stop` let the caller update its
    own index as decisions are applied (a stopped job usually re-enters `queue`, behind).
    """
    failed: set[tuple] = set()
    victims_of: VictimPool | None = None
    cur: tuple[Key, int] | None = None
    while True:
        # iterate without re-searching the list; start over from `cur` after a decision
        # (the callbacks change `queue`)
        it = iter(queue) if cur is None else queue.irange(cur, inclusive=(False, True))
        decided = False
        for cur in it:
            key, idx = cur
            job = ctx.job_at(idx)
            if job.status != PENDING:
                continue
            ck = request_class(job.spec)
            if ck in failed:
                continue
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                plan = None
                if pool is not None and got.resolvable:
                    if victims_of is None:
                        victims_of = pool()
                    plan = find_victims(ctx, job, key, victims_of)
                if plan is None:
                    failed.add(ck)
                    if classes is not None and len(failed) >= len(classes):
                        return
                    if free_milli(ctx) <= 0:
                        if pool is None:
                            return
                        if victims_of is None:
                            victims_of = pool()
                        low = victims_of.lowest()
                        if low is None or low <= key:
                            return
                    continue
                victims, got = plan
                assert victims_of is not None
                for v in victims:
                    victims_of.remove(v.idx)
                    why = f"{reason}: for {job.job_id}" if reason else f"for {job.job_id}"
                    yield (Suspend if stop == "suspend" else Preempt)(v.job_id, why)
                    on_stop(v)
                failed.clear()  # the victims may have freed more than the job takes
            yield Start(job.job_id, got)
            on_start(job)
            decided = True
            break
        if not decided:
            return


STOP_PARAM = Param(
    "suspend", as_choice("preempt", "suspend"),
    "how a job loses its GPUs: suspend (checkpoint first, per the engine's "
    "checkpoint_on_suspend, as DL schedulers preempt) or preempt (work since the job's "
    "last checkpoint is lost)",
)


class PriorityPolicy(Policy):
    """A policy that runs pending jobs in the order of a key, optionally preemptively.

    Subclasses give `pending_key` (fixed while a job waits) and, when preemptive,
    `running_key` on the same scale: a running job is a victim for a pending one only when
    its key is strictly larger. Hooks see every status change the feed reports.
    """

    preemptive: ClassVar[bool] = False
    fixed_running_keys: ClassVar[bool] = False  # keys change only via `rekey_running`

    def attach(self, ctx: SchedContext) -> None:
        """Fresh per-run index: the feed, the ordered queue, the last seen statuses."""
        self.feed = JobFeed()
        self.queue: SortedList = SortedList()
        self.qkey: dict[int, Key] = {}
        self.known: dict[int, str] = {}
        self.cpu_only: deque[JobState] = deque()
        self.class_count: dict[tuple, int] = {}  # request classes of the queued jobs
        self.running_pool = VictimPool([])  # kept current when fixed_running_keys

    # --- what subclasses define ---

    def notify(self, ctx: SchedContext, job: JobState, kind: str) -> None:
        """Note the job for the next pass (see JobFeed)."""
        self.feed.note(job, kind)

    def pending_key(self, ctx: SchedContext, job: JobState) -> Key:
        """Priority of a waiting job (smaller first); must not change while it waits."""
        raise NotImplementedError

    def running_key(self, ctx: SchedContext, job: JobState) -> Key:
        """Priority of a running job now, comparable with `pending_key`."""
        return self.pending_key(ctx, job)

    def on_status(self, ctx: SchedContext, job: JobState, old: str | None) -> None:
        """A job changed status (`old` None: first seen); `job.status` is the new one."""

    def before_walk(self, ctx: SchedContext) -> None:
        """Per-pass bookkeeping before jobs are started (e.g. queue changes)."""

    def after_walk(self, ctx: SchedContext) -> None:
        """Per-pass bookkeeping after the decisions (e.g. timers)."""

    # --- index maintenance ---

    def _enqueue(self, ctx: SchedContext, job: JobState) -> None:
        key = self.pending_key(ctx, job)
        self.qkey[job.idx] = key
        self.queue.add((key, job.idx))
        ck = request_class(job.spec)
        self.class_count[ck] = self.class_count.get(ck, 0) + 1

    def _dequeue(self, job: JobState) -> None:
        key = self.qkey.pop(job.idx, None)
        if key is not None:
            self.queue.remove((key, job.idx))
            ck = request_class(job.spec)
            left = self.class_count[ck] - 1
            if left:
                self.class_count[ck] = left
            else:
                del self.class_count[ck]

    def rekey(self, ctx: SchedContext, job: JobState) -> None:
        """Recompute a pending job's key (after a change the subclass made)."""
        self._dequeue(job)
        if job.status == PENDING and job.spec.num_gpus > 0:
            self._enqueue(ctx, job)

    def rekey_running(self, ctx: SchedContext, job: JobState) -> None:
        """Recompute a running job's key (with fixed_running_keys, after a change)."""
        if self.fixed_running_keys and job.idx in self.running_pool.keys:
            self.running_pool.add(job.idx, self.running_key(ctx, job))

    def _observe(self, ctx: SchedContext, job: JobState) -> None:
        old = self.known.get(job.idx)
        new = job.status
        if new == old:
            return
        if old == PENDING:
            self._dequeue(job)
        elif old == RUNNING:
            self.running_pool.remove(job.idx)
        if new in (PENDING, RUNNING):
            self.known[job.idx] = new
        else:
            self.known.pop(job.idx, None)
        self.on_status(ctx, job, old)
        if new == RUNNING and self.fixed_running_keys and job.spec.num_gpus:
            self.running_pool.add(job.idx, self.running_key(ctx, job))
        elif new == PENDING:
            if job.spec.num_gpus == 0:
                self.cpu_only.append(job)
            else:
                self._enqueue(ctx, job)

    def _pool(self, ctx: SchedContext) -> Callable[[], VictimPool] | None:
        if not self.preemptive:
            return None
        if self.fixed_running_keys:
            return lambda: self.running_pool
        return lambda: VictimPool([(self.running_key(ctx, j), j.idx)
                                   for j in ctx.running().values() if j.spec.num_gpus])

    def schedule(self, ctx: SchedContext) -> Iterator[Decision]:
        """Sync the index with what changed, then start (and preempt) in key order."""
        for job in self.feed.changed(ctx):
            self._observe(ctx, job)
        self.before_walk(ctx)
        while self.cpu_only:  # no GPUs to wait for: they start at once
            job = self.cpu_only.popleft()
            if job.status == PENDING:
                yield Start(job.job_id, ())
                self._observe(ctx, job)
        yield from priority_walk(
            ctx, self.queue, self._pool(ctx),
            on_start=lambda j: self._observe(ctx, j),
            on_stop=lambda j: self._observe(ctx, j),
            stop=self.p.get("stop", "suspend"), reason=self.name, classes=self.class_count,
        )
        self.after_walk(ctx)


def _size(spec: JobSpec, work: float, weight: str) -> float:
    return work * spec.num_gpus * spec.gpu_share if weight == "gpus" else work


WEIGHT_PARAM = Param("none", as_choice("none", "gpus"),
                     "job size: none = run time, gpus = GPU time (run time x GPUs)")


class SjfPolicy(PriorityPolicy):
    """Shortest job first (oracle durations), non-preemptive, skipping jobs that do not fit."""

    name = "sjf"
    description = "shortest job first by trace duration (oracle); non-preemptive"
    params = {"weight": WEIGHT_PARAM}

    def pending_key(self, ctx: SchedContext, job: JobState) -> Key:
        """(size, submit time): ties go to the earlier arrival."""
        return (_size(job.spec, job.spec.duration, self.p["weight"]), job.spec.submit_time)


class SrtfPolicy(PriorityPolicy):
    """Shortest remaining time first (oracle), preempting jobs with more work left."""

    name = "srtf"
    description = "shortest remaining time first (oracle); preempts longer running jobs"
    params = {"weight": WEIGHT_PARAM, "stop": STOP_PARAM}
    preemptive = True

    def pending_key(self, ctx: SchedContext, job: JobState) -> Key:
        """(remaining size, 1, submit): a running job wins a tie (its 0 sorts first)."""
        rem = job.spec.duration - job.work
        return (_size(job.spec, rem, self.p["weight"]), 1, job.spec.submit_time)

    def running_key(self, ctx: SchedContext, job: JobState) -> Key:
        """(remaining size now, 0, submit)."""
        s = job.spec
        rem = s.duration - job.progress_at(ctx.now)
        if self.p["weight"] == "gpus":
            rem *= s.num_gpus * s.gpu_share
        return (rem, 0, s.submit_time)
