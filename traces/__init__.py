"""Traces: the canonical schema (SPEC sec. 2), readers, writers and generators.

`load_trace` is the single entry point used by the CLI and the Python API: it accepts a
path to a trace file in any known format (`traces.readers.TRACE_FORMATS`, detected or
named) or the name of a bundled or generated trace.

The public names below are imported on first use (PEP 562), so `import traces` (and
`traces.base`, which the engine needs) loads neither pandas nor the format readers.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traces.base import Trace
from traces.calibrated import calibrated

if TYPE_CHECKING:
    from traces.canonical import read_canonical, write_canonical
    from traces.load import bundled_traces, load_trace, trace_formats
    from traces.readers import TRACE_FORMATS, detect_format, read_trace
    from traces.shaping import shape
    from traces.synthetic import from_records, generate

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
    "TRACE_FORMATS": "traces.readers",
    "bundled_traces": "traces.load",
    "detect_format": "traces.readers",
    "from_records": "traces.synthetic",
    "generate": "traces.synthetic",
    "load_trace": "traces.load",
    "read_canonical": "traces.canonical",
    "read_trace": "traces.readers",
    "shape": "traces.shaping",
    "trace_formats": "traces.load",
    "write_canonical": "traces.canonical",
}


def __getattr__(name: str) -> Any:
    """Import a public name on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'traces' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
