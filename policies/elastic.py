"""Grow and shrink rules for elastic jobs, shared by `fifo-elastic` and `gandiva`.

Jobs with `target_util` scale on utilization (issue 16, seeds/002: PyTorch elastic workers
with min/max replicas, PaddlePaddle elastic), as a Kubernetes HorizontalPodAutoscaler
does. The job's measured utilization on n GPUs is its `gpu_util` at `num_gpus` spread over
n, at most 1: util(n) = min(1, gpu_util x num_gpus / n) (HPA's model: the load stays, the
replicas share it). It scales out one step (`gpus_per_task` GPUs, 1 when not given, up to
`max_gpus`) when util(n) > target_util, nothing is pending and the larger size can be
placed, at most once per `scale_interval` s since its last start or resize; so it walks
to HPA's desired size ceil(n x util(n) / target_util) one step per period and stops
there. Under pressure (a blocked head) it gives GPUs back toward its floor at once, like
any elastic donor but without waiting for `resize_interval`. It starts at most at
`num_gpus`. Scale-out checks are driven by a per-job timer (`ctx.wake_at`) and a ready
list of due jobs, never by a scan of the running jobs.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from schedlab.sim.jobstate import RUNNING, JobState
from schedlab.sim.model import Decision, JobSpec, Resize, Unschedulable

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext


def bounds(job: JobState) -> tuple[int, int]:
    """(min, max) GPUs of a job; both num_gpus for a rigid one."""
    s = job.spec
    return (s.min_gpus or s.num_gpus), (s.max_gpus or s.num_gpus)


def is_elastic(job: JobState) -> bool:
    """True for a job with a min_gpus/max_gpus range."""
    return job.spec.min_gpus is not None or job.spec.max_gpus is not None


def utilization_driven(job: JobState) -> bool:
    """True for an elastic job that scales on utilization (`target_util` given).

    A fractional job (`gpu_share` < 1) is not scaled: it holds part of one GPU.
    """
    s = job.spec
    return s.target_util is not None and s.gpu_share >= 1.0 and is_elastic(job)


def utilization_at(spec: JobSpec, n: int) -> float:
    """Measured utilization on n GPUs: gpu_util at num_gpus spread over n, at most 1."""
    if n <= 0:
        return 0.0
    return min(1.0, spec.gpu_util * spec.num_gpus / n)


def scale_step(spec: JobSpec) -> int:
    """GPUs one scaling step adds: one task (`gpus_per_task`), 1 when not given."""
    return spec.gpus_per_task or 1


def wants_out(job: JobState) -> bool:
    """A utilization-driven job below max_gpus whose utilization is above its target."""
    s = job.spec
    n = len(job.gpus)
    return (s.target_util is not None and 0 < n < bounds(job)[1]
            and utilization_at(s, n) > s.target_util * (1 + 1e-12))


def start_cap(job: JobState) -> int:
    """Largest size a job starts at: max_gpus, or num_gpus for a utilization-driven one."""
    hi = bounds(job)[1]
    return min(hi, job.spec.num_gpus) if utilization_driven(job) else hi


class UtilScaler:
    """Per-run scale-out timers of utilization-driven jobs (see the module docstring).

    Each running job that wants to scale out has one heap entry at its last start or
    resize + scale_interval (and a `ctx.wake_at` pass then); due entries move to `ready`,
    ordered oldest job first, where they wait for free GPUs and an empty queue. Any event
    of the job but a migration cancels its entry (a token) and re-arms it.
    """

    def __init__(self, pause: float | None) -> None:
        self.pause = pause
        self.due: list[tuple[float, int, int]] = []  # (due time, idx, token)
        self.token: dict[int, int] = {}
        self.ready: SortedList = SortedList()  # (first_start, idx) of due jobs
        self.ready_key: dict[int, tuple[float, int]] = {}

    def notice(self, ctx: PolicyContext, job: JobState, kind: str) -> None:
        """Re-arm a utilization-driven job's timer after its start, resume or resize."""
        if not utilization_driven(job) or kind == "migrate":
            return
        idx = job.idx
        tok = self.token.get(idx, 0) + 1
        self.token[idx] = tok
        key = self.ready_key.pop(idx, None)
        if key is not None:
            self.ready.remove(key)
        if kind in ("start", "resume", "resize") and job.status == RUNNING and wants_out(job):
            t = ctx.now + job.spec.scale_interval
            heapq.heappush(self.due, (t, idx, tok))
            ctx.wake_at(t)

    def scale_out(self, ctx: PolicyContext) -> Iterator[Decision]:
        """One step out for each due job, oldest first, while nothing waits and GPUs idle."""
        now = ctx.now
        while self.due and self.due[0][0] <= now:
            _, idx, tok = heapq.heappop(self.due)
            if self.token.get(idx) == tok:
                key = (ctx.job_at(idx).first_start, idx)
                self.ready.add(key)
                self.ready_key[idx] = key
        if not self.ready or ctx.pending_count or ctx.cluster.free_whole <= 0:
            return
        for _, idx in list(self.ready):
            free = ctx.cluster.free_whole
            if free <= 0:
                return
            job = ctx.job_at(idx)
            n = len(job.gpus)
            k = min(bounds(job)[1], n + scale_step(job.spec))
            if k - n > free or ctx.share_mode(job) != "":
                continue  # too few idle GPUs, or time-sliced (gandiva): not alone to scale
            got = ctx.place_if_freed(job, [job], num_gpus=k)
            if not isinstance(got, Unschedulable) and len(got) == k:
                yield Resize(job.job_id, got, self.pause)


