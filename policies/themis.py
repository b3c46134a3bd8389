"""Themis (NSDI 2020): finish-time fairness with leases, the worst-off jobs served first.

A job's finish-time fairness rho = T_shared / T_ideal. T_ideal is its run time alone on
1/N of the cluster (N = jobs with GPUs in the system, pending or running, G = healthy
GPUs): duration x max(1, g N / G) for a job of g GPUs, since a gang larger than its
share G/N would time-share that share. T_shared is the finish time it is heading for if
it runs from now on: time since submission + remaining ideal work. rho > 1 means the job
is worse off than on its private 1/N cluster.

Leases: every `lease` seconds all running jobs' leases expire at once and their GPUs are
re-auctioned with the free ones. The auction is simplified as follows (rigid gangs and a
placement-blind valuation make every bid for a gang worth the same rho improvement, so
the partial-allocation auction reduces to an order): the ceil((1 - f) N) jobs with the
worst rho (`fairness_knob` f) are offered GPUs first, worst rho first; each takes free
GPUs or, when the placer says preemption helps, the GPUs of expired-lease jobs with a
better rho (those are stopped, per `stop`). Expired jobs nobody needed renew their lease.
GPUs left over go to the other waiting jobs in a seeded random order, without preemption
(Themis' leftover allocation keeps the cluster work-conserving). Between lease
boundaries, GPUs freed by completions are handed out the same way, without preemption
(and when they cover every waiting job, simply worst rho first).
Departures from Themis: leases are synchronized on one clock instead of per allocation,
an app is a single job, and there are no placement-sensitive bids or hidden payments.
With `stop=preempt`, jobs that never checkpoint lose their work at each lost lease.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
from sortedcontainers import SortedList

from policies.base import Policy
from policies.priority import STOP_PARAM, cpu_only_pending, priority_walk, start_cpu_only
from policies.victims import VictimPool, free_milli
from sim.jobstate import PENDING, JobState
from sim.model import Decision, JobSpec, job_milli
from sim.params import Param, as_float

if TYPE_CHECKING:
    from sim.context import SchedContext

EPS = 1e-9


def _rho(spec: JobSpec, done: float, now: float, n_jobs: int, total: int) -> float:
    share = spec.num_gpus * spec.gpu_share * n_jobs / total if total > 0 else math.inf
    ideal = spec.duration * (share if share > 1.0 else 1.0)
    remaining = spec.duration - done if done < spec.duration else 0.0
    return (now - spec.submit_time + remaining) / ideal


class JobTable:
    """Per-job constants of a run as arrays by job index (GPUs x share, duration, submit)."""

    def __init__(self, ctx: SchedContext) -> None:
        jobs = [ctx.job_at(i).spec for i in range(ctx.num_jobs)]
        self.g = np.array([s.num_gpus * s.gpu_share for s in jobs], dtype=float)
        self.dur = np.array([s.duration for s in jobs], dtype=float)
        self.submit = np.array([s.submit_time for s in jobs], dtype=float)
        self.demand = np.array([s.num_gpus * job_milli(s) for s in jobs], dtype=np.int64)

    def rho(self, ctx: SchedContext, idx: np.ndarray, done: np.ndarray, n_jobs: int
            ) -> np.ndarray:
        """`_rho` of the jobs `idx` with work `done` (the same arithmetic, vectorized)."""
        now, total = ctx.now, ctx.cluster.healthy_gpus
        g, dur, submit = self.g[idx], self.dur[idx], self.submit[idx]
        share = g * n_jobs / total if total > 0 else np.full(len(idx), math.inf)
        ideal = dur * np.where(share > 1.0, share, 1.0)
        remaining = np.where(done < dur, dur - done, 0.0)
        return (now - submit + remaining) / ideal


def finish_time_fairness(ctx: SchedContext, job: JobState, n_jobs: int) -> float:
    """Rho of a job with `n_jobs` contending: (elapsed + remaining) / ideal finish time."""
    return _rho(job.spec, ctx.progress(job), ctx.now, n_jobs, ctx.cluster.healthy_gpus)


def _something_fits(ctx: SchedContext) -> bool:
    """True when some waiting request is no larger than the free capacity (by count)."""
    free = free_milli(ctx)
    for lst in ctx.pending_classes().values():
        if lst:
            s = ctx.job_at(lst[0][1]).spec
            if s.num_gpus * job_milli(s) <= free:
                return True
    return False


def _nothing(job: JobState) -> None:
    """The walk's callbacks: Themis keeps no index between passes."""


