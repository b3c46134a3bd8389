"""HiveD's cell model: physical and virtual cells, priorities, usage counts and free lists.

Levels are HiveD's chain levels: 1 is a leaf (one GPU), each parent one more. A cell's
`used` maps a priority to the leaves used at that priority in its subtree (updated for a
cell and its ancestors), as in HiveD's `usedLeafCellNumAtPriorities`. Only leaves carry a
priority of their own (`prio`): FREE, OPP (an opportunistic job) or the guaranteed
priority 0..1000 of the job using it.

`FreeList` is the buddy free list of one chain: cells per level in HiveD's order (a cell
joins at the end; one leaves by swap-with-last, HiveD's `CellList.remove`), so buddy
allocation picks the cells HiveD picks. Taking a cell splits its free ancestor down to
it; giving it back merges it with its buddies when all are free.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Self

FREE: Final = -2  # a leaf no job uses
OPP: Final = -1  # opportunistic (trace priority -1)
MIN_GUARANTEED: Final = 0
MAX_GUARANTEED: Final = 1000


class Cell:
    """What physical and virtual cells share: tree links, level and usage counts."""

    __slots__ = ("chain", "level", "parent", "children", "total", "used", "order", "prio",
                 "name", "view", "vpos", "_leaves")

    def __init__(self, chain: str, level: int, total: int, order: int, name: str) -> None:
        self.chain = chain  # the chain it belongs to (a tree never spans chains)
        self.level = level  # 1: a leaf (one GPU); a parent is one level up
        # tree links, fixed once the tree is built; children in topology order
        self.parent: Self | None = None
        self.children: list[Self] = []
        self.total = total  # leaves under the cell (1 for a leaf)
        # priority -> leaves of the subtree used at it (OPP or guaranteed; never FREE, never
        # a zero count): a leaf is used by at most one gang, so the counts sum to <= total
        self.used: dict[int, int] = {}
        self.order = order  # position for deterministic tie-breaks
        # leaves only: FREE, or the priority the leaf is used at (its one `used` key);
        # cells above the leaves keep FREE
        self.prio = FREE
        self.name = name
        self.view: Any = None  # the NodeIndex of the cluster view this cell is a node of
        self.vpos = -1  # its position in that view
        self._leaves: tuple[Self, ...] | None = None  # `leaf_cells`, once asked for

    def max_prio(self) -> int:
        """The highest priority using a leaf of this cell (FREE when none)."""
        return max(self.used) if self.used else FREE

    def leaves(self) -> list[Self]:
        """The leaf cells under this cell, left to right."""
        return list(self.leaf_cells())

    def leaf_cells(self) -> tuple[Self, ...]:
        """The leaf cells under this cell, left to right, computed once.

        A tree never changes once built, and searches ask for a node's leaves often.
        """
        got = self._leaves
        if got is not None:
            return got
        if not self.children:
            got = (self,)
        else:
            out: list[Self] = []
            stack = [self]
            while stack:
                c = stack.pop()
                if c.children:
                    stack.extend(reversed(c.children))
                else:
                    out.append(c)
            got = tuple(out)
        self._leaves = got
        return got

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, level={self.level})"


class PCell(Cell):
    """A cell of the physical cluster (one per topology cell below the root)."""

    __slots__ = ("id", "node", "gpu", "vcell", "split", "pinned", "healthy", "group",
                 "reserver", "in_free", "free_pos", "multi_node", "doomed")

    def __init__(self, chain: str, level: int, total: int, order: int, name: str,
                 cell_id: int, node: int, gpu: int, multi_node: bool) -> None:
        super().__init__(chain, level, total, order, name)
        self.id = cell_id  # topology cell id
        self.node = node  # topology node index (-1 above node level)
        self.gpu = gpu  # GPU index for a leaf, -1 otherwise
        # bound virtual cell, of the same level, whose `pcell` is this cell; None when
        # unbound. Bound: a cell allocated to a VC and, below it, the cells its gangs use
        # (with their ancestors up to it), a pinned cell, a doomed cell, and a bad cell
        # inside a bound one (so that the VC sees the failure)
        self.vcell: VCell | None = None
        # buddy allocation split it: its children, not it, are (or were taken from) the
        # free list; cleared when they merge back
        self.split = False
        self.pinned = False  # a VC's pinned cell (the tree's root only): bound all run
        # False when the cell or any cell below it is bad (a cell is healthy again when
        # all its children are)
        self.healthy = True
        # leaves only: index of the gang running on the leaf (a key of the algorithm's
        # `groups`), -1 when none; while a preemptor has reserved the leaf, the victim
        self.group = -1
        # leaves only: index of the preempting gang the leaf is reserved for (HiveD's
        # Reserving/Reserved), -1 otherwise; back to -1 when that gang takes the leaf
        # (`group` then names it) or is cancelled
        self.reserver = -1
        self.in_free = False  # listed in its chain's free list (at `free_pos`)
        self.free_pos = -1  # index in its level's free list while in_free
        self.multi_node = multi_node  # above node level (a rack of nodes)
        # allocated to one of a VC's free preassigned cells because it is bad (HiveD's
        # doomed bad cell); True exactly while in that VC's `vc_doomed` list
        self.doomed = False


class VCell(Cell):
    """A cell of a virtual cluster; bound to a physical cell while in use."""

    __slots__ = ("vc", "preassigned", "pcell", "pinned_id")

    def __init__(self, chain: str, level: int, total: int, order: int, name: str,
                 vc: str, pinned_id: str = "") -> None:
        super().__init__(chain, level, total, order, name)
        self.vc = vc  # the VC whose tree it is in
        self.preassigned: VCell = self  # top-level ancestor (the VC's unit of quota)
        # bound physical cell, of the same level, whose `vcell` is this cell; None when
        # unbound. A bound cell's parent is bound too (up to the preassigned cell)
        self.pcell: PCell | None = None
        self.pinned_id = pinned_id  # the pinned cell its tree stands for ("" if none)

    @property
    def healthy(self) -> bool:
        """A virtual cell is bad when it is bound to a bad physical cell."""
        return self.pcell is None or self.pcell.healthy


def add_used(cell: Cell | None, prio: int, delta: int) -> None:
    """Count `delta` leaves used at `prio` on a cell and its ancestors (and their views)."""
    while cell is not None:
        used = cell.used
        n = used.get(prio, 0) + delta
        if n:
            used[prio] = n
        else:
            del used[prio]
        if cell.view is not None:  # only node cells have a view: one call a chain
            cell.view.changed(cell, prio, delta)
        cell = cell.parent


def swap_remove(cells: list, cell: Cell) -> None:
    """Remove `cell` from a list as HiveD's `CellList.remove` does: the last takes its place."""
    for i, c in enumerate(cells):
        if c is cell:
            cells[i] = cells[-1]
            cells.pop()
            return
    raise ValueError(f"cell {cell.name} is not in the list")


