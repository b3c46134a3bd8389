"""Readers of real trace formats into the canonical schema, and format detection.

`TRACE_FORMATS` names every format (the `--trace-format` values); `detect_format`
guesses one from the file (suffix, then its first line); `read_trace` reads a file in a
named or detected format. The topologies of the trace bundles (PAI machine spec,
openb node list) are read by `schedlab.topologies` (`read_pai_machines`, `read_openb_nodes`).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.sim.errors import InvalidTrace, unknown_name_message
from schedlab.traces.base import Trace
from schedlab.traces.canonical import REQUIRED_COLUMNS, read_canonical
from schedlab.traces.csv_stream import read_head
from schedlab.traces.readers._common import check_columns, resolve, trace_epoch, with_epoch
from schedlab.traces.readers.gavel import layout as gavel_layout
from schedlab.traces.readers.gavel import read_gavel
from schedlab.traces.readers.helios import HELIOS_REQUIRED, read_helios
from schedlab.traces.readers.openb import POD_COLUMNS, read_openb_pods
from schedlab.traces.readers.pai import read_pai, table_kind
from schedlab.traces.readers.philly import (
    POLLUX_COLUMNS,
    POLLUX_FORMAT,
    POLLUX_REQUIRED,
    read_philly_csv,
    read_philly_json,
)
from schedlab.traces.readers.pollux import (
    POLLUX_WORKLOAD_COLUMNS,
    POLLUX_WORKLOAD_FORMAT,
    read_pollux,
)
from schedlab.traces.readers.shockwave import layout as shockwave_layout
from schedlab.traces.readers.shockwave import read_shockwave
from schedlab.traces.readers.sia import SIA_REQUIRED, read_sia
from schedlab.traces.readers.swf import read_swf
from schedlab.traces.readers.tiresias import TIRESIAS_REQUIRED, read_tiresias
from schedlab.traces.schema import missing_columns_error, missing_required

__all__ = [
    "TRACE_FORMATS",
    "TraceFormat",
    "detect_format",
    "read_trace",
    "trace_epoch",
    "with_epoch",
]


def _canonical(path: Path, *, skip_bad_rows: bool = False, name: str | None = None,
               **_: Any) -> Trace:
    return read_canonical(path, skip_bad_rows=skip_bad_rows, name=name)


@dataclass(frozen=True)
class TraceFormat:
    """A named trace format: its reader, the options it takes, and what it is."""

    name: str
    description: str
    read: Callable[..., Trace]
    options: tuple[str, ...] = ()


TRACE_FORMATS: dict[str, TraceFormat] = {
    f.name: f
    for f in (
        TraceFormat("canonical", "schedlab canonical CSV / CSV.gz / Parquet (contract.md#sec-2)",
                    _canonical),
        TraceFormat("philly", "Philly job table, Pollux-derived CSV "
                    "(timestamp,duration,num_gpus,gpu_time,cluster)", read_philly_csv),
        TraceFormat("philly-json", "Philly cluster_job_log JSON (msr-fiddle/philly-traces)",
                    read_philly_json),
        TraceFormat("helios", "Helios cluster_log.csv (SC'21)", read_helios),
        TraceFormat("pai", "Alibaba PAI 2020 pai_task_table (+ pai_job_table)", read_pai,
                    ("job_table", "task_table")),
        TraceFormat("openb", "Alibaba openb 2023 pod list (FGD, ATC'23)", read_openb_pods),
        TraceFormat("swf", "Standard Workload Format (.swf, .swf.gz)", read_swf,
                    ("procs_per_gpu",)),
        TraceFormat("gavel", "Gavel trace (+ simulation_throughputs.json)", read_gavel,
                    ("throughputs", "reference")),
        TraceFormat("tiresias", "Tiresias trace CSV", read_tiresias),
        TraceFormat("pollux", "Pollux workload CSV (name,time,application,num_replicas,"
                    "batch_size)", read_pollux),
        TraceFormat("sia", "Sia workload CSV (name,time,application,num_replicas,batch_size)",
                    read_sia),
        TraceFormat("shockwave", "Shockwave trace (Gavel's, 12 fields with the adaptation "
                    "mode; perf_model=shockwave=<throughputs.json>)", read_shockwave),
    )
}
"""Every trace format by its `--trace-format` name."""


_HEADER_FORMATS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("canonical", REQUIRED_COLUMNS, "canonical"),
    ("philly", POLLUX_REQUIRED, POLLUX_FORMAT),
    ("helios", HELIOS_REQUIRED, "Helios"),
    ("tiresias", TIRESIAS_REQUIRED, "Tiresias"),
    ("openb", POD_COLUMNS[:5], "openb pod list"),
    ("pollux", POLLUX_WORKLOAD_COLUMNS, POLLUX_WORKLOAD_FORMAT),
    ("sia", SIA_REQUIRED, "Sia workload"),
)
"""Formats told by their CSV header: name, the columns its reader needs, its message name."""

_CANONICAL_HINTS = ("job_id", "submit_time", "num_gpus")
"""One of these in a header that fits no format makes it a canonical attempt."""


def _header(text: str) -> tuple[list[str], str]:
    """The first non-blank line of the text, split as CSV (cells stripped), and the line."""
    for line in text.splitlines():
        if line.strip():
            try:
                cells = next(csv.reader([line]), [])
            except csv.Error:
                cells = line.split(",")
            return [c.strip() for c in cells], line
    return [], ""


def _near_miss(label: str, cols: Sequence[str]) -> None:
    """Raise the missing-columns error of the format a header comes closest to, if any.

    A header that shares two required columns with a format (or, for canonical, one of
    job_id, submit_time, num_gpus) is an attempt at it: the message is the one its reader
    gives with `--trace-format`, naming the missing and the found columns.
    """
    names = [c for c in cols if c]
    present = set(names)
    best, score = None, 0
    for entry in _HEADER_FORMATS:
        n = sum(c in present for c in entry[1])
        hinted = entry[0] == "canonical" and any(c in present for c in _CANONICAL_HINTS)
        if n > score and (n >= 2 or hinted):
            best, score = entry, n
    if best is None:
        return
    fmt, required, fmt_label = best
    if fmt == "canonical":
        raise missing_columns_error(label, names)
    check_columns(label, names, required, fmt_label)


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of a trace file, from its suffix and first line.

    Args:
        path: An existing file.

    Returns:
        A key of `TRACE_FORMATS`.

    Raises:
        InvalidTrace: Missing file or a directory; an unreadable file (not gzip,
            truncated gzip, not UTF-8); an empty file; a CSV header that is an attempt
            at a format but lacks required columns (naming them and the columns found);
            no known format matches (naming the formats).
    """
    p = resolve(path)
    low = p.name.lower()
    if low.endswith((".parquet", ".pq")):
        return "canonical"
    if low.endswith((".swf", ".swf.gz")):
        return "swf"
    text = read_head(p)
    cols, line = _header(text)
    if not line:
        what = "the file is empty" if not text else "the file has only blank lines"
        raise InvalidTrace(f"{p.name}: {what}; a trace file starts with a header line or "
                           "its first record")
    first = line.lstrip()
    if first.startswith(";"):
        return "swf"
    if first.startswith(("[", "{")):
        return "philly-json"
    if gavel_layout(p) is not None:
        return "gavel"
    if shockwave_layout(p) is not None:
        return "shockwave"
    names = set(cols)
    if not missing_required(names):
        return "canonical"
    if tuple(cols[: len(POLLUX_COLUMNS)]) == POLLUX_COLUMNS or set(POLLUX_REQUIRED) <= names:
        return "philly"
    if set(HELIOS_REQUIRED) <= names:
        return "helios"
    if set(TIRESIAS_REQUIRED) <= names:
        return "tiresias"
    if set(POD_COLUMNS[:5]) <= names:
        return "openb"
    if set(SIA_REQUIRED) <= names and "category" in names:
        return "sia"
    if set(POLLUX_WORKLOAD_COLUMNS) <= names:
        return "pollux"
    if table_kind(p) is not None:
        return "pai"
    fields = line.split()
    if len(fields) == 18 and all(_is_number(f) for f in fields):
        return "swf"
    _near_miss(p.name, cols)
    raise InvalidTrace(
        f"{p.name}: cannot tell the trace format from its name or first line "
        f"{line[:80]!r}; name one with --trace-format / trace_format= "
        f"({', '.join(TRACE_FORMATS)})"
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_trace(
    path: str | os.PathLike[str],
    trace_format: str | None = None,
    *,
    skip_bad_rows: bool = False,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Trace:
    """Read a trace file in a named format, or in the detected one.

    Args:
        path: The file.
        trace_format: A key of `TRACE_FORMATS`, or None to detect it.
        skip_bad_rows: Count bad rows instead of failing on the first.
        name: Trace name (default: from the file name).
        options: Format options (`procs_per_gpu` for swf; `throughputs`, `reference`
            for gavel; `job_table`, `task_table` for pai).

    Returns:
        The trace in the canonical schema.

    Raises:
        InvalidTrace: Unknown format or option (naming the known ones), or a bad file.
    """
    p = resolve(path)
    fmt_name = detect_format(p) if trace_format is None else trace_format.strip().lower()
    fmt = TRACE_FORMATS.get(fmt_name)
    if fmt is None:
        raise InvalidTrace(unknown_name_message("trace format", fmt_name, TRACE_FORMATS))
    opts = dict(options or {})
    for key in opts:
        if key not in fmt.options:
            allowed = ", ".join(fmt.options) or "none"
            raise InvalidTrace(f"option {key!r} is not one of the {fmt.name} format's "
                               f"options; allowed: {allowed}")
    return fmt.read(p, skip_bad_rows=skip_bad_rows, name=name, **opts)
