"""`best-fit`: the FGD authors' BestFit baseline, the node left with the least resources.

Their `BestFitScorePlugin`: a node's score is 0.5 x (CPUs left after the task / 128)
+ 0.5 x (GPU capacity left after the task / 8), lower is better (they report 100 x (1 -
it), rescaled over the nodes). Shared search and stated departures: `scored`.
"""

from __future__ import annotations

from schedlab.policies.placement.fgd import State
from schedlab.policies.placement.scored import MAX_SPEC_CPUS, MAX_SPEC_GPUS, ScorePlacer, cpu_free
from schedlab.sim.model import MILLI


class BestFitPlacer(ScorePlacer):
    """The node with the least CPUs and GPU capacity left after the task (FGD's BestFit)."""

    name = "best-fit"

    def score(self, state: State, n: int, milli: int, cpus: float, room: int) -> float:
        """Weighted CPUs and GPUs left after the task, normalised by the largest node."""
        _, _, whole, partial, cpu = state
        ask = n * MILLI if milli == MILLI else milli
        gpus_left = (whole * MILLI + sum(partial) - ask) / MILLI
        return (0.5 * (cpu_free(cpu) - cpus) / MAX_SPEC_CPUS
                + 0.5 * gpus_left / MAX_SPEC_GPUS)
