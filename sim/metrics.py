"""Summary metrics of docs/contract.md#sec-5, computed once from the result tables."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def time_weighted_mean(t: np.ndarray, v: np.ndarray, t0: float, t1: float) -> float:
    """Mean of a step function (value v[i] from t[i] to t[i+1]) over [t0, t1]."""
    if len(t) == 0 or t1 <= t0:
        return math.nan
    edges = np.append(t, max(t1, t[-1]))
    lo = np.clip(edges[:-1], t0, t1)
    hi = np.clip(edges[1:], t0, t1)
    w = hi - lo
    total = w.sum()
    return float((w * v).sum() / total) if total > 0 else math.nan


def integral(t: np.ndarray, v: np.ndarray, t1: float) -> float:
    """Integral of a step function from t[0] to t1."""
    if len(t) == 0:
        return 0.0
    edges = np.append(t, max(t1, t[-1]))
    return float((np.diff(edges) * v).sum())


def jain(x: np.ndarray) -> float:
    """Jain's fairness index (1 = equal; 1/n = one gets all)."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0 or (x**2).sum() == 0:
        return math.nan
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def _pct(s: pd.Series, q: float) -> float:
    return float(np.percentile(s, q)) if len(s) else math.nan


def _mean(s: pd.Series) -> float:
    return float(s.mean()) if len(s) else math.nan


BOUNDED_SLOWDOWN_FLOOR = 10.0
"""Seconds: jobs shorter than this count as this long in the bounded slowdown (HPC use)."""

ENDED_WITHOUT_COMPLETING = frozenset({"failed", "killed", "rejected"})


def sla_violated(status: str, submit: float, first_start: float, end_time: float,
                 deadline: float | None, max_wait_hours: float, run_end: float) -> bool:
    """True when a job broke its SLA (docs/contract.md#sec-5 `sla_violations`).

    A job with a `deadline` (s from trace start) breaks it when it completed after it,
    ended without completing (failed, killed, rejected), or is unfinished at the end of
    the run and the run ended at or after its deadline (it ends later still, so it can no
    longer meet it). A job with `max_wait_hours` > 0 breaks it when it first started
    later than submit + max_wait_hours, ended without ever starting, or is unfinished,
    has not started and the run ended at or after that limit. A run stops after applying
    every event and scheduling pass at its end time, so an unfinished job ends (and a job
    not started by then starts) strictly after the run's end.
    """
    if deadline is not None and not math.isnan(deadline):
        if status == "completed":
            if end_time > deadline:
                return True
        elif status in ENDED_WITHOUT_COMPLETING or run_end >= deadline:
            return True
    if max_wait_hours > 0:
        limit = submit + max_wait_hours * 3600.0
        if not math.isnan(first_start):
            return first_start > limit
        return status in ENDED_WITHOUT_COMPLETING or run_end >= limit
    return False


def waited(jobs: pd.DataFrame) -> pd.DataFrame:
    """The jobs queueing-delay statistics are over: every submitted job not rejected.

    A job that never started (or is waiting again) at the end of the run has its wait
    counted up to the end in `queueing_delay` (`censored`), so it counts, never as zero.
    """
    return jobs[jobs["status"] != "rejected"]


def gpu_demand(jobs: pd.DataFrame) -> pd.Series:
    """GPU-seconds each job demands (`JobSpec.gpu_time`; duration x GPUs without it)."""
    if "gpu_time" in jobs:
        return jobs["gpu_time"].astype(float)
    return (jobs["duration"] * jobs["num_gpus"]).astype(float)


def fairness_jain(jobs: pd.DataFrame) -> float:
    """Jain's index over users of GPU time received / GPU time demanded (docs/contract.md#sec-5).

    Received is `gpu_seconds` (held up to the end of the run for a job running then);
    demanded is the ideal GPU time of the user's submitted jobs; users demanding no GPU
    time (CPU-only jobs) are left out.
    """
    per_user = pd.DataFrame({"user": jobs["user"], "got": jobs["gpu_seconds"],
                             "want": gpu_demand(jobs)})
    per_user = per_user[per_user["want"] > 0].groupby("user", sort=True).sum()
    return jain((per_user["got"] / per_user["want"]).to_numpy())


def summarize(jobs: pd.DataFrame, timeline: pd.DataFrame, end: float) -> dict[str, Any]:
    """The metric part of summary.json from jobs.parquet and timeline.parquet columns."""
    status = jobs["status"]
    # the rows of the columns each statistic reads, not of the whole table (at a million
    # jobs a copy of every column is ~200 MB, and three were alive at once)
    done = jobs.loc[status == "completed", ["jct", "duration", "slowdown"]]
    ended = jobs.loc[status.isin(["completed", "failed", "killed"]), ["end_time"]]
    started = jobs.loc[jobs["start_time"].notna(), ["start_time", "submit_time"]]
    queued = waited(jobs[["status", "queueing_delay"]])["queueing_delay"]
    response = started["start_time"] - started["submit_time"]
    bounded = np.maximum(1.0, done["jct"] / np.maximum(done["duration"],
                                                         BOUNDED_SLOWDOWN_FLOOR))
    first = float(jobs["submit_time"].min()) if len(jobs) else 0.0
    if (status == "unfinished").any():
        last = end
    else:
        last = float(ended["end_time"].max()) if len(ended) else first
    makespan = max(0.0, last - first)
    t = timeline["time"].to_numpy(dtype=float)

    def tw(col: str) -> float:
        return time_weighted_mean(t, timeline[col].to_numpy(dtype=float), first, last)

    lost_gpu_s = float((jobs["lost_work"] * jobs["num_gpus"]).sum())
    hours = makespan / 3600.0
    return {
        "jobs_submitted": int(len(jobs)),
        "jobs_completed": int((status == "completed").sum()),
        "jobs_failed": int((status == "failed").sum()),
        "jobs_killed": int((status == "killed").sum()),
        "jobs_rejected": int((status == "rejected").sum()),
        "jobs_unfinished": int((status == "unfinished").sum()),
        "makespan": makespan,
        "queueing_delay_mean": _mean(queued),
        "queueing_delay_p50": _pct(queued, 50),
        "queueing_delay_p95": _pct(queued, 95),
        "queueing_delay_p99": _pct(queued, 99),
        "jct_mean": float(done["jct"].mean()) if len(done) else math.nan,
        "jct_p50": _pct(done["jct"], 50),
        "jct_p95": _pct(done["jct"], 95),
        "jct_p99": _pct(done["jct"], 99),
        "slowdown_mean": _mean(done["slowdown"]),
        "bounded_slowdown_mean": _mean(bounded),
        "response_time_mean": _mean(response),
        "response_time_p95": _pct(response, 95),
        "jobs_never_started": int(((status != "rejected") & jobs["start_time"].isna()).sum()),
        "sla_violations": int(jobs["sla_violated"].sum()) if "sla_violated" in jobs else 0,
        "utilization_mean": tw("utilization"),
        "fragmentation_mean": tw("fragmentation"),
        "fragmentation_fgd_mean": tw("fragmentation_fgd"),
        "idle_while_blocked_gpu_hours": integral(
            t, timeline["blocked_free_gpus"].to_numpy(dtype=float), last) / 3600.0,
        "preemptions": int(jobs["preemptions"].sum()),
        "migrations": int(jobs["migrations"].sum()),
        "lost_gpu_hours": lost_gpu_s / 3600.0,
        "fairness_jain": fairness_jain(jobs),
        "throughput_jobs_per_hour": len(done) / hours if hours > 0 else math.nan,
        "gpu_hours_used": float(jobs["gpu_seconds"].sum()) / 3600.0,
    }
