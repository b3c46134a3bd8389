"""Tiresias (NSDI'19) trace CSV reader.

Header `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`
(shared/traces/tiresias): `job_id` as is, `num_gpu` -> `num_gpus`, `submit_time` and
`duration` (run time when placed as requested) in seconds; `model_name` and
`iterations` are pass-through; `interval` (the gap to the next job) is dropped, being
implied by the submit times.
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
    number_field,
    resolve,
    stem_of,
)

__all__ = ["TIRESIAS_COLUMNS", "TIRESIAS_REQUIRED", "read_tiresias"]

TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name",
                    "duration", "interval")
"""Header of a Tiresias trace."""

TIRESIAS_REQUIRED = ("job_id", "num_gpu", "submit_time", "duration")
"""Columns the Tiresias reader needs."""


def read_tiresias(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read a Tiresias trace CSV (see the module doc for the mapping).

    Args:
        path: The CSV.
        skip_bad_rows: Count bad rows instead of failing on the first.
        name: Trace name (default: the file name without suffixes).

    Returns:
        The trace with pass-through columns `model_name` and `iterations` when present.

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
        check_columns(issues.label, cols, TIRESIAS_REQUIRED, "Tiresias")
        bad = issues.errors((df["job_id"].str.strip() == "").to_numpy(), lines, "job_id",
                            df["job_id"], "is empty (required)")
        gpus, b = number_field(df, lines, issues, "num_gpu", rule="is not an integer >= 0",
                               lo=0.0, integer=True)
        bad |= b
        submit, b = number_field(df, lines, issues, "submit_time",
                                 rule="is not a number >= 0", lo=0.0)
        bad |= b
        dur, b = number_field(df, lines, issues, "duration", rule="is not a number > 0",
                              lo=0.0, lo_open=True)
        bad |= b
        keep = ~bad
        out = pd.DataFrame({
            "job_id": df["job_id"].str.strip().to_numpy()[keep],
            "submit_time": submit[keep],
            "num_gpus": gpus[keep].astype(np.int64),
            "duration": dur[keep],
        })
        for col in ("model_name", "iterations"):
            if col in cols:
                out[col] = df[col].str.strip().to_numpy()[keep]
        parts.append(out)
        line_parts.append(lines[keep])
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p))
