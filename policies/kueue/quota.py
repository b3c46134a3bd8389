"""Kueue's quota tree: ClusterQueues and Cohorts as resource nodes with usage.

A port of the arithmetic of Kueue's `pkg/cache/scheduler/resource_node.go` and
`fair_sharing.go`: a node's subtree quota is its nominal quota plus what its children lend
it (their subtree quota minus the part their `lendingLimit` keeps local); usage beyond a
node's local quota bubbles up to its parent; `available` walks to the root, capped by
each node's `borrowingLimit`. Amounts are floats holding Kueue's integers (GPUs,
millicores, bytes) and `math.inf` for unlimited.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from schedlab.policies.kueue.config import Quota

FR = tuple[str, str]  # (flavor, resource)
_NO_QUOTA = Quota(0.0)


class Node:
    """A ClusterQueue (`is_cq`) or a Cohort in the tree, with its quotas and usage."""

    __slots__ = ("name", "is_cq", "quotas", "subtree", "usage", "parent", "child_cohorts",
                 "child_cqs", "weight")

    def __init__(self, name: str, is_cq: bool, quotas: Mapping[FR, Quota],
                 weight: float = 1.0) -> None:
        self.name = name
        self.is_cq = is_cq
        self.quotas: dict[FR, Quota] = dict(quotas)
        self.subtree: dict[FR, float] = {}
        self.usage: dict[FR, float] = {}
        self.parent: Node | None = None
        self.child_cohorts: list[Node] = []
        self.child_cqs: list[Node] = []
        self.weight = weight

    def __repr__(self) -> str:
        return f"{'ClusterQueue' if self.is_cq else 'Cohort'}/{self.name}"

    def quota(self, fr: FR) -> Quota:
        """The quota of `fr` (zero when not declared)."""
        return self.quotas.get(fr, _NO_QUOTA)

    def path_to_root(self) -> Iterator[Node]:
        """The ancestors, parent first."""
        n = self.parent
        while n is not None:
            yield n
            n = n.parent

    def root(self) -> Node:
        """The root cohort (itself without a parent)."""
        n = self
        while n.parent is not None:
            n = n.parent
        return n

    def subtree_cqs(self) -> Iterator[Node]:
        """Every ClusterQueue below this node (itself when it is one)."""
        if self.is_cq:
            yield self
            return
        for c in self.child_cohorts:
            yield from c.subtree_cqs()
        yield from self.child_cqs

    # --- resource_node.go ---

    def local_quota(self, fr: FR) -> float:
        """What `lendingLimit` keeps for this subtree, never lent to the parent."""
        ll = self.quota(fr).lending_limit
        if ll is None:
            return 0.0
        return max(0.0, self.subtree.get(fr, 0.0) - ll)

    def local_available(self, fr: FR) -> float:
        """Unused local quota."""
        return max(0.0, self.local_quota(fr) - self.usage.get(fr, 0.0))

    def available(self, fr: FR) -> float:
        """What this node may still use of `fr`, counting borrowing limits up the tree."""
        if self.parent is None:
            return self.subtree.get(fr, 0.0) - self.usage.get(fr, 0.0)
        parent_available = self.parent.available(fr)
        bl = self.quota(fr).borrowing_limit
        if bl is not None:
            lq = self.local_quota(fr)
            stored = self.subtree.get(fr, 0.0) - lq
            used = max(0.0, self.usage.get(fr, 0.0) - lq)
            parent_available = min(stored - used + bl, parent_available)
        return self.local_available(fr) + parent_available

    def potential_available(self, fr: FR) -> float:
        """The most this node could use of `fr` with nothing used anywhere."""
        if self.parent is None:
            return self.subtree.get(fr, 0.0)
        avail = self.local_quota(fr) + self.parent.potential_available(fr)
        bl = self.quota(fr).borrowing_limit
        if bl is not None:
            avail = min(self.subtree.get(fr, 0.0) + bl, avail)
        return avail

    def add_usage(self, fr: FR, val: float) -> None:
        """Charge `val` of `fr`; what exceeds the local quota goes up."""
        local = self.local_available(fr)
        self.usage[fr] = self.usage.get(fr, 0.0) + val
        if self.parent is not None and val > local:
            self.parent.add_usage(fr, val - local)

    def remove_usage(self, fr: FR, val: float) -> None:
        """Release `val` of `fr`, from the parent first for what was stored there."""
        stored = self.usage.get(fr, 0.0) - self.local_quota(fr)
        self.usage[fr] = self.usage.get(fr, 0.0) - val
        if stored <= 0 or self.parent is None:
            return
        self.parent.remove_usage(fr, min(val, stored))

    def borrowing_with(self, fr: FR, val: float) -> bool:
        """Whether usage plus `val` exceeds the subtree quota of `fr`."""
        return self.subtree.get(fr, 0.0) < self.usage.get(fr, 0.0) + val

    def borrowing(self, fr: FR) -> bool:
        """Whether usage already exceeds the subtree quota of `fr`."""
        return self.borrowing_with(fr, 0.0)

    def within_nominal(self, frs: Iterable[FR]) -> bool:
        """IsWithinNominalInResources: usage at most the subtree quota in every `fr`."""
        return all(self.subtree.get(fr, 0.0) >= self.usage.get(fr, 0.0) for fr in frs)

    def height(self) -> int:
        """getNodeHeight: 1 for a cohort of ClusterQueues, one more per cohort level."""
        h = min(len(self.child_cohorts) + len(self.child_cqs), 1)
        for c in self.child_cohorts:
            h = max(h, c.height() + 1)
        return h

    # --- fair_sharing.go ---

    def drs(self, extra: Mapping[FR, float] | None = None) -> tuple[float, bool]:
        """Dominant resource share (ratio x 1000, unweighted, as Kueue) and if it borrows.

        `extra` is a workload's usage added for the computation.
        """
        if self.parent is None:
            return 0.0, False
        borrowed: dict[str, float] = {}
        for fr, q in self.subtree.items():
            b = (extra.get(fr, 0.0) if extra else 0.0) + self.usage.get(fr, 0.0) - q
            if b > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0.0) + b
        if not borrowed:
            return 0.0, False
        root = self.root()
        lendable: dict[str, float] = {}
        for fr in root.subtree:
            lendable[fr[1]] = lendable.get(fr[1], 0.0) + self.parent.potential_available(fr)
        ratio = 0.0
        for r, b in borrowed.items():
            lr = lendable.get(r, 0.0)
            if lr > 0:
                ratio = max(ratio, b * 1000.0 / lr)
        return ratio, True

    def weighted_share(self, extra: Mapping[FR, float] | None = None) -> tuple[int, float]:
        """A DRS as a sort key (CompareDRS): zero-weight borrowers last, then the share."""
        ratio, _ = self.drs(extra)
        return share_key(ratio, self.weight)


def share_key(ratio: float, weight: float) -> tuple[int, float]:
    """CompareDRS as a tuple: (zero-weight and borrowing, weighted share)."""
    if ratio == 0:
        return (0, 0.0)
    if weight == 0:
        return (1, ratio)
    return (0, ratio / weight)


def is_inf(key: tuple[int, float]) -> bool:
    """PreciseWeightedShare is +Inf (a zero-weight node that borrows)."""
    return key[0] == 1 or math.isinf(key[1])


def build_subtree(node: Node) -> None:
    """updateCohortResourceNode: subtree quotas bottom up (usage starts at zero)."""
    node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
    for child in [*node.child_cohorts, *node.child_cqs]:
        build_subtree(child)
        for fr, cq in child.subtree.items():
            node.subtree[fr] = node.subtree.get(fr, 0.0) + cq - child.local_quota(fr)


def lowest_fitting_height(cq: Node, fr: FR, val: float) -> tuple[int, bool]:
    """FindHeightOfLowestSubtreeThatFits: the borrowing level of `val` of `fr`.

    0 when it fits in the ClusterQueue's own quota, else the height of the lowest cohort
    whose subtree quota holds it; and whether a cohort above that one exists (reclaiming
    may then happen in the hierarchy).
    """
    if not cq.borrowing_with(fr, val) or cq.parent is None:
        return 0, cq.parent is not None
    remaining = val - cq.local_available(fr)
    for node in cq.path_to_root():
        if not node.borrowing_with(fr, remaining):
            return node.height(), node.parent is not None
        remaining -= node.local_available(fr)
    return cq.root().height(), False


def fits_in_quota(node: Node, requests: Mapping[FR, float]) -> tuple[bool, dict[FR, float]]:
    """QuantitiesFitInQuota: whether `requests` fit in the node's subtree quota.

    Also what is left over its local quota, for its parent.
    """
    fits = True
    rest: dict[FR, float] = {}
    for fr, v in requests.items():
        if node.subtree.get(fr, 0.0) < node.usage.get(fr, 0.0) + v:
            fits = False
        rest[fr] = max(0.0, v - node.local_available(fr))
    return fits, rest
