"""Pollux (OSDI'21): every interval, GPUs to the jobs where goodput gains most, fairly.

Each round (`interval`, 60 s) Pollux's scheduler maximises the power mean (`p`, -1) of
every active job's speedup: goodput on (nodes, GPUs) over its goodput on a fair share
(ceil(GPUs / jobs) on one node), times the job's dominant share times the number of
nodes; a job whose allocation changes has its speedup scaled by
max(age - restarts x `restart_delay`, 0) / (age + `restart_delay`) (the restart
penalty). Goodput is the job's at its progress with the batch size it picks there
(`ctx.perf`: an adaptive job re-tunes it, as Pollux's agent). A job that has not run yet
is taken to scale linearly (Pollux fits its model only once it has measurements). A job
may take at most twice the most GPUs it has run on (at least 1; exploration, as Pollux),
`max_gpus` and 64, on at most 16 nodes; a node holds at most one job spread over nodes
(interference avoidance).

Search: Pollux runs NSGA-II (pymoo, 100 x 100) on this objective. The objective with
p = -1 is a sum of one term per job, so schedlab maximises it by marginal gains: GPUs
one at a time to the job whose term improves most, then exchanges of one GPU between
two jobs while any helps; deterministic, and the same optimum where each job's term is
concave in its GPUs. Placement keeps a job whose count is unchanged on its nodes; others
go, largest first, to one node that holds them (best fit), else to whole free nodes.
Defaults follow Pollux's simulator (`simulator/pollux.py`, `simulator.py`; OSDI'21
artifact): interval 60, p -1, delay 30 (its rescale time), 16 nodes, 64 GPUs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from typing import Any

from schedlab.policies.allocation import (
    RoundClock,
    all_rigid,
    apply_allocation,
    held_nodes,
    start_cpu_only,
    start_planned,
)
from schedlab.policies.base import Ctx, Policy
from schedlab.policies.elastic import bounds
from schedlab.policies.optimus import most_gpus
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision
from schedlab.sim.params import Param, as_bool, as_float, as_int

__all__ = ["PolluxPolicy", "restart_factor", "power_mean"]

EPS = 1e-3  # Pollux adds it to every scaled speedup before the power mean


def restart_factor(age: float, restarts: int, delay: float) -> float:
    """Pollux's penalty on the speedup of a job whose allocation changes."""
    return max(age - restarts * delay, 0.0) / (age + delay)


def power_mean(values: list[float], p: float) -> float:
    """Pollux's objective: the power mean of the scaled speedups (each + 1e-3)."""
    if not values:
        return 0.0
    if p == 0:
        return math.exp(sum(math.log(max(v, EPS)) for v in values) / len(values))
    return (sum((v + EPS) ** p for v in values) / len(values)) ** (1.0 / p)


