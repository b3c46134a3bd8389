"""Quasi-shortest-service-first (Helios, Hu et al., SC'21): waiting jobs by estimated GPU time.

A job's service is its GPUs x its estimated run time; waiting jobs start smallest
service first, and nobody is preempted. The estimate never reads the job's own run time:
by default (`estimator=history`) it is learned online from the jobs that finished so far,
by the rules of Helios' `NaiveEstimator` (user and job name, fuzzy-matched names, the
same GPU count first; `schedlab.policies.qssf_history`); `estimator=column` reads an
estimate made before the run (the pass-through trace column `estimate`, seconds: a
predictor's output, as Helios' Philly set-up reads its `Philly_lgb.csv`). The job name
is the pass-through column `name` (empty: the job matches no name). As Helios' simulator
(`framework/QSSF Service/policies/qssf.py`), the walk stops at the first job that does
not fit (`blocked=stop`); `blocked=skip` lets later jobs start, as `sjf` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from schedlab.policies.priority import Ctx, Key, PriorityPolicy
from schedlab.policies.qssf_history import ServiceHistory
from schedlab.policies.sjf import blocking_pass
from schedlab.sim.errors import InvalidTrace
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision, EventKind, JobSpec
from schedlab.sim.params import Param, as_choice

__all__ = ["QssfPolicy", "job_name", "trace_estimate"]

NAME_COLUMN = "name"
"""Pass-through trace column holding a job's name (docs/contract.md sec. 2)."""

ESTIMATE_COLUMN = "estimate"
"""Pass-through trace column holding a job's estimated run time in seconds (sec. 2)."""


def _extra(spec: JobSpec, key: str) -> Any:
    for k, v in spec.extra:
        if k == key:
            return v
    return None


def job_name(spec: JobSpec) -> str:
    """The job's name (pass-through column `name`; '' when absent or empty)."""
    v = _extra(spec, NAME_COLUMN)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v).strip()


def trace_estimate(spec: JobSpec) -> float:
    """The job's estimated run time from the `estimate` column, or InvalidTrace naming it."""
    v = _extra(spec, ESTIMATE_COLUMN)
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x):
        raise InvalidTrace(f"job {spec.job_id!r}: column {ESTIMATE_COLUMN!r} is {v!r}; "
                           "qssf with estimator=column needs a number of seconds (a "
                           "predictor's estimate: any finite number, smaller first)")
    return x


class QssfPolicy(PriorityPolicy):
    """Smallest estimated service (GPUs x estimated run time) first; non-preemptive.

    Keys are computed when a job starts waiting, from what is known then (Helios
    computes a job's priority once, too); ties go to fewer GPUs, then the earlier
    arrival. Finished jobs join the history as they finish.
    """

    name = "qssf"
    description = ("quasi-shortest-service-first (Helios): estimated GPU time from the "
                   "history of the user and job name; non-preemptive")
    params = {
        "estimator": Param("history", as_choice("history", "column"),
                           "history = learned from finished jobs by user and job name "
                           "(Helios' NaiveEstimator); column = the trace's `estimate` "
                           "column (seconds)"),
        "blocked": Param("stop", as_choice("skip", "stop"),
                         "a waiting job that does not fit: stop = nobody behind it starts "
                         "this pass (Helios' simulator), skip = later jobs may start"),
    }

    def attach(self, ctx: Ctx) -> None:
        """The priority index, and an empty history."""
        super().attach(ctx)
        self.history = ServiceHistory()

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """A finished job joins the history at once (before any key of that instant)."""
        super().notify(ctx, job, kind)
        if kind == EventKind.FINISH and self.p["estimator"] == "history":
            s = job.spec
            self.history.add(s.user, job_name(s), s.num_gpus, s.duration)

    def pending_key(self, ctx: Ctx, job: JobState) -> Key:
        """(estimated service, GPUs, submit time)."""
        s = job.spec
        if self.p["estimator"] == "column":
            service = trace_estimate(s) * s.num_gpus
        else:
            service = self.history.service(s.user, job_name(s), s.num_gpus)
        return (service, s.num_gpus, s.submit_time)

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """A walk that stops at the first misfit (`blocked=stop`), or the priority walk."""
        if self.p["blocked"] == "stop":
            yield from blocking_pass(self, ctx)
        else:
            yield from super().schedule(ctx)
