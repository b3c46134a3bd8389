"""Shared machinery of the trace readers: streaming, row errors and the hand-off to canonical.

Every reader follows the same path: it streams its file in chunks (pandas chunked CSV,
or an incremental JSON decoder), maps each chunk's source fields to canonical columns
with vectorized numpy, reports a bad source field as `file, line L, field F: value 'V'
RULE`, and finally hands one canonical frame to `traces.canonical.frame_to_trace`, the
single validation path, with each row's file line so its messages name the line too.

Rows that are well formed but describe no replayable job (a job that never started, a
run time the log does not know) are *excluded*: counted in `Trace.bad_rows` with an
`excluded:` message, never silently dropped and never an error.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import math
import os
import re
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from sim.errors import InvalidTrace
from traces.base import Trace
from traces.canonical import MAX_BAD_ROW_MESSAGES, frame_to_trace

__all__ = [
    "CHUNK_ROWS",
    "READ_ERRORS",
    "CsvChunk",
    "Issues",
    "finish",
    "head_text",
    "iter_csv",
    "label_of",
    "number_field",
    "open_text",
    "parse_datetime",
    "parse_number",
    "show",
    "stem_of",
    "trace_epoch",
    "with_epoch",
]

CHUNK_ROWS = 200_000
"""Rows per chunk when streaming a CSV: bounds memory to a chunk of text at a time."""

READ_ERRORS: tuple[type[BaseException], ...] = (OSError, UnicodeDecodeError, EOFError, zlib.error)
"""What reading a (possibly corrupt, possibly gzipped) text file can raise."""

_NA = ("", "nan", "na", "n/a", "null", "none", "<na>")
_GZ_MAGIC = b"\x1f\x8b"
_SKIPPED = re.compile(r"Skipping line (\d+): expected (\d+) fields?, saw (\d+)")


def label_of(path: Path) -> str:
    """What messages call a file: its name."""
    return path.name


def stem_of(path: Path) -> str:
    """A trace name from a file name: the name without its (compression) suffixes."""
    name = path.name
    for suffix in (".gz", ".csv", ".swf", ".json", ".trace", ".txt", ".tsv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or path.name


def show(value: Any) -> str:
    """A raw value quoted for a message, cut at 80 characters."""
    text = "" if value is None else str(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return repr(text)


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZ_MAGIC


def open_text(path: Path) -> IO[str]:
    """Open a (possibly gzipped) text file for streaming; errors become InvalidTrace."""
    try:
        if _is_gzip(path):
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
        return open(path, encoding="utf-8")  # noqa: SIM115  # the caller closes it
    except OSError as exc:
        raise InvalidTrace(f"{label_of(path)}: cannot be opened: {exc}") from None


def head_text(path: Path, size: int = 65536) -> str:
    """The first `size` characters of a (possibly gzipped) file, '' when unreadable."""
    try:
        with open_text(path) as f:
            return f.read(size)
    except (InvalidTrace, *READ_ERRORS):
        return ""


def parse_number(raw: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Cells as float64 and the mask of missing cells (unparsable cells are NaN, not missing)."""
    text = raw.astype(str).str.strip()
    missing = np.array(text.str.lower().isin(_NA).to_numpy(dtype=bool))
    values = pd.to_numeric(text.mask(missing, ""), errors="coerce")
    out = np.array(values.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    out[missing] = np.nan
    return out, missing


def parse_datetime(raw: pd.Series, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """'YYYY-MM-DD HH:MM:SS' cells as Unix seconds (float64) and the missing mask."""
    text = raw.astype(str).str.strip()
    missing = np.array(text.str.lower().isin(_NA).to_numpy(dtype=bool))
    parsed = pd.to_datetime(text.mask(missing, ""), format=fmt, errors="coerce")
    secs = (parsed - pd.Timestamp(0)).dt.total_seconds()
    out = np.array(secs.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    out[missing] = np.nan
    return out, missing


@dataclass
class Issues:
    """Errors and exclusions found by a reader, before canonical validation.

    `error` raises at once unless bad rows are skipped; then it counts them and keeps
    the first messages. `exclude` only counts and keeps messages.
    """

    label: str
    skip: bool
    bad: int = 0
    excluded: int = 0
    messages: list[tuple[int, str]] = field(default_factory=list)

    def _keep(self, line: int, msg: str) -> None:
        if len(self.messages) < 4 * MAX_BAD_ROW_MESSAGES:
            self.messages.append((line, msg))

    def where(self, line: int) -> str:
        """'file, line L'."""
        return f"{self.label}, line {line}"

    def error(self, line: int, field_name: str, value: Any, rule: str) -> None:
        """One bad field: raise (strict) or count (skip_bad_rows)."""
        msg = f"{self.where(line)}, field {field_name}: value {show(value)} {rule}"
        if not self.skip:
            raise InvalidTrace(msg + "; skip_bad_rows=True / --skip-bad-rows skips bad rows")
        self.bad += 1
        self._keep(line, msg)

    def errors(self, mask: np.ndarray, lines: np.ndarray, field_name: str,
               raw: Sequence[Any] | pd.Series, rule: str) -> np.ndarray:
        """Flag every row of a mask (messages built only for bad rows); returns a copy."""
        mask = np.array(mask, dtype=bool)
        idx = np.flatnonzero(mask)
        if idx.size:
            values = raw.iloc if isinstance(raw, pd.Series) else raw
            for pos in idx.tolist():
                self.error(int(lines[pos]), field_name, values[pos], rule)
        return mask

    def exclude(self, line: int, why: str) -> None:
        """A well-formed row that is no replayable job: counted, never an error."""
        self.excluded += 1
        self._keep(line, f"{self.where(line)}: excluded: {why}")

    def excludes(self, mask: np.ndarray, lines: np.ndarray, why: str) -> np.ndarray:
        """Exclude every row of a mask; returns a copy of it."""
        mask = np.array(mask, dtype=bool)
        for pos in np.flatnonzero(mask).tolist():
            self.exclude(int(lines[pos]), why)
        return mask


@dataclass(frozen=True)
class CsvChunk:
    """A chunk of a CSV file read as strings, with each row's file line."""

    frame: pd.DataFrame
    lines: np.ndarray


def iter_csv(
    path: Path,
    issues: Issues,
    *,
    names: Sequence[str] | None = None,
    sep: str = ",",
    comment: str | None = None,
    chunk_rows: int | None = None,
) -> Iterator[CsvChunk]:
    """Stream a CSV (plain or gzipped) in chunks of string cells, blank lines dropped.

    With `names` the file has no header line and these are its columns; without, the
    first line is the header (cells stripped). A line with the wrong number of fields is
    a bad row (an error, or counted under skip_bad_rows).

    Args:
        path: The file.
        issues: Where bad lines go.
        names: Column names of a header-less file.
        sep: Field separator.
        comment: Lines starting with this character are skipped (not counted as rows).
        chunk_rows: Rows per chunk (default CHUNK_ROWS).

    Yields:
        Chunks whose rows carry their 1-based file line numbers.

    Raises:
        InvalidTrace: Unreadable file, empty file, or a bad line when not skipping.
    """
    chunk_rows = chunk_rows or CHUNK_ROWS
    header_lines = 0 if names is not None else 1
    skipped: set[int] = set()
    next_line = header_lines + 1
    label = issues.label
    if comment is not None:
        yield from _iter_commented(path, issues, names, sep, comment, chunk_rows)
        return
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            reader = pd.read_csv(
                path, sep=sep, dtype=str, na_filter=False, keep_default_na=False,
                skip_blank_lines=False, index_col=False, on_bad_lines="warn",
                encoding="utf-8", header=None if names is not None else 0,
                names=list(names) if names is not None else None,
                chunksize=chunk_rows, compression="gzip" if _is_gzip(path) else None,
                engine="c",
            )
            with reader:
                for frame in reader:
                    _drain(caught, skipped, issues)
                    n = len(frame)
                    lines = _take_lines(next_line, n, skipped)
                    next_line = int(lines[-1]) + 1 if n else next_line
                    frame = frame.rename(columns=lambda c: str(c).strip())
                    blank = np.ones(n, dtype=bool)
                    for c in frame.columns:
                        blank &= (frame[c].str.strip() == "").to_numpy(dtype=bool)
                    if blank.any():
                        frame = frame.loc[~blank].reset_index(drop=True)
                        lines = lines[~blank]
                    yield CsvChunk(frame, lines)
            _drain(caught, skipped, issues)
    except pd.errors.EmptyDataError:
        raise InvalidTrace(f"{label}: the file is empty") from None
    except (pd.errors.ParserError, ValueError, *READ_ERRORS) as exc:
        detail = str(exc).strip().replace("\n", " ")
        raise InvalidTrace(f"{label}: cannot be read as CSV: {detail}") from None


def _drain(caught: list[warnings.WarningMessage], skipped: set[int], issues: Issues) -> None:
    """Turn pandas' 'Skipping line N' warnings into bad-row errors (others are dropped)."""
    for w in caught:
        for m in _SKIPPED.finditer(str(w.message)):
            line = int(m.group(1))
            if line not in skipped:
                skipped.add(line)
                issues.error(line, "(line)", "", f"has {m.group(3)} fields; "
                             f"expected {m.group(2)}")
    caught.clear()


def _take_lines(start: int, n: int, skipped: set[int]) -> np.ndarray:
    """The first n line numbers from `start` on that are not skipped lines."""
    out = np.empty(n, dtype=np.int64)
    line, k = start, 0
    if not skipped or max(skipped) < start:
        return np.arange(start, start + n, dtype=np.int64)
    while k < n:
        if line not in skipped:
            out[k] = line
            k += 1
        line += 1
    return out


def _iter_commented(
    path: Path, issues: Issues, names: Sequence[str] | None, sep: str, comment: str,
    chunk_rows: int,
) -> Iterator[CsvChunk]:
    """Whitespace/sep-split lines with comment lines skipped (SWF): a chunk at a time."""
    if names is None:  # pragma: no cover - only header-less formats use comments
        raise ValueError("names are required with comment")
    width = len(names)
    rows: list[list[str]] = []
    lines: list[int] = []
    with open_text(path) as f:
        try:
            for lineno, line in enumerate(f, start=1):
                text = line.strip()
                if not text or text.startswith(comment):
                    continue
                cells = text.split() if sep == r"\s+" else [c.strip() for c in text.split(sep)]
                if len(cells) != width:
                    issues.error(lineno, "(line)", text, f"has {len(cells)} fields; "
                                 f"expected {width}")
                    continue
                rows.append(cells)
                lines.append(lineno)
                if len(rows) >= chunk_rows:
                    yield CsvChunk(pd.DataFrame(rows, columns=list(names), dtype=str),
                                   np.array(lines, dtype=np.int64))
                    rows, lines = [], []
        except READ_ERRORS as exc:
            raise InvalidTrace(f"{issues.label}: cannot be read as text: {exc}") from None
    if rows:
        yield CsvChunk(pd.DataFrame(rows, columns=list(names), dtype=str),
                       np.array(lines, dtype=np.int64))


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
    issues: Issues,
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
        if issues.messages:
            issues.messages.sort()
            detail = f"; {issues.bad} bad, {issues.excluded} excluded; first: " \
                     f"{issues.messages[0][1]}"
        raise InvalidTrace(f"{label}: no replayable job rows{detail}")
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
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
        merged = sorted(issues.messages)
        msgs = [m for _, m in merged] + list(trace.bad_row_messages)
        trace = dataclasses.replace(trace, bad_rows=trace.bad_rows + extra,
                                    bad_row_messages=tuple(msgs[:MAX_BAD_ROW_MESSAGES]))
    return with_epoch(trace, epoch)


_HAS_EPOCH = "epoch" in {f.name for f in dataclasses.fields(Trace)}


def with_epoch(trace: Trace, epoch: float | None) -> Trace:
    """The trace with its calendar origin (Unix s of submit_time 0) when Trace keeps one."""
    if not _HAS_EPOCH:
        return trace
    value = float(epoch) if epoch is not None and math.isfinite(epoch) else None
    if getattr(trace, "epoch", None) == value:
        return trace
    return dataclasses.replace(trace, epoch=value)  # type: ignore[call-arg]


def trace_epoch(trace: Trace) -> float | None:
    """Unix time of the trace's submit_time 0, or None when it is not calendar time."""
    value = getattr(trace, "epoch", None)
    return float(value) if value is not None else None


def resolve(path: str | os.PathLike[str]) -> Path:
    """An existing file, or InvalidTrace naming it."""
    p = Path(path)
    if not p.is_file():
        raise InvalidTrace(f"trace file {str(p)!r} not found")
    return p


def number_field(
    frame: pd.DataFrame,
    lines: np.ndarray,
    issues: Issues,
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
    values, missing = parse_number(raw)
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
