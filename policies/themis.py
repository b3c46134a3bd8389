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

Heterogeneity (`perf=true`, as Gavel's `finish_time_fairness_perf`): rho is computed
over per-type throughputs (`gpu_speeds`). T_ideal is the job's time on an equal share of
every type, duration / iso x max(1, g N / G) with iso = sum_t speed_t N_t / G over the
types it may use; T_shared divides the remaining work by the speed it is getting (its
placement's type, or iso while it waits). So a job stuck on a slow type looks worse off
and is served first; at each lease boundary, after the auction, running jobs (worst rho
first) move (`Migrate`, paying the restore pause) to a faster type whose GPUs are free.
Placers already put a job with `gpu_speeds` on the fastest type that can hold it. Jobs
without `gpu_speeds` get exactly the rho of `perf=false`. Departure from Gavel: no LP
over time fractions; jobs keep whole leases and only move to free faster GPUs.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterator
from typing import Any, Final, cast

import numpy as np
from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from schedlab.policies.base import Ctx, Policy
from schedlab.policies.priority import (
    STOP_PARAM,
    ClassHeads,
    JobFeed,
    cpu_only_pending,
    priority_walk,
    start_cpu_only,
)
from schedlab.policies.victims import VictimPool, free_milli
from schedlab.sim.agenda import drain_watch
from schedlab.sim.cfuncs import bisect_right
from schedlab.sim.jobstate import PENDING, RUNNING, JobState
from schedlab.sim.model import (
    Decision,
    JobSpec,
    Migrate,
    Start,
    Unschedulable,
    job_milli,
    request_class,
)
from schedlab.sim.params import Param, as_bool, as_float

EPS: Final = 1e-9
_version: Final = operator.attrgetter("version")


def _rho(spec: JobSpec, done: float, now: float, n_jobs: int, total: int) -> float:
    share = spec.num_gpus * spec.gpu_share * n_jobs / total if total > 0 else math.inf
    ideal = spec.duration * (share if share > 1.0 else 1.0)
    remaining = spec.duration - done if done < spec.duration else 0.0
    return (now - spec.submit_time + remaining) / ideal


def isolated_speed(spec: JobSpec, gpu_types: dict[str, int]) -> float:
    """The job's speed on an equal share of every type it may use: sum_t speed_t N_t / N."""
    if not spec.gpu_speeds:
        return 1.0
    types = [spec.gpu_type] if spec.gpu_type in gpu_types else list(gpu_types)
    total = sum(gpu_types[t] for t in types)
    if total <= 0:
        return 1.0
    return sum(spec.speed_on(t) * gpu_types[t] for t in types) / total


@mypyc_attr(allow_interpreted_subclasses=True)
class JobTable:
    """Per-job constants of a run as arrays by job index.

    GPUs x share, duration, submit, and (with `perf`) the speed on an equal share of the
    types, else 1.
    """

    def __init__(self, ctx: Ctx, perf: bool = False) -> None:
        jobs = [ctx.job_at(i).spec for i in range(ctx.num_jobs)]
        self.g = np.array([s.num_gpus * s.gpu_share for s in jobs], dtype=float)
        self.dur = np.array([s.duration for s in jobs], dtype=float)
        self.submit = np.array([s.submit_time for s in jobs], dtype=float)
        self.demand = np.array([s.num_gpus * job_milli(s) for s in jobs], dtype=np.int64)
        self.demand_of: list[int] = self.demand.tolist()  # the same, read one by one
        self.work = np.zeros(len(jobs))  # work done, kept for the waiting jobs
        types = dict(ctx.topology.gpu_types)
        self.iso = np.array([isolated_speed(s, types) if perf else 1.0 for s in jobs],
                            dtype=float)
        ids: dict[tuple, int] = {}
        self.cls = np.array([ids.setdefault(request_class(s), len(ids)) for s in jobs],
                            dtype=np.int64)  # request class, numbered
        # whole GPUs the placer is not asked for unless free (elastic, fractional: 0)
        self.whole = np.array([s.num_gpus if s.gpu_share >= 1.0 and s.min_gpus is None
                               else 0 for s in jobs], dtype=np.int64)
        n = len(jobs)
        self.rank = np.empty(n, dtype=np.int64)  # position by (submit time, index)
        self.rank[np.lexsort((np.arange(n), self.submit))] = np.arange(n)
        self.cpu_only = not bool(self.demand.all())  # some job asks for no GPU

    def rho(self, ctx: Ctx, idx: np.ndarray, done: np.ndarray, n_jobs: int,
            speed: np.ndarray | None = None) -> np.ndarray:
        """`_rho` of the jobs `idx` with work `done` (the same arithmetic, vectorized).

        With `speed`, over per-type throughputs: remaining work at `speed`, the ideal on
        an equal share of the types.
        """
        now, total = ctx.now, ctx.cluster.healthy_gpus
        g, dur, submit = self.g[idx], self.dur[idx], self.submit[idx]
        share = g * n_jobs / total if total > 0 else np.full(len(idx), math.inf)
        # max(x, 1) and max(d, 0) are the where()s of `_rho` bit for bit (no NaN; a
        # positive difference where done < dur, +0.0 where they are equal)
        ideal = dur * np.maximum(share, 1.0)
        remaining = np.maximum(dur - done, 0.0)
        if speed is not None:
            ideal = ideal / self.iso[idx]
            remaining = remaining / speed
        return (now - submit + remaining) / ideal


def finish_time_fairness(ctx: Ctx, job: Any, n_jobs: int) -> float:
    """Rho of a job with `n_jobs` contending: (elapsed + remaining) / ideal finish time.

    `job`: a `JobState`, or anything with its `spec` that `ctx.progress` reads (untyped,
    so compiled code does not insist on the class).
    """
    return _rho(job.spec, ctx.progress(job), ctx.now, n_jobs, ctx.cluster.healthy_gpus)


def _faster_free(ctx: Ctx, job: JobState, now_speed: float
                 ) -> tuple[int, ...] | None:
    """Free GPUs of a type faster for the job than `now_speed`, from the placer."""
    got = ctx.place(job)
    if isinstance(got, Unschedulable) or not isinstance(got, tuple) or not got:
        return None
    topo = ctx.topology
    speed = min(job.spec.speed_on(t) for t in {topo.nodes[topo.gpu_node[g]].gpu_type
                                               for g in got})
    return got if speed > now_speed else None


def _something_fits(ctx: Ctx) -> bool:
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


class _Ranked:
    """Jobs already in walk order, read by `priority_walk` as a SortedList of (key, idx).

    An entry's key is made when the walk reaches it, so a walk costs the entries it
    visits, not the length of the queue (a SortedList of them all would).
    """

    def __init__(self, ids: list[int], key: Callable[[int], Any]) -> None:
        self.ids = ids
        self.key = key

    def _at(self, p: int) -> tuple[Any, int]:
        return (self.key(p), self.ids[p])

    def _from(self, p: int) -> Iterator[tuple[Any, int]]:
        return (self._at(q) for q in range(p, len(self.ids)))

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        return self._from(0)

    def irange(self, cur: tuple[Any, int], inclusive: tuple[bool, bool] = (False, True)
               ) -> Iterator[tuple[Any, int]]:
        """The entries after `cur` (the walk resumes there after a decision)."""
        lo, hi = 0, len(self.ids)
        while lo < hi:  # the first entry larger than cur
            mid = (lo + hi) // 2
            if self._at(mid) <= cur:
                lo = mid + 1
            else:
                hi = mid
        return self._from(lo)

    def walk(self) -> SortedList:
        """Typed as what `priority_walk` reads (it only iterates and calls irange)."""
        return cast(SortedList, self)


class _ClassList:
    """The entries of one request class of a `_Ranked`, read by the walk as a SortedList.

    `pos`: their positions in the ranked order, ascending; an entry is made when read.
    """

    __slots__ = ("pos", "ranked")

    def __init__(self, ranked: _Ranked, pos: list[int]) -> None:
        self.ranked = ranked
        self.pos = pos

    def __len__(self) -> int:
        return len(self.pos)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        return self.ranked._at(self.pos[i])

    def bisect_right(self, entry: tuple[Any, int]) -> int:
        """How many of the class's entries are <= `entry` (as SortedList.bisect_right)."""
        return bisect_right(self.pos, entry, key=self.ranked._at)


def _heads(ranked: _Ranked, cls: np.ndarray) -> tuple[ClassHeads | None, dict[tuple, int]]:
    """The ranked entries by request class (`cls`: number per position), and their counts.

    The heads let the walk merge the classes' next entries instead of meeting every
    entry of a failed class; the counts stop it once as many classes failed as there are.
    """
    if not len(cls):
        return None, {}
    order = np.argsort(cls, kind="stable")
    sc = cls[order]
    cuts = (np.flatnonzero(sc[1:] != sc[:-1]) + 1).tolist()
    starts, ends = [0, *cuts], [*cuts, len(sc)]
    pos = order.tolist()
    heads = ClassHeads()
    lists = {(c,): _ClassList(ranked, pos[a:b])
             for c, a, b in zip(sc[starts].tolist(), starts, ends, strict=True)}
    heads.lists = cast(dict[tuple, SortedList], lists)
    return heads, {ck: len(lst) for ck, lst in lists.items()}


class _Running:
    """The running GPU jobs as arrays (index, work, rate, segment start) for rho of all.

    Membership follows the policy's notifications (a job starts, stops and finishes with
    an event). A job's progress fields are read again only when it was noted or its
    `version` moved (every change of rate or placement bumps it, and `work` and
    `seg_start` only change with one or with an event), so a lease costs numpy work over
    the running jobs instead of a Python tuple each. The moves are those the run's
    progress watch (`moved`, `ctx.watch_progress`) saw; without one, or should it
    overflow, every running job's version is read.
    """

    def __init__(self, moved: set[int] | None = None) -> None:
        self.moved = moved
        self.jobs: list[JobState] = []
        self.slot: dict[int, int] = {}  # job index -> position in the arrays
        cap = 64
        self.idx = np.zeros(cap, dtype=np.int64)
        self.work, self.rate, self.seg = np.zeros(cap), np.zeros(cap), np.zeros(cap)
        self.speed = np.ones(cap)
        self.ver = np.full(cap, -1, dtype=np.int64)  # version when read; -1: read again

    def _grow(self) -> None:
        """Twice the room, the entries kept."""
        self.idx, self.work, self.rate = _more(self.idx), _more(self.work), _more(self.rate)
        self.seg, self.speed, self.ver = _more(self.seg), _more(self.speed), _more(self.ver, -1)

    def note(self, job: JobState, running: bool) -> None:
        """A noted job: (re)enter it when it runs, with its fields read at the next use."""
        k = self.slot.get(job.idx)
        if running:
            if k is None:
                k = len(self.jobs)
                if k == len(self.idx):
                    self._grow()
                self.jobs.append(job)
                self.slot[job.idx] = k
                self.idx[k] = job.idx
            self.ver[k] = -1
        elif k is not None:  # the last job takes its place
            last = len(self.jobs) - 1
            moved = self.jobs.pop()
            del self.slot[job.idx]
            if k != last:
                self.jobs[k] = moved
                self.slot[moved.idx] = k
                for a in (self.idx, self.work, self.rate, self.seg, self.speed, self.ver):
                    a[k] = a[last]

    def progress(self, now: float, dur: np.ndarray,
                 speed_of: Callable[[JobState], float] | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(job indices, work done by `now`, speed) of the running jobs.

        Work done is `JobState.progress_at` computed for all at once; the speed
        (`speed_of`, with perf) is read with the other fields.
        """
        jobs = self.jobs
        n = len(jobs)
        moved = drain_watch(self.moved, n)
        if moved is not None:
            slot, ver = self.slot, self.ver
            for i in moved:
                k = slot.get(i)
                if k is not None:
                    ver[k] = -1
            stale = np.flatnonzero(ver[:n] < 0).tolist()
        else:
            vers = np.fromiter(map(_version, jobs), np.int64, n)
            stale = np.flatnonzero(vers != self.ver[:n]).tolist()
        for k in stale:
            j = jobs[k]
            self.work[k], self.rate[k], self.seg[k] = j.work, j.rate, j.seg_start
            if speed_of is not None:
                self.speed[k] = speed_of(j)
            self.ver[k] = j.version
        idx, work, rate, seg = self.idx[:n], self.work[:n], self.rate[:n], self.seg[:n]
        prog = np.where(now <= seg, work, np.minimum(dur[idx], work + rate * (now - seg)))
        return idx, prog, self.speed[:n]


def _more(a: np.ndarray, fill: int = 0) -> np.ndarray:
    """`a` with as many entries again, set to `fill`."""
    return np.concatenate([a, np.full_like(a, fill)])


class _PairKey:
    """The walk key of position p, (neg[p], sub[p]): a callable object, not a closure.

    Compiled, a closure made in a generator (`_auction`) and the generator's frame
    would reference each other: a cycle per auction.
    """

    __slots__ = ("neg", "sub")

    def __init__(self, neg: list[float], sub: list[float]) -> None:
        self.neg, self.sub = neg, sub

    def __call__(self, p: int) -> tuple[float, float]:
        return (self.neg[p], self.sub[p])


def _start_in_order(ctx: Ctx, ids: list[int], cls: list[int]) -> Iterator[Start]:
    """Start the waiting jobs `ids` in this order where they fit now, never preempting.

    The visits of `priority_walk` without a victim pool (`cls`: request class numbers):
    a class that failed is skipped for the rest of the walk, which ends once every class
    failed or, after a failure, nothing is free. A plain loop over the list: an entry
    skipped costs a set lookup, not a key, a job lookup and a request class.
    """
    failed: set[int] = set()
    n_classes = len(set(cls))
    job_at, place = ctx.job_at, ctx.place
    for i, c in zip(ids, cls, strict=True):
        if c in failed:
            continue
        job = job_at(i)
        if job.status != PENDING:
            continue
        got = place(job)
        if isinstance(got, Unschedulable):
            failed.add(c)
            if len(failed) >= n_classes or free_milli(ctx) <= 0:
                return
            continue
        yield Start(job.job_id, got)


def _worst(neg: np.ndarray, rank: np.ndarray, m: int) -> np.ndarray | None:
    """Positions of the m smallest (neg, rank) in that order; None if a NaN is among them.

    As np.lexsort((rank, neg))[:m]: the m-th smallest key bounds the candidates, so only
    those are sorted (about m of them, not all).
    """
    if m <= 0:
        return np.zeros(0, dtype=np.int64)
    if m < len(neg):
        t = np.partition(neg, m - 1)[m - 1]
        if t != t:
            return None
        sel = np.flatnonzero(neg <= t)
    elif np.isnan(neg).any():
        return None
    else:
        sel = np.arange(len(neg))
    return sel[np.lexsort((rank[sel], neg[sel]))][:m]


def _start_fitting(ctx: Ctx, table: JobTable, ids: np.ndarray) -> Iterator[Start]:
    """`_start_in_order` of the waiting jobs `ids`, leaving out those that cannot fit.

    A job of whole GPUs asking for more than are free fails at once (the context does not
    ask the placer), and keeps failing in a walk that only starts jobs: leaving its class
    out starts the same jobs (that walk can start nothing once every class failed, or
    once nothing is free).
    """
    ids = ids[table.whole[ids] <= ctx.cluster.free_whole]
    return _start_in_order(ctx, ids.tolist(), table.cls[ids].tolist())


def _pool(rho: np.ndarray, submit: np.ndarray, idx: np.ndarray) -> VictimPool:
    """The running jobs as victims, keyed (-rho, submit time) as the waiting ones."""
    keys = zip((-rho).tolist(), submit.tolist(), strict=True)
    return VictimPool(list(zip(keys, idx.tolist(), strict=True)))


@mypyc_attr(allow_interpreted_subclasses=True)
class ThemisFtfPolicy(Policy):
    """Finish-time fair leases: the jobs with the worst rho get GPUs at each lease."""

    name = "themis-ftf"
    supports_roles = True
    container_jobs = False  # its job table (rho per job index) is fixed when it attaches
    description = "Themis finish-time fairness: leases re-auctioned to the worst rho first"
    params = {
        "lease": Param(600.0, as_float(0.0, lo_open=True),
                       "lease length (s): every lease, running jobs' GPUs are re-auctioned"),
        "fairness_knob": Param(
            0.8, as_float(0.0, 1.0),
            "f: GPUs are offered first to the 1 - f fraction of jobs with the worst rho",
        ),
        "stop": STOP_PARAM,
        "perf": Param(False, as_bool,
                      "heterogeneity-aware: rho over per-type throughputs (gpu_speeds), as "
                      "Gavel's finish_time_fairness_perf, and moves to faster free GPUs at "
                      "lease boundaries"),
    }

    def attach(self, ctx: Ctx) -> None:
        """Lease clock starts with the first pass; the job table is built on first need."""
        self.table: JobTable | None = None
        self.next_round = -math.inf
        self.armed = -math.inf
        self.counts = {"lease_auctions": 0, "auctions_between_leases": 0}
        if self.p["perf"]:
            self.counts["migrations"] = 0
        self.feed = JobFeed()
        self.waiting: dict[int, None] = {}  # waiting jobs with GPUs to ask for
        self.wait_demand = 0  # their milli-GPUs in all
        self.run = _Running(ctx.watch_progress())  # running jobs with GPUs

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Note the job for the next pass (see JobFeed)."""
        self.feed.note(job, kind)

    def _sync(self, ctx: Ctx) -> JobTable:
        """Bring the set of waiting GPU jobs (and their work done) up to date."""
        table = self._table(ctx)
        waiting, demand = self.waiting, table.demand_of
        for job in self.feed.changed(ctx):
            i = job.idx
            if job.status == PENDING and demand[i] > 0:
                if i not in waiting:
                    waiting[i] = None
                    self.wait_demand += demand[i]
                table.work[i] = job.work
            elif i in waiting:
                del waiting[i]
                self.wait_demand -= demand[i]
            self.run.note(job, job.status == RUNNING and job.spec.num_gpus > 0)
        return table

    def _table(self, ctx: Ctx) -> JobTable:
        if self.table is None:
            self.table = JobTable(ctx, self.p["perf"])
        return self.table

    def _type_speed(self, ctx: Ctx, job: JobState) -> float:
        """The job's speed on the slowest GPU type of its placement."""
        topo = ctx.topology
        nodes, gnode = topo.nodes, topo.gpu_node
        return min(job.spec.speed_on(t) for t in {nodes[gnode[g]].gpu_type for g in job.gpus})

    def metrics(self) -> dict[str, float]:
        """Counters of this run: auctions at lease boundaries and of freed GPUs between."""
        return dict(self.counts)

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """At a lease boundary re-auction everything; otherwise hand out free GPUs."""
        now = ctx.now
        boundary = now >= self.next_round - EPS
        if boundary:
            self.next_round = now + self.p["lease"]
        table = self._sync(ctx)
        if table.cpu_only:
            yield from start_cpu_only(ctx, cpu_only_pending(ctx))
        if ctx.pending_count and (boundary or _something_fits(ctx)):
            pending = np.fromiter(self.waiting, np.int64, len(self.waiting))
            if not boundary and self.wait_demand <= free_milli(ctx):
                # no contention: every waiting job gets GPUs, worst rho first (a job
                # waiting alone, as most do on an uncontended cluster, has no one to
                # be ordered against: its key is never compared, so none is computed)
                if len(pending) == 1:
                    queue = SortedList([((0.0, 0.0), int(pending[0]))])
                else:
                    keys = self._keys(ctx, pending, len(pending) + len(ctx.running()))
                    queue = SortedList((k, i) for i, k in keys.items())
                yield from priority_walk(ctx, queue, None, on_start=_nothing,
                                         on_stop=_nothing, reason=self.name)
            else:
                self.counts["lease_auctions" if boundary else "auctions_between_leases"] += 1
                yield from self._auction(ctx, pending, boundary)
        perf = self.p["perf"]
        if boundary and perf and free_milli(ctx) > 0:
            running = [j for j in ctx.running().values() if j.spec.num_gpus]
            if running:
                idx, rho = self._rhos(ctx, np.zeros(0, dtype=np.int64), running,
                                      ctx.pending_count + len(running))
                order = np.lexsort((idx, self._table(ctx).submit[idx], -rho))
                yield from self._move_faster(ctx, [running[k] for k in order.tolist()])
        # the next boundary matters only if someone waits and leases can be taken back,
        # or (perf) a running job could move to a faster type
        if self.armed < self.next_round and ctx.running() and (
                ctx.pending_count or (perf and self._could_move(ctx))):
            self.armed = self.next_round
            ctx.wake_at(self.next_round)

    def _could_move(self, ctx: Ctx) -> bool:
        """True when a running job with gpu_speeds is not on its fastest allowed type."""
        types = ctx.topology.gpu_types
        if len(types) < 2:
            return False
        for job in ctx.running().values():
            s = job.spec
            if s.gpu_speeds and job.gpus and self._type_speed(ctx, job) < max(
                    s.speed_on(t) for t in types if not s.gpu_type or t == s.gpu_type):
                return True
        return False

    def _rhos(self, ctx: Ctx, pending: np.ndarray, running: list[JobState],
              n: int) -> tuple[np.ndarray, np.ndarray]:
        """(job indices, rho) of the pending (indices) then the running jobs, `n` contending.

        Work done is the table's for waiting jobs (static while they wait) and, for the
        running ones, `JobState.progress_at` computed for all at once.
        """
        table = self._table(ctx)
        now = ctx.now
        idx, done = pending, table.work[pending]
        if running:
            r = np.array([(j.idx, j.work, j.rate, j.seg_start) for j in running])
            ridx = r[:, 0].astype(np.int64)
            work, rate, seg = r[:, 1], r[:, 2], r[:, 3]
            prog = np.where(now <= seg, work,
                            np.minimum(table.dur[ridx], work + rate * (now - seg)))
            idx = np.concatenate([idx, ridx])
            done = np.concatenate([done, prog])
        speed = None
        if self.p["perf"]:  # waiting: an equal share of the types; running: its type
            speed = np.concatenate([table.iso[idx[:len(pending)]], np.fromiter(
                (self._type_speed(ctx, j) for j in running), float, len(running))])
        return idx, table.rho(ctx, idx, done, n, speed)

    def _keys(self, ctx: Ctx, jobs: np.ndarray, n: int) -> dict[int, tuple]:
        """Priority keys (-rho, submit time) of these waiting jobs with `n` contending."""
        idx, rho = self._rhos(ctx, jobs, [], n)
        return {i: (-r, ctx.job_at(i).spec.submit_time)
                for i, r in zip(idx.tolist(), rho.tolist(), strict=True)}

    def _move_faster(self, ctx: Ctx, jobs: list[JobState]) -> Iterator[Decision]:
        """Move running jobs (in this order) to free GPUs of a faster type for them."""
        types = ctx.topology.gpu_types
        for job in jobs:
            if free_milli(ctx) <= 0:
                return
            s = job.spec
            if job.status != RUNNING or not s.gpu_speeds or not job.gpus or job.tasks:
                continue
            here = self._type_speed(ctx, job)
            if here >= max(s.speed_on(t) for t in types if not s.gpu_type or t == s.gpu_type):
                continue
            got = _faster_free(ctx, job, here)
            if got is not None:
                yield Migrate(job.job_id, got)
                self.counts["migrations"] += 1

    def _auction(self, ctx: Ctx, pending: np.ndarray, boundary: bool
                 ) -> Iterator[Decision]:
        """The worst rho first (taking expired leases at a boundary), then the others.

        The others go in a seeded random order; both walks visit only what they need.
        """
        table = self._table(ctx)
        perf = self.p["perf"]
        ridx, rdone, rspeed = self.run.progress(
            ctx.now, table.dur, functools.partial(self._type_speed, ctx) if perf else None)
        np_ = len(pending)
        n = np_ + len(ridx)
        idx = np.concatenate((pending, ridx))
        done = np.concatenate((table.work[pending], rdone))
        speed = np.concatenate((table.iso[pending], rspeed)) if perf else None
        rho = table.rho(ctx, idx, done, n, speed)
        m = math.ceil((1.0 - self.p["fairness_knob"]) * n)
        # the m worst rho (ties: earlier submission, then job index), the waiting ones
        worst = _worst(-rho, table.rank[idx], m)
        nan = worst is None  # NaN keys: only the walk's own search is exact
        if worst is None:
            worst = np.lexsort((idx, table.submit[idx], -rho))[:m]
        worst = worst[worst < np_]
        ids = idx[worst]
        if boundary or nan:
            neg, sub = (-rho[worst]).tolist(), table.submit[ids].tolist()
            first = _Ranked(ids.tolist(), _PairKey(neg, sub))
            heads, classes = _heads(first, table.cls[ids])
            pool = functools.partial(_pool, rho[np_:], table.submit[ridx], ridx) \
                if boundary else None
            yield from priority_walk(ctx, first.walk(), pool, on_start=_nothing,
                                     on_stop=_nothing, stop=self.p["stop"],
                                     reason=self.name, classes=classes,
                                     heads=None if nan else heads)
        else:
            yield from _start_fitting(ctx, table, ids)
        if free_milli(ctx) <= 0:
            return
        # the others that still wait (the walk only started jobs of its own), by
        # submission, then in a seeded random order
        later = np.ones(np_, dtype=bool)
        later[worst] = False
        rest = pending[later]
        if len(rest):
            rest = rest[np.argsort(table.rank[rest])]
            yield from _start_fitting(ctx, table, rest[ctx.rng.permutation(len(rest))])
