"""Checkpoints with a cost: each job's interval and write time, and the Young/Daly interval.

A job checkpoints after every `tau` s of progress and then writes for `cost` s, making no
progress meanwhile; the checkpoint counts once the write is done. `tau` is the trace's
`checkpoint_interval`, the engine's `checkpoint_interval` in seconds for every job, or
`auto`: Daly's higher-order optimum (2006) for the job's expected time between failures
given its size. `progress_time` and `wall_time` map wall time since an attempt's start
to progress time and back (`schedlab.sim.progress`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from schedlab.sim.jobstate import JobState, plain_spec


def daly_interval(cost: float, mtbf: float) -> float:
    """Daly's higher-order optimum compute time between checkpoints (s).

    tau = sqrt(2 C M) [1 + sqrt(C / 2M) / 3 + (C / 2M) / 9] - C for C < 2M, else M
    (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart
    dumps", FGCS 22(3), 2006, eq. 37). Young's first-order sqrt(2 C M) is its first term.
    """
    if not mtbf < math.inf:
        return math.inf
    if cost >= 2 * mtbf:
        return mtbf
    x = cost / (2 * mtbf)
    return math.sqrt(2 * cost * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - cost


def daly_wall_time(work: float, tau: float, cost: float, restart: float, mtbf: float) -> float:
    """Daly's expected wall time (2006, eq. 13) of `work` s in segments of tau + cost.

    T = M e^(R/M) (e^((tau+C)/M) - 1) work / tau: failures are exponential with mean M,
    each followed by a restart of R s (which a failure may itself interrupt).
    """
    return mtbf * math.exp(restart / mtbf) * math.expm1((tau + cost) / mtbf) * work / tau


def progress_time(e: float, tau: float, period: float) -> float:
    """Progress made `e` s of wall time after an attempt's start (cycles of tau + cost)."""
    if e <= 0:
        return 0.0
    k = math.floor(e / period)
    return k * tau + min(e - k * period, tau)


def wall_time(q: float, tau: float, period: float) -> float:
    """Wall time from an attempt's start until its progress reaches `q` (no write after)."""
    if q <= 0:
        return 0.0
    k = math.ceil(q / tau) - 1
    return k * period + (q - k * tau)


class CheckpointPlan:
    """Each job's (interval, write cost) in s; interval 0 means no checkpoints."""

    def __init__(self, interval: float | str | None, cost: float,
                 job_rate: Callable[[int], float]) -> None:
        self.interval = interval  # None: the trace's; "auto"; or seconds for every job
        self.cost = cost
        self.job_rate = job_rate  # expected failures per hour of a job of n GPUs
        self._of: dict[int, tuple[float, float]] = {}
        self._auto: dict[int, float] = {}

    def of(self, job: JobState) -> tuple[float, float]:
        """(tau, cost) of `job`, cached by job."""
        got = self._of.get(job.idx)
        if got is None:
            got = self._of[job.idx] = (self._tau(job), self.cost)
        return got

    def _tau(self, job: JobState) -> float:
        iv = self.interval
        if iv is None:
            s = job.spec
            return 0.0 if plain_spec(s) else float(s.checkpoint_interval or 0.0)
        if iv != "auto":
            return float(iv)
        n = job.spec.num_gpus
        tau = self._auto.get(n)
        if tau is None:
            rate = self.job_rate(n)
            tau = daly_interval(self.cost, 3600.0 / rate if rate > 0 else math.inf)
            self._auto[n] = tau
        return 0.0 if math.isinf(tau) else tau
