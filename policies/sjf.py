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

from collections.abc import Callable, Mapping
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


_STATE = attrgetter("work", "rate", "seg_start")  # what a running key is computed from
_VERSION = attrgetter("version")  # bumped whenever `_STATE` of a running job changes

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
        """The index of `PriorityPolicy`, and per-job columns for the running keys."""
        super().attach(ctx)
        self._dur = np.zeros(0)
        self._submit: list[float] = []
        self._weight = np.zeros(0) if self.p["weight"] == "gpus" else None
        self._gpu = np.zeros(0, dtype=bool)  # asks for GPUs (the pool's jobs)
        # `_STATE` of each job as last read, and the `job.version` it was read at
        self._work = np.zeros(0)
        self._rate = np.zeros(0)
        self._seg = np.zeros(0)
        self._seen = np.zeros(0, dtype=np.int64)
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
        more = len(specs)
        self._gpu = np.concatenate([self._gpu, np.array([s.num_gpus > 0 for s in specs])])
        self._work = np.concatenate([self._work, np.zeros(more)])
        self._rate = np.concatenate([self._rate, np.zeros(more)])
        self._seg = np.concatenate([self._seg, np.zeros(more)])
        self._seen = np.concatenate([self._seen, np.full(more, -1, dtype=np.int64)])

    def _refresh(self, run: Mapping[int, JobState]) -> np.ndarray:
        """Indexes of the running jobs; their columns re-read where `version` moved.

        A running job's work, rate and segment start change only together with a bump
        of its `version` (`Progress.set_rate` and `stop`; an in-place restart of a
        container job's task run is one, without an event), so the columns read at the
        same version still hold the same floats, and a pass reads only the jobs that
        changed (plus one `version` a running job).
        """
        n = len(run)
        idx = np.fromiter(run.keys(), dtype=np.int64, count=n)
        ver = np.fromiter(map(_VERSION, run.values()), dtype=np.int64, count=n)
        stale = np.flatnonzero(self._seen[idx] != ver)
        if stale.size:
            jobs = list(run.values())
            work, rate, seg, seen = self._work, self._rate, self._seg, self._seen
            for p in stale.tolist():
                j = jobs[p]
                i = j.idx
                work[i], rate[i], seg[i] = _STATE(j)
                seen[i] = j.version
        return idx[self._gpu[idx]]

    def _pool(self, ctx: SchedContext) -> Callable[[], VictimPool] | None:
        """The running jobs keyed by `running_key`, computed for all of them at once.

        The same floats as `running_key` job by job (`JobState.progress_at` in numpy),
        from columns kept across passes (`_refresh`): a pass that needs victims reads one
        `version` per running job and re-reads only the jobs that changed, and the pool
        keeps them as columns (`ArrayPool`), so a victim search reads only the entries it
        visits.
        """
        def build() -> VictimPool:
            run = ctx.running()
            if not run:
                return VictimPool([], self._spans)
            self._extend(ctx)
            idx = self._refresh(run)
            if not idx.size:
                return VictimPool([], self._spans)
            work, rate, seg = self._work[idx], self._rate[idx], self._seg[idx]
            now, dur = ctx.now, self._dur[idx]
            done = np.where(now <= seg, work, np.minimum(dur, work + rate * (now - seg)))
            rem = dur - done
            if self._weight is not None:
                rem = rem * self._weight[idx]
            sub = self._submit_arr[idx]
            order = np.lexsort((idx, sub, rem))  # the pool's order: ((rem, 0, sub), idx)
            ids = idx[order].tolist()
            return ArrayPool(rem[order].tolist(), sub[order].tolist(), ids, self._spans,
                             list(map(run.__getitem__, ids)))
        return build
