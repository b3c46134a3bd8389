"""First-in first-out, strict (head-of-line blocking) and with backfilling."""

from __future__ import annotations

from collections.abc import Iterator

from mypy_extensions import mypyc_attr

from schedlab.policies.base import Ctx, Policy
from schedlab.sim.cfuncs import heapify, heappop, heappush
from schedlab.sim.context import SchedContext, start_on
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision, Placement, Unschedulable, class_over_free


@mypyc_attr(allow_interpreted_subclasses=True)
class FifoPolicy(Policy):
    """Jobs start in arrival order; when the head cannot be placed, everyone waits."""
    supports_roles = True
    only_pending = True

    name = "fifo"
    description = "strict arrival order with head-of-line blocking"

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Start queue heads until one does not fit."""
        for job in ctx.pending():
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                return
            yield start_on(job.job_id, got)


@mypyc_attr(allow_interpreted_subclasses=True)
class FifoBackfillPolicy(Policy):
    """Arrival order, but a later job starts whenever it fits and the head does not.

    Jobs with identical requests form a class: if a class head does not fit, no job of the
    class does, so a pass costs one placement attempt per class, not one per queued job.
    """
    supports_roles = True
    only_pending = True

    name = "fifo-backfill"
    description = "arrival order; later jobs start when the head cannot (no reservation)"

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Try class heads in arrival order; a class that fails waits for the next pass."""
        classes = ctx.pending_classes()
        # a class asking more whole GPUs than are free fails without asking the placer;
        # not under a placement of its own (the policy's, or a context's: HiveD's queues
        # preempt to place)
        skip = type(self).place is FifoBackfillPolicy.place and type(ctx) is SchedContext
        cluster = ctx.cluster
        heap = [(lst[0], ck) for ck, lst in classes.items()]
        heapify(heap)
        while heap:
            key, ck = heappop(heap)
            if skip and class_over_free(ck, cluster.free_whole):
                continue
            job = ctx.job_at(key[1])
            got = self.place(ctx, job)
            if isinstance(got, Unschedulable):
                continue
            yield start_on(job.job_id, got)
            lst = classes.get(ck)
            if lst:
                heappush(heap, (lst[0], ck))

    def place(self, ctx: Ctx, job: JobState) -> Placement:
        """Where the job would go now (the engine's placer; subclasses may use their own)."""
        return ctx.place(job)
