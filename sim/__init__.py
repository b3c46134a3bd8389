"""The simulation core: model, cluster state, engine, metrics and results.

Public names are loaded lazily so that `schedlab.topologies` and `schedlab.traces` can
import `schedlab.sim.model` without importing the engine.
"""

from __future__ import annotations

from typing import Any

from schedlab._native import compiled_modules

__all__ = ["Simulation", "SimResult", "compiled_modules", "load_trace", "load_topology"]

_LAZY = {
    "Simulation": "schedlab.sim.engine",
    "SimResult": "schedlab.sim.results",
    "load_trace": "schedlab.traces",
    "load_topology": "schedlab.topologies",
}


def __getattr__(name: str) -> Any:
    """Import the public names on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'schedlab.sim' has no attribute {name!r}")
