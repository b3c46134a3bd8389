"""Reader and writer of the canonical trace schema (SPEC sec. 2), CSV or Parquet.

Validation is vectorized: each column is parsed once with pandas/numpy into a value array
and a "bad" mask, and error messages are only built for the bad rows. Every error names
the file, the row (1-based data row, plus the file line for CSV), the column, the value
and the rule, e.g.::

    trace.csv, row 7 (line 8), column num_gpus: value '2.5' is not an integer >= 0

The same validation path serves files (`read_canonical`), in-memory records
(`traces.synthetic.from_records`) and the synthetic generator.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import warnings
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.errors import InvalidTrace
from sim.model import PRIORITY_NAMES, JobSpec
from traces.base import Trace

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

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "num_gpus", "duration")
"""Columns every canonical trace must have."""

OPTIONAL_COLUMNS: tuple[str, ...] = (
    "user", "vc", "priority", "gpu_type", "num_cpus", "mem_gb", "gpus_per_task",
    "checkpoint_interval", "max_retries", "fail_at", "max_lifetime", "min_gpus",
    "max_gpus", "depends_on", "locality_sensitivity", "gpu_speeds", "gpu_share",
    "gpu_util", "gpu_mem_gb", "max_wait_hours",
)
"""Optional columns of SPEC sec. 2, in their documented order."""

CANONICAL_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
"""Every column with a meaning; any other column is passed through as `JobSpec.extra`."""

MAX_BAD_ROW_MESSAGES = 20
"""How many messages `Trace.bad_row_messages` keeps under `skip_bad_rows`."""

_NA_TOKENS = ("", "nan", "na", "n/a", "null", "none", "<na>")
_MAX_INT = float(2**53)  # integers beyond this are not exact in float64
_TEXT_DEFAULTS = {"user": "", "vc": "default", "gpu_type": ""}
_CSV_SUFFIXES = (".csv", ".csv.gz")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_SKIP_HINT = "skip_bad_rows=True / --skip-bad-rows skips bad rows"


@dataclass(frozen=True)
class _NumCol:
    """A numeric column: its rule, its range and the default of an empty cell."""

    name: str
    integer: bool
    default: float | int | None
    rule: str
    lo: float = -math.inf
    lo_open: bool = False
    hi: float = math.inf
    hi_open: bool = False
    required: bool = False

    def ok(self, v: np.ndarray) -> np.ndarray:
        """Mask of values that satisfy the rule (NaN never does)."""
        with np.errstate(invalid="ignore"):
            m = np.isfinite(v)
            m &= (v > self.lo) if self.lo_open else (v >= self.lo)
            m &= (v < self.hi) if self.hi_open else (v <= self.hi)
            if self.integer:
                m &= (v == np.floor(v)) & (np.abs(v) <= _MAX_INT)
        return m


_NUM_COLS: dict[str, _NumCol] = {
    c.name: c
    for c in (
        _NumCol("submit_time", False, None, "a finite number >= 0", lo=0.0, required=True),
        _NumCol("num_gpus", True, None, "an integer >= 0", lo=0.0, required=True),
        _NumCol("duration", False, None, "a finite number > 0", lo=0.0, lo_open=True,
                required=True),
        _NumCol("priority", True, 0,
                "an integer or a level name (" + ", ".join(PRIORITY_NAMES) + ")"),
        _NumCol("num_cpus", False, 0.0, "a finite number >= 0", lo=0.0),
        _NumCol("mem_gb", False, 0.0, "a finite number >= 0", lo=0.0),
        _NumCol("gpus_per_task", True, 0, "an integer >= 1", lo=1.0),
        _NumCol("checkpoint_interval", False, None, "a finite number > 0", lo=0.0,
                lo_open=True),
        _NumCol("max_retries", True, 0, "an integer >= 0", lo=0.0),
        _NumCol("fail_at", False, None, "a finite number > 0", lo=0.0, lo_open=True),
        _NumCol("max_lifetime", False, None, "a finite number > 0", lo=0.0, lo_open=True),
        _NumCol("min_gpus", True, None, "an integer >= 0", lo=0.0),
        _NumCol("max_gpus", True, None, "an integer >= 0", lo=0.0),
        _NumCol("locality_sensitivity", False, 1.0, "a number in [0, 1]", lo=0.0, hi=1.0),
        _NumCol("gpu_share", False, 1.0, "a number in (0, 1]", lo=0.0, lo_open=True, hi=1.0),
        _NumCol("gpu_util", False, 1.0, "a number in [0, 1]", lo=0.0, hi=1.0),
        _NumCol("gpu_mem_gb", False, 0.0, "a finite number >= 0", lo=0.0),
        _NumCol("max_wait_hours", False, 0.0, "a finite number >= 0", lo=0.0),
    )
}

_FIELD_NAMES = tuple(f.name for f in fields(JobSpec))


# --------------------------------------------------------------------------- errors


def _show(value: Any) -> str:
    """Quote a raw cell value for a message: always as a quoted string."""
    if value is None or value is pd.NA:
        text = ""
    elif isinstance(value, str):
        text = value
    else:
        text = str(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return repr(text)


class _Check:
    """Collects row errors; raises the first one unless bad rows are skipped."""

    def __init__(
        self,
        label: str,
        n: int,
        skip: bool,
        rows: np.ndarray | None = None,
        lines: np.ndarray | None = None,
    ) -> None:
        self.label = label
        self.skip = skip
        self.rows = rows if rows is not None else np.arange(1, n + 1)
        self.lines = lines
        self.bad = np.zeros(n, dtype=bool)
        self.errors: list[tuple[int, int, str]] = []  # (row number, sequence, message)
        self.outside_bad = 0  # bad records that are not rows of the frame (ragged lines)

    def row_ref(self, pos: int) -> str:
        """'row R (line L)' for a frame position."""
        row = int(self.rows[pos])
        if self.lines is None:
            return f"row {row}"
        return f"row {row} (line {int(self.lines[pos])})"

    def where(self, pos: int) -> str:
        """'file, row R (line L)' for a frame position."""
        return f"{self.label}, {self.row_ref(pos)}"

    def cell(self, pos: int, column: str, value: Any, rule: str) -> None:
        """Record a bad cell at frame position `pos`."""
        msg = f"{self.where(pos)}, column {column}: value {_show(value)} {rule}"
        self.errors.append((int(self.rows[pos]), len(self.errors), msg))
        self.bad[pos] = True

    def cells(self, mask: np.ndarray, column: str, raw: pd.Series, rule: str) -> None:
        """Record every bad cell of a column mask (messages built only for bad rows)."""
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            return
        values = raw.iloc[idx].tolist()
        for pos, value in zip(idx.tolist(), values, strict=True):
            self.cell(pos, column, value, rule)

    def outside(self, row: int, line: int, detail: str) -> None:
        """Record a bad record that pandas could not turn into a row (CSV only)."""
        self.errors.append((row, len(self.errors), f"{self.label}, row {row} (line {line}): "
                                                   f"{detail}"))
        self.outside_bad += 1

    def raise_if_any(self) -> None:
        """Raise the first error (lowest row) unless bad rows are being skipped."""
        if not self.errors or self.skip:
            return
        self.errors.sort()
        more = len(self.errors) - 1
        msg = self.errors[0][2]
        if more:
            msg += f" (and {more} more error{'s' if more > 1 else ''}; {_SKIP_HINT})"
        raise InvalidTrace(msg)

    @property
    def bad_rows(self) -> int:
        """Number of bad records."""
        return int(self.bad.sum()) + self.outside_bad

    def messages(self) -> tuple[str, ...]:
        """The first MAX_BAD_ROW_MESSAGES messages, in row order."""
        self.errors.sort()
        return tuple(m for _, _, m in self.errors[:MAX_BAD_ROW_MESSAGES])


# --------------------------------------------------------------------------- parsing


def _as_text(s: pd.Series) -> pd.Series:
    """Cells as stripped strings; missing cells become ''."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.astype(object).map(lambda v: "" if v is None or v is pd.NA else str(v))
    if pd.api.types.is_numeric_dtype(s.dtype):
        def fmt(v: Any) -> str:
            if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
                return ""
            if isinstance(v, float) and v.is_integer():
                return str(int(v))
            return str(v)

        return s.astype(object).map(fmt).astype(str)
    return s.fillna("").astype(str).str.strip()


