"""Grow and shrink rules for elastic jobs, shared by `fifo-elastic` and `gandiva`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sim.jobstate import JobState
from sim.model import Decision, Resize, Unschedulable

if TYPE_CHECKING:
    from sim.context import SchedContext


def bounds(job: JobState) -> tuple[int, int]:
    """(min, max) GPUs of a job; both num_gpus for a rigid one."""
    s = job.spec
    return (s.min_gpus or s.num_gpus), (s.max_gpus or s.num_gpus)


def is_elastic(job: JobState) -> bool:
    """True for a job with a min_gpus/max_gpus range."""
    return job.spec.min_gpus is not None or job.spec.max_gpus is not None


class ElasticRules:
    """Shrink running elastic jobs for a blocked head; grow them into idle GPUs.

    Shrinks take the youngest jobs first down to a floor (`min_gpus`, or `num_gpus` first
    when `nominal_first`), keep each job's lowest-numbered GPUs, and happen only when the
    shrinks together free enough GPUs by count. Grows take the oldest jobs first. A job is
    resized at most once per `interval` seconds; every resize pays `pause` (None: the
    engine's restore overhead).
    """

    def __init__(self, interval: float, pause: float | None = None,
                 nominal_first: bool = False) -> None:
        self.interval = interval
        self.pause = pause
        self.nominal_first = nominal_first
        self.last: dict[int, float] = {}

    def may_resize(self, ctx: SchedContext, job: JobState) -> bool:
        """False while the job's last resize is younger than the interval."""
        last = self.last.get(job.idx)
        return last is None or ctx.now - last >= self.interval

    def _floor(self, job: JobState) -> int:
        lo = bounds(job)[0]
        if self.nominal_first and len(job.gpus) > job.spec.num_gpus:
            return max(lo, job.spec.num_gpus)
        return lo

    def shrink_for(self, ctx: SchedContext, need: int) -> Iterator[Decision]:
        """Free `need` GPUs by shrinking running elastic jobs, or do nothing."""
        if need <= 0:
            return
        donors = sorted(
            (j for j in ctx.running().values()
             if is_elastic(j) and len(j.gpus) > self._floor(j) and self.may_resize(ctx, j)
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

    def grow(self, ctx: SchedContext) -> Iterator[Decision]:
        """Grow running elastic jobs, oldest first, into free GPUs."""
        growers = sorted(
            (j for j in ctx.running().values()
             if is_elastic(j) and len(j.gpus) < bounds(j)[1] and self.may_resize(ctx, j)
             and ctx.share_mode(j) == ""),
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
