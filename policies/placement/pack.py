"""`pack`: the tightest cell that fits, spreading over nodes only when it must."""

from __future__ import annotations

from schedlab.policies.placement.base import BasePlacer


class PackPlacer(BasePlacer):
    """Tightest cell first; ties to the fullest switch, socket, node; spreads if it must.

    Tightest means the lowest common level, then the fewest free GPUs at that level.
    """

    name = "pack"
    spread = True
