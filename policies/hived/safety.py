"""HiveD's VC safety check: the initial VC assignment must fit in the physical cells.

Per chain, top level down: the cells left at a level are those not promised to VCs at
that level; each splits into its children for the level below (HiveD's `initCellNums`).
VCs are added one by one in config order so the error names the first VC that breaks it.
"""

from __future__ import annotations

from collections.abc import Mapping

from schedlab.policies.hived.config import ChainInfo, VcCells
from schedlab.sim.errors import InvalidTopology


def demand(vcs: Mapping[str, VcCells], cells_of: Mapping[int, tuple[str, int]]
           ) -> dict[str, dict[str, dict[int, int]]]:
    """Cells each VC asks for: vc -> chain -> level -> count (pinned cells included)."""
    out: dict[str, dict[str, dict[int, int]]] = {}
    for name, vc in vcs.items():
        d = out.setdefault(name, {})
        for chain, level, n in vc.cells:
            lv = d.setdefault(chain, {})
            lv[level] = lv.get(level, 0) + n
        for _pid, cid in vc.pinned:
            chain, level = cells_of[cid]
            lv = d.setdefault(chain, {})
            lv[level] = lv.get(level, 0) + 1
    return out


def shortfall(info: ChainInfo, need: Mapping[int, int]) -> tuple[int, int, int] | None:
    """(level, needed, available) at the first level the cells cannot back, else None."""
    available = info.tops
    for level in range(info.top_level, 0, -1):
        n = need.get(level, 0)
        left = available - n
        if left < 0:
            return level, n, available
        available = left * info.children[level] if level > 1 else left
    return None


def check_vc_safety(chains: Mapping[str, ChainInfo],
                    wants: Mapping[str, Mapping[str, Mapping[int, int]]],
                    source: str = "") -> None:
    """Raise InvalidTopology naming the VC, chain and level when VCs cannot be backed."""
    where = f"{source}: " if source else ""
    for vc, per_chain in wants.items():
        for chain in per_chain:
            if chain not in chains:
                raise InvalidTopology(
                    f"{where}VC {vc!r}: chain {chain!r} does not exist in the physical "
                    f"cluster; allowed: {', '.join(chains)}")
    for chain, info in chains.items():
        total: dict[int, int] = {}
        before: list[str] = []
        for vc, per_chain in wants.items():
            mine = per_chain.get(chain)
            if not mine:
                continue
            for level, n in mine.items():
                total[level] = total.get(level, 0) + n
            bad = shortfall(info, total)
            if bad is not None:
                level, n, available = bad
                others = before
                raise InvalidTopology(
                    f"{where}VC {vc!r} cannot be backed by the physical cluster (HiveD VC "
                    f"safety): chain {chain!r} level {level} (cell type "
                    f"{info.types[level]!r}, {info.topo_levels[level].label}): the VCs "
                    f"need {n} cells there ({vc!r} with "
                    f"{', '.join(repr(v) for v in others[:3]) or 'no other VC'}"
                    f"{'...' if len(others) > 3 else ''}), only {available} are left after "
                    "the levels above; allowed: VC cells that fit in the physical cells")
            before.append(vc)
