"""Microsoft Philly readers: the Pollux-derived job CSV and the original `cluster_job_log` JSON.

Pollux CSV (`timestamp,duration,num_gpus,gpu_time,cluster`; shared/traces/philly):
one row a job. The table has no job id and no user: `job_id` is `philly-{R}` with R the
0-based data row of the file (file line minus 2), the same ids as the bundled default
trace; `cluster` is the virtual cluster (`vc`); `submit_time` counts from the first
submission; `gpu_time` (= duration x num_gpus) is dropped.

`cluster_job_log` (msr-fiddle/philly-traces): a JSON array of jobs with `jobid`, `user`,
`vc`, `status` (Pass / Killed / Failed), `submitted_time` and `attempts`, each attempt
with `start_time`, `end_time` and `detail` (machines and their GPUs). One job a job:
`num_gpus` is the largest GPU count of an attempt, `duration` is the job's real run
time, the sum of its attempts' run times, and its final `status` and number of
`attempts` are pass-through columns. Jobs that never ran (no attempt with both times),
that were still running when the log was taken (last `end_time` None), or that used no
recorded GPU are excluded (counted, with a message). The file is decoded one job at a
time (an array or JSON lines), never held whole.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    READ_ERRORS,
    RowErrors,
    check_columns,
    finish,
    iter_csv,
    label_of,
    number_field,
    open_text,
    parse_datetime,
    read_error,
    resolve,
    stem_of,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["POLLUX_COLUMNS", "POLLUX_FORMAT", "POLLUX_REQUIRED", "iter_json_records",
           "read_philly_csv", "read_philly_json"]

POLLUX_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
"""Header of the Pollux-derived Philly job table."""

POLLUX_REQUIRED = ("timestamp", "duration", "num_gpus")
"""Columns the Pollux CSV reader needs."""

POLLUX_FORMAT = "Philly (Pollux CSV)"
"""What messages call the format."""

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
JSON_CHUNK = 1 << 20
"""Characters read at a time from a JSON trace."""
_JOBS_PER_PART = 50_000
_MAX_RECORD = 64 << 20  # no job record is larger: stop reading ahead for a broken one


def read_philly_csv(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read the Pollux-derived Philly job table (see the module doc for the mapping).

    Args:
        path: `philly_jobs_pollux.csv` or a file of the same schema (may be gzipped).
        skip_bad_rows: Count bad rows instead of failing on the first.
        name: Trace name (default: the file name without suffixes).

    Returns:
        The trace; its epoch (when Trace keeps one) is the first submission.

    Raises:
        InvalidTrace: Missing columns, or a bad row naming file, line, field and value.
    """
    import pandas as pd

    p = resolve(path)
    issues = RowErrors(label_of(p), skip_bad_rows)
    parts, line_parts = [], []
    epoch = math.inf
    for chunk in iter_csv(p, issues):
        df, lines = chunk.frame, chunk.lines
        check_columns(issues.label, list(df.columns), POLLUX_REQUIRED, POLLUX_FORMAT)
        submit, missing = parse_datetime(df["timestamp"], TIME_FORMAT)
        bad = issues.errors(np.isnan(submit), lines, "timestamp", df["timestamp"],
                            "is not a time YYYY-MM-DD HH:MM:SS")
        dur, bad_d = number_field(df, lines, issues, "duration", rule="is not a number > 0",
                                  lo=0.0, lo_open=True)
        gpus, bad_g = number_field(df, lines, issues, "num_gpus",
                                   rule="is not an integer >= 0", lo=0.0, integer=True)
        keep = ~(bad | bad_d | bad_g)
        vc = df["cluster"].str.strip() if "cluster" in df.columns else None
        out = pd.DataFrame({
            "job_id": [f"philly-{ln - 2}" for ln in lines[keep].tolist()],
            "submit_time": submit[keep],
            "num_gpus": gpus[keep].astype(np.int64),
            "duration": dur[keep],
        })
        if vc is not None:
            out["vc"] = vc.to_numpy()[keep]
        if keep.any():
            epoch = min(epoch, float(np.nanmin(submit[keep])))
        parts.append(out)
        line_parts.append(lines[keep])
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p),
                  epoch=0.0 if math.isfinite(epoch) else None)


