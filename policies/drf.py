"""Dominant resource fairness (Ghodsi et al., NSDI 2011), weighted, with optional preemption.

Rules:
1. Resources are GPUs, CPUs and memory: a job holds `num_gpus` (x `gpu_share`),
   `num_cpus` and `mem_gb`; the totals are the topology's (a resource whose total is 0 is
   not modelled and ignored). A tenant's dominant share is the largest fraction of any
   resource its running jobs hold; with weights, shares are divided by the tenant's weight.
2. Tenants are users (`drf_by=user`, default) or virtual clusters (`drf_by=vc`); a job
   without a user (the bundled default trace has none) counts under its vc (our choice);
   `weights` is a YAML file `tenant: weight` (tenants not listed weigh 1).
3. Progressive filling: at every pass, the pending tenant with the lowest weighted dominant
   share is offered the cluster; its oldest pending job starts if the placer finds room for
   the whole gang. A tenant whose next job does not fit is passed over for the rest of the
   pass (its later jobs wait: a tenant's jobs start in arrival order). Ties go to the
   tenant whose next job arrived first.
4. Preemption (`preempt=true`). A tenant's fair share is the level DRF's progressive
   filling reaches with every tenant's demand (running + pending jobs) as its cap: the
   largest weighted share L such that giving each tenant min(demand, L) of its demand's
   mix fits in the cluster, resource by resource (tenants asking less than L keep what
   they ask). A tenant below L whose next job does not fit takes resources back: each
   victim is the youngest (most recently started) job of the tenant then furthest above L,
   and a tenant gives only what it holds above L (it stays at L or higher without the
   job), until the job fits. Victims lose their work since their last checkpoint and pay
   the restore overhead when they restart. Every exchange moves a tenant up from below L
   and others down to no less than L, so tenants never take jobs back and forth.
   While a tenant below L waits for room, no tenant is given a job that lifts it above L
   in that pass (it would be taken back): the room is left for the waiting tenant.
Simplifications: the level assumes each tenant keeps the resource mix of its demand; shares
use the topology's totals even while nodes are down; at most 32 victims are considered for
one job; an elastic job is started at its `num_gpus`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList

from schedlab.policies.base import Policy
from schedlab.policies.queues import EPS, EngineMirror, Resources, Vec, add
from schedlab.policies.tenant_key import user_or_vc
from schedlab.sim.errors import InvalidParameter, InvalidTopology
from schedlab.sim.jobstate import PENDING, JobState
from schedlab.sim.model import Decision, JobSpec, Preempt, Start, Unschedulable
from schedlab.sim.params import Param, as_bool, as_choice, as_optional, as_path
from schedlab.topologies.native import load_yaml

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext

MAX_VICTIMS = 32  # victims considered for one job (bounds the what-if placements)


def load_weights(path: str | None) -> dict[str, float]:
    """Tenant weights from a YAML mapping `tenant: weight` (weights are numbers > 0)."""
    if path is None:
        return {}
    try:
        data: Any = load_yaml(path, "weights file")
    except InvalidTopology as e:
        raise InvalidParameter(f"parameter weights={path!r}: {e}") from None
    if not isinstance(data, dict) or not data:
        raise InvalidParameter(
            f"parameter weights={path!r}: got {data!r}; allowed: a non-empty mapping "
            "tenant: weight")
    out: dict[str, float] = {}
    for k, w in data.items():
        ok = isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w)
        if not ok or w <= 0:
            raise InvalidParameter(
                f"parameter weights={path!r}: tenant {k!r}: weight {w!r}; allowed: a "
                "number > 0")
        out[str(k)] = float(w)
    return out


class _Tenant:
    """Mutable per-run state of one tenant."""

    __slots__ = ("name", "weight", "used", "ws", "pend", "pending", "running")

    def __init__(self, name: str, weight: float) -> None:
        self.name = name
        self.weight = weight
        self.used = [0.0, 0.0, 0.0]
        self.ws = 0.0  # weighted dominant share of `used`
        self.pend = [0.0, 0.0, 0.0]  # demand of the pending jobs
        self.pending: SortedList = SortedList()  # (submit_time, idx) in arrival order
        self.running: dict[int, Vec] = {}  # idx -> demand, in start order


class DrfPolicy(Policy):
    """Weighted dominant resource fairness by progressive filling, gangs all or nothing."""
    supports_roles = True

    name = "drf"
    description = ("dominant resource fairness over GPUs, CPUs and memory between users or "
                   "VCs (weighted, progressive filling, optional preemption)")
    params = {
        "drf_by": Param("user", as_choice("user", "vc"),
                        "tenants are users or virtual clusters (the trace's vc column)"),
        "weights": Param(None, as_optional(as_path),
                         "YAML file tenant: weight (tenants not listed weigh 1)"),
        "preempt": Param(False, as_bool,
                         "a tenant below its fair share takes resources back from the "
                         "tenant furthest above it, youngest job first"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.weights = load_weights(self.p["weights"])
        self.tenant_field = self.p["drf_by"]

    def tenant_key(self, spec: JobSpec) -> str:
        """A job's tenant: its vc (`drf_by=vc`), else its user, or its vc when it has none."""
        return spec.vc if self.p["drf_by"] == "vc" else user_or_vc(spec)

    def attach(self, ctx: PolicyContext) -> None:
        """Fresh per-run state: tenants, the engine mirror, the cluster totals."""
        self.res = Resources.of(ctx.topology)
        self.mirror = EngineMirror()
        self.tenants: dict[str, _Tenant] = {}
        self.by_vc = self.p["drf_by"] == "vc"
        self.owner: dict[int, _Tenant] = {}  # running job index -> tenant
        self.waiting: dict[str, _Tenant] = {}  # tenants with pending jobs
        self.epoch = 0  # counts starts and stops: what-if answers change only with it
        self.no_room: dict[int, tuple] = {}  # head index -> state in which no exchange fit

    # --- state ---

    def tenant_of(self, job: JobState) -> _Tenant:
        """The tenant a job belongs to (created on first sight)."""
        name = self.tenant_key(job.spec)
        t = self.tenants.get(name)
        if t is None:
            t = self.tenants[name] = _Tenant(name, self.weights.get(name, 1.0))
        return t

    def _queue(self, t: _Tenant, job: JobState) -> None:
        t.pending.add((job.spec.submit_time, job.idx))
        add(t.pend, Resources.demand(job.spec))
        self.waiting[t.name] = t

    def _unqueue(self, t: _Tenant, job: JobState) -> None:
        t.pending.remove((job.spec.submit_time, job.idx))
        if t.pending:
            add(t.pend, Resources.demand(job.spec), -1.0)
        else:
            t.pend = [0.0, 0.0, 0.0]
            del self.waiting[t.name]

    def _charge(self, t: _Tenant, job: JobState, sign: float) -> None:
        if sign > 0:
            d = t.running[job.idx] = Resources.demand(job.spec)
            self.owner[job.idx] = t
        else:
            d = t.running.pop(job.idx)
            del self.owner[job.idx]
        add(t.used, d, sign)
        t.ws = self.res.share(t.used) / t.weight
        self.epoch += 1

    def _sync(self, ctx: PolicyContext) -> None:
        ch = self.mirror.sync(ctx)
        for job in ch.stopped:
            self._charge(self.owner[job.idx], job, -1.0)
        if ch.rebuilt is not None:
            for t in self.tenants.values():
                t.pending.clear()
                t.pend = [0.0, 0.0, 0.0]
            self.waiting.clear()
        for job in ch.rebuilt if ch.rebuilt is not None else ch.queued:
            self._queue(self.tenant_of(job), job)

    def _started(self, t: _Tenant, job: JobState) -> None:
        self._unqueue(t, job)
        self._charge(t, job, 1.0)
        self.mirror.started(job)
        self.no_room.pop(job.idx, None)

    def _preempted(self, job: JobState) -> None:
        t = self.owner[job.idx]
        self._charge(t, job, -1.0)
        self._queue(t, job)
        self.mirror.preempted(job)

    def fair_level(self) -> float:
        """DRF's water level L (weighted share) with each tenant's demand as its cap.

        Between two consecutive demand caps every resource's use grows linearly in L, so
        the level is found segment by segment after sorting the caps: O(tenants log
        tenants). Infinite when every demand fits.
        """
        totals = self.res.totals
        share = self.res.share
        items = []
        slope = [0.0, 0.0, 0.0]
        for t in self.tenants.values():
            if not (t.pending or t.running):
                continue
            v = [t.used[0] + t.pend[0], t.used[1] + t.pend[1], t.used[2] + t.pend[2]]
            cap = share(v) / t.weight
            if cap <= 0:
                continue
            per = (v[0] / cap, v[1] / cap, v[2] / cap)  # resources per unit of level
            items.append((cap, t.name, v, per))
            add(slope, per)
        items.sort()
        base = [0.0, 0.0, 0.0]
        for cap, _, v, per in items:
            level = math.inf
            for r in range(3):
                if totals[r] > 0 and slope[r] > EPS:
                    level = min(level, (totals[r] - base[r]) / slope[r])
            if level <= cap:
                return level
            add(base, v)
            add(slope, per, -1.0)
        return math.inf

    # --- the pass ---

    def schedule(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Progressive filling; then, with preemption, one exchange at a time and refill."""
        self._sync(ctx)
        preempted: set[int] = set()
        level: float | None = None if self.p["preempt"] else math.inf
        for _ in range(len(ctx.running()) + 1):  # an exchange preempts a job not yet hit
            blocked, level = yield from self._fill(ctx, level)
            if not blocked or level == math.inf:
                return
            done = yield from self._exchange(ctx, blocked, level, preempted)
            if not done:
                return

    def _head(self, t: _Tenant, ctx: PolicyContext) -> JobState | None:
        while t.pending:
            job = ctx.job_at(t.pending[0][1])
            if job.status == PENDING:
                return job
            self._unqueue(t, job)  # the engine dropped it (the mirror resyncs next pass)
        return None

    def _fill(self, ctx: PolicyContext, level: float | None
              ) -> Generator[Decision, None, tuple[list[_Tenant], float]]:
        """Offer the cluster to the lowest weighted share whose next job fits.

        Returns the tenants passed over because their next job did not fit, and the fair
        level. Once a tenant below the level is passed over, no tenant gets a job lifting
        it above the level. The level is computed when first needed (None: not yet); it
        does not change within a pass, as starts and preemptions keep every tenant's
        demand (running + pending) as it is.
        """
        heap = [(t.ws, t.pending[0], t.name) for t in self.waiting.values()]
        heapq.heapify(heap)
        failed: set[tuple] = set()  # requests that did not fit (only less is free later)
        blocked: list[_Tenant] = []
        hold = False  # a tenant below the fair level is waiting for room
        while heap:
            _, _, name = heapq.heappop(heap)
            t = self.tenants[name]
            job = self._head(t, ctx)
            if job is None:
                continue
            s = job.spec
            if hold and level is not None:
                after = list(t.used)
                add(after, Resources.demand(s))
                if self.res.share(after) / t.weight > level + EPS:
                    continue
            cls = (s.num_gpus, s.task_gpus, s.gpu_type, s.gpu_share, s.num_cpus, s.mem_gb,
                   s.disk_gb)
            got = None if cls in failed else ctx.place(job)
            if got is None or isinstance(got, Unschedulable):
                failed.add(cls)
                blocked.append(t)
                if level is None:
                    level = self.fair_level()
                hold = hold or t.ws < level - EPS
                continue
            yield Start(job.job_id, got)
            self._started(t, job)
            if t.pending:
                heapq.heappush(heap, (t.ws, t.pending[0], name))
        return blocked, (math.inf if level is None else level)

    def _exchange(self, ctx: PolicyContext, blocked: list[_Tenant], level: float,
                  preempted: set[int]) -> Generator[Decision, None, bool]:
        """Let the first blocked tenant below the fair level take resources back."""
        for a in blocked:
            if a.ws >= level - EPS:
                continue
            head = self._head(a, ctx)
            if head is None:
                continue
            state = (self.epoch, level, ctx.cluster.healthy_gpus)
            if self.no_room.get(head.idx) == state:
                continue  # nothing changed since no exchange could make room for it
            victims = self._victims(ctx, a, head, level, preempted)
            if not victims:
                self.no_room[head.idx] = state
                continue
            why = f"drf: tenant {a.name!r} below its fair share"
            for v in victims:
                yield Preempt(v.job_id, why)
                self._preempted(v)
                preempted.add(v.idx)
            got = ctx.place(head)
            if not isinstance(got, Unschedulable):
                yield Start(head.job_id, got)
                self._started(a, head)
            return True
        return False

    def _victims(self, ctx: PolicyContext, a: _Tenant, head: JobState, level: float,
                 preempted: set[int]) -> list[JobState] | None:
        """The shortest prefix of the victim order that lets `head` fit, or None.

        What-if placements are tried at exponentially spaced prefix lengths once the freed
        GPUs suffice by count, then the fitting length is narrowed by bisection: O(log)
        what-ifs per attempt instead of one per victim.
        """
        cands = self._candidates(ctx, a, level, preempted)
        need = head.spec.num_gpus if head.spec.gpu_share >= 1.0 else 0
        free = ctx.cluster.free_whole
        k0 = 0
        for i, v in enumerate(cands):
            free += len(v.gpus) if v.milli >= 1000 else 0
            if free >= need:
                k0 = i + 1
                break
        if not k0:
            return None

        def fits(k: int) -> bool:
            return not isinstance(ctx.place_if_freed(head, cands[:k]), Unschedulable)

        lo, k, step = k0 - 1, k0, 1
        while not fits(k):
            if k == len(cands):
                return None
            lo, k, step = k, min(len(cands), k0 + step), step * 2
        hi = k
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid
        return cands[:hi]

    def _candidates(self, ctx: PolicyContext, a: _Tenant, level: float,
                    preempted: set[int]) -> list[JobState]:
        """Victims in order: each the youngest job of the tenant then furthest above `level`.

        A tenant gives only what it holds above the level (it stays at the level or above
        without the job); jobs started at this instant or preempted in this pass are spared.
        """
        share = self.res.share
        used = {t.name: list(t.used) for t in self.tenants.values()
                if t is not a and t.running and t.ws > level + EPS}
        order = {name: iter(reversed(self.tenants[name].running)) for name in used}
        now = ctx.now
        out: list[JobState] = []
        while used and len(out) < MAX_VICTIMS:
            name = max(used, key=lambda n: (share(used[n]) / self.tenants[n].weight, n))
            t = self.tenants[name]
            job = None
            for idx in order[name]:
                cand = ctx.job_at(idx)
                if idx not in preempted and cand.held_since < now:
                    job = cand
                    break
            if job is None:
                del used[name]
                continue
            d = t.running[job.idx]
            if share(d) <= EPS:
                continue  # holds nothing the shares count: taking it frees nothing
            after = list(used[name])
            add(after, d, -1.0)
            if share(after) / t.weight < level - EPS:
                del used[name]  # only what a tenant holds above the level is taken
                continue
            used[name] = after
            out.append(job)
        return out
