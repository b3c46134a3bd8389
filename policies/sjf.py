"""Shortest job first and shortest remaining time first: oracle baselines that know durations.

Both read each job's `duration` (ideal seconds) from the trace, as an oracle would.
`sjf` never preempts: pending jobs start shortest first, and a job that does not fit is
skipped, not waited for (Tiresias' simulator schedules its `shortest` baselines the same
way). `srtf` preempts: a pending job whose remaining work is smaller than a running job's
takes that job's GPUs when it needs them (`stop`: suspend, i.e. checkpoint then stop, by
default; `preempt` loses the work since the job's last checkpoint). With `weight=gpus`
the size is GPU-seconds (duration x GPUs), as in Tiresias' `shortest-gpu`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter

import numpy as np

from policies.priority import STOP_PARAM, Key, PriorityPolicy, SchedContext
from policies.victims import ArrayPool, Spans, VictimPool
from sim.jobstate import RUNNING, JobState
from sim.model import JobSpec
from sim.params import Param, as_choice

__all__ = ["SjfPolicy", "SrtfPolicy"]


def _size(spec: JobSpec, work: float, weight: str) -> float:
    return work * spec.num_gpus * spec.gpu_share if weight == "gpus" else work


_STATE = attrgetter("idx", "work", "rate", "seg_start")  # what a running key is computed from

WEIGHT_PARAM = Param("none", as_choice("none", "gpus"),
                     "job size: none = run time, gpus = GPU time (run time x GPUs)")


class SjfPolicy(PriorityPolicy):
    """Shortest job first (oracle durations), non-preemptive, skipping jobs that do not fit."""

    name = "sjf"
    description = "shortest job first by trace duration (oracle); non-preemptive"
    params = {"weight": WEIGHT_PARAM}

    def pending_key(self, ctx: SchedContext, job: JobState) -> Key:
        """(size, submit time): ties go to the earlier arrival."""
        return (_size(job.spec, job.spec.duration, self.p["weight"]), job.spec.submit_time)


class SrtfPolicy(PriorityPolicy):
    """Shortest remaining time first (oracle), preempting jobs with more work left."""

    name = "srtf"
    description = "shortest remaining time first (oracle); preempts longer running jobs"
    params = {"weight": WEIGHT_PARAM, "stop": STOP_PARAM}
    preemptive = True

    def pending_key(self, ctx: SchedContext, job: JobState) -> Key:
        """(remaining size, 1, submit): a running job wins a tie (its 0 sorts first)."""
        rem = job.spec.duration - job.work
        return (_size(job.spec, rem, self.p["weight"]), 1, job.spec.submit_time)

    def running_key(self, ctx: SchedContext, job: JobState) -> Key:
        """(remaining size now, 0, submit)."""
        s = job.spec
        rem = s.duration - job.progress_at(ctx.now)
        if self.p["weight"] == "gpus":
            rem *= s.num_gpus * s.gpu_share
        return (rem, 0, s.submit_time)

    def attach(self, ctx: SchedContext) -> None:
        """The index of `PriorityPolicy`, and per-job constants for the running keys."""
        super().attach(ctx)
        self._dur = np.zeros(0)
        self._submit: list[float] = []
        self._weight = np.zeros(0) if self.p["weight"] == "gpus" else None
        self._spans: dict[int, tuple[tuple[int, ...], Spans]] = {}  # see VictimPool
        self._extend(ctx)

    def on_status(self, ctx: SchedContext, job: JobState, old: str | None) -> None:
        """A job that stopped running leaves the spans cache (it holds running jobs only)."""
        if old == RUNNING:
            self._spans.pop(job.idx, None)

    def _extend(self, ctx: SchedContext) -> None:
        """Constants of jobs added since the last call (a container job's task runs)."""
        have = len(self._submit)
        if have == ctx.num_jobs:
            return
        specs = [ctx.job_at(i).spec for i in range(have, ctx.num_jobs)]
        self._dur = np.concatenate([self._dur, [s.duration for s in specs]])
        self._submit += [s.submit_time for s in specs]
        self._submit_arr = np.asarray(self._submit, dtype=float)
        if self._weight is not None:
            self._weight = np.concatenate(
                [self._weight, [s.num_gpus * s.gpu_share for s in specs]])

    def _pool(self, ctx: SchedContext) -> Callable[[], VictimPool] | None:
        """The running jobs keyed by `running_key`, computed for all of them at once.

        The same floats as `running_key` job by job (`JobState.progress_at` in numpy):
        a pass that needs victims costs one sweep over the running jobs, not a method
        call per job, and the pool keeps them as columns (`ArrayPool`), so a victim
        search reads only the entries it visits.
        """
        def build() -> VictimPool:
            run = [j for j in ctx.running().values() if j.spec.num_gpus]
            if not run:
                return VictimPool([], self._spans)
            self._extend(ctx)
            r = np.array(list(map(_STATE, run)))
            idx = r[:, 0].astype(np.int64)
            work, rate, seg = r[:, 1], r[:, 2], r[:, 3]
            now, dur = ctx.now, self._dur[idx]
            done = np.where(now <= seg, work, np.minimum(dur, work + rate * (now - seg)))
            rem = dur - done
            if self._weight is not None:
                rem = rem * self._weight[idx]
            sub = self._submit_arr[idx]
            order = np.lexsort((idx, sub, rem))  # the pool's order: ((rem, 0, sub), idx)
            return ArrayPool(rem[order].tolist(), sub[order].tolist(), idx[order].tolist(),
                             self._spans)
        return build
