"""Reading text inputs of any trace format: (gzipped) files, CSV streamed in chunks.

`iter_csv` is the one CSV path: every reader and the canonical reader stream their file
through it, so blank lines, ragged lines (more or fewer fields than the header: a bad row,
named by its line), columns without a header name and line numbers behave the same
everywhere. Text is UTF-8 (a leading BOM is
dropped); a file is gzip when it starts with the gzip magic, and a `.gz` file must be.
An unreadable file (a directory, not gzip, truncated gzip, not UTF-8) is an InvalidTrace
naming the file and the reason. pandas is imported only when a file is read.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.rows import RowErrors

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CHUNK_ROWS", "READ_ERRORS", "TRACE_SUFFIXES", "BadLine", "CsvChunk", "gzipped",
    "head_text", "is_gzip", "iter_csv", "label_of", "missing_file", "open_text", "read_error",
    "read_head", "require_file", "stem_of",
]

CHUNK_ROWS = 200_000
"""Rows per chunk when streaming a CSV: bounds memory to a chunk of text at a time."""

READ_ERRORS: tuple[type[BaseException], ...] = (OSError, UnicodeDecodeError, EOFError, zlib.error)
"""What reading a (possibly corrupt, possibly gzipped) text file can raise."""

TRACE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq", ".swf", ".swf.gz", ".json",
                  ".json.gz", ".trace")
"""File names that look like trace files (what a directory's listing shows)."""

ENCODING = "utf-8-sig"
"""Text files are UTF-8; a leading byte order mark (BOM) is dropped."""

_GZ_MAGIC = b"\x1f\x8b"
_SKIPPED = re.compile(r"Skipping line (\d+): expected (\d+) fields?, saw (\d+)")
_SUFFIXES = (".gz", ".csv", ".swf", ".json", ".trace", ".txt", ".tsv", ".parquet", ".pq")
_LISTED = 8  # trace files a directory's message names

BadLine = Callable[[int, str, str, str], None]
"""Told of a bad line: (line, field, value, rule); field is '' when the whole line is bad
(a wrong number of fields), else the field (a column without a header name)."""


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


def missing_file(path: Path, shown: str | None = None) -> InvalidTrace:
    """The error of a trace path that is no file: not found, a directory, or special.

    Args:
        path: The path.
        shown: How the message names it (default: the path as given).
    """
    text = repr(shown if shown is not None else str(path))
    if path.is_dir():
        try:
            found = sorted(c.name for c in path.iterdir()
                           if c.name.lower().endswith(TRACE_SUFFIXES)
                           and not c.name.startswith(".") and c.is_file())
        except OSError:
            found = []
        if found:
            more = f", ... ({len(found)} in all)" if len(found) > _LISTED else ""
            listing = f"; trace files in it: {', '.join(found[:_LISTED])}{more}"
        else:
            listing = f"; it holds no trace file ({', '.join(TRACE_SUFFIXES)})"
        return InvalidTrace(f"trace file {text} is a directory, not a file{listing}; "
                            "give the path of one trace file")
    if path.exists():
        return InvalidTrace(f"trace file {text} is not a regular file; give the path of a "
                            "trace file")
    return InvalidTrace(f"trace file {text} not found")


def require_file(path: str | os.PathLike[str]) -> Path:
    """An existing regular file, or InvalidTrace saying what the path is instead."""
    p = Path(path)
    if not p.is_file():
        raise missing_file(p)
    return p


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == _GZ_MAGIC


def gzipped(path: Path) -> bool:
    """Whether the file is gzip-compressed (by its magic bytes); a `.gz` file must be.

    Raises:
        InvalidTrace: The file cannot be opened, or its name ends in `.gz` but it is not
            gzip (naming its first bytes).
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError as exc:
        raise InvalidTrace(f"{label_of(path)}: cannot be opened: {exc}") from None
    if magic == _GZ_MAGIC:
        return True
    if path.name.lower().endswith(".gz"):
        what = ("the file is empty" if not magic
                else f"it starts with bytes {magic.hex(' ')}, not the gzip magic 1f 8b")
        raise InvalidTrace(f"{label_of(path)}: not a gzip file ({what}); a .gz trace must "
                           "be gzip-compressed")
    return False


def read_error(label: str, exc: BaseException) -> str:
    """What went wrong reading a (gzipped) text file, as a message naming `label`."""
    if isinstance(exc, EOFError):
        return (f"{label}: truncated gzip stream: the file ends before the end of its "
                f"compressed data ({exc})")
    if isinstance(exc, gzip.BadGzipFile):
        return f"{label}: not a valid gzip file ({exc})"
    if isinstance(exc, zlib.error):
        return f"{label}: not a valid gzip file: corrupt compressed data ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        bad = exc.object[exc.start:exc.end]
        shown = bad.hex(" ") if isinstance(bad, bytes) else repr(bad)
        return (f"{label}: not UTF-8 text: bytes {shown} cannot be decoded ({exc.reason}); "
                "trace files are UTF-8 text")
    return f"{label}: cannot be read: {exc}"


def open_text(path: Path) -> IO[str]:
    """Open a (possibly gzipped) text file for streaming; errors become InvalidTrace.

    UTF-8, a leading BOM dropped; a `.gz` file must be gzip (`gzipped`).
    """
    compressed = gzipped(path)
    try:
        if compressed:
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding=ENCODING)
        return open(path, encoding=ENCODING)  # noqa: SIM115  # the caller closes it
    except OSError as exc:
        raise InvalidTrace(f"{label_of(path)}: cannot be opened: {exc}") from None


def read_head(path: Path, size: int = 65536) -> str:
    """The first `size` characters of a (possibly gzipped) file.

    Raises:
        InvalidTrace: Unreadable: not gzip, truncated or corrupt gzip, not UTF-8 (naming
            the file and the reason).
    """
    with open_text(path) as f:
        try:
            return f.read(size)
        except READ_ERRORS as exc:
            raise InvalidTrace(read_error(label_of(path), exc)) from None


def head_text(path: Path, size: int = 65536) -> str:
    """The first `size` characters of a (possibly gzipped) file, '' when unreadable."""
    try:
        return read_head(path, size)
    except InvalidTrace:
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
    on_bad_line: BadLine | None = None,
    empty_hint: str = "",
) -> Iterator[CsvChunk]:
    """Stream a CSV (plain or gzipped) in chunks of string cells, blank lines dropped.

    With `names` the file has no header line and these are its columns; without, the
    first line is the header (cells stripped; a header-only file yields one empty chunk;
    a name given twice is an error). A line with more fields than the header (or than
    `names`; a trailing comma adds an empty field) or fewer (pandas would pad it with
    empty cells) is a bad line, never cut or padded silently: `issues.error` (raised, or
    counted under skip_bad_rows), or whatever `on_bad_line` makes of it. A column whose
    header name is empty (a header ending in a comma) is dropped when all its cells are
    empty; a value in it is a bad line. Bad lines are not in the chunks.

    Args:
        path: The file (UTF-8, a leading BOM dropped; gzip when its name ends in `.gz`
            or it starts with the gzip magic).
        issues: Where bad lines go (its label names the file).
        names: Column names of a header-less file.
        sep: Field separator.
        comment: Lines starting with this character are skipped (not counted as rows).
        chunk_rows: Rows per chunk (default CHUNK_ROWS).
        on_bad_line: Called instead of `issues.error` for a bad line.
        empty_hint: Added to the message of an empty file.

    Yields:
        Chunks whose rows carry their 1-based file line numbers.

    Raises:
        InvalidTrace: Unreadable file (not gzip, truncated, not UTF-8), empty file, a
            header naming a column twice, or a bad line when not skipping.
    """
    import pandas as pd

    if on_bad_line is None:
        def on_bad_line(line: int, field_name: str, value: str, rule: str) -> None:
            issues.error(line, field_name or "(line)", value, rule)

    if comment is not None:
        yield from _iter_commented(path, issues, names, sep, comment, chunk_rows or CHUNK_ROWS)
        return
    compressed = gzipped(path)
    header, width, header_line = _check_header(path, issues.label, names, sep)
    has_header = names is None

    def width_rule(saw: int) -> str:
        return (f"has {saw} fields but the header has {width}" if has_header
                else f"has {saw} fields; expected {width}")

    skipped: set[int] = set()
    if width:
        for line, cells in _ragged_lines(path, issues.label, sep, width, header_line):
            skipped.add(line)
            hint = ""
            if len(cells) < width:
                hint = ("; missing fields are not read as empty ones: write every field, "
                        "empty ones too")
            elif all(not c.strip() for c in cells[width:]):
                what = "a trailing comma" if sep == "," else "a trailing separator"
                n = len(cells) - width
                hint = (f"; its extra field{'s are' if n > 1 else ' is'} empty "
                        f"({what}?)")
            on_bad_line(line, "", "", width_rule(len(cells)) + hint)

    def on_skipped(line: int, saw: int) -> None:
        on_bad_line(line, "", "", width_rule(saw))

    next_line = header_line + 1
    skiprows = {ln - 1 for ln in skipped} | set(range(max(header_line - 1, 0)))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            reader = pd.read_csv(
                path, sep=sep, dtype=str, na_filter=False, keep_default_na=False,
                skip_blank_lines=False, index_col=False, on_bad_lines="warn",
                encoding=ENCODING, header=None if names is not None else 0,
                names=list(names) if names is not None else None,
                skiprows=sorted(skiprows) or None,
                chunksize=chunk_rows or CHUNK_ROWS, engine="c",
                compression="gzip" if compressed else None,
            )
            with reader:
                for frame in reader:
                    _drain(caught, skipped, on_skipped, issues.label)
                    lines = _take_lines(next_line, len(frame), skipped)
                    next_line = int(lines[-1]) + 1 if len(frame) else next_line
                    frame, lines = _unnamed_columns(frame, lines, header, on_bad_line)
                    yield _without_blank_rows(frame, lines)
            _drain(caught, skipped, on_skipped, issues.label)
    except pd.errors.EmptyDataError:
        hint = f"; {empty_hint}" if empty_hint else ""
        raise InvalidTrace(f"{issues.label}: the file is empty{hint}") from None
    except READ_ERRORS as exc:
        raise InvalidTrace(read_error(issues.label, exc)) from None
    except (pd.errors.ParserError, ValueError) as exc:
        detail = str(exc).strip().replace("\n", " ")
        raise InvalidTrace(f"{issues.label}: cannot be read as CSV: {detail}") from None


def _check_header(path: Path, label: str, names: Sequence[str] | None, sep: str
                  ) -> tuple[list[str] | None, int, int]:
    """The header's stripped cells (None without a header line), the width and its line.

    The header is the first line that is not blank (line 0 without a header line); width
    0 when unknown (an empty file, a regex separator).

    Raises:
        InvalidTrace: Unreadable file, or a header naming a column twice.
    """
    if names is not None:
        return None, len(names), 0
    if len(sep) != 1:
        return None, 0, 1
    first: list[str] | None = None
    with open_text(path) as f:
        rows = csv.reader(f, delimiter=sep)
        try:
            for cells in rows:
                if any(c.strip() for c in cells):
                    first = cells
                    break
        except READ_ERRORS as exc:
            raise InvalidTrace(read_error(label, exc)) from None
        except csv.Error:
            return None, 0, 1
        line = rows.line_num
    if first is None:
        return None, 0, 1
    header = [c.strip() for c in first]
    seen: dict[str, int] = {}
    for pos, name in enumerate(header, start=1):
        if name and name in seen:
            raise InvalidTrace(f"{label}, line {line}: column {name!r} is named twice in the "
                               f"header (fields {seen[name]} and {pos}); column names must "
                               "be unique")
        seen.setdefault(name, pos)
    return header, len(header), line


SCAN_BYTES = 1 << 22
"""Bytes per block of the field-count scan (`_ragged_lines`)."""

def _ragged_lines(path: Path, label: str, sep: str, width: int, header_line: int
                  ) -> Iterator[tuple[int, list[str]]]:
    """The data lines after the header (line 0: none) with more or fewer than `width` fields.

    pandas' C parser pads a short line with empty cells and takes a first wide line for
    an index column (cutting every line of its width), both silently: every such line is
    found here, with its cells, and kept from pandas. A short line with nothing but
    separators and blanks is a blank row (dropped later), not reported. Fields are
    counted as separators per line with numpy, a block at a time; a file with a quote
    character is parsed with the csv module instead (a quoted field may hold separators
    or line breaks).
    """
    if len(sep) != 1 or ord(sep) > 127:
        return
    code = ord(sep)
    line0 = 1  # file line of the first line in `data`
    data = b""
    try:
        with gzip.open(path, "rb") if gzipped(path) else open(path, "rb") as f:
            while True:
                block = f.read(SCAN_BYTES)
                data += block
                if b'"' in data:
                    break
                end = len(data) if not block else data.rfind(b"\n") + 1
                if end > 0:
                    yield from _ragged_in(data[:end], line0, code, sep, width, header_line)
                    line0 += data.count(b"\n", 0, end)
                    data = data[end:]
                if not block:
                    return
    except READ_ERRORS as exc:
        raise InvalidTrace(read_error(label, exc)) from None
    yield from _ragged_quoted(path, label, sep, width, max(header_line, line0 - 1))


def _ragged_in(data: bytes, line0: int, code: int, sep: str, width: int, header_line: int
               ) -> Iterator[tuple[int, list[str]]]:
    """`_ragged_lines` over whole lines of unquoted bytes whose first line is `line0`.

    Two vectorised passes (line feeds, separators); only lines of the wrong width are
    decoded.
    """
    a = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(a == 10)
    if not len(ends) or ends[-1] != len(a) - 1:
        ends = np.append(ends, len(a))  # the last line has no line feed
    seps = np.searchsorted(np.flatnonzero(a == code), ends)
    fields = np.diff(seps, prepend=0) + 1
    odd = np.flatnonzero(fields != width)
    first = header_line - line0 + 1  # index of the first data line in `data`
    for k in odd[odd >= first].tolist():
        start = int(ends[k - 1]) + 1 if k else 0
        text = data[start:int(ends[k])].decode(ENCODING, errors="replace").rstrip("\r")
        if fields[k] > width or text.strip(f"{sep} \t"):
            yield line0 + k, text.split(sep)


def _ragged_quoted(path: Path, label: str, sep: str, width: int, header_line: int
                   ) -> Iterator[tuple[int, list[str]]]:
    """`_ragged_lines` with the csv module (quoted fields) after line `header_line`.

    Lines are counted as pandas counts them for `skiprows` (and `_take_lines` numbers
    rows): a line break inside a quoted field does not start a new line.
    """
    with open_text(path) as f:
        try:
            for line, cells in enumerate(csv.reader(f, delimiter=sep), start=1):
                n = len(cells)
                if line > header_line and n != width and (
                        n > width or any(c.strip(f"{sep} \t\r\n") for c in cells)):
                    yield line, cells
        except READ_ERRORS as exc:
            raise InvalidTrace(read_error(label, exc)) from None
        except csv.Error:
            return


def _unnamed_columns(frame: pd.DataFrame, lines: np.ndarray, header: list[str] | None,
                     on_bad_line: BadLine) -> tuple[pd.DataFrame, np.ndarray]:
    """Drop the columns whose header name is empty; a row with a value in one is bad."""
    if header is None or len(header) != len(frame.columns):
        return frame, lines
    unnamed = [k for k, name in enumerate(header) if not name]
    if not unnamed:
        return frame, lines
    bad = np.zeros(len(frame), dtype=bool)
    for k in unnamed:
        cells = frame.iloc[:, k]
        has = (cells.str.strip() != "").to_numpy(dtype=bool) & ~bad
        for pos in np.flatnonzero(has).tolist():
            on_bad_line(int(lines[pos]), f"{k + 1} (no name in the header)", cells.iat[pos],
                        "is in a column whose header name is empty; name the column in the "
                        "header or leave its cells empty")
        bad |= has
    frame = frame.drop(columns=[frame.columns[k] for k in unnamed])
    if bad.any():
        frame = frame.loc[~bad].reset_index(drop=True)
        lines = lines[~bad]
    return frame, lines


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


def _drain(caught: list[warnings.WarningMessage], skipped: set[int],
           on_skipped: Callable[[int, int], None], label: str) -> None:
    """Turn pandas' 'Skipping line N' warnings into bad lines (others are dropped).

    Raises:
        InvalidTrace: pandas cut the lines to the header (a wider first data line this
            module did not catch): never read such a file silently.
    """
    for w in caught:
        text = str(w.message)
        if "does not match length of data" in text:
            raise InvalidTrace(f"{label}: a data line has more fields than the header; "
                               "every line must have as many fields as the header")
        for m in _SKIPPED.finditer(text):
            line = int(m.group(1))
            if line not in skipped:
                skipped.add(line)
                on_skipped(line, int(m.group(3)))
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
            raise InvalidTrace(read_error(issues.label, exc)) from None
    if rows:
        yield CsvChunk(pd.DataFrame(rows, columns=list(names), dtype=str),
                       np.array(lines, dtype=np.int64))
