"""FIFO for elastic jobs: start at any size in range, shrink for the head, grow when idle.

Rules (documented in `schedlab policies`):
1. Jobs start in arrival order (head-of-line blocking as in `fifo`). A rigid job needs
   exactly `num_gpus`; an elastic job (`min_gpus`..`max_gpus`) starts at the largest size
   in its range that can be placed now, never below `min_gpus`.
2. When the head cannot start even at its minimum, running elastic jobs above their
   minimum are shrunk, youngest first, until enough GPUs are free by count for the head
   (each shrink keeps the job's lowest-numbered GPUs). A job is resized at most once per
   `resize_interval` seconds, and only when the shrinks can free enough for the head.
3. When nothing is pending, running elastic jobs below their maximum grow, oldest first,
   into free GPUs (the engine may move them to a tighter set of GPUs while doing so).
Every resize pays the engine's checkpoint/restore pause (`restore_overhead`); the speed on
k GPUs follows the engine's `elastic_scaling` model.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.base import Policy
from policies.placers import Unschedulable
from sim.engine import SchedContext
from sim.jobstate import JobState
from sim.model import Decision, Resize, Start
from sim.params import Param, as_float


def _bounds(job: JobState) -> tuple[int, int]:
    s = job.spec
    return (s.min_gpus or s.num_gpus), (s.max_gpus or s.num_gpus)


def _elastic(job: JobState) -> bool:
    return job.spec.min_gpus is not None or job.spec.max_gpus is not None


class FifoElasticPolicy(Policy):
    """Arrival order; elastic jobs start at the largest size that fits, shrink and grow."""

    name = "fifo-elastic"
    description = "arrival order; elastic jobs start at any size in range, shrink, grow"
    params = {
        "resize_interval": Param(300.0, as_float(0.0),
                                 "seconds at least between two resizes of one job"),
    }

    def attach(self, ctx: SchedContext) -> None:
        """Per-run memory of when each job was last resized."""
        self.last_resize: dict[int, float] = {}

    def _may_resize(self, ctx: SchedContext, job: JobState) -> bool:
        last = self.last_resize.get(job.idx)
        return last is None or ctx.now - last >= self.p["resize_interval"]

    def _start(self, ctx: SchedContext, job: JobState) -> Start | None:
        lo, hi = _bounds(job)
        sizes = range(min(hi, max(lo, ctx.cluster.free_whole)), lo - 1, -1) \
            if _elastic(job) and job.spec.num_gpus else (job.spec.num_gpus,)
        for k in sizes:
            got = ctx.place(job, num_gpus=k) if _elastic(job) else ctx.place(job)
            if not isinstance(got, Unschedulable):
                return Start(job.job_id, got)
        return None

    def schedule(self, ctx: SchedContext) -> Iterator[Decision]:
        """Start in order; shrink for a blocked head; grow into idle GPUs."""
        head: JobState | None = None
        for job in ctx.pending():
            start = self._start(ctx, job)
            if start is None:
                head = job
                break
            yield start
        if head is not None:
            yield from self._shrink_for(ctx, head)
        elif ctx.pending_count == 0:
            yield from self._grow(ctx)

    def _shrink_for(self, ctx: SchedContext, head: JobState) -> Iterator[Decision]:
        need = (_bounds(head)[0] if _elastic(head) else head.spec.num_gpus) \
            - ctx.cluster.free_whole
        if need <= 0:
            return
        donors = sorted(
            (j for j in ctx.running().values()
             if _elastic(j) and len(j.gpus) > _bounds(j)[0] and self._may_resize(ctx, j)),
            key=lambda j: (-j.first_start, -j.idx),
        )
        plan: list[tuple[JobState, int]] = []
        for j in donors:
            give = min(len(j.gpus) - _bounds(j)[0], need)
            plan.append((j, len(j.gpus) - give))
            need -= give
            if need <= 0:
                break
        if need > 0:
            return  # shrinking everyone would not free enough: leave them alone
        for j, keep in plan:
            self.last_resize[j.idx] = ctx.now
            yield Resize(j.job_id, tuple(sorted(j.gpus))[:keep])
        start = self._start(ctx, head)
        if start is not None:
            yield start

    def _grow(self, ctx: SchedContext) -> Iterator[Decision]:
        growers = sorted(
            (j for j in ctx.running().values()
             if _elastic(j) and len(j.gpus) < _bounds(j)[1] and self._may_resize(ctx, j)),
            key=lambda j: (j.first_start, j.idx),
        )
        for j in growers:
            free = ctx.cluster.free_whole
            if free <= 0:
                return
            target = min(_bounds(j)[1], len(j.gpus) + free)
            for k in range(target, len(j.gpus), -1):
                got = ctx.place_if_freed(j, [j], num_gpus=k)
                if not isinstance(got, Unschedulable):
                    self.last_resize[j.idx] = ctx.now
                    yield Resize(j.job_id, got)
                    break
