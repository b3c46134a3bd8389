"""Gavel (OSDI 2020): heterogeneity-aware max-min fairness over GPU types, in rounds.

Allocation (the paper's LP, solved with scipy's HiGHS `linprog`): X[j, t] is the fraction
of time job j should run on GPU type t. With throughput T[j, t] (the job's speed on t,
`gpu_speeds`, times the locality slowdown of its best placement on an idle t, since
Gavel's profiled throughputs include communication; 0 on a type it may not use or cannot
be placed on), scale s_j (its GPUs) and its throughput under an equal split of every
type, prop_j = sum_t T[j, t] N_t / sum N, Gavel maximizes min_j sum_t T[j, t] s_j X[j, t]
/ prop_j subject to sum_t X[j, t] <= 1 and sum_j s_j X[j, t] <= N_t (GPUs of type t).
Max-min optima are rarely unique; a second LP keeps the optimal minimum and maximizes the
total normalized throughput, so the allocation is deterministic and wastes nothing.
Identical jobs (same throughputs and GPUs) are one LP class with one allocation, which
the LP's symmetry allows and which keeps it as small as the variety of jobs. On a
cluster of one GPU type the optimum is computed in closed form instead: water-filling of
GPU time (job j gets min(s_j, z) GPUs over time, sum = the GPUs), which is the most even
of the LP's optima (Gavel's water-filling variant) and costs no solver call.
`gavel-mmf-agnostic` solves the same LP with every usable throughput set to 1, as
Gavel's heterogeneity-agnostic baseline does, and spreads each job's time over its usable
types in proportion to their sizes (the symmetric optimum: time on "a GPU", whatever its
type); jobs still run at their real speeds.

Rounds (`round`, Gavel's 360 s): at each round every job's priority on type t is
X[j, t] / (its share of the time type t ran jobs since the allocation was computed),
X x 1e9 before it has run there. Jobs are taken greedily per type (fastest types first,
the agnostic variant shuffles types each round with the run's seed, as Gavel does), in
decreasing priority, while the type has GPUs for them. A job chosen for the type it runs
on keeps its GPUs; others stop (`stop`, suspend by default: Gavel checkpoints at round
ends) and the chosen ones are placed on their type, largest first (on another type with
GPUs left when the engine's placer finds the chosen type's free GPUs too scattered; a
type the placer can never use for a job, even idle, has throughput 0 for it). The
allocation is recomputed when the set of jobs changed, at most every `reset_interval` s
(Gavel's 1920); a job that arrived since has priority 0 and gets only GPUs nobody else
wants (`unallocated=spare`, default), or, as in Gavel's simulator, nothing until the
next recomputation (`unallocated=wait`: on the 1000-job msr trace its mean first-start
delay is 1,060 s there against 185 s with spare GPUs). Nothing starts between rounds;
rounds go on while jobs wait and something can change (jobs run, a round started some,
or failed nodes will come back). With `stop=preempt`, a job that never checkpoints loses
its work at every switch, so rounds shorter than such jobs can keep them from ever
finishing: the engine fails such a job after `stop_retries` stops without checkpointed
progress, so the run ends. Per-job priority weights and Gavel's deficit tie-break are not
modelled (ties go to the larger allocation, then the earlier submission).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, vstack

from policies.base import Policy
from policies.priority import STOP_PARAM, cpu_only_pending, start_cpu_only
from sim.cluster import ClusterState
from sim.interfaces import Placer
from sim.jobstate import RUNNING, JobState
from sim.model import (
    MILLI,
    Decision,
    JobSpec,
    Preempt,
    Start,
    Suspend,
    Unschedulable,
    job_milli,
    request_class,
)
from sim.params import Param, as_choice, as_float
from sim.registry import PLACERS

if TYPE_CHECKING:
    from sim.context import SchedContext

EPS = 1e-9


def max_min_allocation(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray
                       ) -> np.ndarray:
    """Gavel's max-min fair time fractions X (jobs x types), efficiency as tie-break.

    Args:
        tput: Throughput of each job on each type (0: cannot run there).
        scale: GPUs each job takes (its scale factor).
        capacity: GPUs of each type.

    Returns:
        X with rows summing to <= 1 and sum_j scale_j X[j, t] <= capacity_t.
    """
    n, k = tput.shape
    if n == 0 or k == 0:
        return np.zeros((n, k))
    usable = (tput > 0) & (scale[:, None] <= capacity[None, :])
    if k == 1:
        return _one_type(scale, float(capacity[0]), usable[:, 0])
    tput = np.where(usable, tput, 0.0)
    # identical jobs (same throughputs and scale) get the same allocation: the LP is
    # convex and symmetric in them, so averaging any optimum over their permutations is
    # another optimum. Solving per class of identical jobs, weighted by its size, keeps
    # the LP as small as the variety of jobs rather than their number.
    keys = np.column_stack([tput, scale])
    uniq, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if len(uniq) < n:
        x = _max_min_classes(uniq[:, :k], uniq[:, k], counts.astype(float), capacity)
        return x[inverse]
    return _max_min_classes(tput, scale, np.ones(n), capacity)


def _max_min_classes(tput: np.ndarray, scale: np.ndarray, mult: np.ndarray,
                     capacity: np.ndarray) -> np.ndarray:
    """The max-min LP over classes of `mult` identical jobs each (one X row per class)."""
    n, k = tput.shape
    usable = tput > 0
    share = capacity / capacity.sum() if capacity.sum() > 0 else np.zeros(k)
    prop = tput @ share
    prop[prop <= 0] = 1.0
    coef = tput * scale[:, None] / prop[:, None]  # normalized throughput per unit of X
    rows = np.repeat(np.arange(n), k)
    cols = np.arange(n * k)
    # z - sum_t coef x <= 0 (jobs that can run somewhere) ; sum_t x <= 1 ;
    # sum_j scale x <= capacity
    live = usable.any(axis=1).astype(float)
    a_fair = coo_matrix((-coef.ravel(), (rows, cols)), shape=(n, n * k + 1)).tolil()
    a_fair[:, n * k] = live[:, None]
    a_time = coo_matrix((np.ones(n * k), (rows, cols)), shape=(n, n * k + 1))
    a_cap = coo_matrix((np.repeat(scale * mult, k), (np.tile(np.arange(k), n), cols)),
                       shape=(k, n * k + 1))
    a = vstack([a_fair.tocoo(), a_time, a_cap]).tocsr()
    b = np.concatenate([np.zeros(n), np.ones(n), capacity.astype(float)])
    bounds = [(0.0, 1.0 if u else 0.0) for u in usable.ravel()] + [(0.0, None)]
    c1 = np.zeros(n * k + 1)
    c1[-1] = -1.0
    first = linprog(c1, A_ub=a, b_ub=b, bounds=bounds, method="highs")
    if first.status != 0:
        return np.outer(np.ones(n), share) * usable
    z = float(first.x[-1])
    # keep everyone at >= z (a hair less, for the solver's tolerance), maximize the total
    b2 = b.copy()
    b2[:n] = 0.0
    bounds2 = bounds[:-1] + [(max(0.0, z * (1 - 1e-7) - 1e-9), None)]
    c2 = np.concatenate([-(coef * mult[:, None]).ravel(), [0.0]])
    second = linprog(c2, A_ub=a, b_ub=b2, bounds=bounds2, method="highs")
    x = second.x if second.status == 0 else first.x
    # rounded so that solver noise does not decide ties between equal jobs
    return np.round(np.clip(x[:-1].reshape(n, k), 0.0, 1.0), 6)


def _one_type(scale: np.ndarray, capacity: float, usable: np.ndarray) -> np.ndarray:
    """The same optimum in closed form for one GPU type: water-filling of GPU time.

    Speeds cancel out (each job's normalized throughput is s_j X_j), so max-min gives
    every usable job min(s_j, z) GPUs over time with sum_j min(s_j, z) = capacity (all
    of s_j when they fit); the total is then the capacity, so the tie-break is moot.
    """
    x = np.zeros((len(scale), 1))
    idx = np.flatnonzero(usable & (scale > 0))
    left, m = capacity, len(idx)
    z = math.inf
    for i in idx[np.argsort(scale[idx], kind="stable")]:
        if scale[i] * m <= left:  # small enough to get all its GPUs all the time
            left -= scale[i]
            m -= 1
        else:
            z = left / m
            break
    for i in idx:
        x[i, 0] = min(1.0, z / scale[i])
    return np.round(x, 6)


def spread_by_capacity(x: np.ndarray, usable: np.ndarray, capacity: np.ndarray
                       ) -> np.ndarray:
    """Each job's total time fraction spread over its usable types in proportion to size.

    What a heterogeneity-agnostic allocation means: time on "a GPU", whatever its type
    (the LP with equal throughputs has many optima; this is its symmetric one).
    """
    weights = usable * capacity[None, :]
    rows = weights.sum(axis=1, keepdims=True)
    rows[rows <= 0] = 1.0
    return np.round(x.sum(axis=1, keepdims=True) * weights / rows, 6)


class GavelPolicy(Policy):
    """Heterogeneity-aware max-min fairness (Gavel): an LP allocation run in rounds."""

    name = "gavel-mmf"
    description = "Gavel heterogeneity-aware max-min fairness over GPU types (LP, rounds)"
    params = {
        "round": Param(360.0, as_float(0.0, lo_open=True), "round length (s)"),
        "reset_interval": Param(1920.0, as_float(0.0),
                                "minimum seconds between two allocation recomputations"),
        "stop": STOP_PARAM,
        "unallocated": Param(
            "spare", as_choice("spare", "wait"),
            "a job that arrived after the last allocation: spare (runs on GPUs the "
            "allocated jobs leave free) or wait (nothing until the next recomputation, "
            "as Gavel's simulator)"),
    }
    aware: ClassVar[bool] = True

    def attach(self, ctx: SchedContext) -> None:
        """Round clock, allocation and time received since it was computed."""
        self.types = sorted(ctx.topology.gpu_types)
        self.next_round = -math.inf
        self.last_round = -math.inf
        self.armed = -math.inf
        self.alloc: dict[int, np.ndarray] = {}  # job idx -> X row over self.types
        self.alloc_jobs: frozenset[int] = frozenset()
        self.alloc_time = -math.inf
        self.type_ix = {t: i for i, t in enumerate(self.types)}
        self.recv: dict[int, np.ndarray] = {}  # job idx -> seconds held per type
        self.type_time = np.zeros(len(self.types))
        self._fits: dict[tuple, float] = {}
        self._tput: dict[int, np.ndarray] = {}
        self._idle: ClusterState | None = None
        self._placer: Placer | None = None
        self.counts = {"rounds": 0, "allocations": 0}

    def metrics(self) -> dict[str, float]:
        """Counters of this run: rounds and allocation (LP) recomputations."""
        return dict(self.counts)

    # --- allocation ---

    def throughput(self, ctx: SchedContext, job: JobState) -> np.ndarray:
        """The job's throughput per type as the LP sees it (1s when agnostic).

        Aware: the job's speed on the type times the locality slowdown of its best
        placement there, as a profiler would measure it (an 8-GPU job on 2-GPU nodes
        spans 4 nodes). 0 on a type the job may not use or cannot be placed on even when
        the type is idle (e.g. 8 GPUs on 2-GPU nodes under the consolidated placer).
        """
        out = self._tput.get(job.idx)
        if out is None:
            s = job.spec
            speeds = [self._idle_speed(ctx, s, t) for t in self.types]
            out = self._tput[job.idx] = np.array(
                speeds if self.aware else [1.0 if v > 0 else 0.0 for v in speeds])
        return out

    def _idle_speed(self, ctx: SchedContext, spec: JobSpec, gpu_type: str) -> float:
        """The job's speed on `gpu_type` placed by the engine's placer in an idle cluster.

        0 when it may not use the type or the placer cannot put it there.
        """
        if spec.gpu_type and spec.gpu_type != gpu_type:
            return 0.0
        key = (request_class(spec), spec.gpu_speeds, spec.locality_sensitivity, gpu_type)
        v = self._fits.get(key)
        if v is None:
            if self._idle is None or self._placer is None:  # both are set together
                self._idle = ClusterState(ctx.topology)
                self._placer = PLACERS[ctx.params["placer"]]()
            typed = dataclasses.replace(spec, gpu_type=gpu_type)
            got = self._placer.place(typed, self._idle)
            v = self._fits[key] = 0.0 if isinstance(got, Unschedulable) \
                else ctx.placement_speed(spec, got)
        return v

    def _capacity(self, ctx: SchedContext) -> np.ndarray:
        """GPUs of each type on healthy nodes."""
        topo = ctx.topology
        if ctx.cluster.healthy_gpus == topo.num_gpus:
            return np.array([topo.gpu_types[t] for t in self.types], dtype=float)
        cap = dict.fromkeys(self.types, 0)
        for node in topo.nodes:
            if node.num_gpus and ctx.cluster.node_up[node.index]:
                cap[node.gpu_type] += node.num_gpus
        return np.array([cap[t] for t in self.types], dtype=float)

    def _reallocate(self, ctx: SchedContext, jobs: list[JobState]) -> None:
        tput = np.array([self.throughput(ctx, j) for j in jobs]).reshape(
            len(jobs), len(self.types))
        scale = np.array([j.spec.num_gpus * job_milli(j.spec) / MILLI for j in jobs])
        capacity = self._capacity(ctx)
        x = max_min_allocation(tput, scale, capacity)
        if not self.aware:
            x = spread_by_capacity(x, (tput > 0) & (scale[:, None] <= capacity[None, :]),
                                   capacity)
        self.alloc = {j.idx: x[i] for i, j in enumerate(jobs)}
        self.alloc_jobs = frozenset(self.alloc)
        self._tput = {i: v for i, v in self._tput.items() if i in self.alloc_jobs}
        self.alloc_time = ctx.now
        self.counts["allocations"] += 1
        self.recv = {}
        self.type_time = np.zeros(len(self.types))

    def _credit(self, ctx: SchedContext) -> None:
        """Add the time each running job held its type since the last round."""
        topo = ctx.topology
        gnode, nodes = topo.gpu_node, topo.nodes
        since = max(self.last_round, self.alloc_time)
        now = ctx.now
        k = len(self.types)
        for j in ctx.running().values():
            if not j.gpus:
                continue
            ti = self.type_ix[nodes[gnode[j.gpus[0]]].gpu_type]
            dt = now - (since if since > j.held_since else j.held_since)
            if dt > 0:
                r = self.recv.get(j.idx)
                if r is None:
                    r = self.recv[j.idx] = np.zeros(k)
                r[ti] += dt
                self.type_time[ti] += dt

    def _rows(self, rows: dict[int, np.ndarray], jobs: list[JobState]) -> np.ndarray:
        """A jobs x types matrix of per-job rows (zeros for jobs without one)."""
        k = len(self.types)
        zero = np.zeros(k)
        return np.array([rows.get(j.idx, zero) for j in jobs]).reshape(len(jobs), k)

    def priorities(self, jobs: list[JobState], alloc: np.ndarray) -> np.ndarray:
        """Gavel's priorities of these jobs (rows) on every type (columns).

        Allocation (`alloc`, the jobs' rows of it) over the share of the type's time
        received: 0 without an allocation on the type; allocation x 1e9 before the job
        (or the type) received time since the allocation.
        """
        got = self._rows(self.recv, jobs)
        total = self.type_time
        share = np.divide(got, total, out=np.zeros_like(got), where=total > 0)
        fresh = share <= 0
        prio = np.divide(alloc, share, out=alloc * 1e9, where=~fresh)
        prio[alloc <= EPS] = 0.0
        return prio

    def type_order(self, ctx: SchedContext, jobs: list[JobState]) -> list[int]:
        """Types to fill first: fastest on average for these jobs (shuffled if agnostic).

        Speed as the LP sees it (type speed x the locality of the type's nodes), so a
        type whose nodes are too small for the jobs' gangs comes after the others.
        """
        if not self.aware:
            return [int(i) for i in ctx.rng.permutation(len(self.types))]
        speed = np.mean([self.throughput(ctx, j) for j in jobs], axis=0)
        return sorted(range(len(self.types)), key=lambda i: (-speed[i], self.types[i]))

    # --- rounds ---

    def schedule(self, ctx: SchedContext) -> Iterator[Decision]:
        """At a round boundary: allocate if needed, pick this round's jobs, place them."""
        now = ctx.now
        yield from start_cpu_only(ctx, cpu_only_pending(ctx))
        if now < self.next_round - EPS:
            return
        jobs = [j for j in ctx.pending() if j.spec.num_gpus]
        jobs += [j for j in ctx.running().values() if j.spec.num_gpus]
        if not jobs:
            self.last_round = now
            return
        self._credit(ctx)
        self.last_round = now
        self.next_round = now + self.p["round"]
        ids = frozenset(j.idx for j in jobs)
        if ids != self.alloc_jobs and (not self.alloc
                                       or now - self.alloc_time >= self.p["reset_interval"]):
            jobs.sort(key=lambda j: j.idx)
            self._reallocate(ctx, jobs)
        self.counts["rounds"] += 1
        made = yield from self._round(ctx, jobs)
        waiting = made or ctx.running() or ctx.cluster.healthy_gpus < ctx.topology.num_gpus
        if not waiting and self.p["unallocated"] == "wait":
            waiting = any(j.idx not in self.alloc for j in jobs)  # for the next allocation
        if waiting and self.armed < self.next_round:
            self.armed = self.next_round
            ctx.wake_at(self.next_round)

    def _round(self, ctx: SchedContext, jobs: list[JobState]
               ) -> Generator[Decision, None, int]:
        """Pick this round's (job, type) pairs greedily, then stop, keep and place."""
        left = {t: int(c) * MILLI for t, c in zip(self.types, self._capacity(ctx), strict=True)}
        tput = {j.idx: self.throughput(ctx, j) for j in jobs}
        need = {j.idx: j.spec.num_gpus * job_milli(j.spec) for j in jobs}
        chosen: dict[int, int] = {}  # job idx -> type index for this round
        order = self.type_order(ctx, jobs)
        # rank per type: priority, then larger allocation, earlier submission, job index
        alloc = self._rows(self.alloc, jobs)
        prio = self.priorities(jobs, alloc)
        tp = self._rows(tput, jobs)
        submit = np.array([j.spec.submit_time for j in jobs])
        ids = np.array([j.idx for j in jobs])
        taken = np.zeros(len(jobs), dtype=bool)
        if self.p["unallocated"] == "wait":  # not in the allocation: nothing this round
            taken |= np.array([j.idx not in self.alloc for j in jobs], dtype=bool)
        for ti in order:
            t = self.types[ti]
            cand = np.flatnonzero((tp[:, ti] > 0) & ~taken)
            if not len(cand) or left[t] <= 0:
                continue
            rank = cand[np.lexsort((ids[cand], submit[cand], -alloc[cand, ti],
                                    -prio[cand, ti]))]
            for i in rank.tolist():
                idx = jobs[i].idx
                if need[idx] <= left[t]:
                    chosen[idx] = ti
                    taken[i] = True
                    left[t] -= need[idx]
                    if left[t] <= 0:
                        break
        topo = ctx.topology
        stop = Suspend if self.p["stop"] == "suspend" else Preempt
        made = 0
        for j in jobs:
            if j.status == RUNNING and j.gpus:
                here = self.types.index(topo.nodes[topo.gpu_node[j.gpus[0]]].gpu_type)
                if chosen.get(j.idx) != here:
                    yield stop(j.job_id, f"{self.name}: round")
                    made += 1
        starts = sorted((j for j in jobs if j.idx in chosen and j.status != RUNNING),
                        key=lambda j: (-need[j.idx], j.idx))
        for j in starts:
            # the chosen type first; if its free GPUs are too scattered for the job, any
            # other usable type with GPUs left this round
            first = chosen[j.idx]
            for ti in [first] + [i for i in order if i != first and tput[j.idx][i] > 0
                                 and need[j.idx] <= left[self.types[i]]]:
                t = self.types[ti]
                spec = j.spec if j.spec.gpu_type == t or len(self.types) == 1 \
                    else dataclasses.replace(j.spec, gpu_type=t)
                got = ctx.place(spec)
                if not isinstance(got, Unschedulable):
                    if ti != first:
                        left[t] -= need[j.idx]
                        left[self.types[first]] += need[j.idx]
                    yield Start(j.job_id, got)
                    made += 1
                    break
        return made


class GavelAgnosticPolicy(GavelPolicy):
    """Gavel's heterogeneity-agnostic max-min fairness: the LP ignores GPU speeds."""

    name = "gavel-mmf-agnostic"
    description = "max-min fairness blind to GPU speeds (Gavel's agnostic baseline)"
    aware = False
