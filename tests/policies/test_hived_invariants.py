"""Invariants of HiveD's cell state under random sequences (hypothesis).

The buddy free list alone: a parent is split iff some descendant is taken, every leaf is
covered exactly once, never all buddies of a parent free (they would have merged). The
whole algorithm: bindings are symmetric, usage counts match the leaves, free lists and
the per-level counters agree, each VC's free-cell count matches its unbound cells, and
node indexes match the usage they summarize, after every start, end, failure and repair.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.policies.hived.algorithm import HivedAlgorithm, Request
from schedlab.policies.hived.cells import FREE, OPP, FreeList, PCell
from schedlab.policies.hived.config import build_physical, resolve_vcs
from schedlab.policies.hived.topology_aware import _pick_one_free, _pick_walk
from schedlab.topologies.build import uniform_topology


def _tree(arity: tuple[int, ...]) -> tuple[PCell, list[PCell]]:
    """A physical chain with the given children per level, top down; returns (top, all)."""
    cells: list[PCell] = []

    def make(depth: int, parent: PCell | None) -> PCell:
        level = len(arity) + 1 - depth
        c = PCell("t", level, 1, len(cells), f"c{len(cells)}", len(cells), 0, -1, False)
        c.parent = parent
        cells.append(c)
        if depth < len(arity):
            c.children = [make(depth + 1, c) for _ in range(arity[depth])]
        return c

    return make(0, None), cells


def _check_free_list(top: PCell, taken: set[int]) -> None:
    def covered(c: PCell, above: bool) -> None:
        mine = c.in_free or c.id in taken
        assert not (above and mine), f"{c.name} covered twice"
        if not c.children:
            assert above or mine, f"leaf {c.name} neither free nor taken"
        below = [d for d in _descendants(c) if d.id in taken]
        assert c.split == (bool(below) and not above and c.id not in taken), c.name
        if c.split:
            assert not all(ch.in_free for ch in c.children), f"{c.name}: all buddies free"
        for ch in c.children:
            covered(ch, above or mine)

    covered(top, False)


def _descendants(c: PCell) -> list[PCell]:
    out = []
    stack = list(c.children)
    while stack:
        d = stack.pop()
        out.append(d)
        stack.extend(d.children)
    return out


@settings(max_examples=80, deadline=None)
@given(arity=st.sampled_from([(2, 2, 2), (3, 2), (2, 4), (4,), (2, 2, 2, 2)]),
       ops=st.lists(st.tuples(st.booleans(), st.integers(0, 10_000)), max_size=40))
def test_buddy_split_and_merge_keep_free_list_consistent(arity, ops):
    top, cells = _tree(arity)
    fl = FreeList(top.level)
    fl.add(top)
    taken: set[int] = set()
    for take, pick in ops:
        if take:
            # any cell that is free or inside a free cell may be taken
            avail = [c for c in cells if c.id not in taken and _under_free(c)]
            if not avail:
                continue
            c = avail[pick % len(avail)]
            fl.take(c)
            taken.add(c.id)
        elif taken:
            cid = sorted(taken)[pick % len(taken)]
            taken.discard(cid)
            fl.give(cells[cid])
        _check_free_list(top, taken)
    for cid in sorted(taken):
        fl.give(cells[cid])
    assert [c.id for c in fl.cells()] == [top.id] and not top.split


def _under_free(c: PCell) -> bool:
    while c is not None:
        if c.in_free:
            return True
        c = c.parent
    return False


# --- the whole algorithm ---


def _topology():
    topo = uniform_topology(4, sockets=1, switches_per_socket=2, gpus_per_switch=2,
                            nodes_per_rack=2, name="inv")
    topo.vcs.update({"a": {"rack": 1}, "b": {"node": 1}, "c": {"switch": 1, "gpu": 1}})
    return topo


def check_state(algo: HivedAlgorithm) -> None:
    """Every cross-structure invariant of the cell state."""
    pc = algo.pc
    vcells = [v for state in algo.vcs.values()
              for roots in [*state.preassigned.values()] for lst in roots.values()
              for r in lst for v in [r, *_descendants(r)]]
    vcells += [v for state in algo.vcs.values() for r in state.pinned.values()
               for v in [r, *_descendants(r)]]
    doomed = [c for per_vc in algo.vc_doomed.values() for per_chain in per_vc.values()
              for cells in per_chain.values() for c in cells]
    assert len(doomed) == len({id(c) for c in doomed}), "a cell doomed twice"
    assert {id(c) for c in doomed} == {id(c) for c in pc.cells.values() if c.doomed}
    for name, info in algo.chains.items():
        for lv in range(1, info.top_level + 1):
            assert algo.all_vc_doomed[name][lv] == sum(
                len(algo.vc_doomed[vc].get(name, {}).get(lv, ())) for vc in algo.vc_order)
            assert {id(c) for c in algo.bad_free[name][lv]} == {
                id(c) for c in pc.cells.values()
                if c.chain == name and c.level == lv and not c.healthy and _under_free(c)}
            listed = algo.free[name].levels[lv]
            assert all(c.in_free and c.free_pos == i for i, c in enumerate(listed))
    for c in pc.cells.values():
        if c.children:
            assert c.healthy == all(ch.healthy for ch in c.children), c.name
            assert c.prio == FREE and c.group < 0 and c.reserver < 0, c.name
        else:
            assert c.group < 0 or c.group in algo.groups, c.name
            assert c.reserver < 0 or c.reserver in algo.groups, c.name
        if c.vcell is not None:
            assert c.vcell.pcell is c and c.vcell.level == c.level
        if not c.children:  # used by a gang, reserved for a preemptor, or free
            assert (c.group >= 0 or c.reserver >= 0) == (c.prio != FREE), c.name
        expect: dict[int, int] = {}
        for leaf in c.leaves():
            if leaf.prio != FREE:
                expect[leaf.prio] = expect.get(leaf.prio, 0) + 1
        assert c.used == expect, c.name
    for v in vcells:
        if v.pcell is not None:
            assert v.pcell.vcell is v
            assert v.parent is None or v.parent.pcell is not None, f"{v.name}: parent unbound"
        expect = {}
        for leaf in v.leaves():
            if leaf.prio != FREE:
                expect[leaf.prio] = expect.get(leaf.prio, 0) + 1
        assert v.used == expect, v.name
    for g in algo.groups.values():
        for i, leaf in enumerate(g.leaves):
            if g.preempting:  # its cells are reserved for it, victims may still run there
                assert leaf.reserver == g.idx and leaf.prio == g.prio
                assert leaf.group < 0 or algo.groups[leaf.group].being_preempted
            else:
                assert leaf.group == g.idx
                if leaf.reserver >= 0:  # a victim: the leaf counts at its preemptor's
                    assert g.being_preempted
                    assert leaf.prio == algo.groups[leaf.reserver].prio
                    continue
                assert leaf.prio == g.prio
            if g.vleaves is not None:
                assert g.vleaves[i].pcell is leaf and g.vleaves[i].prio == g.prio
    for name, info in algo.chains.items():
        fl = algo.free[name]
        for top in pc.tops[name]:
            _check_allocation(top)
        for lv in range(1, info.top_level + 1):
            obtainable = sum(info.leaves[c.level] // info.leaves[lv]
                             for c in fl.cells() if c.level >= lv)
            assert algo.total_left[name][lv] == obtainable, (name, lv)
            free_cells = sum(algo.vc_free[vc].get(name, {}).get(lv, 0) for vc in algo.vc_order)
            assert algo.all_vc_free[name][lv] == free_cells
            if not any(algo.bad_free[name].values()):
                assert free_cells <= obtainable, "VC safety broken"
    for vc, state in algo.vcs.items():
        for chain, by_level in state.preassigned.items():
            for lv, roots in by_level.items():
                unbound = sum(1 for r in roots if r.pcell is None)
                assert algo.vc_free[vc][chain][lv] == unbound, (vc, chain, lv)
    views = [*algo.phys_views.values()] + [
        v for state in algo.vcs.values()
        for v in [*state.views.values(), *state.pinned_views.values()]]
    for index in views:
        index._flush()
        prios: dict[int, int] = {}
        for i, node in enumerate(index.nodes):
            assert index.keys[i] == index._key(node)
            rank, free = index.keys[i]
            assert i in index.by_rank[rank][free]
            for q, k in node.used.items():
                prios[q] = prios.get(q, 0) + k
            if free and node.used:  # the one-free-leaf shortcut picks what the walk picks
                assert _pick_one_free(node) is _pick_walk(node, 1, OPP, set())[0], node.name
        assert prios == index.prios
        # the buckets: sorted position lists of exactly the nodes keyed there
        assert index.ranks == sorted(index.by_rank)
        for rank, by_free in index.by_rank.items():
            for free, lst in by_free.items():
                assert lst == sorted(i for i, k in enumerate(index.keys) if k == (rank, free))


def _check_dry_run_memo(algo: HivedAlgorithm, req: Request) -> None:
    """A remembered failed dry run says what a fresh one says, for this job or another."""
    first = algo.schedule(req, commit=False)
    again = algo.schedule(Request(req.idx + 1000, req.vc, req.prio, "", req.task_gpus,
                                  req.tasks), commit=False)  # the memo, if it failed
    algo._no.clear()
    fresh = algo.schedule(req, commit=False)
    for got in (first, again):
        if isinstance(fresh, str):
            assert got == fresh
        else:
            assert not isinstance(got, str) and got.gpus == fresh.gpus


def _check_allocation(c: PCell) -> None:
    """Each physical cell is free, held by a VC's preassigned cell, or split below."""
    if c.in_free:
        assert not c.split and c.vcell is None
        for d in _descendants(c):
            assert not d.in_free and not d.split and d.vcell is None
            assert d.prio in (FREE, OPP), f"{d.name}: guaranteed use outside its VC's cells"
    elif c.vcell is not None and c.vcell.parent is None:
        assert not c.split
        for d in _descendants(c):
            assert not d.in_free and not d.split
    else:
        assert c.split, f"{c.name} is neither free, held nor split"
        assert not all(ch.in_free for ch in c.children), f"{c.name}: all buddies free"
        for ch in c.children:
            _check_allocation(ch)


