"""EASY and conservative backfilling, the HPC standards, with trace durations as estimates.

A job's user estimate is `estimate_factor` x its trace duration (1: exact; > 1: the
overestimates users submit). A running job is expected to end its estimate after it got
its GPUs (or now, once it overran). Reservations count GPU capacity in milli-GPUs (EASY:
of the types the head may use; conservative: of all types), as HPC schedulers count
nodes; a job is then placed by the engine's placer, so a start the counts allow can
still wait for a placement.

`easy-backfill` (Lifka 1995; Mu'alem & Feitelson 2001): jobs start in arrival order until
one cannot be placed. That head gets a reservation at the shadow time, the earliest
expected end at which enough capacity is free for it; `extra` is what is left over at
that time. A later job starts now if it can be placed and either ends (by its estimate)
before the shadow time or fits in `extra` (which it then uses up).

`conservative-backfill` (Mu'alem & Feitelson 2001): every queued job in arrival order
gets the earliest reservation in a profile of future free capacity that no earlier
reservation is disturbed by; a job whose reservation is now starts. The profile is
rebuilt each pass (so reservations move earlier when jobs end early). For speed, only the
first `max_reservations` (25) waiting jobs that cannot start at once are given
reservations; later ones start only if they fit now without disturbing any of those
(each pass costs about `max_reservations` x the running jobs).

Both scan the queue past the head by request class (`class_backfill`), which gives the
same starts as a job-by-job scan in arrival order at a fraction of the cost.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator
from typing import Final

import numpy as np
from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from schedlab.policies.base import Ctx, Policy
from schedlab.policies.priority import JobFeed
from schedlab.policies.victims import free_milli
from schedlab.sim.cfuncs import bisect_left, bisect_right, heappop, heappush
from schedlab.sim.jobstate import PENDING, RUNNING, JobState
from schedlab.sim.model import (
    MILLI,
    Decision,
    JobSpec,
    Start,
    Unschedulable,
    job_milli,
    request_class,
)
from schedlab.sim.params import Param, as_float, as_int

ESTIMATE: Final = Param(1.0, as_float(1.0),
                 "user estimate = this factor x the trace duration (1: exact estimates)")


def demand(spec: JobSpec) -> int:
    """Milli-GPUs the job holds while it runs."""
    return spec.num_gpus * job_milli(spec)


def _allowed(ctx: Ctx, spec: JobSpec, gpus: tuple[int, ...]) -> int:
    """How many of `gpus` are of a type `spec` may use."""
    if not spec.gpu_type:
        return len(gpus)
    topo = ctx.topology
    return sum(1 for g in gpus if topo.nodes[topo.gpu_node[g]].gpu_type == spec.gpu_type)


def _free_for(ctx: Ctx, spec: JobSpec) -> int:
    """Free milli-GPUs of the types `spec` may use (whole GPUs only for a typed job)."""
    if not spec.gpu_type:
        return free_milli(ctx)
    return ctx.cluster.free_by_type.get(spec.gpu_type, 0) * MILLI


class _Lane:
    """One request class's waiting jobs in arrival order, their estimates in an array.

    So the first job after a queue key within an estimate limit is one vectorised
    comparison, not a walk of the class. A job that stops waiting stays as a tombstone
    (estimate inf, key in `gone`) until half the lane is tombstones.
    """

    __slots__ = ("keys", "est", "gone")

    def __init__(self) -> None:
        self.keys: list[tuple] = []  # queue keys, ascending (tombstones included)
        self.est: np.ndarray = np.empty(16)  # estimate per key (inf: tombstone); spare tail
        self.gone: set[tuple] = set()  # the tombstones' keys

    def __len__(self) -> int:
        return len(self.keys) - len(self.gone)  # the jobs still waiting

    def add(self, key: tuple, estimate: float) -> None:
        """A job starts waiting (usually the latest arrival, so it goes last)."""
        keys = self.keys
        n = len(keys)
        if not keys or key > keys[-1]:
            pos = n
        else:
            pos = bisect_left(keys, key)
            if keys[pos] == key:  # back before its tombstone was cleared
                self.gone.discard(key)
                self.est[pos] = estimate
                return
        if n == len(self.est):
            self.est = np.concatenate((self.est, np.empty(n)))
        est = self.est
        if pos < n:
            est[pos + 1:n + 1] = est[pos:n].copy()
        keys.insert(pos, key)
        est[pos] = estimate

    def drop(self, key: tuple) -> None:
        """A job stops waiting: tombstone it, compacting when half the lane is gone."""
        keys = self.keys
        self.est[bisect_left(keys, key)] = math.inf
        gone = self.gone
        gone.add(key)
        if len(gone) >= 16 and 2 * len(gone) >= len(keys):
            keep = [p for p, k in enumerate(keys) if k not in gone]
            est = np.empty(max(16, 2 * len(keep)))
            est[:len(keep)] = self.est[keep]
            self.keys = [keys[p] for p in keep]
            self.est = est
            gone.clear()

    def first(self, ctx: Ctx, since: tuple, limit: float) -> tuple | None:
        """Key of the first pending job after `since` whose estimate is within `limit`.

        `limit` is finite, so tombstones never match; a job started earlier in the pass
        (still in the lane until the next sync) is passed over.
        """
        keys = self.keys
        n = len(keys)
        pos = bisect_right(keys, since)
        est = self.est
        while pos < n:
            ok = est[pos:n] <= limit
            j = int(ok.argmax())
            if not ok[j]:
                return None
            key = keys[pos + j]
            if ctx.job_at(key[1]).status == PENDING:
                return key
            pos += j + 1
        return None


@mypyc_attr(allow_interpreted_subclasses=True)
class EstimateIndex:
    """Pending GPU jobs per request class with their estimates, kept current from `notify`.

    Lets a backfill pass find the earliest-arriving job of a class whose estimate is at
    most a limit without walking the whole class.
    """

    def __init__(self) -> None:
        self.feed = JobFeed()
        self.lanes: dict[tuple, _Lane] = {}
        self.entry: dict[int, tuple[tuple, tuple]] = {}  # idx -> (class, (est, key))

    def sync(self, ctx: Ctx, estimate: Callable[[JobSpec], float]) -> None:
        """Add the jobs that started waiting, drop those that stopped."""
        for job in self.feed.changed(ctx):
            waiting = job.status == PENDING and job.spec.num_gpus > 0
            old = self.entry.get(job.idx)
            if waiting and old is None:
                ck = request_class(job.spec)
                e = (estimate(job.spec), (job.spec.submit_time, job.idx))
                lane = self.lanes.get(ck)
                if lane is None:
                    lane = self.lanes[ck] = _Lane()
                lane.add(e[1], e[0])
                self.entry[job.idx] = (ck, e)
            elif not waiting and old is not None:
                del self.entry[job.idx]
                lane = self.lanes[old[0]]
                lane.drop(old[1][1])
                if not len(lane):
                    del self.lanes[old[0]]

    def first_within(self, ctx: Ctx, ck: tuple, since: tuple, limit: float
                     ) -> tuple | None:
        """The earliest waiting job of request class `ck` after `since` within `limit`.

        Returns its queue key, or None (`limit` is finite). `ck` is the queue's class
        key, the request_class its jobs had when queued, as the lanes' keys are.
        """
        lane = self.lanes.get(ck)
        return None if lane is None else lane.first(ctx, since, limit)


def class_backfill(
    ctx: Ctx,
    index: EstimateIndex,
    after: tuple,
    fits: Callable[[JobSpec], bool],
    limit: Callable[[JobSpec], float],
    take: Callable[[JobState, tuple[int, ...]], bool],
) -> Iterator[Decision]:
    """Start, in arrival order, the pending jobs after queue key `after` that qualify.

    Equivalent to scanning the queue in arrival order, but by request class: a class
    whose request `fits` refuses or that the placer refuses is skipped whole, and each
    class offers only its first job whose estimate is within the class's `limit`
    (infinite: any job), found through the estimate index; a pass thus costs about the
    classes, not the queue. `take` sees the placement and may still refuse it (it also
    records what the start uses). Rules only tighten as jobs start, so a job refused once
    stays refused for the pass.
    """
    classes = ctx.pending_classes()
    heap: list[tuple[tuple, tuple]] = []
    # (no nested helper: compiled, a closure and the generator's frame would reference
    # each other, a cycle per pass that only the cyclic collector frees)
    for ck, lst in classes.items():
        if lst:
            _offer(ctx, index, heap, fits, limit, ck, lst, after)
    dead: set[tuple] = set()
    while heap:
        key, ck = heappop(heap)
        lst = classes.get(ck)
        if ck in dead or not lst:
            continue
        job = ctx.job_at(key[1])
        if job.status != PENDING:
            continue
        if not fits(job.spec):
            dead.add(ck)
            continue
        if index.entry.get(job.idx, (None, (0.0,)))[1][0] > limit(job.spec):
            _offer(ctx, index, heap, fits, limit, ck, lst, key)
            continue
        got = ctx.place(job)
        if isinstance(got, Unschedulable):
            dead.add(ck)
            continue
        if not take(job, got):
            _offer(ctx, index, heap, fits, limit, ck, lst, key)
            continue
        yield Start(job.job_id, got)
        lst = classes.get(ck)
        if lst:
            _offer(ctx, index, heap, fits, limit, ck, lst, key)


def _offer(ctx: Ctx, index: EstimateIndex, heap: list[tuple[tuple, tuple]],
           fits: Callable[[JobSpec], bool], limit: Callable[[JobSpec], float],
           ck: tuple, lst: SortedList, since: tuple) -> None:
    """Push class `ck`'s first qualifying job after `since` (`class_backfill`), if any."""
    spec = ctx.job_at(lst[0][1]).spec
    if not fits(spec):
        return
    bound = limit(spec)
    if bound == math.inf:
        i = lst.bisect_right(since)
        key = lst[i] if i < len(lst) else None
    else:
        key = index.first_within(ctx, ck, since, bound)
    if key is not None:
        heappush(heap, (key, ck))


