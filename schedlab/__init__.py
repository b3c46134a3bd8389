"""schedlab: a discrete-event simulator of deep-learning GPU clusters.

The public API, loaded on first use so that `import schedlab` stays cheap:

- `Simulation`, `SimResult`: run a policy on a trace and a topology, read its results;
- `RunHandle`: what a user's SimPy process (`Simulation(processes=...)`) acts through;
- `load_trace`, `load_topology`, `Trace`, `JobSpec`, `Topology`: the inputs;
- `register`, `registered_policies`, `make_policy`, `Policy`, `check_policy`: policies;
- `POLICIES`, `PLACERS`, `SPEED_FACTORS`: the registries of extension points;
- `compiled_modules()`: the modules running compiled (empty: pure Python).

Subpackages: `schedlab.sim` (engine, model, metrics), `schedlab.policies`,
`schedlab.topologies`, `schedlab.traces` and `schedlab.app` (CLI, sweeps, plots, report,
Gym environment). `python -m schedlab` is the `schedlab` command.
"""

from __future__ import annotations

import importlib
from typing import Any

from schedlab._native import compiled_modules as compiled_modules

__version__ = "0.1.0"

_LAZY = {
    "Simulation": "schedlab.sim.engine",
    "SimResult": "schedlab.sim.results",
    "RunHandle": "schedlab.sim.processes",
    "JobSpec": "schedlab.sim.model",
    "load_trace": "schedlab.traces",
    "Trace": "schedlab.traces.base",
    "load_topology": "schedlab.topologies",
    "Topology": "schedlab.topologies.tree",
    "register": "schedlab.policies.registry",
    "registered_policies": "schedlab.policies.registry",
    "make_policy": "schedlab.policies.registry",
    "Policy": "schedlab.policies.base",
    "check_policy": "schedlab.policies.conformance",
    "POLICIES": "schedlab.sim.registry",
    "PLACERS": "schedlab.sim.registry",
    "SPEED_FACTORS": "schedlab.sim.registry",
}

__all__ = sorted([*_LAZY, "compiled_modules", "__version__"])


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'schedlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
