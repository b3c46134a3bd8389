"""schedlab's engine package: model, cluster state, engine, metrics, results and CLI.

Public names are loaded lazily so that `topologies` and `traces` can import `sim.model`
without importing the engine.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Simulation", "SimResult", "load_trace", "load_topology", "__version__"]

_LAZY = {
    "Simulation": "sim.engine",
    "SimResult": "sim.results",
    "load_trace": "traces",
    "load_topology": "topologies",
}


def __getattr__(name: str) -> Any:
    """Import the public names on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