@mypyc_attr(allow_interpreted_subclasses=True)
class EndIndex:
    """Running GPU jobs ordered by expected end (start + estimate), kept from `notify`.

    A reservation then reads the ends it needs, earliest first, instead of sorting every
    running job at each pass. Beside it, the milli-GPUs released at each distinct end
    (summed, ends ascending), so conservative backfilling builds its profile from a few
    list slices (`steps`) instead of a tuple per running job.
    """

    def __init__(self) -> None:
        self.feed = JobFeed()
        self.order: SortedList = SortedList()  # (start + estimate, idx)
        self.key: dict[int, tuple[float, int]] = {}
        self.held: dict[int, int] = {}  # idx -> milli-GPUs held when last synced
        self.shared: set[int] = set()  # jobs holding part of a GPU when last synced
        self._at: list[float] = []  # distinct expected ends, ascending
        self._sum: list[int] = []  # milli-GPUs released at each (sum over its jobs)
        self._count: list[int] = []  # jobs ending at each

    def sync(self, ctx: Ctx, estimate: Callable[[JobSpec], float]) -> None:
        """Re-key the jobs that started, moved or stopped since the last call."""
        for job in self.feed.changed(ctx):
            old = self.key.pop(job.idx, None)
            if old is not None:
                self.order.remove(old)
                self._release(old[0], -self.held.pop(job.idx), -1)
                self.shared.discard(job.idx)
            if job.status == RUNNING and job.gpus:
                k = (job.held_since + estimate(job.spec), job.idx)
                self.key[job.idx] = k
                self.order.add(k)
                m = self.held[job.idx] = len(job.gpus) * job.milli
                self._release(k[0], m, 1)
                if job.milli != MILLI:
                    self.shared.add(job.idx)

    def _release(self, t: float, m: int, n: int) -> None:
        """Add `n` jobs releasing `m` milli-GPUs at `t` (negative: take them away)."""
        at = self._at
        i = bisect_left(at, t)
        if i < len(at) and at[i] == t:
            self._count[i] += n
            if self._count[i]:
                self._sum[i] += m
            else:
                del at[i], self._sum[i], self._count[i]
        else:
            at.insert(i, t)
            self._sum.insert(i, m)
            self._count.insert(i, n)

    def ends(self, ctx: Ctx) -> Iterator[tuple[float, JobState]]:
        """(expected end, job) of the running jobs, earliest first; overdue ones at now."""
        now = ctx.now
        for t, idx in self.order:
            yield (t if t > now else now), ctx.job_at(idx)

    def passed(self, since: float, now: float) -> bool:
        """Whether some expected end lies in (since, now]: the profile from now differs."""
        return bisect_right(self._at, since) != bisect_right(self._at, now)

    def steps(self, now: float, free: int) -> tuple[list[float], list[int]] | None:
        """The free-capacity profile from `now` (see `_Profile`), or None to rebuild it.

        `free` milli-GPUs are free now; each running job adds what it holds at its
        expected end (overdue ones now). None while some synced job shares a GPU: its
        share can change with its group and no event of its own tells.
        """
        if self.shared:
            return None
        at, sums = self._at, self._sum
        k = bisect_right(at, now)
        times = [now]
        times += at[k:]
        return times, list(itertools.accumulate(sums[k:], initial=free + sum(sums[:k])))


