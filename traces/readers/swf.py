"""Standard Workload Format (Parallel Workloads Archive) reader, plain or gzipped.

18 whitespace-separated fields a line, `-1` for unknown, `;` header comments (the
header's `UnixStartTime` gives the calendar origin). Mapping: job number -> `job_id`,
submit time -> `submit_time` (seconds from the first), run time -> `duration`,
processors -> `num_gpus` = ceil(processors / `procs_per_gpu`) with processors the
allocated count (field 5), or the requested count (field 8) when that is unknown;
user id -> `user`, queue number -> `vc` (`default` when unknown), and the status, group
and executable numbers as pass-through columns `status`, `group`, `executable`
(empty when unknown), and the requested time (field 9) as the pass-through column
`time_limit` (whole s; empty when unknown), which the `slurm` policy reads.
`procs_per_gpu` (default 1: one processor is one GPU, as for
replaying a CPU log on an accelerator cluster) is the documented mapping parameter.
Jobs whose run time is unknown (-1) or 0 did not run and are excluded.
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    READ_ERRORS,
    RowErrors,
    finish,
    iter_csv,
    label_of,
    number_field,
    open_text,
    read_error,
    resolve,
    stem_of,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SWF_FIELDS", "read_swf", "swf_header"]

SWF_FIELDS = (
    "job", "submit", "wait", "run_time", "alloc_procs", "avg_cpu", "used_mem", "req_procs",
    "req_time", "req_mem", "status", "user", "group", "executable", "queue", "partition",
    "prev_job", "think_time",
)
"""The 18 SWF fields, in order (names used in messages)."""

_HEADER = re.compile(r"^;\s*([A-Za-z]+)\s*:\s*(.*?)\s*$")


def swf_header(path: str | os.PathLike[str]) -> dict[str, str]:
    """The `; Key: value` header fields of an SWF file (first value of a repeated key)."""
    out: dict[str, str] = {}
    with open_text(resolve(path)) as f:
        try:
            for line in f:
                s = line.strip()
                if not s:
                    continue
                if not s.startswith(";"):
                    break
                m = _HEADER.match(s)
                if m:
                    out.setdefault(m.group(1), m.group(2))
        except READ_ERRORS as exc:
            raise InvalidTrace(read_error(label_of(resolve(path)), exc)) from None
    return out


def _opt(values: np.ndarray, keep: np.ndarray) -> list[str]:
    """Known (non -1) integers as strings, unknown as ''."""
    return ["" if (math.isnan(v) or v < 0) else str(int(v)) for v in values[keep].tolist()]


def read_swf(
    path: str | os.PathLike[str],
    *,
    skip_bad_rows: bool = False,
    name: str | None = None,
    procs_per_gpu: int = 1,
) -> Trace:
    """Read an SWF log (see the module doc for the mapping).

    Args:
        path: `.swf` or `.swf.gz`.
        skip_bad_rows: Count bad lines instead of failing on the first.
        name: Trace name (default: the file name without suffixes).
        procs_per_gpu: Processors that make one GPU (>= 1).

    Returns:
        The trace; its epoch (when Trace keeps one) from the header's UnixStartTime.

    Raises:
        InvalidTrace: A bad line naming file, line, field and value, or a bad parameter.
    """
    if isinstance(procs_per_gpu, bool) or not isinstance(procs_per_gpu, int) \
            or procs_per_gpu < 1:
        raise InvalidTrace(f"procs_per_gpu {procs_per_gpu!r}: expected an integer >= 1")
    p = resolve(path)
    issues = RowErrors(label_of(p), skip_bad_rows)
    header = swf_header(p)
    epoch: float | None = None
    try:
        epoch = float(header["UnixStartTime"])
    except (KeyError, ValueError):
        epoch = None
    parts, line_parts = [], []
    for chunk in iter_csv(p, issues, names=SWF_FIELDS, sep=r"\s+", comment=";"):
        out, lines = _jobs(chunk.frame, chunk.lines, issues, procs_per_gpu)
        parts.append(out)
        line_parts.append(lines)
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p),
                  epoch=epoch)


def _jobs(df: pd.DataFrame, lines: np.ndarray, issues: RowErrors, procs_per_gpu: int
          ) -> tuple[pd.DataFrame, np.ndarray]:
    """One chunk of the log as canonical rows, and the file line of each."""
    import pandas as pd

    unknown = ("-1",)
    bad = issues.errors((df["job"].str.strip() == "").to_numpy(), lines, "job", df["job"],
                        "is empty")
    submit, b = number_field(df, lines, issues, "submit", rule="is not a number >= 0",
                             lo=0.0)
    bad |= b
    run, b = number_field(df, lines, issues, "run_time", rule="is not a number >= 0",
                          lo=0.0, required=False, missing_tokens=unknown)
    bad |= b
    alloc, b = number_field(df, lines, issues, "alloc_procs",
                            rule="is not an integer >= 0 (or -1)", lo=0.0, integer=True,
                            required=False, missing_tokens=unknown)
    bad |= b
    req, b = number_field(df, lines, issues, "req_procs",
                          rule="is not an integer >= 0 (or -1)", lo=0.0, integer=True,
                          required=False, missing_tokens=unknown)
    bad |= b
    req_time, b = number_field(df, lines, issues, "req_time",
                               rule="is not a number >= 0 (or -1)", lo=0.0, required=False,
                               missing_tokens=unknown)
    bad |= b
    procs = np.where(np.isnan(alloc) | (alloc <= 0), req, alloc)
    no_procs = ~bad & np.isnan(procs)
    bad |= issues.errors(no_procs, lines, "alloc_procs", df["alloc_procs"],
                         "and req_procs are both unknown; a job needs a processor count")
    with np.errstate(invalid="ignore"):
        idle = ~bad & ~(run > 0)
    issues.excludes(idle, lines, "run time unknown (-1) or 0 s: the job did not run")
    keep = ~(bad | idle)
    opt = {}
    for col in ("user", "queue", "status", "group", "executable"):
        v, b = number_field(df, lines, issues, col, rule="is not an integer (or -1)",
                            lo=-1.0, integer=True, required=False,
                            missing_tokens=unknown)
        opt[col] = v
        if b[keep].any():
            keep &= ~b
    queue = _opt(opt["queue"], keep)
    out = pd.DataFrame({
        "job_id": df["job"].str.strip().to_numpy()[keep],
        "submit_time": submit[keep],
        "num_gpus": np.ceil(procs[keep] / procs_per_gpu).astype(np.int64),
        "duration": run[keep],
        "user": _opt(opt["user"], keep),
        "vc": [q or "default" for q in queue],
        "status": _opt(opt["status"], keep),
        "group": _opt(opt["group"], keep),
        "executable": _opt(opt["executable"], keep),
        "time_limit": _opt(np.where(req_time > 0, req_time, -1.0), keep),
    })
    return out, lines[keep]