class ThemisFtfPolicy(Policy):
    """Finish-time fair leases: the jobs with the worst rho get GPUs at each lease."""

    name = "themis-ftf"
    description = "Themis finish-time fairness: leases re-auctioned to the worst rho first"
    params = {
        "lease": Param(600.0, as_float(0.0, lo_open=True),
                       "lease length (s): every lease, running jobs' GPUs are re-auctioned"),
        "fairness_knob": Param(
            0.8, as_float(0.0, 1.0),
            "f: GPUs are offered first to the 1 - f fraction of jobs with the worst rho",
        ),
        "stop": STOP_PARAM,
    }

    def attach(self, ctx: SchedContext) -> None:
        """Lease clock starts with the first pass; the job table is built on first need."""
        self.table: JobTable | None = None
        self.next_round = -math.inf
        self.armed = -math.inf
        self.counts = {"lease_auctions": 0, "auctions_between_leases": 0}

    def metrics(self) -> dict[str, float]:
        """Counters of this run: auctions at lease boundaries and of freed GPUs between."""
        return dict(self.counts)

    def schedule(self, ctx: SchedContext) -> Iterator[Decision]:
        """At a lease boundary re-auction everything; otherwise hand out free GPUs."""
        now = ctx.now
        boundary = now >= self.next_round - EPS
        if boundary:
            self.next_round = now + self.p["lease"]
        yield from start_cpu_only(ctx, cpu_only_pending(ctx))
        if ctx.pending_count and (boundary or _something_fits(ctx)):
            if self.table is None:
                self.table = JobTable(ctx)
            demand = self.table.demand
            pending = [ctx.job_at(k[1]) for lst in ctx.pending_classes().values()
                       for k in lst if demand[k[1]] > 0]
            if not boundary and sum(int(demand[j.idx]) for j in pending) <= free_milli(ctx):
                # no contention: every waiting job gets GPUs, worst rho first
                keys = self._keys(ctx, pending, len(pending) + len(ctx.running()))
                queue = SortedList((k, i) for i, k in keys.items())
                yield from priority_walk(ctx, queue, None, on_start=_nothing,
                                         on_stop=_nothing, reason=self.name)
            else:
                self.counts["lease_auctions" if boundary else "auctions_between_leases"] += 1
                yield from self._auction(ctx, pending, boundary)
        # the next boundary matters only if someone waits and leases can be taken back
        if ctx.pending_count and ctx.running() and self.armed < self.next_round:
            self.armed = self.next_round
            ctx.wake_at(self.next_round)

    def _rhos(self, ctx: SchedContext, pending: list[JobState], running: list[JobState],
              n: int) -> tuple[np.ndarray, np.ndarray]:
        """(job indices, rho) of the pending then the running jobs, `n` contending."""
        if self.table is None:
            self.table = JobTable(ctx)
        now = ctx.now
        idx = np.fromiter((j.idx for j in pending), np.int64, len(pending))
        done = np.fromiter((j.work for j in pending), float, len(pending))  # static
        if running:
            idx = np.concatenate([idx, np.fromiter((j.idx for j in running), np.int64,
                                                   len(running))])
            done = np.concatenate([done, np.fromiter((j.progress_at(now) for j in running),
                                                     float, len(running))])
        return idx, self.table.rho(ctx, idx, done, n)

    def _keys(self, ctx: SchedContext, jobs: list[JobState], n: int) -> dict[int, tuple]:
        """Priority keys (-rho, submit time) of these waiting jobs with `n` contending."""
        idx, rho = self._rhos(ctx, jobs, [], n)
        return {int(i): (-float(r), j.spec.submit_time)
                for i, r, j in zip(idx, rho, jobs, strict=True)}

    def _auction(self, ctx: SchedContext, pending: list[JobState], boundary: bool
                 ) -> Iterator[Decision]:
        running = [j for j in ctx.running().values() if j.spec.num_gpus]
        n = len(pending) + len(running)
        idx, rho = self._rhos(ctx, pending, running, n)
        assert self.table is not None
        submit = self.table.submit[idx]
        m = math.ceil((1.0 - self.p["fairness_knob"]) * n)
        # the m worst rho (ties: earlier submission, then job index)
        order = np.lexsort((idx, submit, -rho))
        np_ = len(pending)
        first = SortedList(((-float(rho[k]), float(submit[k])), int(idx[k]))
                           for k in order[:m].tolist() if k < np_)
        pool = (lambda: VictimPool([((-float(rho[k]), float(submit[k])), int(idx[k]))
                                    for k in range(np_, n)])) if boundary else None
        yield from priority_walk(ctx, first, pool, on_start=_nothing, on_stop=_nothing,
                                 stop=self.p["stop"], reason=self.name)
        if free_milli(ctx) <= 0:
            return
        # the others that still wait, by submission, then in a seeded random order
        later = np.ones(np_, dtype=bool)
        later[order[:m][order[:m] < np_]] = False
        cand = np.flatnonzero(later)
        cand = cand[np.lexsort((idx[cand], submit[cand]))]
        rest = [pending[k] for k in cand.tolist() if pending[k].status == PENDING]
        if rest:
            perm = ctx.rng.permutation(len(rest))
            leftover = SortedList(((r,), rest[int(i)].idx) for r, i in enumerate(perm))
            yield from priority_walk(ctx, leftover, None, on_start=_nothing,
                                     on_stop=_nothing, reason=self.name)
