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
4. A job with `target_util` scales on utilization instead (`schedlab.policies.elastic`): it starts
   at most at `num_gpus`, steps out one task at a time while its utilization
   min(1, gpu_util x num_gpus / n) is above target and nothing is pending, at most once
   per its `scale_interval`, before rule 3's grows; rule 2 shrinks it at once.
Every resize pays the engine's checkpoint/restore pause (`restore_overhead`); the speed on
k GPUs follows the engine's `elastic_scaling` model. PyTorch-style elastic jobs of the
seeds (min/max replicas) map onto `min_gpus`/`max_gpus`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from schedlab.policies.base import Policy
from schedlab.policies.elastic import ElasticRules, bounds, is_elastic, start_cap
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision, Start, Unschedulable
from schedlab.sim.params import Param, as_float

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext


def start_elastic(ctx: PolicyContext, job: JobState) -> Start | None:
    """Start a job at the largest size in its range that can be placed now, or None."""
    if not is_elastic(job) or not job.spec.num_gpus:
        got = ctx.place(job)
        return None if isinstance(got, Unschedulable) else Start(job.job_id, got)
    lo, hi = bounds(job)[0], start_cap(job)
    for k in range(min(hi, max(lo, ctx.cluster.free_whole)), lo - 1, -1):
        got = ctx.place(job, num_gpus=k)
        if not isinstance(got, Unschedulable):
            return Start(job.job_id, got)
    return None


class FifoElasticPolicy(Policy):
    """Arrival order; elastic jobs start at the largest size that fits, shrink and grow."""

    name = "fifo-elastic"
    orders = False  # places jobs itself
    description = "arrival order; elastic jobs start at any size in range, shrink, grow"
    params = {
        "resize_interval": Param(300.0, as_float(0.0),
                                 "seconds at least between two resizes of one job"),
    }

    def attach(self, ctx: PolicyContext) -> None:
        """Per-run memory of when each job was last resized."""
        self.rules = ElasticRules(self.p["resize_interval"])

    def notify(self, ctx: PolicyContext, job: JobState, kind: str) -> None:
        """Arm the scale-out timer of a utilization-driven job."""
        self.rules.util.notice(ctx, job, kind)

    def schedule(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Start in order; shrink for a blocked head; grow into idle GPUs."""
        head: JobState | None = None
        for job in ctx.pending():
            start = start_elastic(ctx, job)
            if start is None:
                head = job
                break
            yield start
        if head is not None:
            need = (bounds(head)[0] if is_elastic(head) else head.spec.num_gpus) \
                - ctx.cluster.free_whole
            shrunk = False
            for d in self.rules.shrink_for(ctx, need):
                shrunk = True
                yield d
            if shrunk:
                start = start_elastic(ctx, head)
                if start is not None:
                    yield start
        elif ctx.pending_count == 0:
            yield from self.rules.util.scale_out(ctx)
            yield from self.rules.grow(ctx)
