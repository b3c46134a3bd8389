"""The run's one clock: the current instant as a native field (`t`, s).

The engine sets it; SimPy's environment (`schedlab.sim.lifecycle.Clock`) keeps its time in
it too, so a stepped run's driver and a user's processes move this same field. The code
that reads the time at every event (recording, progress, the job lifecycle) reads `t`:
compiled, a field of a native object is a cheap read where a property of an interpreted
class is a call.
"""

from __future__ import annotations


class Instant:
    """Where the run's clock stands (`t`, s); calling it gives `t` (a clock callable)."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        """`t`, for a reader that takes any clock callable."""
        return self.t
