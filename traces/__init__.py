"""Traces: the canonical schema (docs/contract.md#sec-2), readers, writers and generators.

`load_trace` is the single entry point used by the CLI and the Python API: it accepts a
path to a trace file in any known format (`schedlab.traces.readers.TRACE_FORMATS`, detected or
named) or the name of a bundled or generated trace.

The public names below are imported on first use (PEP 562), so `import traces` (and
`schedlab.traces.base`, which the engine needs) loads neither pandas nor the format readers.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.traces.base import Trace
from schedlab.traces.calibrated import calibrated

if TYPE_CHECKING:
    from schedlab.traces.canonical import read_canonical, write_canonical
    from schedlab.traces.load import bundled_traces, load_trace, trace_formats
    from schedlab.traces.readers import TRACE_FORMATS, detect_format, read_trace
    from schedlab.traces.shaping import shape
    from schedlab.traces.synthetic import from_records, generate

__all__ = [
    "DATA_DIR",
    "TRACE_FORMATS",
    "Trace",
    "bundled_traces",
    "calibrated",
    "detect_format",
    "from_records",
    "generate",
    "load_trace",
    "read_canonical",
    "read_trace",
    "shape",
    "trace_formats",
    "write_canonical",
]

DATA_DIR = Path(__file__).resolve().parent / "data"
"""Folder of the bundled trace files."""

_LAZY = {
    "TRACE_FORMATS": "schedlab.traces.readers",
    "bundled_traces": "schedlab.traces.load",
    "detect_format": "schedlab.traces.readers",
    "from_records": "schedlab.traces.synthetic",
    "generate": "schedlab.traces.synthetic",
    "load_trace": "schedlab.traces.load",
    "read_canonical": "schedlab.traces.canonical",
    "read_trace": "schedlab.traces.readers",
    "shape": "schedlab.traces.shaping",
    "trace_formats": "schedlab.traces.load",
    "write_canonical": "schedlab.traces.canonical",
}


def __getattr__(name: str) -> Any:
    """Import a public name on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'schedlab.traces' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