# --------------------------------------------------------------------------- JSON


def iter_json_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, Any]]:
    """Decode a JSON array (or JSON lines) one element at a time.

    Args:
        path: The file (may be gzipped).

    Yields:
        (element number from 1, line where it starts, decoded value).

    Raises:
        InvalidTrace: Not JSON, naming the file and line.
    """
    p = resolve(path)
    label = label_of(p)
    with open_text(p) as f:
        js = _JsonStream(f, label)
        first = js.peek()
        if first == "":
            raise InvalidTrace(f"{label}: the file is empty")
        array = first == "["
        if array:
            js.pos += 1
        count = 0
        while True:
            ch = js.peek()
            if array and ch == "]":
                return
            if ch == "":
                if array:
                    raise InvalidTrace(f"{label}, line {js.line}: the JSON array is not "
                                       "closed (missing ']')")
                return
            if array and count:
                if ch != ",":
                    raise InvalidTrace(f"{label}, line {js.line}: expected ',' or ']' "
                                       f"between jobs, found {ch!r}")
                js.pos += 1
                if js.peek() in ("", "]"):
                    raise InvalidTrace(f"{label}, line {js.line}: expected a job after ','")
            count += 1
            start_line, value = js.decode()
            yield count, start_line, value


class _JsonStream:
    """A text stream read in chunks, with a cursor (`pos` in `buf`) and its line."""

    def __init__(self, f: Any, label: str) -> None:
        self.f = f
        self.label = label
        self.decoder = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False

    def more(self) -> bool:
        """Append the next chunk (dropping what was consumed); False at the end."""
        if self.eof:
            return False
        try:
            data = self.f.read(JSON_CHUNK)
        except READ_ERRORS as exc:
            raise InvalidTrace(read_error(f"{self.label}, line {self.line}", exc)) from None
        if not data:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def peek(self) -> str:
        """Skip whitespace; return the next character, or '' at the end."""
        while True:
            buf = self.buf
            while self.pos < len(buf) and buf[self.pos].isspace():
                if buf[self.pos] == "\n":
                    self.line += 1
                self.pos += 1
            if self.pos < len(buf):
                return buf[self.pos]
            if not self.more():
                return ""

    def decode(self) -> tuple[int, Any]:
        """The JSON value at the cursor and the line it starts on; the cursor moves past."""
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos < _MAX_RECORD and self.more():
                    continue
                where = self.line + self.buf.count("\n", self.pos, exc.pos)
                raise InvalidTrace(f"{self.label}, line {where}: not valid JSON: "
                                   f"{exc.msg}") from None
            if end >= len(self.buf) and self.more():  # a number might continue past it
                continue
            break
        start_line = self.line
        self.line += self.buf.count("\n", self.pos, end)
        self.pos = end
        return start_line, value


def _time(issues: RowErrors, line: int, field: str, value: Any) -> float | None:
    """'YYYY-MM-DD HH:MM:SS' as naive-UTC Unix seconds; None for a null/None time."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    if not isinstance(value, str):
        issues.error(line, field, value, "is not a time YYYY-MM-DD HH:MM:SS")
        return math.nan
    try:
        t = datetime.strptime(value.strip(), TIME_FORMAT)
    except ValueError:
        issues.error(line, field, value, "is not a time YYYY-MM-DD HH:MM:SS")
        return math.nan
    return (t - datetime(1970, 1, 1)).total_seconds()


def _attempts(issues: RowErrors, line: int, jobid: str, attempts: list[Any]
              ) -> tuple[float, int, int] | None:
    """(run time, GPUs, attempts that ran) of a job's attempts; None when bad or excluded."""
    run = 0.0
    gpus = 0
    ran = 0
    for k, att in enumerate(attempts):
        if not isinstance(att, dict):
            issues.error(line, f"attempts[{k}]", json.dumps(att)[:60], "is not an object")
            return None
        start = _time(issues, line, f"attempts[{k}].start_time", att.get("start_time"))
        end = _time(issues, line, f"attempts[{k}].end_time", att.get("end_time"))
        if (start is not None and math.isnan(start)) or (end is not None and math.isnan(end)):
            return None
        detail = att.get("detail", [])
        if not isinstance(detail, list) or not all(
            isinstance(d, dict) and isinstance(d.get("gpus", []), list) for d in detail
        ):
            issues.error(line, f"attempts[{k}].detail", json.dumps(detail)[:60],
                         "is not a list of {ip, gpus: [...]} objects")
            return None
        gpus = max(gpus, sum(len(d.get("gpus", [])) for d in detail))
        if k == len(attempts) - 1 and start is not None and end is None:
            issues.exclude(line, f"job {jobid!r} was still running when the log was taken "
                                 "(last attempt has no end_time)")
            return None
        if start is not None and end is not None:
            if end < start:
                issues.error(line, f"attempts[{k}].end_time", att.get("end_time"),
                             f"is before its start_time {att.get('start_time')!r}")
                return None
            run += end - start
            ran += 1
    return run, gpus, ran


