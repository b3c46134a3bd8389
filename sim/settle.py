"""The end of a run that can change no more: every waiting job gets a final status and why.

A run without `until` ends only when every job is final. When nothing can change any
more (nothing runs, nothing is left to arrive or to happen, the policy starts nothing),
the jobs still waiting could wait for ever; instead each one the policy or the placer can
say no to is rejected as `unschedulable: <reason>`, and the policy gets another pass for
the rest (a FIFO head that can never start no longer holds back the jobs behind it). When
the placer could place every one of them and the policy still starts none, they are all
rejected, naming the policy. Held jobs follow their dependencies (killed with the reason).
"""

from __future__ import annotations

from typing import Final

from schedlab.sim.faces import SettleRun
from schedlab.sim.jobstate import PENDING, REJECTED, JobState
from schedlab.sim.model import EventKind, Unschedulable

__all__ = ["IDLE_PASS_LIMIT", "settle", "why_waiting"]

IDLE_PASS_LIMIT: Final = 1000
"""Passes in a row with nothing running in which the policy started nothing: stuck."""


def why_waiting(run: SettleRun, job: JobState) -> str:
    """Why a pending job cannot start now: the policy's own reason, else the placer's."""
    why = run.sim.policy.explain(run.ctx, job)
    if why:
        return why
    got = run.ctx.place(job)
    if not isinstance(got, Unschedulable):
        return ""
    c = run.cluster
    down = c.total_gpus - c.healthy_gpus
    return got.reason + (f" ({down} GPUs on failed nodes)" if down else "")


def settle(run: SettleRun) -> bool:
    """Reject the waiting jobs that can never start; True when a pass should follow."""
    pending = [run.jobs[i] for i in run.queue.iter_jobs()]
    if not pending:
        return False
    stuck = [(job, why) for job in pending if (why := why_waiting(run, job))]
    again = bool(stuck)
    if not stuck:  # the placer could place each of them, yet the policy starts none
        name = run.sim.policy.name
        stuck = [(job, f"policy {name!r} started none of the {len(pending)} waiting jobs "
                  "although nothing else could change any more") for job in pending]
    for job, why in stuck:
        if job.status == PENDING:  # not yet ended by an earlier one's dependents
            run.dequeue(job)
            run.events_processed += 1
            run.finalize(job, REJECTED, EventKind.REJECT, f"unschedulable: {why}")
    return again
