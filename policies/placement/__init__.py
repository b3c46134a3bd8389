"""Built-in placers, one per module: where a job's GPUs go (`schedlab.sim.interfaces.Placer`).

`base` holds the shared cell search; `pack`, `consolidated`, `first_fit` and `fgd` the
placers registered under those names in `schedlab.sim.registry.PLACERS`; `best_fit`,
`gpu_packing` and `dot_product` the FGD authors' node-scoring baselines (`best-fit`,
`gpu-packing`, `dot-product`) on the search they share (`scored`). The classes are
re-exported lazily: importing this package imports none of the modules.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "BasePlacer": "base",
    "PackPlacer": "pack",
    "ConsolidatedPlacer": "consolidated",
    "FirstFitPlacer": "first_fit",
    "FgdPlacer": "fgd",
    "ScorePlacer": "scored",
    "BestFitPlacer": "best_fit",
    "GpuPackingPlacer": "gpu_packing",
    "DotProductPlacer": "dot_product",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{where}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
