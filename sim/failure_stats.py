"""Where a job's wall time goes: productive, recomputed, checkpoint writing, restarts, waiting.

An attempt runs from a (re)start to the release of its GPUs (`Progress.set_rate` with a
resume time opens it, `Progress.stop` closes it; a migration closes one and opens the
next). Of its wall time W: the restore pause is `restart`, completed checkpoint writes
are `checkpoint`, the progress still kept at its end (work over rate) is `productive`,
and the rest, progress thrown away plus any unfinished write, is `recompute`. `wait` is
the job's wall time from its first start to its end not covered by an attempt. The five
add up to the job's wall time exactly; GPU-hours are these seconds times the job's
`num_gpus` (docs/failures.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from schedlab.sim.jobstate import JobState

if TYPE_CHECKING:
    from schedlab.sim.failure_ckpt import CheckpointPlan

CAUSES = ("recompute", "checkpoint", "restart", "wait")
"""Causes of lost time, in column order."""
SIZE_BUCKETS = ((1, 1), (2, 8), (9, 64), (65, 512), (513, 4096), (4097, 1 << 62))
"""GPU-count buckets of `mttf_hours_by_size`."""


class AttemptStats:
    """Per job: seconds held, restarting, writing checkpoints, recomputed, productive."""

    def __init__(self) -> None:
        self.open: dict[int, tuple[float, float, float]] = {}  # idx -> t0, resume, work0
        self.totals: dict[int, list[float]] = {}  # idx -> held, restart, ckpt, lost, prod

    def begin(self, job: JobState, now: float, resume_at: float,
              plan: CheckpointPlan | None) -> None:
        """An attempt starts now and makes progress from `resume_at` (a move: a new one)."""
        if job.idx in self.open:
            self.end(job, now, plan)
        self.open[job.idx] = (now, resume_at, job.work)

    def end(self, job: JobState, now: float, plan: CheckpointPlan | None) -> None:
        """The attempt ends now with `job.work` kept (work lost is reset already)."""
        seg = self.open.pop(job.idx, None)
        if seg is None:
            return
        t0, resume, work0 = seg
        held = max(0.0, now - t0)
        restart = min(held, max(0.0, resume - t0))
        ckpt = 0.0
        if plan is not None:
            tau, cost = plan.of(job)
            if tau and cost:
                e = max(0.0, now - resume)
                ckpt = math.floor(e / (tau + cost) + 1e-9) * cost
        ckpt = min(ckpt, held - restart)
        kept = job.work - work0
        prod = kept / job.rate if job.rate > 0 and kept > 0 else 0.0
        prod = min(prod, held - restart - ckpt)
        lost = held - restart - ckpt - prod
        t = self.totals.get(job.idx)
        if t is None:
            t = self.totals[job.idx] = [0.0] * 5
        t[0] += held
        t[1] += restart
        t[2] += ckpt
        t[3] += lost
        t[4] += prod


def job_columns(jobs: Sequence[JobState], stats: AttemptStats, end: float,
                interruptions: Mapping[int, int], plan: CheckpointPlan | None
                ) -> dict[str, list[float]]:
    """The failure columns of jobs.parquet, one value a job of `jobs` (docs/contract.md)."""
    cols: dict[str, list[float]] = {k: [] for k in (
        "ettr", "interruptions", "checkpoint_interval_used", "productive_gpu_hours",
        *(f"lost_{c}_gpu_hours" for c in CAUSES))}
    nan = math.nan
    for j in jobs:
        t = stats.totals.get(j.idx, [0.0] * 5)
        held, restart, ckpt, lost, prod = t
        if j.idx in stats.open:  # still running at the end: up to now
            t0, resume, _ = stats.open[j.idx]
            held += end - t0
        first = j.first_start
        stop = j.end_time if not math.isnan(j.end_time) and j.end_time > 0 else end
        wall = stop - first if not math.isnan(first) else 0.0
        wait = max(0.0, wall - held)
        g = j.spec.num_gpus / 3600.0
        cols["ettr"].append(prod / wall if wall > 0 else nan)
        cols["interruptions"].append(float(interruptions.get(j.idx, 0)))
        cols["checkpoint_interval_used"].append(plan.of(j)[0] if plan is not None else nan)
        cols["productive_gpu_hours"].append(prod * g)
        for c, v in zip(CAUSES, (lost, ckpt, restart, wait), strict=True):
            cols[f"lost_{c}_gpu_hours"].append(v * g)
    return cols


def run_summary(cols: Mapping[str, Sequence[float]], num_gpus: Sequence[int],
                run_time: Sequence[float], by_cause: Mapping[str, int],
                swaps: int) -> dict[str, Any]:
    """Run totals: ETTR, lost GPU-hours by cause, interruptions, MTTF by job size."""
    ettr = [x for x in cols["ettr"] if not math.isnan(x)]
    prod = sum(cols["productive_gpu_hours"])
    lost = {c: sum(cols[f"lost_{c}_gpu_hours"]) for c in CAUSES}
    wall = prod + sum(lost.values())
    out: dict[str, Any] = {
        "ettr_mean": sum(ettr) / len(ettr) if ettr else math.nan,
        "ettr_gpu_weighted": prod / wall if wall > 0 else math.nan,
        "productive_gpu_hours": prod,
        **{f"lost_{c}_gpu_hours": v for c, v in lost.items()},
        "interruptions_total": int(sum(cols["interruptions"])),
        "interruptions_by_component": dict(sorted(by_cause.items())),
        "spare_swaps": swaps,
    }
    mttf: dict[str, float | None] = {}
    for lo, hi in SIZE_BUCKETS:
        held = sum(r for r, n in zip(run_time, num_gpus, strict=True) if lo <= n <= hi)
        hits = sum(k for k, n in zip(cols["interruptions"], num_gpus, strict=True)
                   if lo <= n <= hi)
        if held > 0:
            name = f"{lo}" if lo == hi else (f"{lo}+" if hi >= 1 << 62 else f"{lo}-{hi}")
            mttf[name] = held / 3600.0 / hits if hits else None
    out["mttf_hours_by_size"] = mttf
    return out


def failure_results(run: Any, end: float) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """(jobs.parquet columns, summary.json keys) of a run with a failure layer.

    The rows are the trace's submitted jobs in run order, as in jobs.parquet.
    """
    from schedlab.sim.jobstate import WAITING

    layer = run.layer
    jobs = [j for j in run.jobs[:run.num_trace] if j.status is not WAITING]
    health = run.health
    by_job = getattr(health, "job_interruptions", {})
    cols = job_columns(jobs, layer.stats, end, by_job, layer.plan)
    run_time = []
    for j in jobs:
        held = j.run_time + (end - j.held_since if j.gpus and j.idx in run.running else 0.0)
        run_time.append(held)
    summary = run_summary(cols, [j.spec.num_gpus for j in jobs], run_time,
                          getattr(health, "interruptions", {}), getattr(health, "swaps", 0))
    return cols, summary
