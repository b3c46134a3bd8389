"""First-in first-out, strict (head-of-line blocking) and with backfilling."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import TYPE_CHECKING

from policies.base import Policy
from sim.context import SchedContext
from sim.model import Decision, Placement, Start, Unschedulable

if TYPE_CHECKING:
    from sim.jobstate import JobState


class FifoPolicy(Policy):
    """Jobs start in arrival order; when the head cannot be placed, everyone waits."""
    supports_roles = True
    only_pending = True

    name = "fifo"
    description = "strict arrival order with head-of-line blocking"

    def schedule(self, ctx: SchedContext) -> Iterator[Decision]:
        """Start queue heads until one does not fit."""
        for job in ctx.pending():
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                return
            yield Start(job.job_id, got)


class FifoBackfillPolicy(Policy):
    """Arrival order, but a later job starts whenever it fits and the head does not.

    Jobs with identical requests form a class: if a class head does not fit, no job of the
    class does, so a pass costs one placement attempt per class, not one per queued job.
    """
    supports_roles = True
    only_pending = True

    name = "fifo-backfill"
    description = "arrival order; later jobs start when the head cannot (no reservation)"

    def schedule(self, ctx: SchedContext) -> Iterator[Decision]:
        """Try class heads in arrival order; a class that fails waits for the next pass."""
        classes = ctx.pending_classes()
        if type(self).place is FifoBackfillPolicy.place and type(ctx) is SchedContext:
            # a class of whole GPUs asking more than are free fails (`ctx.place` says so
            # without its placer): left out, and skipped once starts used up the GPUs.
            # Not for a context of another placement (HiveD's queues preempt to place).
            cluster = ctx.cluster
            free = cluster.free_whole
            heap = [(lst[0], ck) for ck, lst in classes.items()
                    if ck[0] <= free or ck[3] < 1.0]
        else:  # a placement of its own (the policy's or the context's): every class asked
            cluster, heap = None, [(lst[0], ck) for ck, lst in classes.items()]
        heapq.heapify(heap)
        while heap:
            key, ck = heapq.heappop(heap)
            if cluster is not None and ck[0] > cluster.free_whole and ck[3] >= 1.0:
                continue
            job = ctx.job_at(key[1])
            got = self.place(ctx, job)
            if isinstance(got, Unschedulable):
                continue
            yield Start(job.job_id, got)
            lst = classes.get(ck)
            if lst:
                heapq.heappush(heap, (lst[0], ck))

    def place(self, ctx: SchedContext, job: JobState) -> Placement:
        """Where the job would go now (the engine's placer; subclasses may use their own)."""
        return ctx.place(job)
