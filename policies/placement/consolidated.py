"""`consolidated` (the engine's default): pack, but never spread a job it could consolidate."""

from __future__ import annotations

from schedlab.policies.placement.base import BasePlacer


class ConsolidatedPlacer(BasePlacer):
    """Like pack, but never spreads a job over more nodes than its size needs: it waits."""

    name = "consolidated"
    spread = False
