"""Reading text inputs of any trace format: (gzipped) files, CSV streamed in chunks.

`iter_csv` is the one CSV path: every reader and the canonical reader stream their file
through it, so blank lines, ragged lines (a bad row, named by its line) and line numbers
behave the same everywhere. pandas is imported only when a file is read.
"""

from __future__ import annotations

import gzip
import io
import re
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

from sim.errors import InvalidTrace
from traces.rows import RowErrors

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CHUNK_ROWS", "READ_ERRORS", "CsvChunk", "head_text", "is_gzip", "iter_csv", "label_of",
    "open_text", "stem_of",
]

CHUNK_ROWS = 200_000
"""Rows per chunk when streaming a CSV: bounds memory to a chunk of text at a time."""

READ_ERRORS: tuple[type[BaseException], ...] = (OSError, UnicodeDecodeError, EOFError, zlib.error)
"""What reading a (possibly corrupt, possibly gzipped) text file can raise."""

_GZ_MAGIC = b"\x1f\x8b"
_SKIPPED = re.compile(r"Skipping line (\d+): expected (\d+) fields?, saw (\d+)")
_SUFFIXES = (".gz", ".csv", ".swf", ".json", ".trace", ".txt", ".tsv", ".parquet", ".pq")

Ragged = Callable[[int, int, int], None]
"""Told of a line with the wrong number of fields: (line, fields seen, fields expected)."""


def label_of(path: Path) -> str:
    """What messages call a file: its name."""
    return path.name


def stem_of(path: Path) -> str:
    """A trace name from a file name: the name without its (compression) suffixes."""
    name = path.name
    for suffix in _SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or path.name


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == _GZ_MAGIC


def open_text(path: Path) -> IO[str]:
    """Open a (possibly gzipped) text file for streaming; errors become InvalidTrace."""
    try:
        if is_gzip(path):
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
        return open(path, encoding="utf-8")  # noqa: SIM115  # the caller closes it
    except OSError as exc:
        raise InvalidTrace(f"{label_of(path)}: cannot be opened: {exc}") from None


_HEAD_ERRORS: tuple[type[BaseException], ...] = (InvalidTrace, *READ_ERRORS)


def head_text(path: Path, size: int = 65536) -> str:
    """The first `size` characters of a (possibly gzipped) file, '' when unreadable."""
    try:
        with open_text(path) as f:
            return f.read(size)
    except _HEAD_ERRORS:
        return ""


@dataclass(frozen=True)
class CsvChunk:
    """A chunk of a CSV file read as strings, with each row's file line."""

    frame: pd.DataFrame
    lines: np.ndarray


def iter_csv(
    path: Path,
    issues: RowErrors,
    *,
    names: Sequence[str] | None = None,
    sep: str = ",",
    comment: str | None = None,
    chunk_rows: int | None = None,
    on_ragged: Ragged | None = None,
    empty_hint: str = "",
) -> Iterator[CsvChunk]:
    """Stream a CSV (plain or gzipped) in chunks of string cells, blank lines dropped.

    With `names` the file has no header line and these are its columns; without, the
    first line is the header (cells stripped; a header-only file yields one empty chunk).
    A line with the wrong number of fields is a bad row: `issues.error` (raised, or
    counted under skip_bad_rows), or whatever `on_ragged` makes of it.

    Args:
        path: The file.
        issues: Where bad lines go (its label names the file).
        names: Column names of a header-less file.
        sep: Field separator.
        comment: Lines starting with this character are skipped (not counted as rows).
        chunk_rows: Rows per chunk (default CHUNK_ROWS).
        on_ragged: Called instead of `issues.error` for a line of the wrong width.
        empty_hint: Added to the message of an empty file.

    Yields:
        Chunks whose rows carry their 1-based file line numbers.

    Raises:
        InvalidTrace: Unreadable file, empty file, or a bad line when not skipping.
    """
    import pandas as pd

    if on_ragged is None:
        def on_ragged(line: int, saw: int, expected: int) -> None:
            issues.error(line, "(line)", "", f"has {saw} fields; expected {expected}")

    if comment is not None:
        yield from _iter_commented(path, issues, names, sep, comment, chunk_rows or CHUNK_ROWS)
        return
    skipped: set[int] = set()
    next_line = (0 if names is not None else 1) + 1
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            reader = pd.read_csv(
                path, sep=sep, dtype=str, na_filter=False, keep_default_na=False,
                skip_blank_lines=False, index_col=False, on_bad_lines="warn",
                encoding="utf-8", header=None if names is not None else 0,
                names=list(names) if names is not None else None,
                chunksize=chunk_rows or CHUNK_ROWS, engine="c",
                compression="gzip" if is_gzip(path) else None,
            )
            with reader:
                for frame in reader:
                    _drain(caught, skipped, on_ragged)
                    lines = _take_lines(next_line, len(frame), skipped)
                    next_line = int(lines[-1]) + 1 if len(frame) else next_line
                    yield _without_blank_rows(frame, lines)
            _drain(caught, skipped, on_ragged)
    except pd.errors.EmptyDataError:
        hint = f"; {empty_hint}" if empty_hint else ""
        raise InvalidTrace(f"{issues.label}: the file is empty{hint}") from None
    except (pd.errors.ParserError, ValueError, *READ_ERRORS) as exc:
        detail = str(exc).strip().replace("\n", " ")
        raise InvalidTrace(f"{issues.label}: cannot be read as CSV: {detail}") from None


def _without_blank_rows(frame: pd.DataFrame, lines: np.ndarray) -> CsvChunk:
    """A chunk with stripped column names and no rows whose cells are all blank."""
    frame = frame.rename(columns=lambda c: str(c).strip())
    blank = np.ones(len(frame), dtype=bool)
    for c in frame.columns:
        blank &= (frame[c].str.strip() == "").to_numpy(dtype=bool)
    if blank.any():
        frame = frame.loc[~blank].reset_index(drop=True)
        lines = lines[~blank]
    return CsvChunk(frame, lines)


def _drain(caught: list[warnings.WarningMessage], skipped: set[int], on_ragged: Ragged) -> None:
    """Turn pandas' 'Skipping line N' warnings into ragged lines (others are dropped)."""
    for w in caught:
        for m in _SKIPPED.finditer(str(w.message)):
            line = int(m.group(1))
            if line not in skipped:
                skipped.add(line)
                on_ragged(line, int(m.group(3)), int(m.group(2)))
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
    path: Path, issues: RowErrors, names: Sequence[str] | None, sep: str, comment: str,
    chunk_rows: int,
) -> Iterator[CsvChunk]:
    """Whitespace/sep-split lines with comment lines skipped (SWF): a chunk at a time."""
    import pandas as pd

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
