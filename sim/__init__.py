"""schedlab's engine package: model, cluster state, engine, metrics, results and CLI.

Public names are loaded lazily so that `topologies` and `traces` can import `sim.model`
without importing the engine. The engine's hot modules may be compiled (`setup.py`):
importing from a source tree whose compiled modules are older than their source is refused
with the way to rebuild, so an edit is never silently ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__version__ = "0.1.0"
__all__ = ["Simulation", "SimResult", "compiled_modules", "load_trace", "load_topology",
           "__version__"]

_LAZY = {
    "Simulation": "sim.engine",
    "SimResult": "sim.results",
    "load_trace": "traces",
    "load_topology": "topologies",
}


_ROOT = Path(__file__).resolve().parent.parent


def _compiled() -> list[tuple[str, Path]]:
    """(module name, compiled file) of each engine module installed compiled."""
    folders = (("sim", _ROOT / "sim"), ("policies", _ROOT / "policies"),
               ("policies.placement", _ROOT / "policies" / "placement"),
               ("policies.hived", _ROOT / "policies" / "hived"),
               ("topologies", _ROOT / "topologies"))  # setup.py's COMPILED
    return [(f"{pkg}.{so.name.partition('.')[0]}", so)
            for pkg, folder in folders for so in folder.glob("*.so")]


def _check_compiled() -> None:
    """Raise ImportError if a compiled module of a source tree is older than its source."""
    if not (_ROOT / "pyproject.toml").is_file():
        return  # an installed package: its modules were built together
    for _, so in _compiled():
        py = so.with_name(so.name.partition(".")[0] + ".py")
        if py.is_file() and py.stat().st_mtime > so.stat().st_mtime:
            raise ImportError(
                f"{py} changed after its compiled module {so.name} was built: rebuild "
                "with `pip install -e .` (or `SCHEDLAB_PURE=1 pip install -e .` for a "
                "pure-Python install that needs no rebuilding)")


_check_compiled()


def compiled_modules() -> list[str]:
    """The engine modules installed compiled (`setup.py`; empty: pure Python)."""
    return sorted(name for name, _ in _compiled())


def __getattr__(name: str) -> Any:
    """Import the public names on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