@mypyc_attr(allow_interpreted_subclasses=True)
class _Backfill(Policy):
    """Shared pieces: estimates and the expected ends of running jobs."""
    supports_roles = True

    params = {"estimate_factor": ESTIMATE}

    def attach(self, ctx: Ctx) -> None:
        """Fresh estimate and end indexes per run."""
        self.index = EstimateIndex()
        self.running = EndIndex()

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Note the job for both indexes (see JobFeed)."""
        self.index.feed.note(job, kind)
        self.running.feed.note(job, kind)

    def estimate(self, spec: JobSpec) -> float:
        """The job's user estimate of its run time (s)."""
        return self.p["estimate_factor"] * spec.duration

    def expected_ends(self, ctx: Ctx) -> Iterator[tuple[float, JobState]]:
        """(when it should release its GPUs, job) of every running job, earliest first."""
        self.running.sync(ctx, self.estimate)
        return self.running.ends(ctx)


@mypyc_attr(allow_interpreted_subclasses=True)
class EasyBackfillPolicy(_Backfill):
    """FIFO with one reservation, for the queue head; later jobs must not delay it."""

    name = "easy-backfill"
    description = "EASY backfilling: FIFO, the blocked head gets a reservation (estimates)"

    def _shadow(self, ctx: Ctx, head: JobState) -> tuple[float, int]:
        """(shadow time, extra milli-GPUs) of the head's reservation.

        The shadow time is the earliest expected end by which enough GPUs are free for
        the head; every job ending at that same time counts in the extra.
        """
        need = demand(head.spec)
        acc = _free_for(ctx, head.spec)
        shadow = math.inf
        for t, r in self.expected_ends(ctx):
            if t > shadow:
                break
            acc += _allowed(ctx, head.spec, r.gpus) * r.milli
            if shadow == math.inf and acc >= need:
                shadow = t
        if shadow == math.inf:
            return math.inf, 0  # counts never suffice (failed nodes): nothing can delay it
        return shadow, acc - need

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Start in order; when the head blocks, backfill around its reservation."""
        head: JobState | None = None
        for job in ctx.pending():
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                head = job
                break
            yield Start(job.job_id, got)
        if head is None or free_milli(ctx) <= 0:
            return
        now = ctx.now
        self.index.sync(ctx, self.estimate)
        shadow, extra = self._shadow(ctx, head)
        rules = _EasyRules(ctx, self, head.spec, now, shadow, extra)
        yield from class_backfill(ctx, self.index, (head.spec.submit_time, head.idx),
                                  rules.fits, rules.limit, rules.take)


class _EasyRules:
    """EASY's backfill rules around the head's reservation (`class_backfill`'s callbacks).

    A class rather than closures: compiled, closures and the pass's frame would form a
    reference cycle per pass.
    """

    def __init__(self, ctx: Ctx, policy: _Backfill, hs: JobSpec, now: float,
                 shadow: float, extra: int) -> None:
        self.ctx, self.policy, self.hs = ctx, policy, hs
        self.now, self.shadow, self.extra = now, shadow, extra

    def shares(self, spec: JobSpec) -> bool:
        """Whether the job could take GPUs the head waits for."""
        hs = self.hs
        return not (hs.gpu_type and spec.gpu_type and spec.gpu_type != hs.gpu_type)

    def fits(self, spec: JobSpec) -> bool:
        """Whether its demand is free now."""
        return demand(spec) <= free_milli(self.ctx)

    def limit(self, spec: JobSpec) -> float:
        """The longest estimate that may start now."""
        shadow = self.shadow
        if shadow == math.inf or not self.shares(spec) or demand(spec) <= self.extra:
            return math.inf
        return shadow - self.now

    def take(self, job: JobState, got: tuple[int, ...]) -> bool:
        """Whether the start is allowed; one that outlives the shadow time uses extra."""
        if self.now + self.policy.estimate(job.spec) > self.shadow:
            use = _allowed(self.ctx, self.hs, got) * job_milli(job.spec)
            if use > self.extra:
                return False
            self.extra -= use
        return True


@mypyc_attr(allow_interpreted_subclasses=True)
class _Profile:
    """Future free capacity: free[i] milli-GPUs from times[i] until times[i + 1].

    Past its first zero a profile with no negative capacity decides nothing more for a
    job that needs GPUs: a start before it may not span it, `horizon` stops at it. So a
    conservative pass defers (`defer`) the reservations that would begin there, and
    replays them (`settle`) only before a question whose answer could depend on them:
    a horizon for no GPUs, or a reservation that spans the zero. Capacity is a sum, and
    `earliest` gives a start in time independent of which breakpoints split equal
    capacity, so the replay gives exactly the profile the reservations in order would.
    """

    def __init__(self, now: float, free: int, releases: list[tuple[float, int]],
                 steps: tuple[list[float], list[int]] | None = None) -> None:
        self.version = 0
        if steps is not None:  # built already (EndIndex.steps): the same lists
            self.times, self.free = steps
        else:
            self.times = [now]
            self.free = [free]
            for t, m in sorted(releases):
                if t > self.times[-1]:
                    self.times.append(t)
                    self.free.append(self.free[-1])
                self.free[-1] += m
        low = min(self.free)
        # index of the first zero (len(times): none), or None: some capacity is negative
        self.zero: int | None = None if low < 0 else \
            self.free.index(0) if low == 0 else len(self.times)
        self.deferred: list[tuple[int, float, float]] = []  # (need, length, from), in order

    def bound(self, need: int) -> int:
        """Where to stop looking for a start of `need` that this pass could act on.

        The first zero for a job that needs capacity (while zeros are tracked), else the
        profile's end.
        """
        z = self.zero
        return z if need > 0 and z is not None else len(self.times)

    def earliest(self, need: int, length: float, first: int = 0, last: int = -1) -> int:
        """Index of the earliest breakpoint from `first` where `need` fits for `length`.

        Only breakpoints before `last` are candidates (-1: all); len(times) if none is.
        """
        times, free = self.times, self.free
        i = first
        n = len(times)
        if last < 0:
            last = n
        while i < last:
            if free[i] < need:
                i += 1
                continue
            end = times[i] + length
            j = i + 1
            stop = j + 8  # the next few breakpoints one by one: a shortfall is often near
            while j < n and j < stop and times[j] < end:
                if free[j] < need:
                    break
                j += 1
            else:
                if j == n or times[j] >= end:
                    return i
                k = bisect_left(times, end, j)  # the rest of its span at once
                low = min(free[j:k])
                if low >= need:
                    return i
                j = free.index(low, j, k)  # a shortfall no start before it can span
            i = j + 1
        return n  # never (capacity below the request)

    def book(self, need: int, length: float, first: int = 0) -> None:
        """Reserve `need` for `length` at its earliest start from `first`, or defer it.

        Deferred when that start lies at or past the first zero (see the class), with
        the time of `first`: breakpoints a later reservation adds before it must not
        become candidates (one inside the first span could, the profile's start not).
        """
        last = self.bound(need)
        i = self.earliest(need, length, first, last)
        if i < last:
            self.reserve(i, need, length)
        elif last < len(self.times):
            self.deferred.append((need, length, self.times[first]))

    def settle(self) -> None:
        """Make the deferred reservations, in order; zeros are no longer tracked."""
        self.zero = None
        todo, self.deferred = self.deferred, []
        for need, length, since in todo:
            i = self.earliest(need, length, bisect_left(self.times, since))
            if i < len(self.times):
                self.reserve(i, need, length)

    def horizon(self, need: int, since: float | None = None) -> float:
        """How long from `since` (default: the profile's start) `need` stays free.

        0: not free at the start; inf: free for ever.
        """
        if need <= 0 and self.deferred:
            self.settle()
        times, free = self.times, self.free
        for j in range(len(times)):
            if free[j] < need:
                return times[j] - (times[0] if since is None else since) if j else 0.0
        return math.inf

    def reserve(self, i: int, need: int, length: float) -> None:
        """Take `need` from breakpoint i for `length` seconds."""
        times, free = self.times, self.free
        start = times[i]
        end = start + length
        z = self.zero
        if self.deferred and z is not None and z < len(times) and times[z] < end \
                and need > 0:
            self.settle()  # it spans the zero: the deferred ones may sit under it
            i = bisect_left(times, start)
            z = None
        k = bisect_left(times, end)
        if k == len(times) or times[k] != end:
            times.insert(k, end)
            free.insert(k, free[k - 1])
            if z is not None and k <= z:
                z += 1
        free[i:k] = map(operator.sub, free[i:k], itertools.repeat(need))
        if z is not None:
            top = min(k, z)
            if need > 0 and i < top and min(free[i:top]) <= 0:
                z = i
                while free[z] > 0:
                    z += 1
            self.zero = z
        self.version += 1


class _Quiet:
    """A pass that started nothing, as much of it as a later pass needs to skip itself.

    Its cluster version, time, last reserved job's queue key and the profile left after
    the reservations (which only a started job or a changed state would alter; the pass
    that made it changes it no more).
    """

    __slots__ = ("version", "now", "last", "prof")

    def __init__(self, version: int, now: float, last: tuple, prof: _Profile) -> None:
        self.version, self.now, self.last, self.prof = version, now, last, prof

    def admits(self, need: int, estimate: float, now: float) -> bool:
        """Whether a job past the reservations could start at `now` in this profile.

        As the backfill after the reservations decides it (`horizon` from `now`).
        """
        h = self.prof.horizon(need, now)
        return h == math.inf or (h > 0 and estimate <= h)


@mypyc_attr(allow_interpreted_subclasses=True)
class ConservativeBackfillPolicy(_Backfill):
    """Every queued job gets a reservation in arrival order; none may be delayed."""

    name = "conservative-backfill"
    description = "conservative backfilling: reservations for every queued job (estimates)"
    params = {
        "estimate_factor": ESTIMATE,
        "max_reservations": Param(
            25, as_int(1),
            "queued jobs given reservations each pass, in order (cost grows with it)"),
    }

    def attach(self, ctx: Ctx) -> None:
        """Fresh indexes, reserved jobs' (spec, demand, length) and skip state per run."""
        super().attach(ctx)
        self._cost: dict[int, tuple[JobSpec, int, float]] = {}
        self._quiet: _Quiet | None = None
        self._arrived: list[JobState] = []  # jobs submitted since the last full pass
        self._moved = False  # some other job event since the last full pass
        self._elastic = False  # some job may resize: a class no longer fits as one

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Note the job for the indexes, and whether it only arrived (see `_unchanged`)."""
        super().notify(ctx, job, kind)
        if kind != "submit":
            self._moved = True
        else:
            self._arrived.append(job)
            if job.spec.min_gpus is not None:
                self._elastic = True

    def _unchanged(self, ctx: Ctx) -> bool:
        """Whether this pass would start nothing, as the last full pass started nothing.

        True when since then no job but arrivals had an event, the cluster is the same,
        no expected end passed (the profile is the same but for its first time), and every
        arrival queues after the reserved jobs and either fits nowhere a backfilled job
        could or cannot be placed now (nor then could any job of its class). The
        reservations are then the same (a later now only tightens a start now, and every
        start now was refused a placement that is refused again), and so is every
        backfill refusal (limits only shrink as now grows).
        """
        q = self._quiet
        if q is None or self._moved or self._elastic or ctx.cluster.version != q.version:
            return False
        now = ctx.now
        if self.running.passed(q.now, now):
            return False
        for job in self._arrived:
            if job.status != PENDING:
                continue
            s = job.spec
            if (s.submit_time, job.idx) <= q.last:
                return False
            if q.admits(demand(s), self.estimate(s), now) \
                    and not isinstance(ctx.place(job), Unschedulable):
                return False
        self._arrived.clear()
        return True

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Start the queue heads that fit; then reserve or start the rest in order.

        Skipped when it would start nothing (`_unchanged`).
        """
        if self._unchanged(ctx):
            return
        self._quiet = None
        self._moved = False
        self._arrived.clear()
        started = False
        it = ctx.pending()
        head: JobState | None = None
        for job in it:  # nothing is reserved ahead of the head: it starts if it fits
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                head = job
                break
            started = True
            yield Start(job.job_id, got)
        if head is None:
            return
        now = ctx.now
        self.running.sync(ctx, self.estimate)
        free = free_milli(ctx)
        steps = self.running.steps(now, free)
        prof = _Profile(now, free, [] if steps is not None else [
            (t, len(r.gpus) * r.milli) for t, r in self.expected_ends(ctx)], steps)
        cap = self.p["max_reservations"]
        cost = self._cost
        # reservations never take capacity below zero, so on a profile with none below
        # zero a full now stays full: no later job could start now or be backfilled
        full = False
        failed: set[tuple] = {request_class(head.spec)}
        last: JobState | None = None
        for n, job in enumerate(itertools.chain((head,), it)):
            if n >= cap:
                break
            last = job
            spec = job.spec
            c = cost.get(job.idx)
            if c is None or c[0] is not spec:
                c = cost[job.idx] = (spec, demand(spec), max(self.estimate(spec), 1e-9))
            _, need, length = c
            if need > 0 and (full or prof.free[0] <= 0 and min(prof.free) >= 0):
                full = True  # its reservation could change no decision of this pass
                continue
            if prof.earliest(need, length, 0, 1) == 0:
                ck = request_class(spec)
                placed = ctx.place(job) if ck not in failed else None
                if placed is not None and not isinstance(placed, Unschedulable):
                    prof.reserve(0, need, length)
                    started = True
                    yield Start(job.job_id, placed)
                    continue
                failed.add(ck)
                prof.book(need, length, 1)
            else:
                prof.book(need, length)
        assert last is not None  # the head at least
        after = (last.spec.submit_time, last.idx)  # the last reserved job's queue key
        quiet = not started and steps is not None and ctx.pending_count >= cap
        if ctx.pending_count <= cap or prof.free[0] <= 0:
            if quiet:
                self._quiet = _Quiet(ctx.cluster.version, now, after, prof)
            return
        # past the reservations: a job may start only if it disturbs none of them
        self.index.sync(ctx, self.estimate)
        rules = _ConservativeRules(prof, self)
        for d in class_backfill(ctx, self.index, after, rules.fits, rules.limit,
                                rules.take):
            quiet = False
            yield d
        if quiet:
            self._quiet = _Quiet(ctx.cluster.version, now, after, prof)


class _ConservativeRules:
    """Conservative backfill past the reservations: a start may delay none of them.

    `class_backfill`'s callbacks, a class rather than closures (see `_EasyRules`).
    Horizons are memoized per demand until the profile changes.
    """

    def __init__(self, prof: _Profile, policy: _Backfill) -> None:
        self.prof, self.policy = prof, policy
        self.horizons: dict[int, tuple[int, float]] = {}

    def horizon(self, need: int) -> float:
        """How long `need` stays free from now in the profile."""
        prof = self.prof
        got = self.horizons.get(need)
        if got is None or got[0] != prof.version:
            got = self.horizons[need] = (prof.version, prof.horizon(need))
        return got[1]

    def fits(self, spec: JobSpec) -> bool:
        """Whether its demand is free now without touching a reservation."""
        return self.horizon(demand(spec)) > 0

    def limit(self, spec: JobSpec) -> float:
        """The longest estimate that may start now."""
        return self.horizon(demand(spec))

    def take(self, job: JobState, got: tuple[int, ...]) -> bool:
        """Reserve what the start uses from now on."""
        self.prof.reserve(0, demand(job.spec), max(self.policy.estimate(job.spec), 1e-9))
        return True