class ElasticRules:
    """Shrink running elastic jobs for a blocked head; grow them into idle GPUs.

    Shrinks take the youngest jobs first down to a floor (`min_gpus`, or `num_gpus` first
    when `nominal_first`), keep each job's lowest-numbered GPUs, and happen only when the
    shrinks together free enough GPUs by count. Grows take the oldest jobs first. A job is
    resized at most once per `interval` seconds; every resize pays `pause` (None: the
    engine's restore overhead). Utilization-driven jobs (`target_util`) never grow here:
    `util` scales them out; they shrink for a blocked head whatever `interval` says.
    """

    def __init__(self, interval: float, pause: float | None = None,
                 nominal_first: bool = False) -> None:
        self.interval = interval
        self.pause = pause
        self.nominal_first = nominal_first
        self.last: dict[int, float] = {}
        self.util = UtilScaler(pause)
        self._ctx: PolicyContext | None = None  # the run `_seen` counts jobs of
        self._seen = 0  # jobs of that run checked for a min_gpus/max_gpus range
        self._any = False  # whether one of them has one

    def elastic_running(self, ctx: PolicyContext) -> list[JobState]:
        """Running elastic jobs, in the running map's order.

        A run without any elastic job (Philly's, say) answers at once: only jobs added
        since the last call (a container job's task runs) are checked, not every running
        job on every call.
        """
        if self._ctx is not ctx:
            self._ctx, self._seen, self._any = ctx, 0, False
        n = ctx.num_jobs
        if self._seen < n:
            self._any = self._any or any(is_elastic(ctx.job_at(i))
                                         for i in range(self._seen, n))
            self._seen = n
        if not self._any:
            return []
        return [j for j in ctx.running().values() if is_elastic(j)]

    def may_resize(self, ctx: PolicyContext, job: JobState) -> bool:
        """False while the job's last resize is younger than the interval."""
        last = self.last.get(job.idx)
        return last is None or ctx.now - last >= self.interval

    def _floor(self, job: JobState) -> int:
        lo = bounds(job)[0]
        if self.nominal_first and len(job.gpus) > job.spec.num_gpus:
            return max(lo, job.spec.num_gpus)
        return lo

    def shrink_for(self, ctx: PolicyContext, need: int) -> Iterator[Decision]:
        """Free `need` GPUs by shrinking running elastic jobs, or do nothing."""
        if need <= 0:
            return
        donors = sorted(
            (j for j in self.elastic_running(ctx)
             if len(j.gpus) > self._floor(j)
             and (utilization_driven(j) or self.may_resize(ctx, j))
             and ctx.share_mode(j) == ""),
            key=lambda j: (-j.first_start, -j.idx),
        )
        plan: list[tuple[JobState, int]] = []
        for j in donors:
            give = min(len(j.gpus) - self._floor(j), need)
            plan.append((j, len(j.gpus) - give))
            need -= give
            if need <= 0:
                break
        if need > 0:
            return
        for j, keep in plan:
            self.last[j.idx] = ctx.now
            yield Resize(j.job_id, tuple(sorted(j.gpus))[:keep], self.pause)

    def grow(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Grow running elastic jobs, oldest first, into free GPUs."""
        growers = sorted(
            (j for j in self.elastic_running(ctx)
             if len(j.gpus) < bounds(j)[1] and self.may_resize(ctx, j)
             and ctx.share_mode(j) == "" and j.spec.target_util is None),
            key=lambda j: (j.first_start, j.idx),
        )
        for j in growers:
            free = ctx.cluster.free_whole
            if free <= 0:
                return
            target = min(bounds(j)[1], len(j.gpus) + free)
            for k in range(target, len(j.gpus), -1):
                got = ctx.place_if_freed(j, [j], num_gpus=k)
                if not isinstance(got, Unschedulable):
                    self.last[j.idx] = ctx.now
                    yield Resize(j.job_id, got, self.pause)
                    break
