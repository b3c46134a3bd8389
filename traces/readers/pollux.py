"""Pollux (OSDI'21) workload CSV reader.

Header `name,time,application,num_replicas,batch_size` (petuum/adaptdl
`simulator/workloads*/workload-N.csv`): `name` -> `job_id`, `time` -> `submit_time`
(seconds, kept as written: Pollux's simulator starts its clock at 0, not at the first
job), `application` -> `model` (a Pollux profile: bert, cifar10, deepspeech2, imagenet,
ncf, yolov3), `num_replicas` -> `num_gpus` (the GPUs of the tuned run that
Tiresias/Optimus+TunedJobs use), `batch_size` -> `batch_size` (global, the tuned one).
`adaptive` is true (the job re-tunes its batch size, as an AdaptDL job; the engine
parameter `adaptive_batch=false` keeps every job at `batch_size`, as Pollux's
+TunedJobs baselines), and jobs are elastic: `min_gpus` 1, `max_gpus` 64 (Pollux's cap).
`ncf` jobs are pinned as Pollux's simulator pins them: not adaptive, one GPU. There is
no `duration` and no `num_steps`/`samples`: a job's work is its
model's own (its profile's progress at its last epoch; docs/contract.md#sec-2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    RowErrors,
    check_columns,
    finish,
    iter_csv,
    label_of,
    number_field,
    resolve,
    stem_of,
)

__all__ = ["POLLUX_WORKLOAD_COLUMNS", "POLLUX_WORKLOAD_FORMAT", "WorkloadFields", "read_pollux",
           "workload_fields"]

POLLUX_WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
"""Header (and required columns) of a Pollux workload."""

POLLUX_WORKLOAD_FORMAT = "Pollux workload"
"""What messages call the format."""

MAX_REPLICAS = 64
"""`max_gpus` of a job (Pollux's simulator caps every job at 64 replicas)."""


def read_pollux(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read a Pollux workload CSV (see the module doc for the mapping).

    Args:
        path: The CSV.
        skip_bad_rows: Count bad rows instead of failing on the first.
        name: Trace name (default: the file name without suffixes).

    Returns:
        The trace: jobs with `model`, `batch_size` and `adaptive`, no duration (NaN).

    Raises:
        InvalidTrace: Missing columns, or a bad row naming file, line, field and value.
    """
    import pandas as pd

    p = resolve(path)
    issues = RowErrors(label_of(p), skip_bad_rows)
    parts, line_parts = [], []
    for chunk in iter_csv(p, issues):
        df, lines = chunk.frame, chunk.lines
        check_columns(issues.label, list(df.columns), POLLUX_WORKLOAD_COLUMNS,
                      POLLUX_WORKLOAD_FORMAT)
        w = workload_fields(df, lines, issues)
        keep = ~w.bad
        model = w.model[keep]
        # Pollux's simulator pins ncf at its batch size on one GPU under every policy
        pinned = model == "ncf"
        parts.append(pd.DataFrame({
            "job_id": w.job_id[keep],
            "submit_time": w.submit[keep],
            "num_gpus": w.gpus[keep].astype(np.int64),
            "min_gpus": np.ones(len(model), dtype=np.int64),
            "max_gpus": np.where(pinned, 1, np.maximum(MAX_REPLICAS,
                                                       w.gpus[keep])).astype(np.int64),
            "model": model,
            "batch_size": w.batch_size[keep].astype(np.int64),
            "adaptive": ~pinned,
        }))
        line_parts.append(lines[keep])
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p),
                  shift=False)


@dataclass(frozen=True)
class WorkloadFields:
    """The five columns of a Pollux-layout chunk, parsed, and its bad rows."""

    bad: np.ndarray
    job_id: np.ndarray
    submit: np.ndarray
    model: np.ndarray
    gpus: np.ndarray
    batch_size: np.ndarray


def workload_fields(df: Any, lines: np.ndarray, issues: RowErrors) -> WorkloadFields:
    """Parse `name,time,application,num_replicas,batch_size` (Pollux's and Sia's layout).

    Each bad value is reported through `issues` with its line, field and value.
    """
    bad = issues.errors((df["name"].str.strip() == "").to_numpy(), lines, "name",
                        df["name"], "is empty (required)")
    bad |= issues.errors((df["application"].str.strip() == "").to_numpy(), lines,
                         "application", df["application"], "is empty (required)")
    submit, b = number_field(df, lines, issues, "time", rule="is not a number >= 0",
                             lo=0.0)
    bad |= b
    gpus, b = number_field(df, lines, issues, "num_replicas",
                           rule="is not an integer >= 1", lo=1.0, integer=True)
    bad |= b
    bsz, b = number_field(df, lines, issues, "batch_size",
                          rule="is not an integer >= 1", lo=1.0, integer=True)
    bad |= b
    return WorkloadFields(bad, df["name"].str.strip().to_numpy(), submit,
                          df["application"].str.strip().to_numpy(), gpus, bsz)
