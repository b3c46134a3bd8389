"""Input shaking: replicas of a trace made by small, documented random perturbations.

After Tsafrir, Ouaknine and Feitelson, "Reducing performance evaluation sensitivity and
variability by input shaking" (MASCOTS 2007): a result that holds for one trace may be
an accident of that trace's exact arrival pattern; running many slightly perturbed
copies ("replicas") and reporting the mean with a confidence interval shows how much of
a difference between policies is real. A replica is, in this order (each step optional):

1. `subset`: every job is kept with probability `subset` (at least one job stays);
2. `resample`: with probability `resample` a job's duration is replaced by the duration
   of a job drawn uniformly from the (unshaken) trace's jobs of the same GPU count, so
   the size-duration relation of the trace is kept;
3. `duration_jitter`: every duration is multiplied by a factor uniform in
   [1 - x, 1 + x];
4. `jitter`: every submit time moves by an amount uniform in +-`jitter` times the
   trace's mean inter-arrival gap, clipped at 0; jobs are then ordered by their new
   submit times (ties by their old order).

A job whose duration changes keeps its work in proportion: `fail_at`, `num_steps` and
`samples` scale with it; a job of task roles with their own durations keeps its
durations. A job's deadline keeps its slack after submission. Dependencies on jobs
dropped by `subset` are dropped (as `traces.shaping` does). Randomness comes only from
the numpy Generator given (`replica_rng`: one per replica seed and index), so a replica
is the same for every policy of a sweep: policies are compared on paired inputs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.sim.errors import InvalidParameter, InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.traces.base import Trace

__all__ = ["SHAKE_KEYS", "Shaking", "replica_rng", "shake", "shaking_from"]

SHAKE_KEYS = ("jitter", "resample", "duration_jitter", "subset")
"""The perturbation parameters, in the order they are documented."""


@dataclass(frozen=True)
class Shaking:
    """How a replica perturbs its trace (module doc); the defaults are schedlab's choices.

    The paper perturbs arrival times only and leaves the amount to the study; these
    defaults keep a replica close to its trace (the replica-to-replica spread should be
    the sensitivity of a result, not a different workload).
    """

    jitter: float = 0.5
    """Submit shift: uniform in +-jitter x the mean inter-arrival gap (>= 0)."""
    resample: float = 0.1
    """Probability that a job's duration is redrawn from same-size jobs ([0, 1])."""
    duration_jitter: float = 0.0
    """Multiplicative duration noise: factor uniform in [1 - x, 1 + x] ([0, 1))."""
    subset: float = 0.95
    """Probability that a job is kept ((0, 1])."""

    def __post_init__(self) -> None:
        for key, lo, hi, lo_open, hi_open in (
                ("jitter", 0.0, math.inf, False, True), ("resample", 0.0, 1.0, False, False),
                ("duration_jitter", 0.0, 1.0, False, True), ("subset", 0.0, 1.0, True, False)):
            v = getattr(self, key)
            bad = isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) \
                or v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi)
            if bad:
                shown = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
                raise InvalidParameter(f"replicas: {key} {v!r}: expected a number in {shown}")

    def as_dict(self) -> dict[str, float]:
        """The parameters as plain data (a sweep point's config)."""
        return {k: float(getattr(self, k)) for k in SHAKE_KEYS}


def shaking_from(values: Mapping[str, Any], where: str = "replicas") -> Shaking:
    """A `Shaking` from a mapping of SHAKE_KEYS (missing keys take the defaults)."""
    for key in values:
        if key not in SHAKE_KEYS:
            raise InvalidParameter(f"{where}: unknown key {key!r}; allowed: "
                                   f"{', '.join(SHAKE_KEYS)}")
    try:
        return Shaking(**{k: values[k] for k in SHAKE_KEYS if k in values})
    except InvalidParameter as e:
        raise InvalidParameter(f"{where}: {str(e).removeprefix('replicas: ')}") from None


def replica_rng(seed: int, index: int) -> np.random.Generator:
    """The Generator of replica `index` of replica seed `seed` (independent streams)."""
    return np.random.default_rng([int(seed), int(index)])


def shake(trace: Trace, shaking: Shaking, rng: np.random.Generator) -> Trace:
    """A replica of `trace` perturbed as `shaking` says (module doc), drawn from `rng`.

    Raises:
        InvalidTrace: The trace has no job.
    """
    jobs = list(trace.jobs)
    if not jobs:
        raise InvalidTrace(f"trace {trace.name!r}: no job to shake")
    n = len(jobs)
    # draws are made for every job in a fixed order, so one parameter's value does not
    # change the draws of the others
    keep_u = rng.random(n)
    resample_u = rng.random(n)
    pick_u = rng.random(n)
    factor_u = rng.random(n)
    shift_u = rng.random(n)
    keep = keep_u < shaking.subset
    if not keep.any():
        keep[int(np.argmin(keep_u))] = True
    by_size: dict[int, list[float]] = {}
    for j in jobs:
        by_size.setdefault(j.num_gpus, []).append(j.duration)
    gap = _mean_gap(jobs)
    out: list[tuple[float, int, JobSpec]] = []
    for i, job in enumerate(jobs):
        if not keep[i]:
            continue
        duration = job.duration
        if resample_u[i] < shaking.resample and not job.tasks:
            pool = by_size[job.num_gpus]
            duration = pool[min(len(pool) - 1, int(pick_u[i] * len(pool)))]
        if shaking.duration_jitter and not job.tasks:
            duration *= 1.0 + shaking.duration_jitter * (2.0 * factor_u[i] - 1.0)
        if duration != job.duration:
            job = _rescaled(job, duration)
        if shaking.jitter and gap > 0:
            submit = max(0.0, job.submit_time + shaking.jitter * gap * (2.0 * shift_u[i] - 1.0))
            job = _resubmit(job, submit)
        out.append((job.submit_time, i, job))
    out.sort(key=lambda t: (t[0], t[1]))
    kept = [j for _, _, j in out]
    if len(kept) < n:
        ids = {j.job_id for j in kept}
        kept = [j if all(d in ids for d in j.depends_on) else dataclasses.replace(
            j, depends_on=tuple(d for d in j.depends_on if d in ids)) for j in kept]
    return dataclasses.replace(trace, jobs=tuple(kept))


def _mean_gap(jobs: list[JobSpec]) -> float:
    """Mean inter-arrival gap: (last submit - first submit) / (jobs - 1); 0 for one job."""
    if len(jobs) < 2:
        return 0.0
    times = [j.submit_time for j in jobs]
    return (max(times) - min(times)) / (len(jobs) - 1)


def _rescaled(job: JobSpec, duration: float) -> JobSpec:
    """The job with another duration, its failure point and work in proportion."""
    r = duration / job.duration
    changes: dict[str, Any] = {"duration": duration}
    if job.fail_at is not None:
        changes["fail_at"] = job.fail_at * r
    if job.num_steps is not None:
        changes["num_steps"] = job.num_steps * r
    if job.samples is not None:
        changes["samples"] = job.samples * r
    return dataclasses.replace(job, **changes)


def _resubmit(job: JobSpec, submit_time: float) -> JobSpec:
    """The job submitted at another time; a deadline keeps its slack after submission."""
    if job.deadline is None:
        return dataclasses.replace(job, submit_time=submit_time)
    return dataclasses.replace(job, submit_time=submit_time,
                               deadline=submit_time + (job.deadline - job.submit_time))
