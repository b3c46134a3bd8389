"""Which admitted workloads Kueue evicts so that a pending one fits.

Classical preemption follows `pkg/scheduler/preemption/preemption.go` and
`classical/{candidate_generator,hierarchical_preemption}.go`: candidates over which the
preemptor has a hierarchical advantage (it reclaims quota its own subtree lends),
priority candidates from borrowing queues of the cohort (`reclaimWithinCohort`,
`borrowWithinCohort` with `maxPriorityThreshold`), then its own ClusterQueue's
(`withinClusterQueue`); removed one by one until the workload fits, then the ones not
needed are put back (last removed first). Fair-sharing preemption follows
`fairPreemptions` with the strategies LessThanOrEqualToFinalShare (S2-a) and
LessThanInitialShare (S2-b) over the ClusterQueue ordering of `fairsharing/ordering.go`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

from schedlab.policies.kueue.config import ClusterQueue
from schedlab.policies.kueue.quota import FR, Node, fits_in_quota, is_inf, share_key
from schedlab.policies.kueue.workload import Workload, candidates_order

WITHIN_CQ = "InClusterQueue"
RECLAIM = "InCohortReclamation"
RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
FAIR = "InCohortFairSharing"


@dataclass(frozen=True, slots=True)
class Target:
    """A workload to evict and Kueue's reason for it."""

    workload: Workload
    reason: str


class Ctx:
    """What one preemption search needs.

    The preemptor, its queue, the flavor-resources needing preemption, its requests and
    the admitted workloads of every ClusterQueue (name -> {job index: workload}).
    """

    def __init__(self, pre: Workload, conf: ClusterQueue, frs: set[FR],
                 requests: Mapping[FR, float],
                 admitted: Mapping[str, Mapping[int, Workload]],
                 tas_fit: Callable[[], bool] | None = None) -> None:
        self.pre = pre
        self.tas_fit = tas_fit  # TAS: whether its pods fit the nodes the removed ones free
        self.cq = pre.cq
        self.conf = conf
        self.frs = frs
        self.requests = requests
        self.admitted = admitted

    def fits(self, allow_borrowing: bool) -> bool:
        """workloadFits: every request within what the ClusterQueue has available."""
        for fr, v in self.requests.items():
            if not allow_borrowing and self.cq.borrowing_with(fr, v):
                return False
            if v > self.cq.available(fr):
                return False
        return self.tas_fit is None or self.tas_fit()


def satisfies(policy: str, pre: Workload, cand: Workload) -> bool:
    """SatisfiesPreemptionPolicy."""
    if policy == "LowerPriority":
        return pre.priority > cand.priority
    if policy == "LowerOrNewerEqualPriority":
        return pre.priority > cand.priority or (
            pre.priority == cand.priority and pre.timestamp < cand.timestamp)
    return policy == "Any"


def _bwc_forbidden(conf: ClusterQueue) -> bool:
    return conf.preemption.borrow_within_cohort == "Never"


# --- classical ---

_NEVER, _WITHIN, _HIER, _WITHOUT_BORROW, _WHILE_BORROW = range(5)
_REASONS = {_WITHIN: WITHIN_CQ, _HIER: RECLAIM, _WITHOUT_BORROW: RECLAIM,
            _WHILE_BORROW: RECLAIM_WHILE_BORROWING}


def _variant(ctx: Ctx, w: Workload, advantage: bool) -> int:
    """ClassifyPreemptionVariant."""
    own = w.cq is ctx.cq
    policy = (ctx.conf.preemption.within_cluster_queue if own
              else ctx.conf.preemption.reclaim_within_cohort)
    if not satisfies(policy, ctx.pre, w) or not w.uses(ctx.frs):
        return _NEVER
    if own:
        return _WITHIN
    if advantage:
        return _HIER
    if _bwc_forbidden(ctx.conf):
        return _WITHOUT_BORROW
    thr = ctx.conf.preemption.max_priority_threshold
    if w.priority >= ctx.pre.priority or (thr is not None and w.priority > thr):
        return _WITHOUT_BORROW
    return _WHILE_BORROW


