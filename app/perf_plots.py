"""A job's throughput and batch size over time, from the `rate` rows of events.parquet.

A run with a performance model records a `rate` row each time a job of a model runs at
a new speed, batch size or attempt (its placement changed, an epoch of its model began,
its batch size was re-tuned): `detail` `rate=R;goodput=G;batch=B`. Between a stop
(`suspend`, `preempt`, `finish`, `fail`, `kill`) and the next placement the job makes no
progress, so its series is 0 there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_STOP = frozenset({"preempt", "suspend", "finish", "fail", "kill"})
HOUR = 3600.0


def _fields(detail: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in str(detail).split(";"):
        key, sep, value = part.partition("=")
        if sep:
            try:
                out[key.strip()] = float(value)
            except ValueError:
                continue
    return out


def rate_series(events: pd.DataFrame, job_id: str) -> pd.DataFrame:
    """The job's `time, goodput, rate, batch, num_gpus` as steps (0 while it is stopped).

    Each row holds from its time to the next row's. Empty when the job has no `rate` row
    (it names no model, or the run has no performance model).
    """
    ev = events[events["job_id"].astype(str) == str(job_id)]
    rows: list[tuple[float, float, float, float, int]] = []
    last = (np.nan, np.nan, np.nan)
    for t, kind, gpus, detail in zip(ev["time"], ev["kind"], ev["num_gpus"], ev["detail"],
                                     strict=True):
        if kind == "rate":
            f = _fields(detail)
            last = (f.get("goodput", np.nan), f.get("rate", np.nan), f.get("batch", np.nan))
            rows.append((float(t), *last, int(gpus)))
        elif kind in _STOP and rows:
            rows.append((float(t), 0.0, 0.0, last[2], 0))
    return pd.DataFrame(rows, columns=["time", "goodput", "rate", "batch", "num_gpus"])


def rated_jobs(events: pd.DataFrame) -> list[str]:
    """Jobs with `rate` rows, most rows first (the ones whose speed changed most often)."""
    counts = events.loc[events["kind"] == "rate", "job_id"].astype(str).value_counts()
    return list(counts.index)


def job_rates_figure(events: pd.DataFrame, job_ids: Sequence[str] | None = None,
                     title: str = "", top: int = 4) -> Figure:
    """Goodput, GPUs and batch size over time of some jobs of a model, time in hours.

    Default jobs: the `top` with the most changes; one colour a job.
    """
    ids = list(job_ids) if job_ids is not None else rated_jobs(events)[:top]
    fig = Figure(figsize=(8.0, 7.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(3, 1, sharex=True)
    drawn = 0
    for jid in ids:
        s = rate_series(events, jid)
        if s.empty:
            continue
        drawn += 1
        t = s["time"].to_numpy() / HOUR
        axes[0].step(t, s["goodput"], where="post", label=str(jid))
        axes[1].step(t, s["num_gpus"], where="post")
        axes[2].step(t, s["batch"], where="post")
    axes[0].set_ylabel("goodput\n(work units/s)")
    axes[1].set_ylabel("GPUs")
    axes[2].set_ylabel("global batch size")
    axes[2].set_xlabel("time (hours)")
    if drawn:
        axes[0].legend(fontsize="small", loc="upper left")
    else:
        axes[0].text(0.5, 0.5, "no job of a performance model in this run",
                     ha="center", va="center", transform=axes[0].transAxes)
    fig.suptitle(title or "throughput and batch size of jobs over time")
    return fig
