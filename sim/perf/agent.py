"""A job's own view of its speed, as Pollux's agent keeps it: a model fitted to what it ran.

Under `perf_agent=fitted` a job that names a model of a backend with step times
(`StepTimes`: Pollux's profiles) does not know its performance model. Like Pollux's
agent (petuum/adaptdl, `simulator/simulator.py` `Job`), it records the (step, sync) time
of every (nodes, GPUs, atomic batch) it runs at, refits Pollux's seven step-time
parameters to them at each new one (`fit_perf_params`), and keeps the gradient statistics
of its current batch and epoch. Its adaptive batch size is `optimize` of that fitted
goodput (before any measurement: max(initial batch, min_local_bsz x GPUs)), and what the
scheduler reads (`ctx.perf.goodput`) is the fitted goodput: with few measurements the
fit is optimistic about more GPUs (no sync time seen, no retrogression), so jobs grow
sooner. The job's true speed is still the backend's at the batch it picked.

As in Pollux's simulator, a job re-picks its batch after each step of running (`STEP`; the
first on a placement after `FIRST_STEP`, the rest of its step being the restart), as long
as the last step taught it something (a new configuration or new gradient statistics),
and at every epoch boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from schedlab.sim.perf.base import Shape
from schedlab.sim.perf.pollux_goodput import (
    GoodputModel,
    GradParams,
    PerfParams,
    cap_atomic_bsz,
    fit_perf_params,
)

__all__ = ["AGENTS", "BatchLimits", "FittedAgent", "FIRST_STEP", "STEP", "StepTimes"]

AGENTS = ("oracle", "fitted")
"""Values of the run parameter `perf_agent`."""

STEP = 60.0
"""Seconds of running between an agent's re-picks (Pollux's simulator steps 60 s)."""

FIRST_STEP = 30.0
"""Seconds of running before the first re-pick on a placement (its 60 s step less the
30 s rescale)."""


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """A model's batch sizes: initial and largest global, smallest and largest per GPU."""

    init: int
    max_batch: int
    min_local: int
    max_local: int


@runtime_checkable
class StepTimes(Protocol):
    """A backend whose profiles give the step times a job would measure (Pollux's)."""

    def batch_limits(self, model: str) -> BatchLimits:
        """The model's batch-size limits."""
        ...

    def split(self, model: str, num_gpus: int, batch_size: int) -> tuple[int, int]:
        """(atomic batch, accumulation steps) a global batch runs as on `num_gpus`."""
        ...

    def step_times(self, model: str, shape: Shape, atomic_bsz: int
                   ) -> tuple[float, float] | None:
        """(optimizer step, its all-reduce part) in seconds (None: not profiled)."""
        ...

    def grad_stats(self, model: str, batch_size: int, progress: float) -> GradParams | None:
        """Gradient (sqr, var) at a global batch size and progress (None: unknown)."""
        ...


class FittedAgent:
    """One job's measured step times, its fit and its gradient statistics."""

    def __init__(self, backend: StepTimes, model: str, adaptive: bool,
                 batch_size: int | None) -> None:
        self.backend = backend
        self.model = model
        self.adaptive = adaptive
        self.fixed = batch_size
        self.limits = backend.batch_limits(model)
        self.profile: dict[tuple[int, int, int], tuple[float, float]] = {}
        self.perf: PerfParams | None = None
        self.grad: GradParams | None = None
        self._memo: dict[tuple[int, int], float] = {}

    # --- what the job does

    def pick(self, shape: Shape) -> int:
        """The global batch the job runs with on `shape` (Pollux's `update_local_bsz`)."""
        lim, r = self.limits, shape.num_gpus
        if not self.adaptive and self.fixed:
            return self.fixed
        if self.perf is None or self.grad is None:
            batch = max(lim.init, lim.min_local * r)
            atomic, accum = self.backend.split(self.model, r, batch)
        else:
            c = self._fitted().optimize(shape.num_nodes, r, lim.max_batch, lim.min_local,
                                        lim.max_local, accumulation=True)
            atomic, accum = c.atomic_bsz, c.accum_steps
        atomic = cap_atomic_bsz(atomic, accum, r, lim.max_batch)
        return max(1, r * atomic * (accum + 1))

    def observe(self, shape: Shape, batch_size: int, progress: float) -> bool:
        """Record a run at `batch_size` on `shape`; True when the fit or gradient changed."""
        b, r = self.backend, shape.num_gpus
        grad = b.grad_stats(self.model, batch_size, progress)
        moved = grad is not None and grad != self.grad
        if moved:
            self.grad = grad
            self._memo.clear()
        atomic, _ = b.split(self.model, r, batch_size)
        key = (shape.num_nodes, r, atomic)
        if key in self.profile:
            return moved
        times = b.step_times(self.model, shape, atomic)
        if times is None or not times[0] - times[1] > 0:
            return moved
        step, sync = times
        self.profile[key] = (step - sync, step)
        keys = list(self.profile)
        vals = list(self.profile.values())
        self.perf = fit_perf_params([k[0] for k in keys], [k[1] for k in keys],
                                    [k[2] for k in keys], [v[0] for v in vals],
                                    [v[1] for v in vals])
        self._memo.clear()
        return True

    def step(self, shape: Shape, progress: float, current: int | None) -> tuple[int, bool]:
        """The batch to run next on `shape`, and whether a step there will teach it more.

        `current`: the batch it has run with on `shape` since it was placed there (None:
        it was just placed). As Pollux's `Job.step`: the statistics of now, the pick from
        the fit, and the pick measured (a refit when new). True means a re-pick is due
        after one more step of running (`STEP`).
        """
        if current is not None:
            self.observe(shape, current, progress)
        batch = self.pick(shape)
        return batch, self.observe(shape, batch, progress)

    # --- what the job reports to the scheduler

    @property
    def fitted(self) -> bool:
        """Whether the job has measured anything yet."""
        return self.perf is not None and self.grad is not None

    def _fitted(self) -> GoodputModel:
        assert self.perf is not None and self.grad is not None
        return GoodputModel(self.perf, self.grad, float(self.limits.init))

    def goodput(self, num_nodes: int, num_gpus: int) -> float:
        """The fitted goodput on (nodes, GPUs): at the best batch when adaptive.

        Samples per second at the initial batch's efficiency (the backend's units).
        """
        key = (num_nodes, num_gpus)
        got = self._memo.get(key)
        if got is not None:
            return got
        lim, m = self.limits, self._fitted()
        if not self.adaptive and self.fixed:
            atomic, accum = self.backend.split(self.model, num_gpus, self.fixed)
            atomic = cap_atomic_bsz(atomic, accum, num_gpus, lim.max_batch)
            got = float(m.goodput(num_nodes, num_gpus, atomic, accum))
        elif lim.init > lim.max_batch or lim.min_local * num_gpus > lim.max_batch:
            got = 0.0
        else:
            got = m.optimize(num_nodes, num_gpus, lim.max_batch, lim.min_local,
                             lim.max_local, accumulation=True).goodput
        got = got if math.isfinite(got) else 0.0
        self._memo[key] = got
        return got