def _as_number(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Cells as float64 (NaN where unparsable) and the mask of missing cells."""
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        values = s.to_numpy(dtype=np.float64, na_value=np.nan)
        return values, np.isnan(values)
    text = _as_text(s)
    missing = text.str.lower().isin(_NA_TOKENS).to_numpy(dtype=bool)
    parsed = pd.to_numeric(text, errors="coerce")
    values = np.array(parsed.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    values[missing] = np.nan
    return values, missing


def _parse_speeds(text: str) -> tuple[tuple[tuple[str, float], ...] | None, str]:
    """Parse 'V100=1;P100=0.6' into sorted pairs, or (None, reason)."""
    pairs: dict[str, float] = {}
    for token in text.split(";"):
        token = token.strip()
        if not token:
            continue
        name, sep, value = token.partition("=")
        name = name.strip()
        if not sep or not name:
            return None, f"{token!r} is not TYPE=SPEED"
        try:
            speed = float(value)
        except ValueError:
            return None, f"speed {value.strip()!r} of {name} is not a number"
        if not (math.isfinite(speed) and speed > 0):
            return None, f"speed of {name} is not a finite number > 0"
        if name in pairs:
            return None, f"{name} is given twice"
        pairs[name] = speed
    return tuple(sorted(pairs.items())), ""


def _parse_deps(text: str) -> tuple[str, ...]:
    """Split 'a;b' into unique, stripped ids (empty tokens ignored)."""
    return tuple(dict.fromkeys(t.strip() for t in text.split(";") if t.strip()))


# --------------------------------------------------------------------------- frame -> trace


def _missing_columns_error(label: str, columns: Sequence[str]) -> InvalidTrace:
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    found = ", ".join(repr(c) for c in columns) or "(none)"
    return InvalidTrace(
        f"{label}: missing required column{'s' if len(missing) > 1 else ''} "
        f"{', '.join(missing)}; found columns: {found}; "
        f"required: {', '.join(REQUIRED_COLUMNS)}"
    )


def frame_to_trace(
    df: pd.DataFrame,
    *,
    label: str,
    name: str,
    source: str = "",
    skip_bad_rows: bool = False,
    rows: np.ndarray | None = None,
    lines: np.ndarray | None = None,
    check: _Check | None = None,
) -> Trace:
    """Validate a DataFrame in the canonical schema and turn it into a Trace.

    This is the one validation path of schedlab: files, in-memory records and the
    synthetic generator all come through here.

    Args:
        df: One row a job; columns as in SPEC sec. 2 (strings or typed values). Unknown
            columns are passed through.
        label: What messages call the input (usually the file name).
        name: Name of the resulting trace.
        source: Where the trace came from (a path), stored in `Trace.source`.
        skip_bad_rows: Skip and count bad rows instead of raising on the first.
        rows: 1-based row number of each frame row (default 1..n).
        lines: File line of each frame row, for CSV messages (None: no line numbers).
        check: Internal: an error collector already holding errors of the reader.

    Returns:
        The jobs sorted by (submit_time, row order).

    Raises:
        InvalidTrace: A missing required column, no rows, or (unless `skip_bad_rows`) a
            bad row.
    """
    df = df.rename(columns=lambda c: str(c).strip())
    columns = list(df.columns)
    if any(c not in columns for c in REQUIRED_COLUMNS):
        raise _missing_columns_error(label, columns)
    n = len(df)
    if check is None:
        check = _Check(label, n, skip_bad_rows, rows, lines)
    if n == 0 and not check.errors:
        raise InvalidTrace(f"{label}: no job rows (only the header)")

    present = set(columns)
    out: dict[str, Any] = {}  # field name -> list (full length n) of python values
    colbad: dict[str, np.ndarray] = {}
    numbers: dict[str, np.ndarray] = {}
    given: dict[str, np.ndarray] = {}

    for col in CANONICAL_COLUMNS:
        if col not in present:
            continue
        raw = df[col]
        if col == "job_id":
            text = _as_text(raw)
            empty = (text == "").to_numpy(dtype=bool)
            check.cells(empty, col, raw, "is empty; job_id is required")
            out[col] = text.tolist()
        elif col in _TEXT_DEFAULTS:
            text = _as_text(raw)
            default = _TEXT_DEFAULTS[col]
            if default:
                text = text.mask(text == "", default)
            out[col] = text.tolist()
        elif col in _NUM_COLS:
            spec = _NUM_COLS[col]
            if col == "priority" and not pd.api.types.is_numeric_dtype(raw.dtype):
                # HAI level names (NORMAL, HIGH, AUTO, ...) stand for their numbers
                text = _as_text(raw)
                raw = text.map(lambda t: str(PRIORITY_NAMES.get(t.upper(), t)))
            values, missing = _as_number(raw)
            bad = ~spec.ok(values) & ~missing
            if spec.required:
                check.cells(missing, col, raw, f"is missing; {col} is required")
            check.cells(bad, col, raw, f"is not {spec.rule}")
            unusable = bad | missing
            colbad[col] = bad | (missing if spec.required else False)
            given[col] = ~unusable
            numbers[col] = values
            out[col] = _fill(values, unusable, spec)
        elif col == "depends_on":
            text = _as_text(raw)
            nonempty = ~text.str.lower().isin(_NA_TOKENS).to_numpy(dtype=bool)
            deps = [()] * n
            ids = out.get("job_id")
            for pos in np.flatnonzero(nonempty).tolist():
                d = _parse_deps(text.iat[pos])
                if ids is not None and ids[pos] in d:
                    check.cell(pos, col, raw.iat[pos],
                               f"makes job {ids[pos]!r} depend on itself")
                    continue
                deps[pos] = d
            out[col] = deps
        elif col == "gpu_speeds":
            text = _as_text(raw)
            nonempty = ~text.str.lower().isin(_NA_TOKENS).to_numpy(dtype=bool)
            speeds: list[Any] = [()] * n
            for pos in np.flatnonzero(nonempty).tolist():
                parsed, why = _parse_speeds(text.iat[pos])
                if parsed is None:
                    check.cell(pos, col, raw.iat[pos],
                               "is not a list of TYPE=SPEED pairs separated by ';' with "
                               f"speeds > 0 ({why})")
                    continue
                speeds[pos] = parsed
            out[col] = speeds

    _cross_checks(df, check, numbers, given, colbad)
    check.raise_if_any()

    alive = ~check.bad
    job_ids = out["job_id"]
    _check_duplicates(df, check, job_ids, alive)
    check.raise_if_any()
    if "depends_on" in out and any(out["depends_on"]):
        _check_dependencies(df, check, job_ids, out["depends_on"], alive)
        check.raise_if_any()

    keep = np.flatnonzero(alive)
    if keep.size == 0:
        check.errors.sort()
        first = check.errors[0][2] if check.errors else ""
        raise InvalidTrace(f"{label}: no valid job rows; all {check.bad_rows} rows are bad; "
                           f"first: {first}")
    order = keep[np.argsort(numbers["submit_time"][keep], kind="stable")]
    extra_cols = tuple(c for c in columns if c not in CANONICAL_COLUMNS)
    jobs = _build_jobs(df, out, order, extra_cols)
    return Trace(
        name=name,
        jobs=jobs,
        source=source,
        bad_rows=check.bad_rows,
        bad_row_messages=check.messages(),
        extra_columns=extra_cols,
    )


def _fill(values: np.ndarray, unusable: np.ndarray, spec: _NumCol) -> list[Any]:
    """Python values of a numeric column with the default in unusable cells."""
    if spec.default is None:
        if spec.integer:
            arr = np.where(unusable, 0, values).astype(np.int64).astype(object)
        else:
            arr = values.astype(object)
        arr[unusable] = None
        return arr.tolist()
    filled = np.where(unusable, spec.default, values)
    if spec.integer:
        return filled.astype(np.int64).tolist()
    return filled.astype(np.float64).tolist()


def _cross_checks(
    df: pd.DataFrame,
    check: _Check,
    numbers: dict[str, np.ndarray],
    given: dict[str, np.ndarray],
    colbad: dict[str, np.ndarray],
) -> None:
    """Rules that relate two columns of the same row (only on individually valid cells)."""
    gpus = numbers["num_gpus"]
    gpus_ok = ~colbad["num_gpus"]
    with np.errstate(invalid="ignore", divide="ignore"):
        if "gpus_per_task" in given:
            g = numbers["gpus_per_task"]
            m = given["gpus_per_task"] & gpus_ok
            bad = m & (np.fmod(np.where(m, gpus, 0), np.where(m, g, 1)) != 0)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "gpus_per_task", df["gpus_per_task"].iat[pos],
                           f"does not divide num_gpus ({int(gpus[pos])})")
        if "min_gpus" in given:
            bad = given["min_gpus"] & gpus_ok & (numbers["min_gpus"] > gpus)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "min_gpus", df["min_gpus"].iat[pos],
                           f"is greater than num_gpus ({int(gpus[pos])}); "
                           "need min_gpus <= num_gpus <= max_gpus")
        if "max_gpus" in given:
            bad = given["max_gpus"] & gpus_ok & (numbers["max_gpus"] < gpus)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "max_gpus", df["max_gpus"].iat[pos],
                           f"is less than num_gpus ({int(gpus[pos])}); "
                           "need min_gpus <= num_gpus <= max_gpus")
        if "gpu_share" in given:
            bad = given["gpu_share"] & gpus_ok & (numbers["gpu_share"] < 1.0) & (gpus != 1)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "gpu_share", df["gpu_share"].iat[pos],
                           f"is < 1 but num_gpus is {int(gpus[pos])}; a fractional GPU "
                           "share needs num_gpus = 1")


def _check_duplicates(
    df: pd.DataFrame, check: _Check, job_ids: list[str], alive: np.ndarray
) -> None:
    """A repeated job_id is an error on the later row, naming the earlier one."""
    idx = np.flatnonzero(alive)
    ids = pd.Series([job_ids[i] for i in idx.tolist()], dtype=object)
    dup = ids.duplicated(keep="first").to_numpy(dtype=bool)
    if not dup.any():
        return
    first_pos = dict(zip(ids[~dup].tolist(), idx[~dup].tolist(), strict=True))
    raw = df["job_id"]
    for pos in idx[dup].tolist():
        earlier = check.row_ref(first_pos[job_ids[pos]])
        check.cell(pos, "job_id", raw.iat[pos],
                   f"is a duplicate of {earlier}; job_id must be unique")
        alive[pos] = False


def _check_dependencies(
    df: pd.DataFrame,
    check: _Check,
    job_ids: list[str],
    deps: list[tuple[str, ...]],
    alive: np.ndarray,
) -> None:
    """Unknown or skipped dependencies and cycles; marks offending rows dead in `alive`."""
    raw = df["depends_on"]
    all_ids = set(job_ids)
    pos_of = {job_ids[p]: p for p in np.flatnonzero(alive).tolist()}
    dependents: dict[str, list[int]] = {}
    with_deps = [p for p in np.flatnonzero(alive).tolist() if deps[p]]
    for p in with_deps:
        for d in deps[p]:
            dependents.setdefault(d, []).append(p)

    dead: deque[int] = deque()

    def kill(pos: int, rule: str) -> None:
        check.cell(pos, "depends_on", raw.iat[pos], rule)
        alive[pos] = False
        if pos_of.get(job_ids[pos]) == pos:
            del pos_of[job_ids[pos]]
        dead.append(pos)

    def propagate() -> None:
        while dead:
            gone = job_ids[dead.popleft()]
            for p in dependents.get(gone, ()):
                if alive[p]:
                    kill(p, f"names job {gone!r}, which was skipped as a bad row")

    for p in with_deps:
        if not alive[p]:
            continue
        unknown = [d for d in deps[p] if d not in all_ids]
        skipped = [d for d in deps[p] if d in all_ids and d not in pos_of]
        if unknown:
            kill(p, f"names unknown job{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(repr(u) for u in unknown)}; depends_on must list job_ids "
                    "of this trace")
        elif skipped:
            kill(p, f"names job {skipped[0]!r}, which was skipped as a bad row")
    propagate()

    while True:  # Kahn's algorithm; what it cannot resolve is on or behind a cycle
        nodes = [p for p in with_deps if alive[p]]
        remaining = {p: len(deps[p]) for p in nodes}
        ready = deque(pos_of[d] for p in nodes for d in deps[p]
                      if pos_of[d] not in remaining)
        resolved: set[int] = set()
        while ready:
            q = ready.popleft()
            if q in resolved:
                continue
            resolved.add(q)
            for p in dependents.get(job_ids[q], ()):
                if p in remaining:
                    remaining[p] -= 1
                    if remaining[p] == 0:
                        ready.append(p)
        stuck = sorted(p for p in nodes if p not in resolved)
        if not stuck:
            return
        cycle = _find_cycle(stuck[0], deps, pos_of, set(stuck))
        names = [job_ids[p] for p in cycle]
        for i, p in enumerate(cycle):
            loop = names[i:] + names[:i] + [names[i]]
            kill(p, f"makes a dependency cycle: {' -> '.join(loop)}")
        if not check.skip:
            return
        propagate()


def _find_cycle(
    start: int, deps: list[tuple[str, ...]], pos_of: dict[str, int], stuck: set[int]
) -> list[int]:
    """Follow unresolved dependencies from `start` until a job repeats; return the loop."""
    path: list[int] = []
    seen: dict[int, int] = {}
    p = start
    while p not in seen:
        seen[p] = len(path)
        path.append(p)
        p = next(pos_of[d] for d in deps[p] if pos_of[d] in stuck)
    return path[seen[p]:]


def _build_jobs(
    df: pd.DataFrame, out: dict[str, Any], order: np.ndarray, extra_cols: tuple[str, ...]
) -> tuple[JobSpec, ...]:
    """Build JobSpecs in one pass over column lists (positional, in field order)."""
    pick = order.tolist()
    args: list[Iterable[Any]] = []
    defaults = {f.name: f.default for f in fields(JobSpec)}
    for fname in _FIELD_NAMES:
        if fname == "extra":
            if extra_cols:
                cols = [df[c].tolist() for c in extra_cols]
                args.append([tuple(zip(extra_cols, (col[i] for col in cols), strict=True))
                             for i in pick])
            else:
                args.append(repeat(()))
        elif fname in out:
            col = out[fname]
            args.append(list(map(col.__getitem__, pick)))
        else:
            args.append(repeat(defaults[fname]))
    return tuple(map(JobSpec, *args))


# --------------------------------------------------------------------------- files


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


def _stem(path: Path) -> str:
    low = path.name.lower()
    for suffix in _CSV_SUFFIXES[::-1] + _PARQUET_SUFFIXES:
        if low.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.stem


_SKIPPED_LINE = re.compile(r"Skipping line (\d+): expected (\d+) fields?, saw (\d+)")


def _read_csv(path: Path, label: str) -> tuple[pd.DataFrame, np.ndarray, list[tuple[int, str]]]:
    """Read every cell as a string; return the frame, each row's file line, ragged lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pd.errors.ParserWarning)
        try:
            df = pd.read_csv(
                path, dtype=str, na_filter=False, keep_default_na=False,
                skip_blank_lines=False, index_col=False, on_bad_lines="warn",
                encoding="utf-8",
            )
        except pd.errors.EmptyDataError:
            raise InvalidTrace(
                f"{label}: the file is empty; a canonical trace needs a header line with at "
                f"least {', '.join(REQUIRED_COLUMNS)}"
            ) from None
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as exc:
            detail = str(exc).strip().replace("\n", " ")
            raise InvalidTrace(f"{label}: cannot be read as CSV: {detail}") from None
    ragged: list[tuple[int, str]] = []
    for w in caught:
        text = str(w.message).strip()
        for line_text in text.splitlines():
            m = _SKIPPED_LINE.search(line_text)
            if m:
                ragged.append((int(m.group(1)), f"has {m.group(3)} fields but the header has "
                                                f"{m.group(2)}"))
        if not issubclass(w.category, pd.errors.ParserWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    n = len(df)
    skipped = np.array(sorted(line for line, _ in ragged), dtype=np.int64)
    all_lines = np.arange(2, 2 + n + skipped.size, dtype=np.int64)
    lines = all_lines[~np.isin(all_lines, skipped)][:n]
    return df, lines, ragged


def read_canonical(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None
) -> Trace:
    """Read a canonical trace (CSV, .csv.gz or Parquet) and validate every cell.

    Empty cells (and NaN) take the column's default; unknown columns are kept as
    pass-through values in `JobSpec.extra` and listed in `Trace.extra_columns`. Blank
    CSV lines are ignored. CSV line numbers in messages assume one line per record (a
    quoted cell spanning lines shifts them).

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
    p = Path(path)
    label = p.name
    kind = _kind(p)
    if not p.is_file():
        raise InvalidTrace(f"trace file {str(p)!r} not found")
    trace_name = name if name is not None else _stem(p)
    if kind == "parquet":
        df = _read_parquet(p, label)
        return frame_to_trace(df, label=label, name=trace_name, source=str(p),
                              skip_bad_rows=skip_bad_rows)

    df, lines, ragged = _read_csv(p, label)
    df = df.rename(columns=lambda c: str(c).strip())
    if any(c not in df.columns for c in REQUIRED_COLUMNS):
        raise _missing_columns_error(label, list(df.columns))
    blank = np.ones(len(df), dtype=bool)
    for c in df.columns:
        blank &= (df[c].str.strip() == "").to_numpy(dtype=bool)
    if blank.any():
        df = df.loc[~blank].reset_index(drop=True)
        lines = lines[~blank]
    record_lines = np.sort(np.concatenate([lines, np.array([ln for ln, _ in ragged],
                                                           dtype=np.int64)]))
    rows = np.searchsorted(record_lines, lines) + 1
    check = _Check(label, len(df), skip_bad_rows, rows, lines)
    for line, detail in ragged:
        check.outside(int(np.searchsorted(record_lines, line)) + 1, line, detail)
    if len(df) == 0 and not ragged:
        raise InvalidTrace(f"{label}: no job rows (only the header)")
    return frame_to_trace(df, label=label, name=trace_name, source=str(p),
                          skip_bad_rows=skip_bad_rows, check=check)


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
        elif col == "gpus_per_task":
            data[col] = pd.array([v or None for v in values], dtype="Int64")
        elif col in _NUM_COLS:
            spec = _NUM_COLS[col]
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