class PolluxPolicy(Policy):
    """Goodput-maximising, fairness-weighted reallocation every interval (Pollux)."""

    name = "pollux"
    description = ("Pollux: every interval, GPUs by the power mean of goodput speedups "
                   "(performance model), restart penalty, adaptive batch sizes")
    params = {
        "interval": Param(60.0, as_float(0.0, lo_open=True),
                          "seconds between reallocations (Pollux's simulator: 60)"),
        "p": Param(-1.0, as_float(), "power-mean exponent: fairness knob (Pollux: -1; "
                   "more negative is fairer, 1 maximises total speedup)"),
        "restart_delay": Param(30.0, as_float(0.0),
                               "seconds a restart costs in the penalty (Pollux: 30)"),
        "max_nodes": Param(16, as_int(1), "most nodes one job spans (Pollux: 16)"),
        "max_replicas": Param(64, as_int(1), "most GPUs one job takes (Pollux: 64)"),
        "explore": Param(True, as_bool, "cap a job at twice the most GPUs it has run on "
                         "(Pollux's exploration; false: only max_gpus and max_replicas)"),
        "interference_avoidance": Param(True, as_bool,
                                        "at most one job spread over nodes per node"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.clock = RoundClock(self.p["interval"])
        self._most: dict[int, int] = {}  # job -> most GPUs it has run on
        self._restarts: dict[int, int] = {}  # job -> allocations changed since its first
        self._static = False  # rigid jobs of no model only (set by attach)
        self._held_memo: dict[int, tuple[tuple[int, ...], list[int]]] = {}

    def attach(self, ctx: Ctx) -> None:
        """Whether rounds may be skipped when nothing fits: no model, no elastic range."""
        self._static = all_rigid(ctx)

    # --- the objective's terms

    def _speedup(self, ctx: Ctx, job: JobState, nodes: int, gpus: int, fair: int,
                 cache: dict[tuple[int, int, int], float]) -> float:
        """Goodput on (nodes, gpus) over goodput on `fair` GPUs (on the fewest nodes)."""
        if gpus <= 0:
            return 0.0
        key = (job.idx, nodes, gpus)
        got = cache.get(key)
        if got is not None:
            return got
        perf = ctx.perf
        if perf is None or not perf.knows(job) or not self._most.get(job.idx):
            got = gpus / fair  # no measurements yet: linear (Pollux's prior)
        else:
            base = cache.get((job.idx, 1, -fair))
            if base is None:
                # Pollux evaluates its fitted model on `fair` GPUs of one node (so does a
                # job's fit, perf_agent=fitted); a measured profile may not hold that: on
                # the fewest nodes instead, else linear
                base = float(perf.goodput(job, fair, 1 if perf.fitted(job) else None))
                if base <= 0:
                    base = float(perf.goodput(job, 1, 1)) * fair
                cache[(job.idx, 1, -fair)] = base
            got = float(perf.goodput(job, gpus, nodes)) / base if base > 0 else 0.0
        cache[key] = got
        return got

    def _cap(self, ctx: Ctx, job: JobState) -> int:
        """The most GPUs the job may take this round."""
        s = job.spec
        if s.min_gpus is None and s.max_gpus is None:
            return s.num_gpus  # rigid: its size or nothing
        lo = bounds(job)[0]
        hi = min(most_gpus(ctx, job), self.p["max_replicas"])
        if self.p["explore"]:
            hi = min(hi, max(2 * self._most.get(job.idx, 0), 1))
        return max(hi, lo)

    # --- a round

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """A reallocation at each round boundary; nothing between them.

        Jobs that ask no GPU start at once, at any pass.
        """
        yield from start_cpu_only(ctx)
        if not self.clock.due(ctx):
            return
        # rigid jobs of no model: running ones keep their GPUs, so a round in which no
        # pending job fits the free GPUs by count decides nothing (an exact skip)
        if self._static and self._nothing_fits(ctx):
            return
        running = ctx.running()

        def key(j: JobState) -> tuple[float, float, int]:
            return ctx.attained_service(j), j.spec.submit_time, j.idx

        if self._static:
            yield from self._rigid_round(ctx, sorted(ctx.pending(), key=key))
            return
        jobs = sorted([*running.values(), *ctx.pending()], key=key)
        jobs = [j for j in jobs if j.spec.num_gpus > 0]
        if not jobs:
            return
        # a count no placement holds (fragmentation, one spread job a node) gives its GPUs
        # back: the round is planned again without that job, a few times at most
        blocked: set[int] = set()
        for _ in range(4):
            counts = self.counts(ctx, jobs, blocked)
            plan = self.place(ctx, jobs, counts)
            missed = {i for i, k in counts.items() if k and i not in plan}
            if not missed:
                break
            blocked |= missed
        for j in jobs:
            after = len(plan.get(j.idx, ()))
            if after and sorted(plan[j.idx]) != self._held(ctx, j):
                # Pollux counts restarts from the first allocation on
                self._restarts[j.idx] = self._restarts.get(j.idx, -1) + 1
            if after:
                self._most[j.idx] = max(self._most.get(j.idx, 0), after)
        yield from apply_allocation(ctx, plan, "pollux", held=lambda j: self._held(ctx, j))

    def _rigid_round(self, ctx: Ctx, pending: list[JobState]) -> Iterator[Decision]:
        """A round when every job is rigid and names no model: what `counts` gives then.

        Running jobs keep their GPUs and a pending job's gain is fixed, so the heap's
        outcome is the pending jobs by gain (then order), each taken while it fits; only
        pending jobs are looked at, and only new ones are started.
        """
        running = [j for j in ctx.running().values() if j.spec.num_gpus > 0]
        pending = [j for j in pending if j.spec.num_gpus > 0]
        if not pending:
            return
        topo = ctx.topology
        up = ctx.cluster.node_up
        sizes = [n.num_gpus for i, n in enumerate(topo.nodes) if up[i]]
        per_node = max(sizes, default=0)
        total = sum(sizes)
        if total <= 0 or per_node <= 0:
            return
        fair = max(1, math.ceil(total / (len(running) + len(pending))))
        scale = sum(1 for n in sizes if n) / total
        p = self.p["p"]
        delay = self.p["restart_delay"]
        max_nodes = self.p["max_nodes"]
        now = ctx.now
        sign = -1.0 if p > 0 else 1.0
        num = {j.idx: len(j.gpus) for j in running}
        left0 = total - sum(num.values())

        def term(s: float) -> float:
            v = s * scale + EPS
            return v ** p if p != 0 else -math.log(v)

        zero = term(0.0)
        ranked = []
        for i, j in enumerate(pending):
            k = j.spec.num_gpus
            if k > left0 or math.ceil(k / per_node) > max_nodes:
                continue
            rf = restart_factor(max(0.0, now - j.spec.submit_time),
                                self._restarts.get(j.idx, 0), delay)
            g = sign * (zero - term(k / fair * rf)) / k
            if g > 1e-15:
                ranked.append((-g, i, j))
        ranked.sort(key=lambda t: (t[0], t[1]))
        kept, free0, spread0 = self._keep(ctx, running, num)
        blocked: set[int] = set()
        for _ in range(4):
            left = left0
            want = dict(num)
            chosen = []
            for _, _, j in ranked:
                k = j.spec.num_gpus
                if j.idx in blocked or k > left:
                    continue
                want[j.idx] = k
                chosen.append(j)
                left -= k
                if left <= 0:
                    break
            plan = dict(kept)
            self._place_new(chosen, want, plan, list(free0), list(spread0))
            missed = {j.idx for j in chosen if j.idx not in plan}
            if not missed:
                break
            blocked |= missed
        new = {i: nodes for i, nodes in plan.items() if i not in kept}  # placement order
        for i, nodes in new.items():
            self._restarts[i] = self._restarts.get(i, -1) + 1
            self._most[i] = max(self._most.get(i, 0), len(nodes))
        yield from start_planned(ctx, new)

    def _held(self, ctx: Ctx, job: JobState) -> list[int]:
        """`held_nodes` of a job, computed again only when its GPUs change."""
        got = self._held_memo.get(job.idx)
        if got is None or got[0] is not job.gpus:
            got = self._held_memo[job.idx] = (job.gpus, held_nodes(ctx, job))
        return got[1]

    @staticmethod
    def _nothing_fits(ctx: Ctx) -> bool:
        """No pending job asks at most the free whole GPUs (every one whole-GPU)."""
        free = ctx.cluster.free_whole
        return all(key[0] > free and key[3] >= 1.0 for key in ctx.pending_classes())

    def counts(self, ctx: Ctx, jobs: list[JobState],
               blocked: frozenset[int] | set[int] = frozenset()) -> dict[int, int]:
        """GPUs per job maximising the power mean (marginal gains, then exchanges).

        `blocked` jobs get none this round (their count could not be placed).
        """
        topo = ctx.topology
        up = ctx.cluster.node_up
        per_node = max((n.num_gpus for i, n in enumerate(topo.nodes) if up[i]), default=0)
        total = sum(n.num_gpus for i, n in enumerate(topo.nodes) if up[i])
        if total <= 0 or per_node <= 0:
            return {}
        num_nodes = sum(1 for i, n in enumerate(topo.nodes) if up[i] and n.num_gpus)
        fair = max(1, math.ceil(total / len(jobs)))
        scale = num_nodes / total  # dominant share (1 GPU a replica) x nodes
        p = self.p["p"]
        delay = self.p["restart_delay"]
        now = ctx.now
        cache: dict[tuple[int, int, int], float] = {}
        base = {j.idx: len(j.gpus) for j in jobs}
        cap = {j.idx: (len(j.gpus) if j.idx in blocked else self._cap(ctx, j)) for j in jobs}
        lo = {j.idx: max(1, bounds(j)[0]) if j.spec.min_gpus is not None
              else j.spec.num_gpus for j in jobs}
        rigid = {j.idx for j in jobs if j.spec.min_gpus is None and j.spec.max_gpus is None}
        by_idx = {j.idx: j for j in jobs}

        terms: dict[tuple[int, int], float] = {}

        def term(idx: int, k: int) -> float:
            """The job's term of the power mean's sum at k GPUs (memoised this round)."""
            got = terms.get((idx, k))
            if got is None:
                got = terms[(idx, k)] = term_of(idx, k)
            return got

        def term_of(idx: int, k: int) -> float:
            """The job's term of the power mean's sum at k GPUs: (scaled + eps)^p."""
            j = by_idx[idx]
            s = self._speedup(ctx, j, max(1, math.ceil(k / per_node)), k, fair, cache) \
                if k else 0.0
            if k != base[idx] and k:
                age = max(0.0, now - j.spec.submit_time)
                s *= restart_factor(age, self._restarts.get(idx, 0), delay)
            v = s * scale + EPS
            return v ** p if p != 0 else -math.log(v)

        sign = -1.0 if p > 0 else 1.0  # p < 0 (or 0): minimise the sum; p > 0: maximise
        num = dict(base)  # from the current allocation (the GA's seed)
        left = total - sum(num.values())

        def step(idx: int, k: int) -> int:
            """The next size up from k (a rigid job: 0 -> its size)."""
            return by_idx[idx].spec.num_gpus if idx in rigid else (lo[idx] if k == 0 else k + 1)

        def gain(idx: int) -> tuple[float, int]:
            """Objective improvement per GPU of growing the job one step, and its cost."""
            k = num[idx]
            if idx in rigid and k:
                return 0.0, 0
            nxt = step(idx, k)
            if nxt > cap[idx]:
                return 0.0, 0
            if nxt > k + left or math.ceil(nxt / per_node) > self.p["max_nodes"]:
                return 0.0, 0
            return sign * (term(idx, k) - term(idx, nxt)) / (nxt - k), nxt - k

        # the sum is separable: a step changes only its own job's gain, so a heap of gains
        # (stale entries re-checked when they surface) gives the best step each time
        order = {j.idx: i for i, j in enumerate(jobs)}  # ties: the earlier in Pollux's order
        heap = []
        for idx in num:
            g, cost = gain(idx)
            if cost and g > 1e-15:
                heap.append((-g, order[idx], idx, num[idx]))
        heapq.heapify(heap)
        while left > 0 and heap:
            _, _, idx, at = heapq.heappop(heap)
            if at != num[idx]:
                continue  # stale
            g, cost = gain(idx)  # `left` may have shrunk below its step since
            if not cost or g <= 1e-15:
                continue
            if heap and -heap[0][0] > g + 1e-15:  # no longer the best: back in line
                heapq.heappush(heap, (-g, order[idx], idx, num[idx]))
                continue
            nxt = step(idx, num[idx])
            left -= nxt - num[idx]
            num[idx] = nxt
            g, cost = gain(idx)
            if cost and g > 1e-15:
                heapq.heappush(heap, (-g, order[idx], idx, num[idx]))
        # exchanges: one GPU (an elastic job's) from the job that loses least to the one
        # that gains most, while that helps (the sum is separable: gains add exactly)
        for _ in range(4 * len(num)):
            donors = [(sign * (term(i, num[i] - 1) - term(i, num[i])), i) for i in num
                      if i not in rigid and num[i] > lo[i]]
            # a job at 0 takes its first GPU (an elastic job's minimum is 1 here)
            takers = [(sign * (term(i, num[i]) - term(i, num[i] + 1)), i) for i in num
                      if i not in rigid and num[i] < cap[i] and (num[i] or lo[i] == 1)]
            if not donors or not takers:
                break
            loss, d = min(donors)
            win, t = max(takers)
            if d == t or win - loss <= 1e-12:
                break
            num[d] -= 1
            num[t] += 1
        return {i: k for i, k in num.items() if k > 0}

    def place(self, ctx: Ctx, jobs: list[JobState], num: dict[int, int]
              ) -> dict[int, list[int]]:
        """Nodes for the counts: unchanged jobs stay, the others one node or spread.

        A job goes to the one node that holds it (best fit), else over the nodes with the
        most free GPUs; a node takes at most one job spread over nodes.
        """
        plan, free, spread_on = self._keep(ctx, jobs, num)
        todo = [j for j in jobs if num.get(j.idx, 0) and j.idx not in plan]
        self._place_new(todo, num, plan, free, spread_on)
        return plan

    def _keep(self, ctx: Ctx, jobs: list[JobState], num: dict[int, int]
              ) -> tuple[dict[int, list[int]], list[int], list[bool]]:
        """Keep the jobs whose count is unchanged on their nodes.

        Returns their plan, the free GPUs per node left and the nodes holding a job
        spread over nodes.
        """
        topo = ctx.topology
        up = ctx.cluster.node_up
        free = [n.num_gpus if up[i] else 0 for i, n in enumerate(topo.nodes)]
        spread_on = [False] * len(free)
        plan: dict[int, list[int]] = {}
        for j in jobs:
            k = num.get(j.idx, 0)
            if k and len(j.gpus) == k:
                nodes = self._held(ctx, j)
                plan[j.idx] = nodes
                for n in nodes:
                    free[n] -= 1
                if len(set(nodes)) > 1:
                    for n in set(nodes):
                        spread_on[n] = True
        return plan, free, spread_on

    def _place_new(self, todo: list[JobState], num: dict[int, int],
                   plan: dict[int, list[int]], free: list[int], spread_on: list[bool]
                   ) -> None:
        """Add the `todo` jobs to `plan`, largest first (updating free and spread_on)."""
        todo = sorted(todo, key=lambda j: (-num[j.idx], j.spec.submit_time, j.idx))
        avoid = self.p["interference_avoidance"]
        nodes = range(len(free))
        for j in todo:
            k = num[j.idx]
            best = min(((free[n], n) for n in nodes if free[n] >= k), default=None)
            if best is not None:
                n = best[1]  # best fit
                plan[j.idx] = [n] * k
                free[n] -= k
                continue
            order = sorted((n for n in nodes if free[n] > 0
                            and not (avoid and spread_on[n])),
                           key=lambda n: (-free[n], n))
            got: list[int] = []
            for n in order:
                take = min(free[n], k - len(got))
                got.extend([n] * take)
                if len(got) == k:
                    break
            if len(got) == k and len(set(got)) <= self.p["max_nodes"]:
                plan[j.idx] = got
                for n in set(got):
                    free[n] -= got.count(n)
                    spread_on[n] = True
