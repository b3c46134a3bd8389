"""The run's current instant as a native field, beside SimPy's clock (`sim.lifecycle.Clock`).

The engine moves SimPy's clock (`env._now`) and this one together, and takes SimPy's
again after each yield of its process (a stepped run's driver may move time meanwhile).
The parts of the engine that read the time at every event (recording, progress, the job
lifecycle) read `t`: compiled, a field of a native object, where SimPy's `_now` is an
entry of the instance dictionary of an interpreted class, about 25 ns a read and some
fifteen reads a job. Policies and speed factors read `ctx.now` and `RunView.now`, which
are SimPy's own.
"""

from __future__ import annotations


class Instant:
    """Where the engine's clock stands (`t`, s); calling it gives `t` (a clock callable)."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        """`t`, for a reader that takes any clock callable."""
        return self.t
