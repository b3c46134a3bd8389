"""Fair-share of Slurm's priority/multifactor plugin: usage with decay, classic and fair tree.

Usage (`_apply_new_usage`, priority_multifactor.c): a running job adds `run_delta x
billing x decay^run_delta` to its association and every ancestor, where `decay = 1 -
0.693 / PriorityDecayHalfLife` per second; every PriorityCalcPeriod `_decay_thread`
first multiplies all usage by `decay^(elapsed)`. Classic (`PriorityFlags=NO_FAIR_TREE`):
`shares_norm` is the product of S/siblings' S down the tree
(`_normalize_assoc_shares_traditional`), `usage_norm = U / U_root`, effective usage
`U_eff = U_norm + (U_eff_parent - U_norm) x S / S_siblings` (`_set_usage_efctv`; a child
of root takes its own `U_norm`), and `F = 2^(-U_eff / shares_norm)`
(`_set_assoc_fs_factor`). Fair tree (fair_tree.c `_calc_tree_fs`): at each level the
level fair-share `LF = S_level / U_level` (`S_level = S / siblings' S`, `U_level = U /
U_parent`), siblings sorted by LF (users before accounts on ties, tied accounts' children
merged), users ranked depth-first from the number of users down, `F = rank / users`.
"""

from __future__ import annotations

import math

from schedlab.policies.slurm.accounts import Assoc


def decay_factor(half_life: float) -> float:
    """Per-second decay (`_decay_thread`): 1 - 0.693 / half-life, 1 without decay."""
    return 1.0 - 0.693 / half_life if half_life > 0 else 1.0


def add_usage(assoc: Assoc, amount: float) -> None:
    """Add usage to an association and its ancestors (root included)."""
    a: Assoc | None = assoc
    while a is not None:
        a.usage += amount
        a = a.parent


def decay_all(root: Assoc, factor: float) -> None:
    """Multiply every association's usage by `factor` (`_apply_decay`)."""
    stack = [root]
    while stack:
        a = stack.pop()
        a.usage *= factor
        stack.extend(a.children)


def _level_shares(a: Assoc) -> int:
    return sum(c.shares for c in a.parent.children) if a.parent else a.shares


def classic(root: Assoc) -> None:
    """Set each user's `fs_factor` by the classic algorithm (module doc)."""
    for c in root.children:
        _classic_visit(c, root.usage, 0.0, 1.0, True)


def _classic_visit(a: Assoc, total: float, ue_parent: float, norm_parent: float,
                   top: bool) -> None:
    """`_set_usage_efctv` and `_set_assoc_fs_factor` for `a` and below, iteratively."""
    stack = [(a, ue_parent, norm_parent, top)]
    while stack:
        a, ue_parent, norm_parent, top = stack.pop()
        level = _level_shares(a)
        share = a.shares / level if level else 0.0
        norm = norm_parent * share if level else 0.0
        un = min(1.0, a.usage / total) if total else 0.0
        if top:
            ue = un
        elif not level:
            ue = ue_parent
        else:
            ue = un + (ue_parent - un) * share
        if a.user:
            a.fs_factor = 0.0 if norm <= 0 else 2.0 ** (-(ue / norm))
        stack.extend((c, ue, norm, False) for c in a.children)


def _level_fs(a: Assoc) -> float:
    """Fair tree's level fair-share S/U of an association (`_calc_assoc_fs`)."""
    level = _level_shares(a)
    s = a.shares / level if level else 0.0
    p = a.parent.usage if a.parent else 0.0
    u = a.usage / p if p else 0.0
    if s == 0:
        return 0.0
    return math.inf if u == 0 else s / u


def _sort_key(t: tuple[float, Assoc]) -> tuple[float, bool]:
    return (-t[0], not t[1].user)


def fair_tree(root: Assoc) -> None:
    """Set each user's `fs_factor` by the fair-tree algorithm (module doc)."""
    users = _count_users(root)
    if users:
        _fair_tree_walk(list(root.children), False, [users, users], users)


def _fair_tree_walk(siblings: list[Assoc], tied_start: bool, state: list[int],
                    users: int) -> None:
    """`_calc_tree_fs`: rank users depth-first; state is [rank, rank-not-tied]."""
    keyed = sorted(((_level_fs(a), a) for a in siblings), key=_sort_key)
    prev = None
    i = 0
    while i < len(keyed):
        value, a = keyed[i]
        tied = tied_start if i == 0 else prev == value
        prev = value
        if a.user:
            if not tied:
                state[0] = state[1]
            a.fs_factor = state[0] / users
            state[1] -= 1
            i += 1
            continue
        j = i + 1  # accounts tied with this one: their children merged
        while j < len(keyed) and not keyed[j][1].user and keyed[j][0] == value:
            j += 1
        merged = [c for _, b in keyed[i:j] for c in b.children]
        if merged:
            _fair_tree_walk(merged, tied, state, users)
        i = j


def _count_users(root: Assoc) -> int:
    n, stack = 0, [root]
    while stack:
        a = stack.pop()
        n += a.user
        stack.extend(a.children)
    return n
