"""Traces: the canonical schema (SPEC sec. 2), readers, writers and generators.

`load_trace` is the single entry point used by the CLI and the Python API: it accepts a
path to a canonical file or the name of a bundled trace.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from sim.errors import InvalidTrace, unknown_name_message
from traces.base import Trace
from traces.canonical import read_canonical, write_canonical
from traces.synthetic import from_records, generate

__all__ = [
    "DATA_DIR",
    "Trace",
    "bundled_traces",
    "from_records",
    "generate",
    "load_trace",
    "read_canonical",
    "write_canonical",
]

DATA_DIR = Path(__file__).resolve().parent / "data"
"""Folder of the bundled trace files."""

_BUNDLED_FILES = {"default": "default.csv"}
_SYNTHETIC = re.compile(r"^synthetic(?::(.*))?$")
_SYNTHETIC_DEFAULT_JOBS = 1000
_KNOWN_FORMATS = ("canonical",)
_PATH_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")


def bundled_traces() -> list[str]:
    """Names `load_trace` accepts besides paths (`synthetic` also as `synthetic:N`)."""
    return sorted([*_BUNDLED_FILES, "synthetic"])


def _looks_like_path(text: str) -> bool:
    return (
        os.sep in text
        or (os.altsep is not None and os.altsep in text)
        or text.lower().endswith(_PATH_SUFFIXES)
    )


def load_trace(
    source: str | os.PathLike[str] | Trace,
    *,
    skip_bad_rows: bool = False,
    trace_format: str | None = None,
) -> Trace:
    """Load a trace from a path or a bundled name.

    Args:
        source: A `.csv`, `.csv.gz` or `.parquet` file in the canonical schema; a bundled
            name: `default` (a 3,000-job window of the Philly trace, see
            `traces/data/README.md`), `synthetic` or `synthetic:N` (`generate(N, seed=0)`,
            N = 1000 by default); or a Trace, returned as is.
        skip_bad_rows: Skip and count bad rows instead of failing on the first.
        trace_format: None or "canonical" (other formats are not supported yet).

    Returns:
        The trace.

    Raises:
        InvalidTrace: Unknown name (with a close match and the known names), missing
            file, unsupported format, or a bad trace.
    """
    if trace_format not in (None, "canonical"):
        raise InvalidTrace(
            f"format {trace_format!r} not supported yet; known: {', '.join(_KNOWN_FORMATS)}"
        )
    if isinstance(source, Trace):
        return source
    text = os.fspath(source)
    if not isinstance(source, os.PathLike):
        key = text.strip()
        if key in _BUNDLED_FILES:
            return read_canonical(DATA_DIR / _BUNDLED_FILES[key], skip_bad_rows=skip_bad_rows,
                                  name=key)
        match = _SYNTHETIC.match(key)
        if match:
            return _synthetic(key, match.group(1))
    path = Path(text)
    if path.is_file():
        return read_canonical(path, skip_bad_rows=skip_bad_rows)
    if isinstance(source, os.PathLike) or _looks_like_path(text):
        raise InvalidTrace(f"trace file {text!r} not found")
    raise InvalidTrace(unknown_name_message("trace", text, bundled_traces())
                       + " (or a path to a .csv, .csv.gz or .parquet file)")


def _synthetic(key: str, count: str | None) -> Trace:
    if count is None:
        n = _SYNTHETIC_DEFAULT_JOBS
    else:
        try:
            n = int(count)
        except ValueError:
            n = 0
        if n < 1:
            raise InvalidTrace(
                f"trace {key!r}: the job count {count!r} is not an integer >= 1 "
                "(use synthetic or synthetic:N)"
            )
    return dataclasses.replace(generate(n, seed=0), name=key)
