"""Summary metrics of SPEC sec. 5, computed once from the result tables."""

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


def summarize(jobs: pd.DataFrame, timeline: pd.DataFrame, end: float) -> dict[str, Any]:
    """The metric part of summary.json from jobs.parquet and timeline.parquet columns."""
    status = jobs["status"]
    done = jobs[status == "completed"]
    ended = jobs[status.isin(["completed", "failed", "killed"])]
    started = jobs[jobs["start_time"].notna()]
    first = float(jobs["submit_time"].min()) if len(jobs) else 0.0
    if (status == "unfinished").any():
        last = end
    else:
        last = float(ended["end_time"].max()) if len(ended) else first
    makespan = max(0.0, last - first)
    t = timeline["time"].to_numpy(dtype=float)

    def tw(col: str) -> float:
        return time_weighted_mean(t, timeline[col].to_numpy(dtype=float), first, last)

    demand = jobs["duration"] * jobs["num_gpus"]
    per_user = pd.DataFrame({"user": jobs["user"], "got": jobs["gpu_seconds"], "want": demand})
    per_user = per_user[per_user["want"] > 0].groupby("user", sort=True).sum()
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
        "queueing_delay_mean": float(started["queueing_delay"].mean()) if len(started)
        else math.nan,
        "queueing_delay_p50": _pct(started["queueing_delay"], 50),
        "queueing_delay_p95": _pct(started["queueing_delay"], 95),
        "queueing_delay_p99": _pct(started["queueing_delay"], 99),
        "jct_mean": float(done["jct"].mean()) if len(done) else math.nan,
        "jct_p50": _pct(done["jct"], 50),
        "jct_p95": _pct(done["jct"], 95),
        "jct_p99": _pct(done["jct"], 99),
        "slowdown_mean": float(done["slowdown"].mean()) if len(done) else math.nan,
        "utilization_mean": tw("utilization"),
        "fragmentation_mean": tw("fragmentation"),
        "fragmentation_fgd_mean": tw("fragmentation_fgd"),
        "idle_while_blocked_gpu_hours": integral(
            t, timeline["blocked_free_gpus"].to_numpy(dtype=float), last) / 3600.0,
        "preemptions": int(jobs["preemptions"].sum()),
        "migrations": int(jobs["migrations"].sum()),
        "lost_gpu_hours": lost_gpu_s / 3600.0,
        "fairness_jain": jain((per_user["got"] / per_user["want"]).to_numpy()),
        "throughput_jobs_per_hour": len(done) / hours if hours > 0 else math.nan,
        "gpu_hours_used": float(jobs["gpu_seconds"].sum()) / 3600.0,
    }
