"""tenants.parquet (contract.md#sec-5): per user and per virtual cluster, what it asked and got.

Built from the jobs table only (so it can be rebuilt from a jobs.parquet), at the results
boundary: pandas is used here, and the engine never imports this module.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from schedlab.sim.metrics import gpu_demand

TENANT_COLUMNS = (
    "kind", "tenant", "jobs", "gpu_hours_demanded", "gpu_hours_received",
    "queueing_delay_mean", "queueing_delay_p95", "jct_mean", "sla_violations",
    "share_received",
)
"""One row a tenant: `kind` is "user" or "vc", `tenant` its name (users first, by name)."""

KINDS = ("user", "vc")


def tenants_frame(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per user and per vc of a jobs table (columns of jobs.parquet).

    - `jobs`: jobs submitted (every status);
    - `gpu_hours_demanded`: the ideal GPU time of those jobs (`JobSpec.gpu_time`);
    - `gpu_hours_received`: GPU time the jobs held (`gpu_seconds`, up to the end of the
      run for a job running then);
    - `queueing_delay_mean`, `queueing_delay_p95`: over its jobs not rejected, a job
      still waiting at the end counting its wait up to the end (as the summary's);
    - `jct_mean`: over its completed jobs (NaN when none);
    - `sla_violations`: its jobs with `sla_violated`;
    - `share_received`: its GPU time received / all GPU time received (NaN when no job
      held any GPU), so each kind's shares add up to 1.
    """
    if not len(jobs):
        return _typed(pd.DataFrame({c: [] for c in TENANT_COLUMNS}))
    base = pd.DataFrame({
        "demanded": gpu_demand(jobs).to_numpy() / 3600.0,
        "received": jobs["gpu_seconds"].astype(float).to_numpy() / 3600.0,
        "waited": np.where(jobs["status"] != "rejected",
                           jobs["queueing_delay"].astype(float), math.nan),
        "jct": np.where(jobs["status"] == "completed", jobs["jct"].astype(float), math.nan),
        "sla": (jobs["sla_violated"].astype(bool) if "sla_violated" in jobs
                else pd.Series(False, index=jobs.index)).to_numpy(dtype=int),
    })
    total = float(base["received"].sum())
    waited = base["waited"].to_numpy()
    parts = []
    for kind in KINDS:
        # by the column itself: a numpy copy of it would hold a Python str a job (at a
        # million jobs, ~150 MB at the run's peak); same groups, same order
        grouped = base.groupby(_names(jobs[kind]), sort=True)
        size = grouped.size()
        rows = grouped.indices  # each group's row positions, by name
        part = pd.DataFrame({
            "kind": kind,
            "jobs": size,
            "gpu_hours_demanded": grouped["demanded"].sum(),
            "gpu_hours_received": grouped["received"].sum(),
            "queueing_delay_mean": grouped["waited"].mean(),
            # on the group's values straight from the column: a Series a group costs
            # more than the percentile itself, over a trace's hundreds of users
            "queueing_delay_p95": pd.Series([_p95(waited[rows[k]]) for k in size.index],
                                            index=size.index, dtype=float),
            "jct_mean": grouped["jct"].mean(),
            "sla_violations": grouped["sla"].sum(),
        })
        part["share_received"] = part["gpu_hours_received"] / total if total > 0 else math.nan
        parts.append(part.rename_axis("tenant").reset_index())
    return _typed(pd.concat(parts, ignore_index=True)[list(TENANT_COLUMNS)])


def _names(col: pd.Series) -> pd.Series:
    """A tenant column as text, without a copy when it is text already."""
    col = col.reset_index(drop=True)
    return col if pd.api.types.is_string_dtype(col.dtype) and col.dtype != object \
        else col.astype(str)


def _p95(values: np.ndarray) -> float:
    """The 95th percentile of the values that are not NaN (NaN when none is)."""
    v = values[~np.isnan(values)]
    return float(np.percentile(v, 95)) if v.size else math.nan


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Stable column types (also for an empty table): names as str, counts as int64."""
    return frame.astype({"kind": str, "tenant": str, "jobs": "int64",
                         "gpu_hours_demanded": float, "gpu_hours_received": float,
                         "queueing_delay_mean": float, "queueing_delay_p95": float,
                         "jct_mean": float, "sla_violations": "int64",
                         "share_received": float})
