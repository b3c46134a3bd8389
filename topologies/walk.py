"""A topology's lowest-common-cell walk on flat per-cell lists, compiled with the engine.

Every start, resume and multi-node placement asks for the lowest cell holding a set of
GPUs (the engine's first-start locality level, the locality speed factor, the multi-node
placer's ranking). Cells are numbered depth first, so that cell is the lowest ancestor
of the smallest GPU whose GPU range reaches past the largest one: a walk up `parent`
comparing one int per step. `Topology` builds one `CellWalk` and answers its own
`lowest_common_cell`/`lowest_common_level`/`best_level` with it, so every caller runs the
same walk, in C when compiled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedlab.sim.model import Level


class CellWalk:
    """The cell tree's shape as lists by cell id, and the best level by GPU count."""

    def __init__(self, gpu_cell: Sequence[int], cell_hi: Sequence[int],
                 cell_parent: Sequence[int], cell_level: Sequence[Level],
                 best: Sequence[Level], top: Level) -> None:
        """Lists by GPU index (`gpu_cell`) and by cell id, and the best levels.

        `best[n]` is the lowest level at which one cell holds n GPUs (n >= 0); a count
        past the list gets `top`, the topology's highest level.
        """
        self.gpu_cell: list[int] = list(gpu_cell)
        self.cell_hi: list[int] = list(cell_hi)  # one past the cell's last GPU index
        self.cell_parent: list[int] = list(cell_parent)
        self.cell_level: list[Level] = list(cell_level)
        self.best: list[Level] = list(best)
        self.top = top

    def __reduce__(self) -> tuple[type[CellWalk], tuple[Any, ...]]:
        """Pickle by the constructor's arguments (a topology sent to a Dask worker)."""
        return (CellWalk, (self.gpu_cell, self.cell_hi, self.cell_parent, self.cell_level,
                           self.best, self.top))

    def lowest_common_cell(self, gpus: Sequence[int]) -> int:
        """Id of the lowest cell that holds every GPU of `gpus` (non-empty)."""
        hi = max(gpus)
        c = self.gpu_cell[min(gpus)]
        up, parent = self.cell_hi, self.cell_parent
        while up[c] <= hi:
            c = parent[c]
        return c

    def lowest_common_level(self, gpus: Sequence[int]) -> Level:
        """Level of the lowest cell holding all of `gpus` (GPU for a single GPU)."""
        return self.cell_level[self.lowest_common_cell(gpus)]

    def best_level(self, num_gpus: int) -> Level:
        """The lowest level at which one cell of the topology holds `num_gpus` GPUs."""
        best = self.best
        if num_gpus < len(best):
            return best[max(num_gpus, 0)]
        return self.top