class FreeList:
    """Buddy free list of one chain: free physical cells per level, in HiveD's order."""

    def __init__(self, top_level: int) -> None:
        # level -> its free cells, in HiveD's order; a cell is listed exactly when its
        # `in_free` is set, at `free_pos`; a listed cell's ancestors are all split and
        # its descendants unlisted, and the children of a split cell are never all listed
        self.levels: dict[int, list[PCell]] = {lv: [] for lv in range(1, top_level + 1)}

    def add(self, cell: PCell) -> None:
        """Append a cell to the list of its level (no merging)."""
        lst = self.levels[cell.level]
        cell.free_pos = len(lst)
        lst.append(cell)
        cell.in_free = True

    def discard(self, cell: PCell) -> None:
        """Take a cell out of the list of its level by swap-with-last (no splitting)."""
        lst = self.levels[cell.level]
        i = cell.free_pos
        if not cell.in_free or i >= len(lst) or lst[i] is not cell:
            raise ValueError(f"cell {cell.name} is not in the free list of level {cell.level}")
        last = lst.pop()
        if last is not cell:
            lst[i] = last
            last.free_pos = i
        cell.in_free = False
        cell.free_pos = -1

    def take(self, cell: PCell) -> int:
        """Remove `cell` (free itself or under a free ancestor), splitting ancestors.

        Returns the highest level touched (HiveD's `splitLevelUpTo`).
        """
        c = cell
        while True:
            parent = c.parent
            if parent is None or parent.split:
                self.discard(c)
                return c.level
            for ch in parent.children:  # appended in child order, then c leaves
                self.add(ch)
            parent.split = True
            self.discard(c)
            c = parent

    def give(self, cell: PCell) -> int:
        """Return `cell`, merging it with its buddies while they are all free.

        Returns the highest level touched (HiveD's `mergeLevelUpTo`).
        """
        c = cell
        while True:
            parent = c.parent
            if parent is not None and all(b is c or b.in_free for b in parent.children):
                for b in parent.children:
                    if b is not c:
                        self.discard(b)
                parent.split = False
                c = parent
                continue
            self.add(c)
            return c.level

    def snapshot(self) -> dict[int, list[PCell]]:
        """A copy of the per-level lists for planning (HiveD's shallowCopy)."""
        return {lv: list(cells) for lv, cells in self.levels.items()}

    def cells(self) -> Iterable[PCell]:
        """Every free cell, level by level bottom up."""
        for lv in sorted(self.levels):
            yield from self.levels[lv]


def in_free_list(cell: PCell) -> bool:
    """True when the cell or an ancestor is in the free list (HiveD's inFreeCellList)."""
    c = cell
    while True:
        if c.vcell is not None or c.split:
            return False
        if c.parent is None or c.parent.split:
            return True
        c = c.parent