op = st.one_of(
    st.tuples(st.just("start"), st.sampled_from(["a", "b", "c"]), st.sampled_from([-1, 0, 1, 2]),
              st.sampled_from([1, 2, 4]), st.integers(1, 3)),
    st.tuples(st.just("end"), st.integers(0, 100)),
    st.tuples(st.just("fail"), st.integers(0, 3)),
    st.tuples(st.just("repair"), st.integers(0, 3)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=40), lazy=st.booleans())
def test_algorithm_state_stays_consistent(ops, lazy):
    topo = _topology()
    pc = build_physical(topo)
    vcs, _ = resolve_vcs(topo, pc)
    algo = HivedAlgorithm(pc, vcs, lazy=lazy)
    up = [True] * len(topo.nodes)
    check_state(algo)
    for i, o in enumerate(ops):
        if o[0] == "start":
            _, vc, prio, gpus, tasks = o
            _check_dry_run_memo(algo, Request(i, vc, prio, "", gpus, tasks))
            plan = algo.schedule(Request(i, vc, prio, "", gpus, tasks), commit=True)
            if not isinstance(plan, str):
                assert all(up[topo.gpu_node[g]] for g in plan.gpus), "placed on a bad node"
                assert len(set(plan.gpus)) == gpus * tasks
                for c in plan.cancels:
                    assert c not in algo.groups
                assert algo.groups[i].preempting == bool(plan.victims)
                if plan.victims and i % 2 == 0:  # the victims stop at once, it starts
                    for v in plan.victims:
                        algo.release(v)
                    algo.allocate(i)
                    assert all(v not in algo.groups for v in plan.victims)
        elif o[0] == "end":  # a gang ends (a preempting one gives its reservation up)
            if algo.groups:
                algo.release(sorted(algo.groups)[o[1] % len(algo.groups)])
            for idx in sorted(algo.groups):  # preemptors whose victims are all gone start
                if algo.groups[idx].preempting and algo.ready(idx):
                    algo.allocate(idx)
        elif o[0] == "fail":
            node = o[1]
            for idx in sorted(algo.groups):  # the engine stops the jobs on it first
                if any(leaf.node == node for leaf in algo.groups[idx].leaves):
                    algo.release(idx)
            up[node] = False
            algo.set_node_health(node, False)
        else:
            up[o[1]] = True
            algo.set_node_health(o[1], True)
        check_state(algo)
    for idx in sorted(algo.groups):
        algo.release(idx)
    for n in range(len(up)):
        algo.set_node_health(n, True)
    check_state(algo)
    assert sorted(c.id for c in algo.free["V100-rack-8"].cells()) == [c.id for c in pc.tops[
        "V100-rack-8"]]
