"""tenants.parquet (contract.md#sec-5): per user and per virtual cluster, what it asked and got.

Built from the jobs table only (so it can be rebuilt from a jobs.parquet), at the results
boundary: pandas is used here, and the engine never imports this module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from schedlab.sim.metrics import gpu_demand

TENANT_COLUMNS = (
    "kind", "tenant", "jobs", "gpu_hours_demanded", "gpu_hours_received",
    "queueing_delay_mean", "queueing_delay_p95", "jct_mean", "sla_violations",
    "share_received",
)
"""One row a tenant: `kind` is "user" or "vc", `tenant` its name (users first, by name);
then the kinds the run's policy declares (`policy_tenants`), in its order."""

KINDS = ("user", "vc")


def policy_tenants(policy: Any, jobs: Sequence[Any]) -> dict[str, list[str]]:
    """The tenant kinds a policy declares, with each job's tenant of each kind.

    A policy declares `tenant_kinds` (a tuple of kind names, e.g. `("clusterqueue",
    "cohort")`) and `tenant_names(idx)`, one name per kind for the job of run index
    `idx`; `jobs` are the jobs-table rows' job states, in order. Empty for any other
    policy (the engine names no policy: the table of every other policy is unchanged).
    """
    kinds = tuple(getattr(policy, "tenant_kinds", ()) or ())
    names = getattr(policy, "tenant_names", None)
    if not kinds or not callable(names):
        return {}
    out: dict[str, list[str]] = {k: [] for k in kinds}
    cols = list(out.values())
    for j in jobs:
        got = names(j.idx)
        for col, name in zip(cols, got, strict=True):
            col.append(str(name))
    return out


def tenants_frame(jobs: pd.DataFrame,
                  extra: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Per user and per vc of a jobs table (columns of jobs.parquet), then per `extra` kind.

    `extra`: kind -> each row's tenant of that kind (`policy_tenants`), grouped as the
    columns are; absent when the table is rebuilt from a jobs.parquet alone.

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
    groups: list[tuple[str, pd.Series]] = [(k, jobs[k]) for k in KINDS]
    for kind, names in (extra or {}).items():
        if kind not in KINDS:
            groups.append((kind, pd.Series(list(names), dtype=str)))
    for kind, col in groups:
        # by the column itself: a numpy copy of it would hold a Python str a job (at a
        # million jobs, ~150 MB at the run's peak); same groups, same order
        grouped = base.groupby(_names(col), sort=True)
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
