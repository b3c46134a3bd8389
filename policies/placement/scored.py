"""Node scorers of the FGD authors' simulator (BestFit, GpuPacking, DotProd), shared parts.

The FGD paper (Weng et al., USENIX ATC 2023) compares FGD with node-scoring baselines in
its kubernetes-scheduler-simulator. Each scores every node that can hold the task and
takes the best; inside the node a share goes on the partly used GPU with the least room
that holds it (a whole free GPU when none does: their "best" GPU selection) and whole
GPUs are whole free ones. These placers reuse the `fgd` placer's search (nodes grouped
by state, each state scored once, gangs task by task on a scratch twin, a task larger
than a node to `consolidated`, CPU-only jobs scored like GPU jobs with no GPUs) and only
replace the score (`option`). Departures from the authors' simulator, stated: scores are
exact (theirs are cut to integers 0..100 and ties are broken at random); ties go to the
node left with the least free GPU capacity, then the lowest index.
"""

from __future__ import annotations

import math

from schedlab.policies.placement.fgd import FgdPlacer, State, Workload
from schedlab.sim.model import MILLI

__all__ = ["MAX_SPEC_CPUS", "MAX_SPEC_GPUS", "ScorePlacer", "best_room"]

MAX_SPEC_CPUS = 128.0
"""CPUs of the largest node the authors normalise by (MaxSpecCpu 128,000 milli-CPU)."""
MAX_SPEC_GPUS = 8.0
"""GPUs of the largest node the authors normalise by (MaxSpecGpu 8,000 milli-GPU)."""


def best_room(whole: int, partial: tuple[int, ...], n: int, milli: int) -> int | None:
    """Room of the shared GPU a task goes on (-1: whole free GPUs), or None if none fits.

    n whole GPUs (milli = MILLI) need n whole free ones; a share goes on the partly used
    GPU with the least room that holds it, else on a whole free GPU; n = 0 (a CPU-only
    job) needs no GPU.
    """
    if milli < MILLI and n:
        fits = [f for f in partial if f >= milli]
        if fits:
            return min(fits)
        return -1 if whole else None
    return -1 if whole >= n else None


def cpu_free(cpu: float) -> float:
    """Free CPUs of a node state for scoring (0 when the node does not model CPUs)."""
    return 0.0 if math.isinf(cpu) else cpu


class ScorePlacer(FgdPlacer):
    """The `fgd` search with another node score (subclasses define `score`)."""

    name = "score"

    def workload(self) -> Workload:
        """These scores need no workload (a constant, so cached scores are kept)."""
        return ()

    def score(self, state: State, n: int, milli: int, cpus: float, room: int) -> float:
        """The node's score for the task, lower is better (the authors': higher)."""
        raise NotImplementedError

    def option(self, state: State, n: int, milli: int, cpus: float
               ) -> tuple[float, int, int] | None:
        """(score, free milli left, shared GPU's room or -1), or None when it cannot fit."""
        key = (state, n, milli, cpus)
        if key in self._best:
            return self._best[key]
        _, _, whole, partial, cpu = state
        out: tuple[float, int, int] | None = None
        room = best_room(whole, partial, n, milli)
        if room is not None and cpus <= cpu + 1e-9:
            ask = n * MILLI if milli == MILLI else milli
            left = whole * MILLI + sum(partial) - ask
            out = (self.score(state, n, milli, cpus, room), left, room)
        if len(self._best) < 500_000:
            self._best[key] = out
        return out
