"""Reader and writer of the canonical trace schema (docs/contract.md#sec-2), CSV or Parquet.

Reading streams a CSV through `schedlab.traces.csv_stream.iter_csv` (the path every reader
shares) or loads a Parquet table, then validates it with `schedlab.traces.validate.frame_to_trace`;
the columns and their rules are in `schedlab.traces.schema`. Every error names the file, the row
(plus the file line for CSV), the column, the value and the rule, e.g.::

    trace.csv, row 7 (line 8), column num_gpus: value '2.5' is not an integer >= 0
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.traces.base import Trace
from schedlab.traces.csv_stream import iter_csv, label_of, require_file, stem_of
from schedlab.traces.roles import format_tasks
from schedlab.traces.rows import MAX_BAD_ROW_MESSAGES, FrameErrors, RowErrors, release_arrow_memory
from schedlab.traces.schema import (
    CANONICAL_COLUMNS,
    NUM_COLS,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    missing_columns_error,
    missing_required,
)
from schedlab.traces.validate import frame_to_trace

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CANONICAL_COLUMNS",
    "MAX_BAD_ROW_MESSAGES",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "frame_to_trace",
    "read_canonical",
    "trace_to_frame",
    "write_canonical",
]

_CSV_SUFFIXES = (".csv", ".csv.gz")
_PARQUET_SUFFIXES = (".parquet", ".pq")


# --------------------------------------------------------------------------- reading


def _kind(path: Path) -> str:
    low = path.name.lower()
    if low.endswith(_CSV_SUFFIXES):
        return "csv"
    if low.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    raise InvalidTrace(
        f"{path.name}: unsupported trace file type; canonical traces are "
        f"{', '.join(_CSV_SUFFIXES + _PARQUET_SUFFIXES)}"
    )


def _read_csv(path: Path, label: str, skip: bool
              ) -> tuple[pd.DataFrame, np.ndarray, list[tuple[int, str, str, str]]]:
    """Every cell as a string, blank lines dropped.

    Returns the frame, each row's file line and the bad lines (line, field, value, rule):
    a wrong number of fields (field ''), a value in a column without a header name.
    """
    import pandas as pd

    bad_lines: list[tuple[int, str, str, str]] = []

    def on_bad_line(line: int, field_name: str, value: str, rule: str) -> None:
        bad_lines.append((line, field_name, value, rule))

    frames, line_parts = [], []
    for chunk in iter_csv(path, RowErrors(label, skip), on_bad_line=on_bad_line,
                          empty_hint="a canonical trace needs a header line with at least "
                                     f"{', '.join(REQUIRED_COLUMNS)}"):
        frames.append(chunk.frame)
        line_parts.append(chunk.lines)
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return df, np.concatenate(line_parts), bad_lines


def read_canonical(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None
) -> Trace:
    """Read a canonical trace (CSV, .csv.gz or Parquet) and validate every cell.

    Empty cells (and NaN) take the column's default; unknown columns are kept as
    pass-through values in `JobSpec.extra` and listed in `Trace.extra_columns`. Numbers
    are bounded (`schedlab.traces.schema`: times at most MAX_SECONDS = 1e12 s, counts at most
    MAX_COUNT = 1e6). Blank CSV lines are ignored; a line with more fields than the
    header is a bad row; a column without a header name must be empty (it is dropped).
    CSV line numbers in messages assume one line per record (a quoted cell spanning
    lines shifts them).

    Args:
        path: A `.csv`, `.csv.gz` or `.parquet` file.
        skip_bad_rows: Skip bad rows instead of raising; they are counted in
            `Trace.bad_rows` and the first messages kept in `Trace.bad_row_messages`.
        name: Trace name (default: the file name without its suffix).

    Returns:
        The trace, jobs sorted by (submit_time, row order).

    Raises:
        InvalidTrace: Missing file, unsupported type, missing required columns, no rows,
            or a bad row (unless `skip_bad_rows`); the message names the file, row,
            column, value and rule.
    """
    p = require_file(path)
    label = label_of(p)
    kind = _kind(p)
    trace_name = name if name is not None else stem_of(p)
    if kind == "parquet":
        df = _read_parquet(p, label)
        return frame_to_trace(df, label=label, name=trace_name, source=str(p),
                              skip_bad_rows=skip_bad_rows)

    df, lines, bad_lines = _read_csv(p, label, skip_bad_rows)
    if missing_required(list(df.columns)):
        raise missing_columns_error(label, list(df.columns))
    record_lines = np.sort(np.concatenate([lines, np.array([b[0] for b in bad_lines],
                                                           dtype=np.int64)]))
    rows = np.searchsorted(record_lines, lines) + 1
    check = FrameErrors(label, len(df), skip_bad_rows, rows, lines)
    for line, column, value, rule in bad_lines:
        check.outside(int(np.searchsorted(record_lines, line)) + 1, line, rule,
                      column=column or None, value=value)
    if len(df) == 0 and not bad_lines:
        raise InvalidTrace(f"{label}: no job rows (only the header)")
    trace = frame_to_trace(df, label=label, name=trace_name, source=str(p),
                           skip_bad_rows=skip_bad_rows, check=check)
    del df
    release_arrow_memory()
    return trace


def _read_parquet(path: Path, label: str) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidTrace(f"{label}: cannot be read as Parquet: {exc}") from None
    return table.to_pandas()


# --------------------------------------------------------------------------- writing


def _speeds_text(speeds: tuple[tuple[str, float], ...]) -> str:
    return ";".join(f"{k}={float(v)!r}" for k, v in speeds)


def trace_to_frame(trace: Trace) -> pd.DataFrame:
    """The trace as a DataFrame in the canonical schema (what `write_canonical` writes).

    Required columns always appear; an optional column only when some job differs from
    its default; pass-through columns last, in `trace.extra_columns` order.

    Args:
        trace: The trace to convert.

    Returns:
        One row a job, in the trace's job order.
    """
    import pandas as pd

    jobs = trace.jobs
    defaults = {f.name: f.default for f in fields(JobSpec)}
    data: dict[str, Any] = {}
    for col in CANONICAL_COLUMNS:
        values = [getattr(j, col) for j in jobs]
        if col not in REQUIRED_COLUMNS and all(v == defaults[col] for v in values):
            continue
        if col == "depends_on":
            data[col] = [";".join(v) for v in values]
        elif col == "gpu_speeds":
            data[col] = [_speeds_text(v) for v in values]
        elif col == "tasks":
            data[col] = [format_tasks(v) if v else "" for v in values]
        elif col == "restart_policy":
            data[col] = [str(v) for v in values]
        elif col == "gpus_per_task":
            data[col] = pd.array([v or None for v in values], dtype="Int64")
        elif col in NUM_COLS:
            spec = NUM_COLS[col]
            if spec.integer:
                dtype = "Int64" if spec.default is None else "int64"
                data[col] = pd.array(values, dtype=dtype)
            else:
                data[col] = np.array([np.nan if v is None else v for v in values],
                                     dtype=np.float64)
        else:
            data[col] = pd.array(values, dtype=object)
    for col in trace.extra_columns:
        data[col] = pd.array([dict(j.extra).get(col) for j in jobs], dtype=object)
    return pd.DataFrame(data)


def write_canonical(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write a trace as canonical CSV (`.csv`, `.csv.gz`) or Parquet, atomically.

    The file is written to a temporary file in the same folder and then renamed, so a
    crash never leaves a half-written file under the final name. `read_canonical` reads
    it back to equal jobs.

    Args:
        trace: The trace to write.
        path: Destination; the suffix chooses the format.

    Returns:
        The path written.

    Raises:
        InvalidTrace: Unsupported suffix.
    """
    p = Path(path)
    kind = _kind(p)
    df = trace_to_frame(trace)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, _file_mode(p))
        if kind == "csv":
            compression = "gzip" if p.name.lower().endswith(".gz") else None
            df.to_csv(tmp, index=False, compression=compression, lineterminator="\n")
        else:
            _write_parquet(df, tmp, trace.extra_columns)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def _file_mode(path: Path) -> int:
    """Mode for a new file: the existing file's, else 0o666 minus the umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_parquet(df: pd.DataFrame, path: Path, extra_cols: Sequence[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for col in df.columns:
        s = df[col]
        if col in extra_cols or s.dtype == object:
            values = s.tolist()
            try:
                arrays[col] = pa.array(values)
            except (pa.ArrowException, TypeError, ValueError):
                arrays[col] = pa.array([None if v is None else str(v) for v in values],
                                       type=pa.string())
        else:
            arrays[col] = pa.Array.from_pandas(s)
    pq.write_table(pa.table(arrays), path)
