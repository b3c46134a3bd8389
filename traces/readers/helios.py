"""Helios (SenseTime, SC'21) `cluster_log.csv` reader.

Schema (HeliosData; see shared/traces/helios-venus-aggregate/README.md): `job_id, user,
vc, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration,
queue`, times as `YYYY-MM-DD HH:MM:SS`. Mapping: `gpu_num` -> `num_gpus`, `cpu_num` ->
`num_cpus`, `user`, `vc` as is, `submit_time` in seconds from the first submission,
`duration` from the `duration` column (end - start, seconds) or, without it, from
`end_time - start_time`; `state` (COMPLETED / CANCELLED / FAILED / TIMEOUT / NODE_FAIL)
and `node_num` are pass-through columns (`status`, `node_num`). Jobs that never ran
(no start, or a duration of 0: typically cancelled in the queue) are excluded.
"""

from __future__ import annotations

import math
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
    parse_datetime,
    resolve,
    stem_of,
)

__all__ = ["HELIOS_COLUMNS", "HELIOS_REQUIRED", "read_helios"]

HELIOS_COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state",
                  "submit_time", "start_time", "end_time", "duration", "queue")
"""Columns of Helios' cluster_log.csv."""

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_TIME_RULE = "is not a time YYYY-MM-DD HH:MM:SS"

HELIOS_REQUIRED = ("job_id", "gpu_num", "submit_time")
"""Columns the Helios reader needs (and `duration` or `start_time`, `end_time`)."""


def read_helios(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read a Helios `cluster_log.csv` (see the module doc for the mapping).

    Args:
        path: The CSV (may be gzipped).
        skip_bad_rows: Count bad rows instead of failing on the first.
        name: Trace name (default: the file name without suffixes).

    Returns:
        The trace with pass-through columns `status` and `node_num`.

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
        check_columns(issues.label, cols, HELIOS_REQUIRED, "Helios")
        if "duration" not in cols:
            check_columns(issues.label, cols, ("start_time", "end_time"), "Helios")
        submit, _ = parse_datetime(df["submit_time"], TIME_FORMAT)
        bad = issues.errors(np.isnan(submit), lines, "submit_time", df["submit_time"],
                            _TIME_RULE)
        gpus, bad_g = number_field(df, lines, issues, "gpu_num",
                                   rule="is not an integer >= 0", lo=0.0, integer=True)
        bad |= bad_g
        if "duration" in cols:
            dur, bad_d = number_field(df, lines, issues, "duration",
                                      rule="is not a number >= 0", lo=0.0, required=False)
            bad |= bad_d
        else:
            start, miss_s = parse_datetime(df["start_time"], TIME_FORMAT)
            end, miss_e = parse_datetime(df["end_time"], TIME_FORMAT)
            bad |= issues.errors(np.isnan(start) & ~miss_s, lines, "start_time",
                                 df["start_time"], _TIME_RULE)
            bad |= issues.errors(np.isnan(end) & ~miss_e, lines, "end_time",
                                 df["end_time"], _TIME_RULE)
            with np.errstate(invalid="ignore"):
                neg = ~bad & (end < start)
            bad |= issues.errors(neg, lines, "end_time", df["end_time"],
                                 "is before start_time")
            dur = end - start
        with np.errstate(invalid="ignore"):
            never = ~bad & ~(dur > 0)
        issues.excludes(never, lines, "job never ran (no start or a duration of 0 s)")
        keep = ~(bad | never)
        out = pd.DataFrame({
            "job_id": df["job_id"].to_numpy()[keep],
            "submit_time": submit[keep],
            "num_gpus": gpus[keep].astype(np.int64),
            "duration": dur[keep],
        })
        if "cpu_num" in cols:
            cpus, bad_c = number_field(df, lines, issues, "cpu_num",
                                       rule="is not a number >= 0", lo=0.0, required=False)
            if bad_c[keep].any():
                keep2 = keep & ~bad_c
                out = out.loc[~bad_c[keep]].reset_index(drop=True)
                keep = keep2
            out["num_cpus"] = np.nan_to_num(cpus[keep], nan=0.0)
        for src, dst in (("user", "user"), ("vc", "vc"), ("state", "status"),
                         ("node_num", "node_num")):
            if src in cols:
                out[dst] = df[src].str.strip().to_numpy()[keep]
        parts.append(out)
        line_parts.append(lines[keep])
    epoch = 0.0 if any(len(x) for x in parts) else None
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p),
                  epoch=epoch if epoch is not None and math.isfinite(epoch) else None)
