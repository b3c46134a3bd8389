"""Kueue's flavor assignment: which ResourceFlavor each resource of a workload takes.

A port of `pkg/scheduler/flavorassigner/flavorassigner.go` for one pod set: per resource
group, the flavors are tried in order; each resource's mode is Fit (quota available,
perhaps borrowing), Preempt (a preemption simulation found targets: reclaim or
priority preemption), no candidates, or NoFit; a flavor's mode is its worst resource's;
`flavorFungibility` decides whether to stop at a flavor that needs borrowing
(`whenCanBorrow`) or preemption (`whenCanPreempt`) or try the next, keeping the best by
`isPreferred` (borrowing over preemption unless `preference` says otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schedlab.policies.kueue.config import ClusterQueue, Flavor, Fungibility
from schedlab.policies.kueue.quota import FR, Node, lowest_fitting_height

NOFIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
Mode = tuple[int, int]  # (preemption mode, borrowing level)
WORST: Mode = (NOFIT, 1 << 30)
BEST: Mode = (FIT, 0)

Oracle = Callable[[FR, float], tuple[int, int]]
"""SimulatePreemption for one flavor-resource and amount: (NO_CANDIDATES | PREEMPT |
RECLAIM, borrowing level after the preemptions)."""


@dataclass(slots=True)
class Assignment:
    """The flavors chosen for a workload's resources and how they were found."""

    mode: int = FIT  # representative: NOFIT, PREEMPT (incl. no candidates) or FIT
    borrow: int = 0  # Borrows(): the highest borrowing level over its resources
    usage: dict[FR, float] = field(default_factory=dict)
    preempt: set[FR] = field(default_factory=set)  # flavor-resources needing preemption
    gpu_type: str | None = None  # the GPU type of the GPU resource's flavor (None: any)
    reason: str = ""
    key: tuple[Any, ...] | None = None  # the request class, for the policy's memo
    gen: int = -1  # the quota state it was computed in
    tas: Flavor | None = None  # the flavor with a Topology the workload takes (TAS)
    tas_blocked: bool = False  # quota fits, its pods do not fit the nodes now (TAS)


def preferred(a: Mode, b: Mode, f: Fungibility) -> bool:
    """isPreferred: whether mode `a` is better than `b` under the fungibility settings."""
    if a[0] == NOFIT:
        return False
    if b[0] == NOFIT:
        return True
    if (a[0] == NO_CANDIDATES) != (b[0] == NO_CANDIDATES):
        return a[0] != NO_CANDIDATES
    if f.preference == "PreemptionOverBorrowing":
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def try_next(m: Mode, f: Fungibility) -> bool:
    """ShouldTryNextFlavor."""
    if m[0] in (NOFIT, NO_CANDIDATES):
        return True
    if m[0] in (PREEMPT, RECLAIM) and f.when_can_preempt == "TryNextFlavor":
        return True
    return m[1] != 0 and f.when_can_borrow == "TryNextFlavor"


def fits_quota(cq: Node, conf: ClusterQueue, fr: FR, val: float, oracle: Oracle,
               fair: bool) -> tuple[int, int, str]:
    """fitsResourceQuota: (mode, borrowing level, why not when not a plain fit)."""
    if val > cq.potential_available(fr):
        return NOFIT, 0, (f"insufficient quota for {fr[1]} in flavor {fr[0]}: {val:g} > "
                          f"maximum capacity {cq.potential_available(fr):g}")
    borrow, may_reclaim = lowest_fitting_height(cq, fr, val)
    if val <= cq.available(fr):
        return FIT, borrow, ""
    why = (f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
           f"{val - cq.available(fr):g} more needed")
    p = conf.preemption
    can_borrow_preempt = (p.borrow_within_cohort != "Never"
                          or (fair and p.reclaim_within_cohort != "Never"))
    if cq.quota(fr).nominal >= val or may_reclaim or can_borrow_preempt:
        mode, after = oracle(fr, val)
        return mode, after, why
    return NOFIT, borrow, why


def assign(requests: dict[str, float], cq: Node, conf: ClusterQueue,
           flavors: dict[str, Flavor], job_gpu_type: str, gpu_resource: str,
           oracle: Oracle, fair: bool, undeclared_nofit: bool,
           tas_check: Callable[[Flavor], str] | None = None) -> Assignment:
    """AssignFlavors for a one-pod-set workload.

    `tas_check`: why a flavor does not suit the workload's topology request ('' : it
    does), Kueue's checkPodSetAndFlavorMatchForTAS; such a flavor is skipped.
    """
    out = Assignment()
    reasons: list[str] = []
    rep_all: Mode = BEST
    covered = {r for g in conf.groups for r in g.covered}
    for r in requests:
        if r not in covered and undeclared_nofit:
            out.mode, out.reason = NOFIT, f"resource {r} unavailable in ClusterQueue"
            return out
    for g in conf.groups:
        req = {r: requests[r] for r in g.covered if requests.get(r, 0) > 0}
        if not req:
            continue
        best: dict[str, tuple[str, int]] | None = None
        best_mode = WORST
        best_flavor: Flavor | None = None
        for fq in g.flavors:
            fl = flavors[fq.flavor]
            if job_gpu_type and fl.gpu_type is not None and fl.gpu_type != job_gpu_type:
                reasons.append(f"flavor {fl.name} doesn't match node affinity")
                continue
            if tas_check is not None:
                why = tas_check(fl)
                if why:
                    reasons.append(why)
                    continue
            rep: Mode = BEST
            cur: dict[str, tuple[str, int]] = {}
            for r, v in req.items():
                mode, borrow, why = fits_quota(cq, conf, (fl.name, r), v, oracle, fair)
                if why:
                    reasons.append(why)
                m = (mode, borrow)
                if preferred(rep, m, conf.fungibility):
                    rep = m
                if rep[0] == NOFIT:
                    break
                cur[r] = (fl.name, mode)
            if not try_next(rep, conf.fungibility):
                best, best_mode, best_flavor = cur, rep, fl
                break
            if preferred(rep, best_mode, conf.fungibility):
                best, best_mode, best_flavor = cur, rep, fl
        if best is None or best_flavor is None or best_mode[0] == NOFIT:
            out.mode = NOFIT
            out.reason = "; ".join(reasons) or "no flavor of the resource group fits"
            return out
        if preferred(rep_all, best_mode, conf.fungibility):
            rep_all = best_mode
        out.borrow = max(out.borrow, best_mode[1])
        for r, (fname, mode) in best.items():
            out.usage[(fname, r)] = req[r]
            if mode != FIT:
                out.preempt.add((fname, r))
        if gpu_resource in req:
            out.gpu_type = best_flavor.gpu_type
        if best_flavor.topology is not None and (out.tas is None or gpu_resource in req):
            out.tas = best_flavor
    out.mode = FIT if not out.preempt else PREEMPT
    out.reason = "; ".join(reasons)
    return out
