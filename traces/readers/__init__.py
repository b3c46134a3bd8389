"""Readers of real trace formats into the canonical schema, and format detection.

`TRACE_FORMATS` names every format (the `--trace-format` values); `detect_format`
guesses one from the file (suffix, then its first line); `read_trace` reads a file in a
named or detected format. The topologies of the trace bundles (PAI machine spec,
openb node list) are read by `topologies` (`read_pai_machines`, `read_openb_nodes`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InvalidTrace, unknown_name_message
from traces.base import Trace
from traces.canonical import REQUIRED_COLUMNS, read_canonical
from traces.readers._common import head_text, resolve, trace_epoch, with_epoch
from traces.readers.gavel import layout as gavel_layout
from traces.readers.gavel import read_gavel
from traces.readers.helios import read_helios
from traces.readers.openb import POD_COLUMNS, read_openb_pods
from traces.readers.pai import read_pai, table_kind
from traces.readers.philly import POLLUX_COLUMNS, read_philly_csv, read_philly_json
from traces.readers.swf import read_swf
from traces.readers.tiresias import read_tiresias

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
        TraceFormat("canonical", "schedlab canonical CSV / CSV.gz / Parquet (SPEC sec. 2)",
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
    )
}
"""Every trace format by its `--trace-format` name."""


def _header(path: Path) -> tuple[list[str], str]:
    """The first non-blank line of the (decompressed) file, split on commas, and the line."""
    for line in head_text(path).splitlines():
        if line.strip():
            return [c.strip() for c in line.split(",")], line
    return [], ""


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of a trace file, from its suffix and first line.

    Args:
        path: An existing file.

    Returns:
        A key of `TRACE_FORMATS`.

    Raises:
        InvalidTrace: Missing file, or no known format matches (naming the formats).
    """
    p = resolve(path)
    low = p.name.lower()
    if low.endswith((".parquet", ".pq")):
        return "canonical"
    if low.endswith((".swf", ".swf.gz")):
        return "swf"
    cols, line = _header(p)
    first = line.lstrip()
    if first.startswith(";"):
        return "swf"
    if first.startswith(("[", "{")):
        return "philly-json"
    if gavel_layout(p) is not None:
        return "gavel"
    names = set(cols)
    if all(c in names for c in REQUIRED_COLUMNS):
        return "canonical"
    if tuple(cols[: len(POLLUX_COLUMNS)]) == POLLUX_COLUMNS or {
        "timestamp", "duration", "num_gpus"} <= names:
        return "philly"
    if {"job_id", "gpu_num", "submit_time"} <= names:
        return "helios"
    if {"job_id", "num_gpu", "submit_time", "duration"} <= names:
        return "tiresias"
    if set(POD_COLUMNS[:5]) <= names:
        return "openb"
    if table_kind(p) is not None:
        return "pai"
    fields = line.split()
    if len(fields) == 18 and all(_is_number(f) for f in fields):
        return "swf"
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