_Elem = tuple[Workload, "Node | None", int]  # (workload, lca, variant)


def _from_cq(ctx: Ctx, cq: Node, lca: Node | None, advantage: bool) -> list[_Elem]:
    out = []
    for w in ctx.admitted.get(cq.name, {}).values():
        v = _variant(ctx, w, advantage)
        if v != _NEVER:
            out.append((w, lca, v))
    return out


def _in_subtree(ctx: Ctx, cohort: Node, root: Node, skip: Node | None, advantage: bool,
                out: list[_Elem]) -> None:
    """CollectCandidatesInSubtree."""
    for child in cohort.child_cohorts:
        if child is skip or child.within_nominal(ctx.frs):
            continue
        _in_subtree(ctx, child, root, skip, advantage, out)
    for cq in cohort.child_cqs:
        if cq is ctx.cq:
            continue
        if not cq.within_nominal(ctx.frs):
            out.extend(_from_cq(ctx, cq, root, advantage))


def _hierarchical(ctx: Ctx, need_prio: bool = True) -> tuple[list[_Elem], list[_Elem]]:
    """collectCandidatesForHierarchicalReclaim: (hierarchy candidates, priority ones).

    `need_prio` False skips collecting the priority candidates (none could be used).
    """
    hier: list[_Elem] = []
    prio: list[_Elem] = []
    if ctx.cq.parent is None or ctx.conf.preemption.reclaim_within_cohort == "Never":
        return hier, prio
    advantage, rest = fits_in_quota(ctx.cq, ctx.requests)
    previous: Node | None = None
    for root in ctx.cq.path_to_root():
        if advantage or need_prio:
            _in_subtree(ctx, root, root, previous, advantage, hier if advantage else prio)
        fits, rest = fits_in_quota(root, rest)
        advantage = advantage or fits
        previous = root
    return hier, prio


def _valid(ctx: Ctx, e: _Elem, borrow: bool) -> bool:
    """candidateIsValid, against the usage left by the removals so far."""
    w, lca, variant = e
    if w.cq is ctx.cq:
        return True
    if borrow and variant == _WITHOUT_BORROW:
        return False
    if w.cq.within_nominal(ctx.frs):
        return False
    for node in w.cq.path_to_root():
        if node is lca:
            break
        if node.within_nominal(ctx.frs):
            return False
    return True


def _fill_back(ctx: Ctx, targets: list[Target], fits: Callable[[], bool]) -> list[Target]:
    """fillBackWorkloads: put back, last removed first, every target not needed."""
    for i in range(len(targets) - 2, -1, -1):
        targets[i].workload.add()
        if fits():
            targets[i] = targets[-1]
            targets.pop()
        else:
            targets[i].workload.remove()
    return targets


def _restore(targets: Iterable[Target]) -> None:
    for t in targets:
        t.workload.add()


def _enough(ctx: Ctx, cands: list[_Elem]) -> bool:
    """Whether evicting every candidate could free what is missing.

    A shortcut of ours: what a ClusterQueue has available grows by at most what is evicted.
    """
    for fr, v in ctx.requests.items():
        missing = v - ctx.cq.available(fr)
        if missing > 0 and sum(e[0].usage.get(fr, 0.0) for e in cands) < missing:
            return False
    return True


