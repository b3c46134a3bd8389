"""Shockwave (NSDI'23) trace reader: Gavel's trace with a dynamic-adaptation mode.

12 tab-separated fields, no header (uw-mad-dash/shockwave `scheduler/utils.py`
`parse_trace`): `job_type, command, working_directory, num_steps_arg, needs_data_dir,
total_steps, scale_factor, mode, priority_weight, SLO, duration, arrival_time`.

Mapping: `job_id` = `shockwave-{i}` (i: 0-based line), `submit_time` = arrival_time (as
written), `num_gpus` = scale_factor, `model` = `'<job_type> <mode>'` (a key of the
`shockwave` performance model, whose batch size follows the mode's schedule by epoch;
`static` jobs keep the bare job type), `num_steps` = total_steps (steps at the initial
batch), `batch_size` = the job type's `(batch size N)`. There is no `duration`: the run
needs `perf_model=shockwave=<throughputs.json>`. The trace's own `duration` (the job's
isolated time at its initial batch) is kept as `trace_duration`; `job_type`, `mode`,
`priority_weight` and `SLO` (-1 = none) pass through.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    RowErrors,
    finish,
    head_text,
    iter_csv,
    label_of,
    number_field,
    resolve,
    stem_of,
)

__all__ = ["SHOCKWAVE_FIELDS", "layout", "read_shockwave"]

SHOCKWAVE_FIELDS = ("job_type", "command", "working_directory", "num_steps_arg",
                    "needs_data_dir", "total_steps", "scale_factor", "mode",
                    "priority_weight", "SLO", "duration", "arrival_time")
"""Fields of a Shockwave trace line."""

MODES = ("static", "accordion", "gns")
"""Dynamic-adaptation modes (the `mode` field)."""

_BATCH = re.compile(r"\(batch size (\d+)\)$")


def layout(path: str | os.PathLike[str]) -> tuple[str, ...] | None:
    """SHOCKWAVE_FIELDS when the first line is a Shockwave trace line, else None."""
    first = head_text(Path(path), 8192).split("\n", 1)[0]
    fields = first.rstrip("\r").split("\t")
    if len(fields) == len(SHOCKWAVE_FIELDS) and fields[7].strip() in MODES:
        return SHOCKWAVE_FIELDS
    return None


def read_shockwave(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read a Shockwave trace (see the module doc for the mapping).

    Args:
        path: The `.trace` file.
        skip_bad_rows: Count bad lines instead of failing on the first.
        name: Trace name (default: the file name without suffixes).

    Returns:
        Jobs with `model`, `num_steps`, `batch_size`; no duration (NaN).

    Raises:
        InvalidTrace: A bad line naming file, line, field, value and what is allowed.
    """
    import pandas as pd

    p = resolve(path)
    issues = RowErrors(label_of(p), skip_bad_rows)
    parts, line_parts = [], []
    for chunk in iter_csv(p, issues, names=SHOCKWAVE_FIELDS, sep="\t"):
        df, lines = chunk.frame, chunk.lines
        steps, bad = number_field(df, lines, issues, "total_steps",
                                  rule="is not a number > 0", lo=0.0, lo_open=True)
        sf, b = number_field(df, lines, issues, "scale_factor",
                             rule="is not an integer >= 1", lo=1.0, integer=True)
        bad |= b
        arrival, b = number_field(df, lines, issues, "arrival_time",
                                  rule="is not a number >= 0", lo=0.0)
        bad |= b
        prio, b = number_field(df, lines, issues, "priority_weight",
                               rule="is not a number > 0", lo=0.0, lo_open=True)
        bad |= b
        slo, b = number_field(df, lines, issues, "SLO", rule="is not a number",
                              required=True)
        bad |= b
        dur, b = number_field(df, lines, issues, "duration", rule="is not a number >= 0",
                              lo=0.0)
        bad |= b
        jt = df["job_type"].fillna("").astype(str).str.strip().tolist()
        mode = df["mode"].fillna("").astype(str).str.strip().tolist()
        bsz = np.zeros(len(df), dtype=np.int64)
        bad |= issues.errors(np.array([m not in MODES for m in mode], dtype=bool), lines,
                             "mode", df["mode"], f"is not one of {', '.join(MODES)}")
        for i, t in enumerate(jt):
            m = _BATCH.search(t)
            bsz[i] = int(m.group(1)) if m else 0
        bad |= issues.errors(bsz <= 0, lines, "job_type", df["job_type"],
                             "is not '<Model> (batch size N)'")
        keep = ~bad
        models = [t if m == "static" else f"{t} {m}" for t, m in zip(jt, mode, strict=True)]
        parts.append(pd.DataFrame({
            "job_id": [f"shockwave-{i}" for i in (lines[keep] - 1).tolist()],
            "submit_time": arrival[keep],
            "num_gpus": sf[keep].astype(np.int64),
            "model": np.array(models, dtype=object)[keep],
            "num_steps": steps[keep],
            "batch_size": bsz[keep],
            "job_type": np.array(jt, dtype=object)[keep],
            "mode": np.array(mode, dtype=object)[keep],
            "priority_weight": prio[keep],
            "SLO": [None if v < 0 else v for v in slo[keep].tolist()],
            "trace_duration": dur[keep],
        }))
        line_parts.append(lines[keep])
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p),
                  shift=False)
