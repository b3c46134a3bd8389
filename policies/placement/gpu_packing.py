"""`gpu-packing`: the FGD authors' GpuPacking baseline, shared GPUs, then used nodes.

Their `GpuPackingScorePlugin` (higher is better): a node whose GPUs are all free scores
max(33 - its GPUs, its GPUs); otherwise the task's GPUs are taken from the least free up:
if that needs whole free GPUs the node scores max(50 - their number, 33), else (a share
on a partly used GPU) max(100 - (room x 100 // 1000) // 10, 50). CPU-only jobs score 0
everywhere (ties). Shared search and stated departures: `scored`.
"""

from __future__ import annotations

from schedlab.policies.placement.fgd import State
from schedlab.policies.placement.scored import ScorePlacer
from schedlab.sim.model import MILLI

MAX_SCORE = 100


class GpuPackingPlacer(ScorePlacer):
    """Shared GPUs first, then whole GPUs of used nodes, then free nodes (FGD's GpuPacking)."""

    name = "gpu-packing"

    def score(self, state: State, n: int, milli: int, cpus: float, room: int) -> float:
        """Minus the authors' packing score (lower is better here)."""
        _, capacity, whole, _, _ = state
        if n == 0:
            return 0.0
        if whole == capacity:  # every GPU of the node is free
            return -float(max(MAX_SCORE // 3 - whole, whole))
        if room < 0:  # needs whole free GPUs: n of them (one for a share)
            k = n if milli == MILLI else 1
            return -float(max(MAX_SCORE // 2 - k, MAX_SCORE // 3))
        return -float(max(MAX_SCORE - (room * 100 // MILLI) // 10, MAX_SCORE // 2))
