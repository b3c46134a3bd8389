"""`load_trace`: one entry point from a path, a bundled name or a generator name to a Trace.

Used by the CLI and the Python API (re-exported as `schedlab.traces.load_trace`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.sim.errors import InvalidParameter, InvalidTrace, unknown_name_message
from schedlab.traces import DATA_DIR
from schedlab.traces.base import Trace
from schedlab.traces.calibrated import PROFILES, calibrated
from schedlab.traces.canonical import read_canonical
from schedlab.traces.csv_stream import TRACE_SUFFIXES, missing_file
from schedlab.traces.readers import TRACE_FORMATS, read_trace
from schedlab.traces.synthetic import generate

if TYPE_CHECKING:
    from schedlab.topologies.tree import Topology

__all__ = ["bundled_traces", "load_trace", "trace_formats"]

_BUNDLED_FILES = {"default": "default.csv"}
_SYNTHETIC = re.compile(r"^synthetic(?::(.*))?$")
_LLM = re.compile(r"^llm-like(?::(.*))?$")
_CALIBRATED = re.compile(r"^(" + "|".join(re.escape(k) for k in PROFILES) + r")(?::(.*))?$")
_SYNTHETIC_DEFAULT_JOBS = 1000
_PATH_SUFFIXES = TRACE_SUFFIXES


def bundled_traces() -> list[str]:
    """Names `load_trace` accepts besides paths (generators also as `NAME:N` for N jobs)."""
    return sorted([*_BUNDLED_FILES, "synthetic", "llm-like", *PROFILES])


def trace_formats() -> list[str]:
    """The `trace_format` / `--trace-format` names."""
    return list(TRACE_FORMATS)


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
    options: Mapping[str, Any] | None = None,
    topology: Topology | None = None,
    load: float | None = None,
    seed: int = 0,
) -> Trace:
    """Load a trace from a path or a bundled name.

    Args:
        source: A trace file in any known format (`trace_formats()`: canonical `.csv`,
            `.csv.gz`, `.parquet`, Philly, Helios, PAI, openb, SWF, Gavel, Tiresias; the
            format is detected from the file unless `trace_format` names it); a bundled
            name: `default` (a 3,000-job window of the Philly trace, see
            `traces/data/README.md`), `synthetic` or `synthetic:N` (`generate(N, seed=0)`,
            N = 1000 by default), `philly-like[:N]` or `helios-like[:N]` (calibrated
            generators, `schedlab.traces.calibrated`), `llm-like[:N]` (LLM-era jobs,
            `schedlab.traces.llm_like`, sizes capped at `topology`'s GPUs); or a Trace,
            returned as is.
        skip_bad_rows: Skip and count bad rows instead of failing on the first.
        trace_format: None (detect) or a name of `trace_formats()`; bundled names are
            canonical.
        options: Options of the file's format (see `schedlab.traces.readers.read_trace`).
        topology: For calibrated generators: sizes that fit it, and the target of `load`.
        load: For calibrated generators: target offered load on `topology`.
        seed: For calibrated generators: the seed.

    Returns:
        The trace.

    Raises:
        InvalidTrace: Unknown name (with a close match and the known names), missing
            file (or a directory: naming its trace files), unknown or inapplicable
            format, or a bad trace.
        InvalidParameter: A calibrated generator's bad load, seed or topology, or
            generator arguments given for a file.
    """
    if trace_format is not None:
        trace_format = trace_format.strip().lower()
        if trace_format not in TRACE_FORMATS:
            raise InvalidTrace(unknown_name_message("trace format", trace_format,
                                                    TRACE_FORMATS))
    if isinstance(source, Trace):
        return source
    text = os.fspath(source)
    if not isinstance(source, os.PathLike):
        key = text.strip()
        bundled = (key in _BUNDLED_FILES or _SYNTHETIC.match(key) or _CALIBRATED.match(key)
                   or _LLM.match(key))
        if bundled and trace_format not in (None, "canonical"):
            raise InvalidTrace(f"trace {key!r} is a bundled or generated trace (canonical); "
                               f"trace format {trace_format!r} applies to files only")
        match = _LLM.match(key)
        if match:  # LLM-era jobs (schedlab.traces.llm_like), sized for `topology`
            from schedlab.traces.llm_like import llm_like

            n = _count(key, match.group(1), "llm-like")
            return llm_like(n, seed=seed, name=key,
                            max_gpus=topology.num_gpus if topology is not None else None)
        match = _CALIBRATED.match(key)
        if match:
            n = _count(key, match.group(2), match.group(1))
            return calibrated(match.group(1), n, seed=seed, topology=topology, load=load,
                              name=key)
        if load is not None:
            raise InvalidParameter(f"load={load!r} applies to the calibrated generators "
                                   f"({', '.join(PROFILES)}); to change a replayed "
                                   "trace's load use load_scale (traces.shape)")
        if key in _BUNDLED_FILES:
            return read_canonical(DATA_DIR / _BUNDLED_FILES[key], skip_bad_rows=skip_bad_rows,
                                  name=key)
        match = _SYNTHETIC.match(key)
        if match:
            return _synthetic(key, match.group(1))
    elif load is not None:
        raise InvalidParameter(f"load={load!r} applies to the calibrated generators "
                               f"({', '.join(PROFILES)}), not to a file")
    path = Path(text)
    if path.is_file():
        return read_trace(path, trace_format, skip_bad_rows=skip_bad_rows, options=options)
    if isinstance(source, os.PathLike) or _looks_like_path(text) or path.exists():
        raise missing_file(path, text)
    raise InvalidTrace(unknown_name_message("trace", text, bundled_traces())
                       + " (or a path to a trace file)")


def _count(key: str, count: str | None, base: str) -> int:
    """N of 'NAME:N' (default 1000), or InvalidTrace."""
    if count is None:
        return _SYNTHETIC_DEFAULT_JOBS
    try:
        n = int(count)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidTrace(f"trace {key!r}: the job count {count!r} is not an integer >= 1 "
                           f"(use {base} or {base}:N)")
    return n


def _synthetic(key: str, count: str | None) -> Trace:
    return dataclasses.replace(generate(_count(key, count, "synthetic"), seed=0), name=key)
