"""`quota-priority`: managed training with group quotas and suspend/resume (seeds/001).

Rules (the seed's "resource quota", "high/low priority" and "suspend and resume"):

1. Groups are the trace's `vc`, each with a quota of GPUs (`quotas` file: vc -> GPUs; a vc
   not listed has 0; no file: no limit). A job that asks for high priority (its
   `max_wait_hours` > 0: the expected maximum wait, 4/6/8/24/48 h) gets it if its group's
   live high-priority jobs (queued or running) plus this one stay within the quota, at
   submission; otherwise, and for `max_wait_hours` = 0, it is low priority.
2. Order: high-priority jobs first, earliest expected deadline (submission + maximum wait)
   first; then suspended low-priority jobs by resume weight; then the other low-priority
   jobs in arrival order. Every job that the engine's placer can place starts (no
   reservation); jobs with identical requests are tried once per pass.
3. A high-priority job that cannot be placed suspends low-priority jobs: the one that has
   run longest (since its current start) among those whose suspension alone lets it be
   placed (on the right nodes, by the placer's what-if); if no single job frees enough,
   low-priority jobs longest-running first until it fits, then those not needed dropped
   (fewest is approximated greedily). Elastic jobs (`min_gpus` < `max_gpus`) save first:
   `Suspend`, losing nothing when the engine's `checkpoint_on_suspend` holds. Other jobs,
   single-node or multi-node, are killed: `Preempt`, losing the progress since their last
   checkpoint (the seed documents graceful saving only for elastic EFDL jobs). Both pay the
   engine's `restore_overhead` when resumed. High-priority jobs are never suspended.
4. Resume weight (`resume_weight`) of a suspended job: w x (seconds since it was
   suspended); the highest goes first (ties: suspended earlier, then trace order). `wait`:
   w = 1; `priority-wait` (default): w = 2 for a job that asked for high priority but was
   over quota, 1 otherwise; `suspensions`: w = the number of times it was suspended.

`metrics()` reports how many high-priority jobs started later than their expected
maximum wait (or had waited longer by the end of the run).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList

from schedlab.policies.base import Policy
from schedlab.policies.quota_files import LiveJobs, load_vc_quotas
from schedlab.sim.jobstate import FINAL, RUNNING, JobState
from schedlab.sim.model import Decision, JobSpec, Placement, Preempt, Start, Suspend, Unschedulable
from schedlab.sim.params import Param, as_choice, as_optional, as_path

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext

WEIGHTS = ("priority-wait", "wait", "suspensions")
_NO_ROOM = Unschedulable("not enough free GPUs now", True)


def class_key(s: JobSpec) -> tuple:
    """Jobs with the same key fit or fail to fit in exactly the same cluster state."""
    return (s.num_gpus, s.task_gpus, s.gpu_type, s.gpu_share, s.num_cpus, s.mem_gb,
            s.disk_gb)


def is_elastic(s: JobSpec) -> bool:
    """An elastic (EFDL) job: its GPU range is not a single size."""
    lo = s.min_gpus if s.min_gpus is not None else s.num_gpus
    hi = s.max_gpus if s.max_gpus is not None else s.num_gpus
    return lo < hi


class QuotaPriorityPolicy(Policy):
    """Group quotas decide high priority; high-priority jobs suspend low-priority ones."""
    supports_roles = True

    name = "quota-priority"
    tenant_field = "vc"
    orders = False  # its own per-group quotas over the cluster
    container_jobs = False  # its arrival tracking takes jobs in trace order only
    description = ("managed training: per-vc GPU quotas give high priority; a blocked "
                   "high-priority job suspends the longest-running low-priority job that "
                   "frees enough")
    params = {
        "quotas": Param(None, as_optional(as_path),
                        "YAML file vc -> GPUs of high-priority quota (none: no limit)"),
        "resume_weight": Param(
            "priority-wait", as_choice(*WEIGHTS),
            "order of resuming suspended jobs: w x seconds suspended, w = 2 if it asked "
            "for high priority (priority-wait), 1 (wait), or times suspended (suspensions)"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        path = self.p["quotas"]
        self.quotas: Mapping[str, int] | None = load_vc_quotas(path) if path else None

    def attach(self, ctx: PolicyContext) -> None:
        """Per-run state: classes of queued jobs, suspended jobs, quota use per vc."""
        self.live = LiveJobs()
        self.high: dict[int, bool] = {}
        self.high_gpus: dict[str, int] = {}
        self.high_jobs: list[int] = []
        self.high_q: dict[tuple, SortedList] = {}  # class -> (deadline, submit, idx)
        self.low_q: dict[tuple, SortedList] = {}  # class -> (submit, idx)
        self.suspended: dict[int, tuple] = {}  # pending jobs this policy suspended -> group
        self.susp_groups: dict[tuple, SortedList] = {}  # (w, class) -> (suspended at, idx)
        self.suspended_at: dict[int, float] = {}
        self.times: dict[int, int] = {}
        self.running_low: dict[int, JobState] = {}
        self.healthy = -1
        # what is left when every low job is gone changes only when a high job stops or
        # node health changes: a class that could not be placed even then is not retried
        self.high_epoch = 0
        self.hopeless: dict[tuple, int] = {}  # class -> high_epoch when it failed
        # low classes that did not fit since GPUs were last freed (our starts only take)
        self.low_failed: set[tuple] = set()
        self.counts = {"suspended": 0, "killed": 0}
        self.ctx = ctx

    # --- bookkeeping ---

    def _classify(self, job: JobState) -> None:
        s = job.spec
        asked = s.max_wait_hours > 0
        high = asked
        if asked and self.quotas is not None:
            high = self.high_gpus.get(s.vc, 0) + s.num_gpus <= self.quotas.get(s.vc, 0)
        self.high[job.idx] = high
        if high:
            self.high_gpus[s.vc] = self.high_gpus.get(s.vc, 0) + s.num_gpus
            self.high_jobs.append(job.idx)

    def _queue(self, job: JobState) -> None:
        s = job.spec
        if self.high[job.idx]:
            key = (s.submit_time + s.max_wait_hours * 3600.0, s.submit_time, job.idx)
            self.high_q.setdefault(class_key(s), SortedList()).add(key)
        elif job.idx in self.suspended:
            return
        else:
            self.low_q.setdefault(class_key(s), SortedList()).add((s.submit_time, job.idx))

    def _unqueue(self, job: JobState) -> None:
        s = job.spec
        ck = class_key(s)
        if self.high[job.idx]:
            key: tuple = (s.submit_time + s.max_wait_hours * 3600.0, s.submit_time, job.idx)
            qs = self.high_q
        else:
            self._unsuspend(job)
            key, qs = (s.submit_time, job.idx), self.low_q
        lst = qs.get(ck)
        if lst is not None:
            lst.discard(key)
            if not lst:
                del qs[ck]

    def _ended(self, job: JobState) -> None:
        if job.status in FINAL and self.high.get(job.idx):
            self.high_gpus[job.spec.vc] -= job.spec.num_gpus

    def metrics(self) -> dict[str, float]:
        """High-priority jobs, how many waited past their expected maximum, suspensions."""
        ctx = self.ctx
        late = 0
        for idx in self.high_jobs:
            job = ctx.job_at(idx)
            s = job.spec
            started = job.first_start if job.first_start == job.first_start else ctx.now
            if job.status == "rejected":
                continue
            if started - s.submit_time > s.max_wait_hours * 3600.0 + 1e-9:
                late += 1
        n = len(self.high_jobs)
        return {"high_priority_jobs": n, "high_priority_late": late,
                "high_priority_late_fraction": late / n if n else 0.0,
                "suspended": self.counts["suspended"], "killed": self.counts["killed"]}

    # --- the pass ---

    def schedule(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Book what changed; when anything did, start high, resumed, then low jobs."""
        ch = self.live.poll(ctx)
        for job in ch.stopped:
            if self.running_low.pop(job.idx, None) is None:
                self.high_epoch += 1  # a high-priority job let go of its GPUs
            self._ended(job)
        for job in ch.dropped:
            self._unqueue(job)
            self._ended(job)
        for job in ch.arrived:
            self._classify(job)
            self._queue(job)
        for job in ch.requeued:
            if job.idx not in self.high:  # held for its dependencies until now
                self._classify(job)
            self._queue(job)
        healthy = ctx.cluster.healthy_gpus
        if not ch and healthy == self.healthy:
            return  # nothing freed, nothing new: whatever failed before fails again
        if healthy != self.healthy:
            self.high_epoch += 1
        if ch.stopped or healthy != self.healthy:
            self.low_failed.clear()  # GPUs were freed: every class may fit again
        self.healthy = healthy
        yield from self._start_high(ctx)
        yield from self._resume(ctx)
        yield from self._start_heads(ctx, self.low_q)

    def _start(self, ctx: PolicyContext, job: JobState, gpus: tuple[int, ...]
               ) -> Iterator[Decision]:
        self._unqueue(job)
        yield Start(job.job_id, gpus)
        self.live.started(job)
        if not self.high[job.idx]:
            self.running_low[job.idx] = job

    def _place(self, ctx: PolicyContext, job: JobState) -> Placement:
        """The placer's answer, after a count check that saves it a call when hopeless."""
        s = job.spec
        if s.gpu_share >= 1.0 and s.num_gpus > ctx.cluster.free_whole:
            return _NO_ROOM
        return ctx.place(job)

    def _heads(self, qs: dict[tuple, SortedList]) -> list[tuple[tuple, tuple]]:
        heap = [(lst[0], ck) for ck, lst in qs.items()]
        heapq.heapify(heap)
        return heap

    def _start_heads(self, ctx: PolicyContext, qs: dict[tuple, SortedList]
                     ) -> Iterator[Decision]:
        """Class heads in queue order; a class that does not fit waits until GPUs free up."""
        heap = self._heads(qs)
        failed = self.low_failed
        while heap:
            key, ck = heapq.heappop(heap)
            if ck in failed:
                continue
            job = ctx.job_at(key[-1])
            got = self._place(ctx, job)
            if isinstance(got, Unschedulable):
                failed.add(ck)
                continue
            yield from self._start(ctx, job, got)
            lst = qs.get(ck)
            if lst:
                heapq.heappush(heap, (lst[0], ck))

    def _start_high(self, ctx: PolicyContext) -> Iterator[Decision]:
        heap = self._heads(self.high_q)
        while heap:
            key, ck = heapq.heappop(heap)
            job = ctx.job_at(key[-1])
            got = self._place(ctx, job)
            if isinstance(got, Unschedulable):
                if not got.resolvable:
                    continue
                victims = self._victims(ctx, job)
                if not victims:
                    continue
                for v in victims:
                    yield from self._suspend(ctx, v, job)
                got = self._place(ctx, job)
                if isinstance(got, Unschedulable):
                    continue
            yield from self._start(ctx, job, got)
            lst = self.high_q.get(ck)
            if lst:
                heapq.heappush(heap, (lst[0], ck))

    def _victims(self, ctx: PolicyContext, job: JobState) -> list[JobState]:
        """The longest-running low job that frees enough, else the fewest longest-running.

        A task that must fit one node (the default `consolidated` placer) looks node by
        node: a node's low jobs, longest-running first, until the node holds the task; the
        node needing the fewest (then the longest-running) wins. Otherwise freeing more
        never hurts a placement: one what-if with every candidate settles whether any set
        works, and a binary search over longest-first prefixes finds the shortest that
        does, then pruned of jobs it does not need. A class that no set can help is not
        searched again until a high-priority job stops or node health changes.
        """
        cands = sorted((v for v in self.running_low.values() if v.status == RUNNING),
                       key=lambda v: (v.attempt_start, v.idx))
        need = job.spec.num_gpus
        free = ctx.cluster.free_whole
        if not cands or free + sum(len(v.gpus) for v in cands) < need:
            return []
        ck = class_key(job.spec)
        if self.hopeless.get(ck) == self.high_epoch:
            return []
        one_node = self._one_node(ctx, job)
        for v in cands:
            if free + len(v.gpus) >= need and (not one_node or self._near(ctx, v, need)) \
                    and not isinstance(ctx.place_if_freed(job, [v]), Unschedulable):
                return [v]
        if one_node:
            got = self._by_node(ctx, job, cands)
        else:
            got = self._by_prefix(ctx, job, cands, free)
        if not got:
            self.hopeless[ck] = self.high_epoch
        return got

    def _one_node(self, ctx: PolicyContext, job: JobState) -> bool:
        """True when the placer must put the job on a single node."""
        s = job.spec
        return (ctx.params.get("placer") == "consolidated" and s.num_tasks == 1
                and s.gpu_share >= 1.0 and s.num_gpus <= ctx.topology.max_node_gpus)

    def _near(self, ctx: PolicyContext, v: JobState, need: int) -> bool:
        """True when `v` sits on a node whose free GPUs plus its own reach `need`."""
        topo, cf = ctx.topology, ctx.cluster.cell_free
        per_node: dict[int, int] = {}
        for g in v.gpus:
            n = topo.gpu_node[g]
            per_node[n] = per_node.get(n, 0) + 1
        return any(cf[topo.nodes[n].cell] + k >= need for n, k in per_node.items())

    def _by_node(self, ctx: PolicyContext, job: JobState, cands: list[JobState]
                 ) -> list[JobState]:
        topo, cf = ctx.topology, ctx.cluster.cell_free
        need, gtype = job.spec.num_gpus, job.spec.gpu_type
        on_node: dict[int, list[tuple[JobState, int]]] = {}
        for v in cands:
            per_node: dict[int, int] = {}
            for g in v.gpus:
                n = topo.gpu_node[g]
                per_node[n] = per_node.get(n, 0) + 1
            for n, k in per_node.items():
                on_node.setdefault(n, []).append((v, k))
        options = []
        for n in sorted(on_node):
            node = topo.nodes[n]
            if gtype and node.gpu_type != gtype:
                continue
            got = cf[node.cell]
            chosen = []
            for v, k in on_node[n]:
                chosen.append(v)
                got += k
                if got >= need:
                    options.append((len(chosen), [c.attempt_start for c in chosen], n, chosen))
                    break
        for *_, chosen in sorted(options, key=lambda o: o[:3]):
            if not isinstance(ctx.place_if_freed(job, chosen), Unschedulable):
                return chosen
        return []

    def _by_prefix(self, ctx: PolicyContext, job: JobState, cands: list[JobState],
                   free: int) -> list[JobState]:
        if isinstance(ctx.place_if_freed(job, cands), Unschedulable):
            return []
        count, lo = free, len(cands)
        for i, v in enumerate(cands):
            count += len(v.gpus)
            if count >= job.spec.num_gpus:
                lo = i + 1
                break
        lo, hi = max(lo, 2), len(cands)  # the shortest working prefix is in lo..hi
        while lo < hi:
            mid = (lo + hi) // 2
            if isinstance(ctx.place_if_freed(job, cands[:mid]), Unschedulable):
                lo = mid + 1
            else:
                hi = mid
        chosen = cands[:hi]
        for v in reversed(cands[:hi]):
            trial = [x for x in chosen if x is not v]
            if len(trial) > 1 and not isinstance(ctx.place_if_freed(job, trial),
                                                 Unschedulable):
                chosen = trial
        return chosen

    def _suspend(self, ctx: PolicyContext, v: JobState, job: JobState) -> Iterator[Decision]:
        if is_elastic(v.spec):
            yield Suspend(v.job_id, f"suspended (saved) for high-priority job {job.job_id}")
            self.counts["suspended"] += 1
        else:
            yield Preempt(v.job_id, f"killed for high-priority job {job.job_id}; progress "
                                    "since the last checkpoint is lost")
            self.counts["killed"] += 1
        self.live.stopped_by_policy(v)
        self.running_low.pop(v.idx, None)
        self.low_failed.clear()
        self.suspended_at[v.idx] = ctx.now
        self.times[v.idx] = self.times.get(v.idx, 0) + 1
        gk = (self._weight_factor(v), class_key(v.spec))
        self.suspended[v.idx] = gk
        self.susp_groups.setdefault(gk, SortedList()).add((ctx.now, v.idx))

    def _weight_factor(self, job: JobState) -> float:
        """The factor w of the resume weight w x (seconds suspended), fixed while suspended."""
        rule = self.p["resume_weight"]
        if rule == "wait":
            return 1.0
        if rule == "suspensions":
            return float(self.times[job.idx])
        return 2.0 if job.spec.max_wait_hours > 0 else 1.0

    def _resume(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Suspended jobs by weight, highest first; a class that does not fit is skipped.

        Jobs are kept in groups of one w and one request class, each sorted by suspension
        time: within a group weights never cross, so merging the group heads by current
        weight gives the exact weight order.
        """
        if not self.susp_groups:
            return
        now = ctx.now
        heap = []
        for gk, lst in self.susp_groups.items():
            t, idx = lst[0]
            heap.append((-gk[0] * (now - t), t, idx, gk))
        heapq.heapify(heap)
        failed = self.low_failed
        while heap:
            _, _, idx, gk = heapq.heappop(heap)
            if gk[1] in failed:
                continue
            job = ctx.job_at(idx)
            got = self._place(ctx, job)
            if isinstance(got, Unschedulable):
                failed.add(gk[1])
                continue
            self._unsuspend(job)
            yield Start(job.job_id, got)
            self.live.started(job)
            self.running_low[idx] = job
            lst = self.susp_groups.get(gk)
            if lst:
                t, i = lst[0]
                heapq.heappush(heap, (-gk[0] * (now - t), t, i, gk))

    def _unsuspend(self, job: JobState) -> None:
        gk = self.suspended.pop(job.idx, None)
        if gk is None:
            return
        lst = self.susp_groups[gk]
        lst.discard((self.suspended_at[job.idx], job.idx))
        if not lst:
            del self.susp_groups[gk]