def classical(ctx: Ctx) -> list[Target]:
    """classicalPreemptions: the targets, or [] when the workload cannot fit."""
    key = candidates_order
    same = (_from_cq(ctx, ctx.cq, None, False)
            if ctx.conf.preemption.within_cluster_queue != "Never" else [])
    forbidden = _bwc_forbidden(ctx.conf)
    under_nominal = all(ctx.cq.quota(fr).nominal > ctx.cq.usage.get(fr, 0.0)
                        for fr in ctx.frs)
    # with borrowing forbidden and the queue at its nominal quota, only [True] is tried,
    # where every priority candidate (ReclaimWithoutBorrowing) is invalid
    hier, prio = _hierarchical(ctx, need_prio=not (forbidden and not under_nominal))
    for lst in (same, hier, prio):
        lst.sort(key=lambda e: key(e[0]))
    cands = hier + prio + same
    if (not hier and not prio) or (forbidden and not under_nominal):
        attempts = [True]
    elif forbidden and not hier:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for borrow in attempts:
        targets: list[Target] = []
        usable = [e for e in cands if not (borrow and e[2] == _WITHOUT_BORROW)]
        if not usable or not _enough(ctx, usable):
            continue
        for e in usable:
            if not _valid(ctx, e, borrow):
                continue
            e[0].remove()
            targets.append(Target(e[0], _REASONS[e[2]]))
            if ctx.fits(borrow):
                targets = _fill_back(ctx, targets, partial(ctx.fits, borrow))
                _restore(targets)
                return targets
        _restore(targets)
    return []


# --- fair sharing ---

def _share(n: Node) -> tuple[int, float]:
    r, _ = n.drs()
    return share_key(r, n.weight)


def _almost_lcas(pre_cq: Node, target_cq: Node) -> tuple[Node, Node]:
    """getAlmostLCAs: the children of the lowest common ancestor on either path."""
    pre_path = [pre_cq, *pre_cq.path_to_root()]
    tgt_path = [target_cq, *target_cq.path_to_root()]
    tgt_set = set(map(id, tgt_path))
    for i, n in enumerate(pre_path):
        if id(n) in tgt_set and i > 0:
            j = next(k for k, m in enumerate(tgt_path) if m is n)
            return pre_path[i - 1], tgt_path[j - 1] if j > 0 else target_cq
    return pre_cq, target_cq


class _Ordering:
    """TargetClusterQueueOrdering: ClusterQueues to take from, highest share first."""

    def __init__(self, pre_cq: Node, candidates: list[Workload]) -> None:
        self.pre_cq = pre_cq
        self.ancestors = set(map(id, pre_cq.path_to_root()))
        self.by_cq: dict[str, list[Workload]] = {}
        for w in candidates:
            self.by_cq.setdefault(w.cq.name, []).append(w)
        self.pruned_cqs: set[int] = set()
        self.pruned_cohorts: set[int] = set()

    def has(self, cq: Node) -> bool:
        return bool(self.by_cq.get(cq.name))

    def pop(self, cq: Node) -> Workload:
        return self.by_cq[cq.name].pop(0)

    def drop(self, cq: Node) -> None:
        self.pruned_cqs.add(id(cq))

    def __iter__(self) -> Iterator[Node]:
        if self.pre_cq.parent is None:
            while id(self.pre_cq) not in self.pruned_cqs and self.has(self.pre_cq):
                yield self.pre_cq
            return
        root = self.pre_cq.root()
        while id(root) not in self.pruned_cohorts:
            t = self._next(root)
            if t is not None:
                yield t

    def _next(self, cohort: Node) -> Node | None:
        best_cq: Node | None = None
        best_cq_share: tuple[int, float] = (0, -1.0)
        for cq in cohort.child_cqs:
            if id(cq) in self.pruned_cqs:
                continue
            ratio, borrowing = cq.drs()
            share = _share(cq)
            if (not borrowing and cq is not self.pre_cq) or not self.has(cq):
                self.pruned_cqs.add(id(cq))
            elif best_cq is not None and share == best_cq_share:
                a, b = self.by_cq[cq.name][0], self.by_cq[best_cq.name][0]
                if _cand_key(a, self.pre_cq) < _cand_key(b, self.pre_cq):
                    best_cq = cq
            elif share > best_cq_share:
                best_cq, best_cq_share = cq, share
        best_co: Node | None = None
        best_co_share: tuple[int, float] = (0, -1.0)
        for co in cohort.child_cohorts:
            if id(co) in self.pruned_cohorts:
                continue
            _, borrowing = co.drs()
            if not borrowing and id(co) not in self.ancestors:
                self.pruned_cohorts.add(id(co))
            elif _share(co) >= best_co_share:
                best_co, best_co_share = co, _share(co)
        if best_co is None and best_cq is None:
            self.pruned_cohorts.add(id(cohort))
            return None
        if best_co is not None and best_co_share >= best_cq_share:
            return self._next(best_co)
        return best_cq


