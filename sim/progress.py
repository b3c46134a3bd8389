"""Job progress: work done as a piecewise-linear function of time, and its accounting.

`work` ideal-seconds were done at `seg_start`; from then on the job advances at `rate`
(a `seg_start` in the future is a restore pause). Every change of speed goes through
`set_rate`: bring the work up to now, take the new rate from the speed chain, cancel the
old completion (version bump) and schedule the new one.

With a checkpoint plan (`plan`, `schedlab.sim.failure_ckpt`) an attempt alternates `tau` s
of progress and `cost` s of writing a checkpoint, counted from `run_start`; `stats`
(`schedlab.sim.failure_stats`) is told where each attempt starts and ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mypy_extensions import mypyc_attr

from schedlab.sim.agenda import Agenda, Due
from schedlab.sim.failure_ckpt import CheckpointPlan, progress_time, wall_time
from schedlab.sim.failure_stats import AttemptStats
from schedlab.sim.instant import Instant
from schedlab.sim.jobstate import RUNNING, JobState, plain_spec
from schedlab.sim.model import MILLI
from schedlab.sim.speed import SpeedChain


@mypyc_attr(allow_interpreted_subclasses=True)
class Progress:
    """Advances jobs, reschedules their completions and accounts GPU time held."""

    def __init__(self, agenda: Agenda, chain: SpeedChain,
                 clock: Callable[[], float] | Instant) -> None:
        self.agenda = agenda
        self.chain = chain
        self._clock = clock
        # the engine's own clock is read as a native field (`schedlab.sim.instant`), any other
        # clock through a call
        self._at: Instant | None = clock if isinstance(clock, Instant) else None
        self.plan: CheckpointPlan | None = None  # checkpoints with a cost (failure layer)
        self.stats: AttemptStats | None = None  # where time goes, by cause (failure layer)
        # told of a job whose completion is (re)scheduled: its rate may be new (the
        # lifecycle's `rate` rows for jobs of a performance model)
        self.on_rate: Callable[[JobState], None] | None = None

    def _now(self) -> float:
        at = self._at
        return at.t if at is not None else self._clock()

    def advance(self, job: JobState) -> None:
        """Bring `work` and the last checkpoint up to now."""
        self.advance_to(job, self._now())

    def hang_since(self, job: JobState, t: float) -> None:
        """The job made no progress since `t` (a failure not yet detected).

        Its work and checkpoint are brought up to `t` only and held there until now.
        """
        self.advance_to(job, t)
        now = self._now()
        if job.seg_start < now:
            job.seg_start = now

    def advance_to(self, job: JobState, now: float) -> None:
        """Bring `work` and the last checkpoint up to `now` (not past the clock)."""
        if job.status != RUNNING or now <= job.seg_start:
            return
        if self.plan is not None:
            self._advance_planned(job, now, self.plan)
            return
        c = None if plain_spec(job.spec) else job.spec.checkpoint_interval
        if c:
            k = math.floor((now - job.run_start) / c + 1e-9)
            tc = job.run_start + k * c
            if k >= 1 and tc >= job.seg_start:
                job.ckpt_work = min(job.spec.duration, job.work + job.rate * (tc - job.seg_start))
        job.work = min(job.spec.duration, job.work + job.rate * (now - job.seg_start))
        job.seg_start = now

    def _advance_planned(self, job: JobState, now: float, plan: CheckpointPlan) -> None:
        """`advance` with checkpoints that take `cost` s to write (no progress then)."""
        tau, cost = plan.of(job)
        if not tau:
            job.work = min(job.spec.duration, job.work + job.rate * (now - job.seg_start))
            job.seg_start = now
            return
        period = tau + cost
        p0 = progress_time(job.seg_start - job.run_start, tau, period)
        e = now - job.run_start
        k = math.floor(e / period + 1e-9)
        if k >= 1 and job.run_start + k * period >= job.seg_start:
            job.ckpt_work = min(job.spec.duration, job.work + job.rate * (k * tau - p0))
        job.work = min(job.spec.duration,
                       job.work + job.rate * (progress_time(e, tau, period) - p0))
        job.seg_start = now

    def account(self, job: JobState) -> None:
        """Add the GPU time held since `held_since` (at the current share) and restart it."""
        now = self._now()
        held = now - job.held_since
        job.run_time += held
        job.gpu_seconds += held * len(job.gpus) * job.milli / MILLI
        job.held_since = now

    def set_rate(self, job: JobState, resume_at: float | None = None, *,
                 reschedule: bool = True) -> None:
        """New speed from the chain; completion rescheduled (work must be advanced first).

        `resume_at`: the job makes progress again only from then (a restore pause); by
        default a running job continues from now. `reschedule=False` leaves scheduling
        the completion to the caller (`schedule_finish`), after its own agenda entries.
        """
        if resume_at is not None and self.stats is not None:
            self.stats.begin(job, self._now(), resume_at, self.plan)
        job.rate = self.chain.rate(job)
        if resume_at is not None:
            job.seg_start = resume_at
            job.run_start = resume_at
        elif job.seg_start < self._now():
            job.seg_start = self._now()
        self.agenda.bump(job)
        if reschedule:
            self.schedule_finish(job)

    def schedule_finish(self, job: JobState) -> None:
        """Put the job's completion on the agenda at its current rate."""
        hook = self.on_rate
        if hook is not None:
            hook(job)
        if job.rate <= 0:
            return
        left = job.remaining_work
        if self.chain.model is not None:  # its rate may change before it finishes
            h = self.chain.horizon(job)
            if h < job.spec.duration:
                left = min(left, max(0.0, h - job.work))
        plan = self.plan
        tau = plan.of(job)[0] if plan is not None else 0.0
        if tau:
            period = tau + plan.cost if plan is not None else tau
            q = progress_time(job.seg_start - job.run_start, tau, period) + left / job.rate
            t = job.run_start + wall_time(q, tau, period)
        else:
            t = job.seg_start + left / job.rate
        self.agenda.schedule(t, Due.FINISH, job.idx, job.version)

    def stop(self, job: JobState) -> None:
        """The job holds no GPUs any more: account, zero its rate, cancel its events."""
        if self.stats is not None:
            self.stats.end(job, self._now(), self.plan)
        self.account(job)
        job.gpus = ()
        job.rate = 0.0
        self.agenda.bump(job)
