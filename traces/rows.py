"""Bad rows, for every trace reader: missing cells, cell parsing, quoting, the one collector.

`RowErrors` collects what is wrong with an input's rows. The format readers
(`schedlab.traces.readers`) report source fields by file line (`file, line L, field F: value 'V'
RULE`) and raise at the first one unless bad rows are skipped; the canonical validation
(`schedlab.traces.validate`) reports columns by data row with `FrameErrors` (`file, row R (line
L), column C: value 'V' RULE`), collecting every error and raising the first with the
count of the others. Both keep the lowest-numbered messages, a bounded number.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.sim.errors import InvalidTrace

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_BAD_ROW_MESSAGES", "NA_TOKENS", "SKIP_HINT", "FrameErrors", "RowErrors", "as_number",
    "as_text", "show",
]

NA_TOKENS = ("", "nan", "na", "n/a", "null", "none", "<na>")
"""Cell texts (lowercased) that mean a missing value."""

MAX_BAD_ROW_MESSAGES = 20
"""How many messages `Trace.bad_row_messages` keeps under `skip_bad_rows`."""

KEPT_MESSAGES = 4 * MAX_BAD_ROW_MESSAGES
"""How many of the lowest-numbered messages a collector keeps (memory stays bounded)."""

SKIP_HINT = "skip_bad_rows=True / --skip-bad-rows skips bad rows"


def show(value: Any) -> str:
    """A raw cell value quoted for a message (missing as ''), cut at 80 characters."""
    if value is None or type(value).__name__ == "NAType":
        text = ""
    else:
        text = str(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return repr(text)


def release_arrow_memory() -> None:
    """Give freed memory back to the system once a trace is built (RSS of a long run).

    pandas keeps string columns in Arrow, whose pool holds on to the pages of a freed
    frame; and glibc keeps the freed buffers of the parse (column lists, arrays) in its
    heap. The run that follows allocates Python objects in arenas of their own, which
    use neither, so at a million jobs both (~300 MB) would stay in its peak memory.
    """
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl): nothing to hand back
            pass


def as_text(s: pd.Series) -> pd.Series:
    """Cells as stripped strings; missing cells become '' (typed columns as written)."""
    import pandas as pd

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


def as_number(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Cells as float64 (NaN where missing or unparsable) and the mask of missing cells."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        values = s.to_numpy(dtype=np.float64, na_value=np.nan)
        return values, np.isnan(values)
    text = as_text(s)
    missing = text.str.lower().isin(NA_TOKENS).to_numpy(dtype=bool)
    parsed = pd.to_numeric(text.mask(missing, ""), errors="coerce")
    values = np.array(parsed.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    values[missing] = np.nan
    return values, missing


class RowErrors:
    """Errors and exclusions of one input, keyed by file line (the format readers' view).

    `error` raises at once when `eager` and bad rows are not skipped; otherwise errors are
    counted and raised together by `raise_if_any`. `exclude` marks a well-formed row that
    is no replayable job: counted, never an error.
    """

    def __init__(self, label: str, skip: bool, *, eager: bool = True) -> None:
        self.label = label
        self.skip = skip
        self.eager = eager
        self.bad = 0  # bad records
        self.excluded = 0
        self.n_errors = 0  # error messages (a record may have several)
        self._kept: list[tuple[int, int, bool, str]] = []  # heap of (-key, -seq, error, msg)
        self._seq = 0

    def _keep(self, key: int, msg: str, error: bool) -> None:
        self._seq += 1
        item = (-key, -self._seq, error, msg)
        if len(self._kept) < KEPT_MESSAGES:
            heapq.heappush(self._kept, item)
        elif item > self._kept[0]:  # lower than the highest kept: replace it
            heapq.heapreplace(self._kept, item)

    def report(self, key: int, msg: str, *, new_row: bool = True) -> None:
        """A bad record at `key` (line or row): raise now, or count it and keep `msg`."""
        if self.eager and not self.skip:
            raise InvalidTrace(f"{msg}; {SKIP_HINT}")
        self.n_errors += 1
        if new_row:
            self.bad += 1
        self._keep(key, msg, True)

    def where(self, line: int) -> str:
        """'file, line L'."""
        return f"{self.label}, line {line}"

    def error(self, line: int, field_name: str, value: Any, rule: str) -> None:
        """One bad source field on a file line."""
        self.report(line, f"{self.where(line)}, field {field_name}: value {show(value)} {rule}")

    def errors(self, mask: np.ndarray, lines: np.ndarray, field_name: str,
               raw: Sequence[Any] | pd.Series, rule: str) -> np.ndarray:
        """Flag every row of a mask (messages built only for bad rows); returns a copy."""
        mask = np.array(mask, dtype=bool)
        idx = np.flatnonzero(mask)
        if idx.size:
            values = raw.iloc if hasattr(raw, "iloc") else raw
            for pos in idx.tolist():
                self.error(int(lines[pos]), field_name, values[pos], rule)
        return mask

    def exclude(self, line: int, why: str) -> None:
        """A well-formed row that is no replayable job: counted, never an error."""
        self.excluded += 1
        self._keep(line, f"{self.where(line)}: excluded: {why}", False)

    def excludes(self, mask: np.ndarray, lines: np.ndarray, why: str) -> np.ndarray:
        """Exclude every row of a mask; returns a copy of it."""
        mask = np.array(mask, dtype=bool)
        for pos in np.flatnonzero(mask).tolist():
            self.exclude(int(lines[pos]), why)
        return mask

    def merge(self, other: RowErrors) -> None:
        """Add another collector's counts and messages (a second file of the same trace)."""
        self.bad += other.bad
        self.excluded += other.excluded
        self.n_errors += other.n_errors
        for key, msg, error in other.entries():
            self._keep(key, msg, error)

    def entries(self) -> list[tuple[int, str, bool]]:
        """The kept (key, message, is_error), lowest key first."""
        return [(-k, m, e) for k, _, e, m in sorted(self._kept, key=lambda t: (-t[0], -t[1]))]

    def messages(self, limit: int = MAX_BAD_ROW_MESSAGES) -> tuple[str, ...]:
        """The first `limit` kept messages, lowest key first."""
        return tuple(m for _, m, _ in self.entries()[:limit])

    def first_error(self) -> str:
        """The lowest-keyed error message kept ('' when none)."""
        return next((m for _, m, e in self.entries() if e), "")

    def raise_if_any(self) -> None:
        """Raise the first error with the count of the others, unless bad rows are skipped."""
        if not self.n_errors or self.skip:
            return
        msg = self.first_error()
        more = self.n_errors - 1
        if more:
            msg += f" (and {more} more error{'s' if more > 1 else ''}; {SKIP_HINT})"
        raise InvalidTrace(msg)


class FrameErrors(RowErrors):
    """Errors of a frame's cells, by position, named by data row (and file line).

    Every error is collected (`raise_if_any` raises the first by row); a row with
    several bad cells counts once in `bad`, and `bad_mask` marks the bad positions.
    """

    def __init__(self, label: str, n: int, skip: bool, rows: np.ndarray | None = None,
                 lines: np.ndarray | None = None) -> None:
        super().__init__(label, skip, eager=False)
        self.rows = rows if rows is not None else np.arange(1, n + 1)
        self.lines = lines
        self.bad_mask = np.zeros(n, dtype=bool)

    def row_ref(self, pos: int) -> str:
        """'row R (line L)' for a frame position (no line for in-memory records)."""
        row = int(self.rows[pos])
        if self.lines is None:
            return f"row {row}"
        return f"row {row} (line {int(self.lines[pos])})"

    def cell(self, pos: int, column: str, value: Any, rule: str) -> None:
        """Record a bad cell at frame position `pos`."""
        msg = f"{self.label}, {self.row_ref(pos)}, column {column}: value {show(value)} {rule}"
        self.report(int(self.rows[pos]), msg, new_row=not self.bad_mask[pos])
        self.bad_mask[pos] = True

    def cells(self, mask: np.ndarray, column: str, raw: pd.Series, rule: str) -> None:
        """Record every bad cell of a column mask (messages built only for bad rows)."""
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            return
        values = raw.iloc[idx].tolist()
        for pos, value in zip(idx.tolist(), values, strict=True):
            self.cell(pos, column, value, rule)

    def outside(self, row: int, line: int, detail: str, *, column: str | None = None,
                value: Any = "") -> None:
        """Record a bad record that is not a row of the frame (a bad CSV line).

        Without `column` the whole line is bad (`file, row R (line L): DETAIL`, e.g. a
        wrong number of fields); with it one cell (`..., column C: value 'V' DETAIL`).
        """
        where = f"{self.label}, row {row} (line {line})"
        if column is None:
            self.report(row, f"{where}: {detail}")
        else:
            self.report(row, f"{where}, column {column}: value {show(value)} {detail}")