def _cand_key(w: Workload, pre_cq: Node) -> tuple[bool, int, float, int]:
    """CandidatesOrdering across queues: other ClusterQueues first, then as in one list."""
    return (w.cq is pre_cq, *candidates_order(w))


def _strategy(name: str, pre_new: tuple[int, float], old: tuple[int, float],
              new: tuple[int, float]) -> bool:
    if name == "LessThanOrEqualToFinalShare":
        return pre_new <= new
    return pre_new < old


def fair(ctx: Ctx, strategies: tuple[str, ...]) -> list[Target]:
    """fairPreemptions: the targets, or [] when the strategies cannot make it fit."""
    cands: list[Workload] = []
    pol = ctx.conf.preemption
    if pol.within_cluster_queue != "Never":
        cands += [w for w in ctx.admitted.get(ctx.cq.name, {}).values()
                  if satisfies(pol.within_cluster_queue, ctx.pre, w) and w.uses(ctx.frs)]
    if ctx.cq.parent is not None and pol.reclaim_within_cohort != "Never":
        for cq in ctx.cq.root().subtree_cqs():
            if cq is ctx.cq or cq.parent is None or not any(cq.borrowing(fr)
                                                            for fr in ctx.frs):
                continue
            cands += [w for w in ctx.admitted.get(cq.name, {}).values()
                      if satisfies(pol.reclaim_within_cohort, ctx.pre, w)
                      and w.uses(ctx.frs)]
    if not cands:
        return []
    cands.sort(key=lambda w: _cand_key(w, ctx.cq))
    for fr, v in ctx.requests.items():  # DRS values include the incoming workload
        ctx.cq.add_usage(fr, v)

    def fits_fs() -> bool:
        for fr, v in ctx.requests.items():
            ctx.cq.remove_usage(fr, v)
        ok = ctx.fits(True)
        for fr, v in ctx.requests.items():
            ctx.cq.add_usage(fr, v)
        return ok

    within_nominal = not any(ctx.cq.borrowing(fr) for fr in ctx.frs)
    targets: list[Target] = []
    retry: list[Workload] = []
    done = False
    order = _Ordering(ctx.cq, cands)
    for cq in order:
        if cq is ctx.cq:  # InClusterQueuePreemption
            w = order.pop(cq)
            w.remove()
            targets.append(Target(w, WITHIN_CQ))
            if fits_fs():
                done = True
                break
            continue
        if within_nominal:
            w = order.pop(cq)
            w.remove()
            targets.append(Target(w, RECLAIM))
            if fits_fs():
                done = True
                break
            continue
        pre_lca, tgt_lca = _almost_lcas(ctx.cq, cq)
        pre_new, tgt_old = _share(pre_lca), _share(tgt_lca)
        if is_inf(pre_new) and not is_inf(tgt_old):
            while order.has(cq):
                retry.append(order.pop(cq))
            continue
        while order.has(cq):
            w = order.pop(cq)
            w.remove()
            tgt_new = _share(tgt_lca)
            if _strategy(strategies[0], pre_new, tgt_old, tgt_new):
                targets.append(Target(w, FAIR))
                if fits_fs():
                    done = True
                break
            w.add()
            retry.append(w)
        if done:
            break
    if not done and len(strategies) > 1:
        order = _Ordering(ctx.cq, retry)
        for cq in order:
            pre_lca, tgt_lca = _almost_lcas(ctx.cq, cq)
            passed = _share(pre_lca) < _share(tgt_lca)
            w = order.pop(cq)
            if passed:
                w.remove()
                targets.append(Target(w, FAIR))
                if fits_fs():
                    done = True
                    break
            order.drop(cq)
    for fr, v in ctx.requests.items():
        ctx.cq.remove_usage(fr, v)
    if not done:
        _restore(targets)
        return []
    targets = _fill_back(ctx, targets, lambda: ctx.fits(True))
    _restore(targets)
    return targets