def _job(issues: RowErrors, n: int, line: int, rec: Any) -> dict[str, Any] | None:
    """One cluster_job_log record as a canonical row, or None (bad or excluded)."""
    if not isinstance(rec, dict):
        issues.error(line, f"job {n}", json.dumps(rec)[:60], "is not a JSON object")
        return None
    jobid = rec.get("jobid")
    if not isinstance(jobid, str) or not jobid.strip():
        issues.error(line, "jobid", jobid, "is not a non-empty string (required)")
        return None
    submit = _time(issues, line, "submitted_time", rec.get("submitted_time"))
    if submit is None:
        issues.error(line, "submitted_time", rec.get("submitted_time"),
                     "is missing; submitted_time is required")
        return None
    if math.isnan(submit):
        return None
    attempts = rec.get("attempts", [])
    if not isinstance(attempts, list):
        issues.error(line, "attempts", json.dumps(attempts)[:60], "is not a list")
        return None
    got = _attempts(issues, line, jobid, attempts)
    if got is None:
        return None
    run, gpus, ran = got
    if ran == 0:
        issues.exclude(line, f"job {jobid!r} never ran (no attempt with start_time and "
                             "end_time)")
        return None
    if run <= 0:
        issues.exclude(line, f"job {jobid!r} has a run time of 0 s")
        return None
    if gpus == 0:
        issues.exclude(line, f"job {jobid!r} has no recorded GPU in its attempts' detail")
        return None
    return {
        "job_id": jobid.strip(),
        "submit_time": submit,
        "num_gpus": gpus,
        "duration": run,
        "user": str(rec.get("user") or ""),
        "vc": str(rec.get("vc") or "") or "default",
        "status": str(rec.get("status") or ""),
        "attempts": len(attempts),
    }


def read_philly_json(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read Philly's original `cluster_job_log` (see the module doc for the mapping).

    Args:
        path: The JSON file (an array of jobs, or JSON lines; may be gzipped).
        skip_bad_rows: Count bad jobs instead of failing on the first.
        name: Trace name (default: the file name without suffixes).

    Returns:
        The trace with pass-through columns `status` and `attempts`.

    Raises:
        InvalidTrace: Not JSON, or a bad job naming file, line, field and value.
    """
    import pandas as pd

    p = resolve(path)
    issues = RowErrors(label_of(p), skip_bad_rows)
    parts: list[pd.DataFrame] = []
    line_parts: list[np.ndarray] = []
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    for n, line, rec in iter_json_records(p):
        row = _job(issues, n, line, rec)
        if row is not None:
            rows.append(row)
            lines.append(line)
        if len(rows) >= _JOBS_PER_PART:
            parts.append(pd.DataFrame.from_records(rows))
            line_parts.append(np.array(lines, dtype=np.int64))
            rows, lines = [], []
    if rows:
        parts.append(pd.DataFrame.from_records(rows))
        line_parts.append(np.array(lines, dtype=np.int64))
    epoch = 0.0 if parts else None
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p),
                  epoch=epoch)
