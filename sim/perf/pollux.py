"""Pollux's profiles as a performance model: goodput by placement, batch size and epoch.

A folder of Pollux application profiles (petuum/adaptdl `simulator/traces/`, one
sub-folder per model; or one profile folder). As Pollux's simulator computes a job's
true speed (`simulator.py`, `Job.step`): a fixed global batch size B on r GPUs runs
local batches of ceil(B / r) split into atomic batches by `max_local_bsz` (a single GPU
above the initial batch accumulates at least once), capped so the global batch stays
within `max_batch_size`; its step time is the profile's for the placement (GPUs per
node) and atomic batch, plus the compute part once per accumulation step. Work is
counted in samples at the initial batch size's statistical efficiency: goodput =
samples/s x efficiency(batch, epoch) from the gradient noise scale of that epoch, so a
job's work is its model's progress at its last epoch x the initial batch size.

An adaptive job picks, at every placement and epoch, the batch size of the best true
goodput among Pollux's candidates (50 sizes in geometric space from max(initial batch,
r x min_local_bsz) to max_batch_size, with Pollux's accumulation rule). Pollux's agent
picks with a model it fits to the step times it has measured; schedlab's knows the
profile (an agent that has profiled every placement). Every (re)allocation costs 30 s
(the simulator's rescale time).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.agent import BatchLimits
from schedlab.sim.perf.base import SAMPLES, Shape, TableModel
from schedlab.sim.perf.pollux_goodput import GradParams
from schedlab.sim.perf.pollux_profiles import InvalidProfile, PolluxProfile, load_profile

RESCALE_TIME = 30.0
"""Seconds of no progress at every (re)allocation (Pollux's simulator, `Job.reallocate`)."""

EPS = 1e-8


class PolluxModels(TableModel):
    """The profiles of a folder, by model name (the sub-folder's name)."""

    name = "pollux"

    def __init__(self, path: str | Path) -> None:
        root = Path(path)
        dirs = [root] if (root / "placements.csv").is_file() else sorted(
            d for d in root.iterdir() if d.is_dir() and (d / "placements.csv").is_file()) \
            if root.is_dir() else []
        if not dirs:
            raise InvalidParameter(f"perf_model pollux={root}: no Pollux profile (a folder "
                                   "with placements.csv, or a folder of such folders)")
        self._p: dict[str, PolluxProfile] = {}
        for d in dirs:
            try:
                self._p[d.name] = load_profile(d)
            except InvalidProfile as e:
                raise InvalidParameter(f"perf_model pollux={root}: {e}") from None
        self._memo: dict[Any, Any] = {}

    def profile(self, model: str) -> PolluxProfile:
        """The model's profile."""
        return self._p[model]

    def models(self) -> Collection[str]:
        """The profiles' names."""
        return self._p.keys()

    def units(self, model: str) -> str:
        """Samples (at the initial batch size's efficiency)."""
        return SAMPLES

    def restart_cost(self, model: str) -> float | None:
        """Pollux's rescale time, at every (re)allocation."""
        return RESCALE_TIME

    def default_work(self, model: str) -> float | None:
        """Progress at the end of the last epoch x the initial batch size."""
        p = self._p[model]
        return p.progress(p.max_epochs) * p.init_batch_size

    def default_batch(self, model: str) -> int | None:
        """The initial batch size (the smallest validated one)."""
        return self._p[model].init_batch_size

    # --- speed

    def _config(self, p: PolluxProfile, replicas: int, batch: float) -> tuple[int, int]:
        """(atomic batch, accumulation steps) of a fixed global batch (`Job.update_local_bsz`)."""
        local = math.ceil(batch / replicas - EPS)
        accum = math.ceil(local / p.max_local_bsz - EPS) - 1
        if replicas == 1 and batch > p.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - EPS)
        count = replicas * (accum + 1)
        return min(atomic, int(p.max_batch_size / count)), accum

    def _samples_per_s(self, p: PolluxProfile, shape: Shape, atomic: int, accum: int
                       ) -> float:
        if atomic <= 0:
            return 0.0
        try:
            step, sync = p.step_time(shape.per_node, atomic)
        except ValueError:
            return 0.0  # outside what was profiled: cannot run so
        total = step + (step - sync) * accum
        return shape.num_gpus * atomic * (accum + 1) / total if total > 0 else 0.0

    @staticmethod
    def _epoch(p: PolluxProfile, progress: float) -> int:
        """The epoch a job trains at `progress` samples (the last once past it)."""
        return min(p.epoch(progress / p.init_batch_size), p.max_epochs - 1)

    def _grad(self, p: PolluxProfile, batch: float, progress: float) -> GradParams | None:
        """Gradient statistics at a global batch and progress (None: outside the profile)."""
        try:
            return p.grad_stats(batch, self._epoch(p, progress))
        except ValueError:
            return None

    def _efficiency(self, p: PolluxProfile, batch: float, progress: float) -> float:
        g = self._grad(p, batch, progress)
        if g is None:
            return 0.0
        scale = batch / p.init_batch_size
        denom = g.var / scale + g.sqr
        gain = (g.var + g.sqr) / denom if denom > 0 else 1.0
        return gain / scale

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """Samples/s on `shape` at a fixed global batch size (the initial one if None)."""
        p = self._p[model]
        batch = batch_size or p.init_batch_size
        atomic, accum = self._config(p, shape.num_gpus, batch)
        return self._samples_per_s(p, shape, atomic, accum)

    def goodput(self, model: str, shape: Shape, batch_size: int | None,
                progress: float) -> float:
        """Samples/s x statistical efficiency at `progress` samples done."""
        p = self._p[model]
        batch = batch_size or p.init_batch_size
        atomic, accum = self._config(p, shape.num_gpus, batch)
        real = shape.num_gpus * atomic * (accum + 1)
        if real <= 0:
            return 0.0
        return self._samples_per_s(p, shape, atomic, accum) * self._efficiency(
            p, real, progress)

    def best_batch(self, model: str, shape: Shape, batch_size: int | None,
                   progress: float) -> int | None:
        """The global batch of the best true goodput among Pollux's candidates."""
        p = self._p[model]
        key = (model, shape.per_node, self._epoch(p, progress))
        got = self._memo.get(key)
        if got is not None:
            return int(got)
        r = shape.num_gpus
        lo = max(p.init_batch_size, p.min_local_bsz * r)
        best, arg = -1.0, p.init_batch_size
        if lo <= p.max_batch_size:
            for batch in np.geomspace(lo, p.max_batch_size, 50).tolist():
                local = batch / r
                accum = math.ceil(local / p.max_local_bsz - EPS) - 1
                if r == 1 and local > p.init_batch_size + EPS:
                    accum = max(accum, 1)
                atomic = math.ceil(local / (accum + 1) - EPS)
                if not p.min_local_bsz <= atomic <= p.max_local_bsz:
                    continue
                real = r * atomic * (accum + 1)
                g = self._samples_per_s(p, shape, atomic, accum) * self._efficiency(
                    p, real, progress)
                if g > best:
                    best, arg = g, real
        self._memo[key] = arg
        return int(arg)

    # --- what a job's agent measures (`StepTimes`, perf_agent=fitted)

    def batch_limits(self, model: str) -> BatchLimits:
        """The profile's initial and largest batch, smallest and largest per GPU."""
        p = self._p[model]
        return BatchLimits(p.init_batch_size, p.max_batch_size, p.min_local_bsz,
                           p.max_local_bsz)

    def split(self, model: str, num_gpus: int, batch_size: int) -> tuple[int, int]:
        """(atomic batch, accumulation steps) of a global batch (`Job.update_local_bsz`)."""
        return self._config(self._p[model], max(1, num_gpus), batch_size)

    def step_times(self, model: str, shape: Shape, atomic_bsz: int
                   ) -> tuple[float, float] | None:
        """The profile's (step, sync) seconds on the placement (None: outside it)."""
        try:
            return self._p[model].step_time(shape.per_node, atomic_bsz)
        except ValueError:
            return None

    def grad_stats(self, model: str, batch_size: int, progress: float) -> GradParams | None:
        """Gradient statistics of the epoch at `progress` samples (None: outside)."""
        return self._grad(self._p[model], batch_size, progress)

    def max_gpus(self, model: str, batch_size: int | None, adaptive: bool) -> int | None:
        """Most GPUs at `min_local_bsz` each (Pollux's simulator).

        max_batch_size // min_local_bsz for an adaptive job, its batch // min_local_bsz
        for a fixed one.
        """
        p = self._p[model]
        batch = p.max_batch_size if adaptive else (batch_size or p.init_batch_size)
        return max(1, int(batch // p.min_local_bsz))

    def horizon(self, model: str, batch_size: int | None, progress: float) -> float:
        """The next epoch boundary, in samples (its gradient statistics change there)."""
        p = self._p[model]
        epoch = p.epoch(progress / p.init_batch_size)
        if epoch >= p.max_epochs:
            return math.inf
        return p.progress(epoch + 1) * p.init_batch_size
