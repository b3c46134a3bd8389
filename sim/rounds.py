"""Decision rounds (engine parameter `decision_round`): decide at round boundaries only.

The policy decides only at multiples of the round length; arrivals are held to the next.

Round-based schedulers (Blox's 300 s rounds, Gavel's 360 s) look at the cluster only at
round boundaries: a job that arrives mid-round is first seen at the next boundary, and
GPUs freed mid-round stay idle until then. With `decision_round` R > 0 the engine holds
every arrival to the first multiple of R at or after its submission (its submit time,
and so its queueing delay and JCT, are unchanged) and holds a pass only at multiples of
R; anything that happens in between (a completion, a policy's own timer) arms a pass at
the next boundary. R = 0 (default) changes nothing.
"""

from __future__ import annotations

import math
from typing import Final

from schedlab.sim.agenda import Agenda, Due

EPS: Final = 1e-9
"""Relative tolerance of "at a boundary" (boundaries are computed as k x R)."""


class Rounds:
    """The round boundaries of one run, and the pass armed at the next one."""

    __slots__ = ("length", "armed")

    def __init__(self, length: float) -> None:
        if not length > 0 or not math.isfinite(length):
            raise ValueError(f"decision_round: {length!r}; expected seconds > 0")
        self.length = float(length)
        self.armed = -math.inf  # the boundary a pass is armed at

    def next_boundary(self, t: float) -> float:
        """The first boundary at or after `t`."""
        k = math.ceil(t / self.length - EPS)
        return k * self.length

    def at_boundary(self, t: float) -> bool:
        """Whether `t` is a boundary (within EPS, relative)."""
        return abs(t - self.next_boundary(t)) <= EPS * max(1.0, abs(t))

    def open(self, t: float, agenda: Agenda) -> bool:
        """True at a boundary (the policy may decide); else arm a pass at the next one."""
        if self.at_boundary(t):
            return True
        b = self.next_boundary(t)
        if b != self.armed:
            self.armed = b
            agenda.schedule(b, Due.TIMER)
        return False

    def waiting(self, t: float) -> bool:
        """Whether a pass is armed at a later boundary (the run is not stuck)."""
        return self.armed > t
