"""Sia (SOSP'23) workload CSV reader (`sia-simulator/workloads/*/workload-N.csv`).

Header `name,time,application,num_replicas,batch_size` (+ optional `category`:
`adaptive`, `scale-gpus` or `rigid`). Mapping: `name` -> `job_id`, `time` ->
`submit_time` (seconds, kept as is: Sia's simulator does not shift them, and its rounds
are on that clock), `application` -> `model` (a folder of Sia's profiles, `perf_model
sia=...`), `num_replicas` -> `num_gpus`, `batch_size` -> `batch_size` (global). The work
is left to the model (its epochs). As in Sia's simulator, a job without a category or of
`adaptive` re-tunes its batch size (`adaptive`) and every job but a `rigid` one is
elastic over 1..64 GPUs (`min_gpus`, `max_gpus`; Sia's `max_replicas` cap of 64, the
policy narrows it per job); a `rigid` job keeps its GPUs and batch size.
"""

from __future__ import annotations

import os

import numpy as np

from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    RowErrors,
    check_columns,
    finish,
    iter_csv,
    label_of,
    resolve,
    stem_of,
)
from schedlab.traces.readers.pollux import POLLUX_WORKLOAD_COLUMNS, workload_fields

__all__ = ["SIA_COLUMNS", "SIA_MAX_GPUS", "SIA_REQUIRED", "read_sia"]

SIA_COLUMNS = POLLUX_WORKLOAD_COLUMNS
"""Header of a Sia workload."""

SIA_REQUIRED = SIA_COLUMNS
"""Columns the Sia reader needs (`category` is optional)."""

SIA_MAX_GPUS = 64
"""Largest allocation of an elastic job (Sia's simulator: `max_replicas` <= 64)."""

CATEGORIES = ("adaptive", "scale-gpus", "rigid")


def read_sia(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read a Sia workload CSV (see the module doc for the mapping).

    Raises:
        InvalidTrace: Missing columns, or a bad row naming file, line, field and value.
    """
    import pandas as pd

    p = resolve(path)
    issues = RowErrors(label_of(p), skip_bad_rows)
    parts, line_parts = [], []
    for chunk in iter_csv(p, issues):
        df, lines = chunk.frame, chunk.lines
        cols = list(df.columns)
        check_columns(issues.label, cols, SIA_REQUIRED, "Sia workload")
        w = workload_fields(df, lines, issues)
        bad = w.bad
        if "category" in cols:
            cat = df["category"].fillna("").str.strip().str.lower().to_numpy()
            bad |= issues.errors(~np.isin(cat, ("", *CATEGORIES)), lines, "category",
                                 df["category"], "is not adaptive, scale-gpus or rigid")
        else:
            cat = np.full(len(df), "", dtype=object)
        keep = ~bad
        rigid = cat[keep] == "rigid"
        adaptive = (cat[keep] == "") | (cat[keep] == "adaptive")
        ngpus = w.gpus[keep].astype(np.int64)
        parts.append(pd.DataFrame({
            "job_id": w.job_id[keep],
            "submit_time": w.submit[keep],
            "num_gpus": ngpus,
            "model": w.model[keep],
            "batch_size": w.batch_size[keep].astype(np.int64),
            "adaptive": np.where(adaptive, "true", "false"),
            "min_gpus": np.where(rigid, "", "1"),
            "max_gpus": np.where(rigid, "", np.maximum(ngpus, SIA_MAX_GPUS).astype(str)),
        }))
        line_parts.append(lines[keep])
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p),
                  shift=False)
