"""Shared machinery of the trace readers: field checks and the hand-off to canonical.

Every reader follows the same path: it streams its file in chunks
(`schedlab.traces.csv_stream.iter_csv`, or an incremental JSON decoder), maps each chunk's source
fields to canonical columns with vectorized numpy, reports a bad source field as `file,
line L, field F: value 'V' RULE` to its `schedlab.traces.rows.RowErrors`, and finally hands one
canonical frame to `schedlab.traces.validate.frame_to_trace`, the single validation path, with
each row's file line so its messages name the line too.

Rows that are well formed but describe no replayable job (a job that never started, a
run time the log does not know) are *excluded*: counted in `Trace.bad_rows` with an
`excluded:` message, never silently dropped and never an error.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.base import Trace, trace_epoch, with_epoch
from schedlab.traces.csv_stream import (
    CHUNK_ROWS,
    READ_ERRORS,
    CsvChunk,
    head_text,
    iter_csv,
    label_of,
    open_text,
    read_error,
    require_file,
    stem_of,
)
from schedlab.traces.rows import MAX_BAD_ROW_MESSAGES, NA_TOKENS, RowErrors, as_number, show
from schedlab.traces.validate import frame_to_trace

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CHUNK_ROWS",
    "READ_ERRORS",
    "CsvChunk",
    "RowErrors",
    "check_columns",
    "finish",
    "head_text",
    "iter_csv",
    "label_of",
    "number_field",
    "open_text",
    "parse_datetime",
    "read_error",
    "resolve",
    "show",
    "stem_of",
    "trace_epoch",
    "with_epoch",
]


def parse_datetime(raw: pd.Series, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """'YYYY-MM-DD HH:MM:SS' cells as Unix seconds (float64) and the missing mask."""
    import pandas as pd

    text = raw.astype(str).str.strip()
    missing = np.array(text.str.lower().isin(NA_TOKENS).to_numpy(dtype=bool))
    parsed = pd.to_datetime(text.mask(missing, ""), format=fmt, errors="coerce")
    secs = (parsed - pd.Timestamp(0)).dt.total_seconds()
    out = np.array(secs.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    out[missing] = np.nan
    return out, missing


def check_columns(label: str, columns: Sequence[str], required: Sequence[str],
                  fmt: str) -> None:
    """Raise when a required source column is missing, naming what was found."""
    missing = [c for c in required if c not in columns]
    if missing:
        raise InvalidTrace(
            f"{label}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"of the {fmt} format; found: {', '.join(repr(c) for c in columns) or '(none)'}; "
            f"required: {', '.join(required)}"
        )


def finish(
    parts: list[pd.DataFrame],
    line_parts: list[np.ndarray],
    issues: RowErrors,
    *,
    name: str,
    source: str,
    epoch: float | None = None,
    shift: bool = True,
) -> Trace:
    """Concatenate canonical chunks, shift times to start at 0, validate, add the counts.

    Args:
        parts: Canonical frames, one per chunk (same columns).
        line_parts: File line of each row of each part.
        issues: The reader's errors and exclusions.
        name: Trace name.
        source: Path of the source file.
        epoch: Unix time of submit_time 0 before shifting (None: not calendar time).
        shift: Shift submit times so the first job arrives at 0.

    Returns:
        The validated trace; `bad_rows` counts the reader's bad and excluded rows too.

    Raises:
        InvalidTrace: No replayable job, or a row breaking a canonical rule.
    """
    label = issues.label
    parts = [p for p in parts if len(p)]
    lines = (np.concatenate([ln for ln in line_parts if len(ln)]) if parts
             else np.zeros(0, dtype=np.int64))
    if not parts:
        detail = ""
        shown = issues.messages(1)
        if shown:
            detail = f"; {issues.bad} bad, {issues.excluded} excluded; first: {shown[0]}"
        raise InvalidTrace(f"{label}: no replayable job rows{detail}")
    if len(parts) > 1:
        import pandas as pd

        df = pd.concat(parts, ignore_index=True)
    else:
        df = parts[0]
    submit = df["submit_time"].to_numpy(dtype=np.float64)
    finite = submit[np.isfinite(submit)]
    if shift and finite.size:
        first = float(finite.min())
        df["submit_time"] = submit - first
        if epoch is not None:
            epoch += first
    trace = frame_to_trace(df, label=label, name=name, source=source,
                           skip_bad_rows=issues.skip, lines=lines,
                           rows=np.arange(1, len(df) + 1))
    extra = issues.bad + issues.excluded
    if extra:
        msgs = list(issues.messages()) + list(trace.bad_row_messages)
        trace = dataclasses.replace(trace, bad_rows=trace.bad_rows + extra,
                                    bad_row_messages=tuple(msgs[:MAX_BAD_ROW_MESSAGES]))
    return with_epoch(trace, epoch)


def resolve(path: str | os.PathLike[str]) -> Path:
    """An existing file, or InvalidTrace saying what the path is (missing, a directory)."""
    return require_file(path)


def number_field(
    frame: pd.DataFrame,
    lines: np.ndarray,
    issues: RowErrors,
    column: str,
    *,
    rule: str,
    lo: float = -math.inf,
    lo_open: bool = False,
    integer: bool = False,
    required: bool = True,
    missing_tokens: Sequence[str] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """A numeric source field checked against its rule; bad cells are reported.

    Args:
        frame: The chunk (string cells).
        lines: File line of each row.
        issues: Where errors go.
        column: Source column name (named in messages).
        rule: The rule as words, e.g. "is not a number >= 0".
        lo: Lower bound.
        lo_open: Exclusive lower bound.
        integer: Values must be integers.
        required: A missing cell is an error (else NaN).
        missing_tokens: Extra cell texts that mean "unknown" (e.g. "-1" in SWF).

    Returns:
        Values (NaN where missing or bad) and the mask of rows reported bad.
    """
    raw = frame[column]
    values, missing = as_number(raw)
    if missing_tokens:
        missing = missing | raw.astype(str).str.strip().isin(list(missing_tokens)).to_numpy(
            dtype=bool)
        values[missing] = np.nan
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(values) & ((values > lo) if lo_open else (values >= lo))
        if integer:
            ok &= values == np.floor(values)
    bad = ~ok & ~missing
    issues.errors(bad, lines, column, raw, rule)
    if required:
        issues.errors(missing, lines, column, raw, f"is missing; {column} is required")
        bad = bad | missing
    values = np.where(ok, values, np.nan)
    return values, bad
