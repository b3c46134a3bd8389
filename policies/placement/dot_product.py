"""`dot-product`: the FGD authors' DotProd baseline, the least aligned free resources.

Their `DotProductScorePlugin` as run in the paper (GPU dimensions merged, normalised by
the largest node): node vector (free CPUs / 128, free GPU capacity / 8), task vector
(CPUs / 128, GPUs / 8); the node whose dot product is smallest wins (they report 100 x
(1 - product / 2)). Shared search and stated departures: `scored`.
"""

from __future__ import annotations

from schedlab.policies.placement.fgd import State
from schedlab.policies.placement.scored import MAX_SPEC_CPUS, MAX_SPEC_GPUS, ScorePlacer, cpu_free
from schedlab.sim.model import MILLI


class DotProductPlacer(ScorePlacer):
    """The node whose free (CPU, GPU) vector has the smallest dot product with the task's."""

    name = "dot-product"

    def score(self, state: State, n: int, milli: int, cpus: float, room: int) -> float:
        """Half the dot product of the normalised free and asked vectors (lower is better)."""
        _, _, whole, partial, cpu = state
        ask = (n * MILLI if milli == MILLI else milli) / MILLI
        free = (whole * MILLI + sum(partial)) / MILLI
        return 0.5 * (cpu_free(cpu) / MAX_SPEC_CPUS * cpus / MAX_SPEC_CPUS
                      + free / MAX_SPEC_GPUS * ask / MAX_SPEC_GPUS)
