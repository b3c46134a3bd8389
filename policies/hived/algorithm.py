"""HiveD's algorithm on our cell model: VC scheduling, buddy cell binding, bad cells.

A guaranteed gang is placed inside its VC's virtual cells by the topology-aware
scheduler; the virtual cells it touches are then bound to physical cells: a VC's
preassigned (top-level) virtual cell gets a free physical cell of its level by buddy
allocation (split a higher free cell when its level has none, prefer cells with fewer
opportunistic leaves, skip bad ones), lower virtual cells map into the physical cell
their parent is bound to. Physical leaves used by other jobs there are preemption
victims: opportunistic jobs, or lower-priority jobs of the same VC. An opportunistic gang
is placed by the same scheduler on a chain's physical nodes, on free leaves only.

Bad hardware follows HiveD's doomed-bad-cell rule: when a chain level has fewer healthy
free physical cells than a VC's free cells there, that VC's free cells are bound to the
bad physical cells so its own scheduler sees (and avoids) them; they are unbound when
healthy cells return. Structure and names follow microsoft/hivedscheduler
`pkg/algorithm` (hived_algorithm.go, cell_allocation.go); the code is our own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from schedlab.policies.hived import topology_aware
from schedlab.policies.hived.cells import (
    FREE,
    MIN_GUARANTEED,
    OPP,
    FreeList,
    PCell,
    VCell,
    add_used,
    in_free_list,
    swap_remove,
)
from schedlab.policies.hived.config import (
    ChainInfo,
    PhysicalCluster,
    VcCells,
    set_preassigned,
    virtual_tree,
)
from schedlab.policies.hived.safety import check_vc_safety, demand
from schedlab.policies.hived.topology_aware import NodeIndex
from schedlab.sim.errors import SimError


@dataclass(frozen=True, slots=True)
class Request:
    """One gang to place: a job's VC, priority, leaf type, pods and pinned cell."""

    idx: int
    vc: str
    prio: int
    leaf_type: str  # "" for any type
    task_gpus: int
    tasks: int
    pinned: str = ""
    lazy: bool | None = None  # may be lazily preempted (HiveD's per-pod flag); None: run's
    members: tuple[int, ...] = ()  # leaves of each pod when they differ (task roles)

    def pods_on(self, chain: ChainInfo) -> list[int]:
        """Leaf counts of the gang's pods on a chain (HiveD's affinity group members).

        Members that differ (a job with roles) are one pod each, never split: a task sits
        on one node. Otherwise `tasks` pods of `task_gpus`, split per node when larger.
        """
        if self.members:
            return list(self.members)
        return chain.pods(self.task_gpus, self.tasks)


@dataclass(slots=True)
class Group:
    """A running gang (HiveD's affinity group): its physical and virtual leaves."""

    idx: int  # the job's index (its key in `HivedAlgorithm.groups`), or a side booking's id
    vc: str  # the job's VC (an opportunistic gang's too)
    prio: int  # current: OPP once lazily preempted
    orig_prio: int  # its priority when committed (back when a lazy preemption reverts)
    chain: str  # the chain of all its leaves ("" for a job of 0 GPUs)
    leaves: list[PCell]  # its physical leaves, pods one after the other; fixed once made
    # the virtual leaf each leaf is bound to, same order: None for opportunistic (and
    # lazily preempted) gangs
    vleaves: list[VCell] | None
    lazy_preempted: bool = False  # downgraded to opportunistic by a preemptor (prio OPP)
    lazy: bool = False  # a preemptor downgrades it instead of preempting it
    preempting: bool = False  # holds its cells reserved until its victims are gone
    being_preempted: bool = False  # a victim of some preempting gang, still running


@dataclass(slots=True)
class Plan:
    """Where a gang goes: physical leaves per pod, their virtual leaves, the victims."""

    req: Request
    chain: str  # the chain every leaf is on
    pods: list[list[PCell]]  # physical leaves of each pod, in physical order
    vleaves: list[VCell] | None  # a virtual leaf per leaf in `leaves` order (None: opp)
    victims: list[int] = field(default_factory=list)  # gangs running on its leaves
    lazy: list[int] = field(default_factory=list)  # gangs downgraded to opportunistic
    cancels: list[int] = field(default_factory=list)  # preempting gangs it overrides

    @property
    def gpus(self) -> tuple[int, ...]:
        """GPU indices of the whole gang, sorted."""
        return tuple(sorted(c.gpu for pod in self.pods for c in pod))

    @property
    def leaves(self) -> list[PCell]:
        """Physical leaves in pod order."""
        return [c for pod in self.pods for c in pod]


class _Vertex:
    """A node of a binding path: a virtual cell to bind and its children to bind."""

    __slots__ = ("cell", "children")

    def __init__(self, cell: VCell) -> None:
        self.cell = cell
        self.children: list[_Vertex] = []


@dataclass
class VcState:
    """One VC's virtual cells: preassigned per chain and level, cluster views, pinned.

    The trees never change; their bindings (`VCell.pcell`) do.
    """

    name: str
    # chain -> level -> the VC's preassigned (top) virtual cells there, pinned ones
    # aside, in config order; each one bound exactly while allocated to the VC
    preassigned: dict[str, dict[int, list[VCell]]] = field(default_factory=dict)
    # chain -> the VC's virtual node cells there (pinned ones aside), which its guaranteed
    # gangs are searched in; usage kept current by `add_used`
    views: dict[str, NodeIndex] = field(default_factory=dict)
    # pinned cell id -> the root of its virtual tree, bound to its physical cell all run
    pinned: dict[str, VCell] = field(default_factory=dict)
    # pinned cell id -> that tree's node cells, searched for gangs pinned to it
    pinned_views: dict[str, NodeIndex] = field(default_factory=dict)


class HivedAlgorithm:
    """Cell state of one run: physical chains, VCs, free lists, gangs, health.

    Levels are chain levels (1: one GPU); counts are cells of that level. A physical cell
    is *allocated* to a VC while bound to one of the VC's preassigned virtual cells (in
    use by its gangs, pinned, or doomed); the rest of the chain is the buddy free list,
    which opportunistic gangs use without taking cells out of it. Fields, with what is
    true of them between calls (inside a compound change, `_defer` > 0, the doomed-cell
    rule waits for its end):

    - `pc`, `chains`: the physical cell trees and each chain's shape; never change.
    - `lazy`: the run's lazy preemption, for gangs whose request leaves it to the run.
    - `chain_order`: chain names in config order, the order chains are searched in.
    - `chains_of_type[leaf_type]`: the chains of that leaf type, in `chain_order`.
    - `free[chain]`: the buddy free list (`FreeList`): physical cells that neither are
      allocated to a VC nor hold one below them, each listed at the highest level
      where that holds (a top cell, or its parent is split), healthy or bad.
    - `phys_views[chain]`: the chain's physical node cells for the opportunistic search;
      kept current by `add_used` (every cell's `used`).
    - `vc_order`: VC names in config order, the order the doomed-cell rule serves them.
    - `vcs[vc]`: the VC's virtual cells (`VcState`); fixed trees, bindings change.
    - `vc_free[vc][chain][level]`: the VC's preassigned cells of that level (pinned
      ones included) not allocated now; only the levels the VC was given are keys;
      always >= 0.
    - `vc_doomed[vc][chain][level]`: the bad physical cells (a cell is bad when a leaf
      below it is) allocated to the VC's free preassigned cells so that its scheduler
      sees them; exactly the cells with `doomed` set, each in one VC's list.
    - `all_vc_free[chain][level]`: the sum of `vc_free[vc][chain][level]` over the VCs.
    - `total_left[chain][level]`: cells of that level no VC holds any part of: the free
      list's cells of that level plus those of that level inside free higher cells
      (HiveD's totalLeftCellNum); bad ones included.
    - `bad_free[chain][level]`: the bad cells among those `total_left` counts (in or
      under the free list), so `total_left - len(bad_free)` healthy cells are left.
    - `all_vc_doomed[chain][level]`: the sum of `len(vc_doomed[vc][chain][level])`.
      The doomed-cell rule (HiveD's) runs per (chain, level) when a change moves that
      level's counts: a VC with more free cells there than healthy cells left
      (`vc_free > total_left - len(bad_free)`) gets bad free cells bound to them as
      doomed, and a VC whose free cells fall below the healthy cells left gets doomed
      ones released. It is event-driven, not an invariant: a level no change touched
      may stay off balance. A doomed cell a job comes to use stays allocated, undoomed.
    - `groups[idx]`: every gang HiveD accounts for, by job index (`Group.idx`): running
      (lazily preempted ones too), preempting, a job of 0 GPUs (no leaves) and a
      non-gang task's side booking (ids from the policy's `SIDE_BASE` up); a leaf's
      `group` and `reserver` are keys here or -1.
    - `cancelled`: indices of preempting gangs `cancel` revoked since the caller last
      drained the list; they are no longer in `groups`.
    - `version`: grows with every change of cell state; a plan or a failed dry run
      seen at an older version is stale.
    - `touched_vcs`: VCs some of whose doomed cells were released since the caller last
      cleared the set (their queues may fit now).
    - `_defer`: depth of nested compound changes (0 between calls).
    - `_pending`: (chain, level) whose doomed-cell checks wait for the outermost
      compound change to end; empty whenever `_defer` is 0.
    - `_gang_cache[shape]`: a request shape's (pods, chain) in search order; valid for the
      whole run (chains and VC cells never change).
    - `_no[shape]`: why a dry run of that request shape failed, valid only while
      `version == _no_at`; `_no_at`: the version `_no` was last cleared at.
    """

    def __init__(self, pc: PhysicalCluster, vcs: dict[str, VcCells], *, lazy: bool = False,
                 source: str = "") -> None:
        self.pc = pc
        self.chains: dict[str, ChainInfo] = pc.chains
        self.lazy = lazy
        cells_of = {cid: (c.chain, c.level) for cid, c in pc.cells.items()}
        wants = demand(vcs, cells_of)
        check_vc_safety(self.chains, wants, source)
        self.chain_order: list[str] = list(self.chains)  # search order of chains
        self.chains_of_type: dict[str, list[str]] = {}
        for name, info in self.chains.items():
            self.chains_of_type.setdefault(info.leaf_type, []).append(name)
        self.free: dict[str, FreeList] = {}
        for name, info in self.chains.items():
            fl = FreeList(info.top_level)
            for top in pc.tops[name]:
                fl.add(top)
            self.free[name] = fl
        self.phys_views: dict[str, NodeIndex] = {
            name: NodeIndex(self._node_view(pc.full[name], info), cross=False)
            for name, info in self.chains.items()}
        self.vc_order = list(vcs)
        self.vcs: dict[str, VcState] = {}
        self.vc_free: dict[str, dict[str, dict[int, int]]] = {}
        self.vc_doomed: dict[str, dict[str, dict[int, list[PCell]]]] = {}
        counter = [0]
        for name, spec in vcs.items():
            st = VcState(name)
            k = 0
            full: dict[str, dict[int, list[VCell]]] = {}
            for chain, level, n in spec.cells:
                info = self.chains[chain]
                for _ in range(n):
                    root = virtual_tree(name, info, level, f"{name}/{k}", counter)
                    set_preassigned(root)
                    k += 1
                    st.preassigned.setdefault(chain, {}).setdefault(level, []).append(root)
                    _collect(root, full.setdefault(chain, {}))
            for chain, by_level in full.items():
                st.views[chain] = NodeIndex(self._node_view(by_level, self.chains[chain]),
                                            cross=True)
            for pid, cid in spec.pinned:
                phys = pc.cells[cid]
                info = self.chains[phys.chain]
                root = virtual_tree(name, info, phys.level, f"{name}/{k}", counter, pid)
                set_preassigned(root)
                k += 1
                st.pinned[pid] = root
                pinned_levels: dict[int, list[VCell]] = {}
                _collect(root, pinned_levels)
                st.pinned_views[pid] = NodeIndex(self._node_view(pinned_levels, info), cross=True)
            self.vcs[name] = st
            self.vc_free[name] = {ch: dict(lv) for ch, lv in wants[name].items()}
            self.vc_doomed[name] = {ch: {lv: [] for lv in range(1, self.chains[ch].top_level + 1)}
                                    for ch in wants[name]}
        self.all_vc_free: dict[str, dict[int, int]] = {}
        self.total_left: dict[str, dict[int, int]] = {}
        self.bad_free: dict[str, dict[int, list[PCell]]] = {}
        self.all_vc_doomed: dict[str, dict[int, int]] = {}
        for name, info in self.chains.items():
            self.all_vc_free[name] = {lv: 0 for lv in range(1, info.top_level + 1)}
            for vc in self.vc_order:
                for lv, n in self.vc_free[vc].get(name, {}).items():
                    self.all_vc_free[name][lv] += n
            self.total_left[name] = {lv: info.tops * info.leaves[info.top_level] // n
                                     for lv, n in info.leaves.items()}
            self.bad_free[name] = {lv: [] for lv in range(1, info.top_level + 1)}
            self.all_vc_doomed[name] = {lv: 0 for lv in range(1, info.top_level + 1)}
        self.groups: dict[int, Group] = {}
        self.cancelled: list[int] = []  # preempting gangs cancelled (the caller drains it)
        self.version = 0  # grows with every change of cell state (plans older are stale)
        self.touched_vcs: set[str] = set()  # VCs whose doomed cells were unbound
        self._defer = 0  # >0 inside a compound change: doomed-cell checks wait for its end
        self._pending: set[tuple[str, int]] = set()
        self._gang_cache: dict[tuple, list[tuple[list[int], str]]] = {}  # see _gangs
        self._no: dict[tuple, str] = {}  # failed dry runs by request shape (see schedule)
        self._no_at = -1  # the version they were seen at
        for name, spec in vcs.items():
            for pid, cid in spec.pinned:
                phys = pc.cells[cid]
                phys.pinned = True
                self._allocate_preassigned(phys, name, False)
                _bind(phys, self.vcs[name].pinned[pid])
        self._boot()

    def _boot(self) -> None:
        """Start as HiveD does: every node bad, then reported healthy one by one.

        HiveD marks every configured node bad at start and waits for Kubernetes to add
        the healthy ones. The VCs' cells are bound to the bad cells as doomed and
        released again as nodes come up, which leaves each chain's free lists in the
        order HiveD's buddy allocation then searches (HiveD's pod24 lands on 0.0.0.1,
        not 0.0.0.0). Per chain, nodes in topology order, leaf by leaf, checks at once.
        """
        for up in (False, True):
            for chain in self.chain_order:
                for top in self.pc.tops[chain]:
                    for leaf in top.leaves():
                        if up:
                            self._set_healthy(leaf)
                        else:
                            self._set_bad(leaf)

    # --- views ---

    @staticmethod
    def _node_view(by_level: dict[int, list], info: ChainInfo) -> list:
        """Node-level cells, then top-level cells below node level (HiveD newClusterView)."""
        node_level = info.node_level or max(by_level)
        out = list(by_level.get(node_level, []))
        for lv in range(node_level - 1, 0, -1):
            out.extend(c for c in by_level.get(lv, []) if c.parent is None)
        return out

    def vc_chains(self, vc: str, leaf_type: str) -> list[str]:
        """Chains where `vc` has preassigned cells and leaves of `leaf_type` (any: '')."""
        st = self.vcs[vc]
        return [ch for ch in self.chain_order if ch in st.views
                and (not leaf_type or self.chains[ch].leaf_type == leaf_type)]

    def type_chains(self, leaf_type: str) -> list[str]:
        """Chains with leaves of `leaf_type` (every chain for '')."""
        return [ch for ch in self.chain_order
                if not leaf_type or self.chains[ch].leaf_type == leaf_type]

    # --- scheduling ---

    def schedule(self, req: Request, commit: bool) -> Plan | str:
        """Place a gang; with `commit` bind its cells and release its victims' cells.

        A dry run that fails is remembered per request shape until the cell state next
        changes (`version`): a blocked queue head asked again at every arrival is answered
        from the memo. The answer does not depend on the job, only on its shape.
        """
        if not commit:
            if self._no_at != self.version:
                self._no.clear()
                self._no_at = self.version
            key = (req.vc, req.prio, req.leaf_type, req.task_gpus, req.tasks, req.pinned,
                   req.members)
            no = self._no.get(key)
            if no is not None:
                return no
        self._defer += 1
        try:
            got = self._schedule(req, commit)
        finally:
            self._end_defer()
        if not commit and type(got) is str and self._no_at == self.version:
            self._no[key] = got  # nothing changed during the dry run (no lazy preemption)
        return got

    def _end_defer(self) -> None:
        """Leave a compound change; at the outermost, settle the doomed bad cells.

        HiveD re-checks doomed cells at every step of a change. Mid-change, a lazy
        preemption or a victim's release could bind the very virtual cells the plan is
        about to use to bad hardware; so the checks of a compound change (lazy preemption,
        mapping, commit, release) run once it is complete. Node health changes check at
        every step, as HiveD does.
        """
        self._defer -= 1
        while not self._defer and self._pending:
            todo = sorted(self._pending)
            self._pending.clear()
            for chain, level in todo:
                self._try_unbind_doomed(chain, level)
                self._try_bind_doomed(chain, level)

    def _schedule(self, req: Request, commit: bool) -> Plan | str:
        guaranteed = req.prio >= MIN_GUARANTEED
        reason = ""
        for pods, chain in self._gangs(req):
            if guaranteed:
                got = self._guaranteed(req, chain, pods, commit)
            else:
                got = self._opportunistic(req, chain, pods)
            if type(got) is Plan:
                if commit:
                    self.commit(got)
                return got
            reason = f"{got} (chain {chain})"
        return reason or f"VC {req.vc!r} has no cells of leaf type {req.leaf_type or 'any'!r}"

    def _gangs(self, req: Request) -> list[tuple[list[int], str]]:
        """The chains a request may use with its pods on each, in search order (cached).

        Fewest pods (best affinity) first, then the chain order. Chains and VC cells never
        change during a run, so the answer depends on the request's shape alone.
        """
        key = (req.vc, req.prio >= MIN_GUARANTEED, req.leaf_type, req.task_gpus, req.tasks,
               req.pinned, req.members)
        got = self._gang_cache.get(key)
        if got is not None:
            return got
        if req.pinned:
            chains = [self.vcs[req.vc].pinned[req.pinned].chain]
        elif req.prio >= MIN_GUARANTEED:
            chains = self.vc_chains(req.vc, req.leaf_type)
        else:
            chains = self.type_chains(req.leaf_type)
        gangs = [(req.pods_on(self.chains[ch]), ch) for ch in chains]
        if len(gangs) > 1:
            gangs = [g for _, g in sorted(enumerate(gangs), key=lambda t: (len(t[1][0]), t[0]))]
        self._gang_cache[key] = gangs
        return gangs

    def _opportunistic(self, req: Request, chain: str, pods: list[int]) -> Plan | str:
        got = topology_aware.schedule(self.phys_views[chain], pods, OPP)
        if isinstance(got, str):
            return f"{got} when scheduling in the physical cluster"
        return Plan(req, chain, got, None)

    def _guaranteed(self, req: Request, chain: str, pods: list[int], commit: bool
                    ) -> Plan | str:
        st = self.vcs[req.vc]
        view = st.pinned_views[req.pinned] if req.pinned else st.views.get(chain)
        if view is None:
            return f"VC {req.vc!r} has no cells in chain {chain!r}"
        vplace = topology_aware.schedule(view, pods, req.prio)
        if isinstance(vplace, str):
            return f"{vplace} when scheduling in VC {req.vc!r}"
        vleaves: list[VCell] = [c for pod in vplace for c in pod]
        lazy = self._try_lazy_preempt(vleaves)
        bindings = self._map_to_physical(vleaves, chain)
        if bindings is not None and not all(p.healthy for p in bindings.values()):
            bindings = None  # never place on bad hardware
        if bindings is None or not commit:
            for g, saved in reversed(lazy):
                self._revert_lazy(g, saved)
        if bindings is None:
            return ("mapping the virtual placement would need a bad physical cell "
                    f"(VC {req.vc!r})")
        pods_phys: list[list[PCell]] = []
        vleaves = []
        for pod in vplace:  # each pod's leaves in physical order, virtual ones alongside
            if len(pod) == 1:
                pods_phys.append([bindings[id(pod[0])]])
                vleaves.append(pod[0])
                continue
            pairs = sorted(((bindings[id(v)], v) for v in pod), key=lambda t: t[0].order)
            pods_phys.append([p for p, _ in pairs])
            vleaves.extend(v for _, v in pairs)
        victims: list[int] = []
        cancels: list[int] = []
        for pod_leaves in pods_phys:
            for leaf in pod_leaves:
                if leaf.group >= 0 and leaf.group not in victims:
                    victims.append(leaf.group)
                if leaf.reserver >= 0 and leaf.reserver not in cancels:
                    cancels.append(leaf.reserver)
        return Plan(req, chain, pods_phys, vleaves, victims, [g.idx for g, _ in lazy],
                    cancels)

    # --- lazy preemption ---

    def _try_lazy_preempt(self, vleaves: Sequence[VCell]) -> list[tuple[Group, list[VCell]]]:
        out: list[tuple[Group, list[VCell]]] = []
        seen: set[int] = set()
        for v in vleaves:
            p = v.pcell
            if p is None or p.group < 0 or p.reserver >= 0 or p.group in seen:
                continue  # free, or reserved by a preemptor (HiveD: only Used cells)
            g = self.groups[p.group]
            if g.vleaves is None or not g.lazy:
                continue
            seen.add(g.idx)
            out.append((g, self._lazy_preempt(g)))
        return out

    def _lazy_preempt(self, g: Group) -> list[VCell]:
        """Downgrade a gang to opportunistic: it leaves its VC but keeps running."""
        self.version += 1
        saved = g.vleaves or []
        for leaf in g.leaves:
            if leaf.reserver < 0:  # leaves a preemptor reserved already left its VC
                self._release_leaf(leaf, g.vc)
                self._allocate_leaf(leaf, None, OPP, g.vc)
        g.vleaves = None
        g.prio = OPP
        g.lazy_preempted = True
        return saved

    def _revert_lazy(self, g: Group, saved: list[VCell]) -> None:
        self.version += 1
        for leaf, v in zip(g.leaves, saved, strict=True):
            if leaf.reserver < 0:
                self._release_leaf(leaf, g.vc)
                self._allocate_leaf(leaf, v, g.orig_prio, g.vc)
        g.vleaves = saved
        g.prio = g.orig_prio
        g.lazy_preempted = False

    # --- committing and releasing gangs ---

    def commit(self, plan: Plan) -> None:
        """Give a plan's cells to its gang (HiveD createPreemptingAffinityGroup).

        Preempting gangs the plan overlaps are cancelled first (their victims get the
        cells back). Without victims the gang holds its cells at once; with victims it
        is *preempting*: its cells are allocated at its priority and reserved for it,
        while the victims (now being preempted) keep running on them until `release`
        (HiveD's Reserving cells); `ready` then says it may start (`allocate`).
        """
        self.version += 1
        self._defer += 1
        try:
            for idx in plan.cancels:
                self.cancel(idx)
            req = plan.req
            prio = req.prio
            leaves = plan.leaves
            vleaves: Sequence[VCell | None] = plan.vleaves or [None] * len(leaves)
            victims = {leaf.group for leaf in leaves if leaf.group >= 0}
            for leaf, v in zip(leaves, vleaves, strict=True):
                if leaf.group >= 0:
                    victim = self.groups[leaf.group]
                    self._release_leaf(leaf, victim.vc)
                    victim.being_preempted = True
                self._allocate_leaf(leaf, v, prio, req.vc)
                if victims:
                    leaf.reserver = req.idx
                else:
                    leaf.group = req.idx
            lazy = self.lazy if req.lazy is None else req.lazy
            self.groups[req.idx] = Group(req.idx, req.vc, prio, prio, plan.chain, leaves,
                                         list(plan.vleaves) if plan.vleaves else None,
                                         lazy=lazy, preempting=bool(victims))
        finally:
            self._end_defer()

    def ready(self, idx: int) -> bool:
        """True when a preempting gang's victims have all left its cells."""
        g = self.groups[idx]
        return not g.preempting or all(leaf.group < 0 for leaf in g.leaves)

    def victims_of(self, idx: int) -> list[int]:
        """Gangs still running on a preempting gang's cells, in leaf order."""
        out: list[int] = []
        for leaf in self.groups[idx].leaves:
            if leaf.group >= 0 and leaf.group not in out:
                out.append(leaf.group)
        return out

    def allocate(self, idx: int) -> None:
        """A preempting gang whose victims are gone holds its cells (HiveD Reserved -> Used)."""
        g = self.groups[idx]
        if not self.ready(idx):
            raise SimError(f"hived: gang {idx} still has victims on its cells")
        self.version += 1
        for leaf in g.leaves:
            leaf.reserver = -1
            leaf.group = idx
        g.preempting = False

    def cancel(self, idx: int) -> Group | None:
        """Revoke a preemption: the cells go back to the victims still on them, else free.

        HiveD deletePreemptingAffinityGroup: a victim gets its leaf back at its
        priority, bound to its own virtual leaf again (none once lazily preempted).
        """
        g = self.groups.get(idx)
        if g is None or not g.preempting:
            return None
        del self.groups[idx]
        self.version += 1
        self.cancelled.append(idx)
        self._defer += 1
        try:
            for leaf in g.leaves:
                if leaf.reserver != idx:
                    continue
                self._release_leaf(leaf, g.vc)
                leaf.reserver = -1
                if leaf.group >= 0:
                    u = self.groups[leaf.group]
                    v = u.vleaves[u.leaves.index(leaf)] if u.vleaves is not None else None
                    self._allocate_leaf(leaf, v, u.prio, u.vc)
        finally:
            self._end_defer()
        return g

    def hold_side(self, gid: int, vc: str, gpus: Sequence[int], prio: int) -> bool:
        """Book free leaves a job's non-gang task holds as gang `gid` at its job's `prio`.

        The engine places non-gang tasks (an evaluator) outside HiveD's cells. A leaf
        inside a physical cell already bound to the VC takes a free virtual leaf there
        (its VC's scheduler then sees it used, at `prio`); others are booked
        opportunistic (physical only). False (nothing booked) when a leaf is not free.
        """
        leaves = [self.pc.leaf_of_gpu[g] for g in gpus]
        if not leaves or any(c.group >= 0 or c.reserver >= 0 or c.prio != FREE
                             or c.vcell is not None for c in leaves):
            return False
        self.version += 1
        self._defer += 1
        try:
            for c in leaves:
                v = self._free_vleaf(c, vc) if prio >= MIN_GUARANTEED else None
                self._allocate_leaf(c, v, prio if v is not None else OPP, vc)
                c.group = gid
        finally:
            self._end_defer()
        self.groups[gid] = Group(gid, vc, OPP, OPP, leaves[0].chain, leaves, None)
        return True

    @staticmethod
    def _free_vleaf(leaf: PCell, vc: str) -> VCell | None:
        """An unbound virtual leaf of `vc` mirroring `leaf` under its lowest bound ancestor."""
        path: list[PCell] = []
        p: PCell | None = leaf.parent
        while p is not None and p.vcell is None:
            path.append(p)
            p = p.parent
        if p is None or p.vcell is None or p.vcell.vc != vc:
            return None
        v = _unbound_child(p.vcell)
        while v is not None and v.children:
            v = v.children[0]  # an unbound cell's descendants are all unbound
        return v

    def add_empty(self, req: Request) -> None:
        """Record a gang that holds no cells (a job of 0 GPUs)."""
        self.groups[req.idx] = Group(req.idx, req.vc, req.prio, req.prio, "", [], None)

    def release(self, idx: int) -> Group | None:
        """Free the cells of a gang that stopped (finished, preempted, failed).

        A preempting gang that stops (killed while waiting) cancels its preemption. A
        leaf a preemptor reserved passes to it (HiveD Reserving -> Reserved).
        """
        g = self.groups.get(idx)
        if g is None:
            return None
        if g.preempting:
            return self.cancel(idx)
        del self.groups[idx]
        self.version += 1
        self._defer += 1
        try:
            for leaf in g.leaves:
                if leaf.group == idx:
                    if leaf.reserver < 0:
                        self._release_leaf(leaf, g.vc)
                    leaf.group = -1
        finally:
            self._end_defer()
        return g

    # --- leaves (HiveD allocateLeafCell / releaseLeafCell) ---

    def _allocate_leaf(self, leaf: PCell, v: VCell | None, prio: int, vc: str) -> None:
        if v is not None:
            v.prio = prio
            add_used(v, prio, 1)
            leaf.prio = prio
            add_used(leaf, prio, 1)
            pre = v.preassigned
            newly = pre.pcell is None
            if leaf.vcell is None:
                _bind(leaf, v)
            if newly:
                assert pre.pcell is not None  # _bind bound it with the leaf
                self._allocate_preassigned(pre.pcell, vc, False)
            elif pre.pcell is not None and pre.pcell.doomed:
                # a job uses the healthy part of a cell doomed to bad hardware: from now on
                # it is a cell in use (HiveD would keep it doomed and could unbind it in use)
                self._undoom(pre.pcell, vc)
        else:
            leaf.prio = OPP
            add_used(leaf, OPP, 1)

    def _release_leaf(self, leaf: PCell, vc: str) -> None:
        v = leaf.vcell
        if v is not None and v.prio != FREE:
            add_used(v, v.prio, -1)
            v.prio = FREE
            pre = v.preassigned
            pre_phys = pre.pcell
            if leaf.healthy:
                _unbind(leaf)
            if (pre_phys is not None and not pre_phys.pinned and not pre.used
                    and not pre_phys.doomed):
                self._release_preassigned(pre_phys, vc, False)
        add_used(leaf, leaf.prio, -1)
        leaf.prio = FREE

    # --- preassigned cells (HiveD allocatePreassignedCell / releasePreassignedCell) ---

    def _allocate_preassigned(self, c: PCell, vc: str, doomed: bool) -> None:
        chain, level = c.chain, c.level
        self.vc_free[vc][chain][level] -= 1
        self.all_vc_free[chain][level] -= 1
        left = self.total_left[chain]
        left[level] -= 1
        up_to = self.free[chain].take(c)
        parent = c.parent
        for lv in range(level + 1, up_to + 1):
            left[lv] -= 1
            assert parent is not None  # levels up to `up_to` are ancestors of c
            if not parent.healthy:
                swap_remove(self.bad_free[chain][lv], parent)
            else:
                self._try_bind_doomed(chain, lv)
            parent = parent.parent
        if not c.healthy:
            self._allocate_bad_cell(c)
            if not doomed:
                self._try_unbind_doomed(chain, level)
        else:
            self._try_bind_doomed(chain, level)
        info = self.chains[chain]
        n = info.children[level]
        for lv in range(level - 1, 0, -1):
            left[lv] -= n
            if not doomed:
                self._try_bind_doomed(chain, lv)
            n *= info.children[lv]

    def _release_preassigned(self, c: PCell, vc: str, doomed: bool) -> None:
        chain, level = c.chain, c.level
        self.vc_free[vc][chain][level] += 1
        self.all_vc_free[chain][level] += 1
        left = self.total_left[chain]
        left[level] += 1
        up_to = self.free[chain].give(c)
        parent = c.parent
        for lv in range(level + 1, up_to + 1):
            left[lv] += 1
            assert parent is not None  # levels up to `up_to` are ancestors of c
            if not parent.healthy:
                self.bad_free[chain][lv].append(parent)
            else:
                self._try_unbind_doomed(chain, lv)
            parent = parent.parent
        if not c.healthy:
            self._release_bad_cell(c)
            if not doomed:
                self._try_bind_doomed(chain, level)
        else:
            self._try_unbind_doomed(chain, level)
        info = self.chains[chain]
        n = info.children[level]
        for lv in range(level - 1, 0, -1):
            left[lv] += n
            if not doomed:
                self._try_unbind_doomed(chain, lv)
            n *= info.children[lv]

    # --- bad cells ---

    def set_node_health(self, node: int, up: bool) -> None:
        """A node failed (`up` False) or was repaired: mark its cells bad or healthy."""
        cell = self.pc.node_cells.get(node)
        if cell is None:
            return
        self.version += 1
        # leaf by leaf with the doomed-cell checks at each step, as HiveD's setBadCell /
        # setHealthyCell (settling them once per node, lowest level first, could leave a
        # VC a guarantee with no cell left: fuzz case 3002176)
        for leaf in cell.leaves():
            if up:
                self._set_healthy(leaf)
            else:
                self._set_bad(leaf)

    def _set_bad(self, c: PCell) -> None:
        if not c.healthy:
            return
        c.healthy = False
        if c.parent is not None:
            self._set_bad(c.parent)
        if in_free_list(c):
            self._add_bad_free(c)
        elif c.vcell is None and not c.split and c.parent is not None:
            pv = c.parent.vcell
            if pv is not None:  # inside a bound cell: show the failure to that VC
                v = _unbound_child(pv)
                if v is not None:
                    c.vcell = v
                    v.pcell = c

    def _set_healthy(self, c: PCell) -> None:
        if c.healthy:
            return
        c.healthy = True
        if in_free_list(c):
            self._remove_bad_free(c)
        elif (v := c.vcell) is not None and not c.pinned and c.max_prio() < MIN_GUARANTEED:
            c.vcell = None  # bound only because it was bad
            v.pcell = None
            if v.parent is None:  # a doomed preassigned cell
                doomed = self.vc_doomed[v.vc][c.chain][c.level]
                if c in doomed:
                    swap_remove(doomed, c)
                    c.doomed = False
                    self.all_vc_doomed[c.chain][c.level] -= 1
                    self._release_preassigned(c, v.vc, True)
        if c.parent is not None and all(b.healthy for b in c.parent.children):
            self._set_healthy(c.parent)

    def _add_bad_free(self, c: PCell) -> None:
        bad = self.bad_free[c.chain][c.level]
        bad.append(c)
        if self.all_vc_free[c.chain][c.level] > self.total_left[c.chain][c.level] - len(bad):
            self._try_bind_doomed(c.chain, c.level)

    def _remove_bad_free(self, c: PCell) -> None:
        swap_remove(self.bad_free[c.chain][c.level], c)
        self._try_unbind_doomed(c.chain, c.level)

    def _try_bind_doomed(self, chain: str, level: int) -> None:
        bad = self.bad_free[chain][level]
        if not bad:
            return
        if self._defer:
            self._pending.add((chain, level))
            return
        for vc in self.vc_order:
            free = self.vc_free[vc].get(chain)
            if free is None:
                continue
            while bad and free.get(level, 0) > self.total_left[chain][level] - len(bad):
                v = _unbound(self.vcs[vc].preassigned.get(chain, {}).get(level, []))
                if v is None:
                    break
                pc = bad[0]
                pc.vcell = v
                v.pcell = pc
                pc.doomed = True
                self.vc_doomed[vc][chain][level].append(pc)
                self.all_vc_doomed[chain][level] += 1
                self._allocate_preassigned(pc, vc, True)

    def _try_unbind_doomed(self, chain: str, level: int) -> None:
        if not self.all_vc_doomed[chain][level]:
            return
        if self._defer:
            self._pending.add((chain, level))
            return
        for vc in self.vc_order:
            free = self.vc_free[vc].get(chain)
            if free is None:
                continue
            doomed = self.vc_doomed[vc][chain][level]
            while doomed and free.get(level, 0) < (
                    self.total_left[chain][level] - len(self.bad_free[chain][level])):
                pc = doomed[0]
                swap_remove(doomed, pc)
                v = pc.vcell
                if v is not None:
                    v.pcell = None
                pc.vcell = None
                pc.doomed = False
                self.all_vc_doomed[chain][level] -= 1
                self.touched_vcs.add(vc)
                self._release_preassigned(pc, vc, True)

    def _undoom(self, pc: PCell, vc: str) -> None:
        swap_remove(self.vc_doomed[vc][pc.chain][pc.level], pc)
        pc.doomed = False
        self.all_vc_doomed[pc.chain][pc.level] -= 1

    def _allocate_bad_cell(self, c: PCell) -> None:
        bad = self.bad_free[c.chain][c.level]
        if c in bad:
            swap_remove(bad, c)
        if c.vcell is None and c.parent is not None and c.parent.vcell is not None:
            v = _unbound_child(c.parent.vcell)
            if v is not None:
                c.vcell = v
                v.pcell = c
        for ch in c.children:
            if not ch.healthy:
                self._allocate_bad_cell(ch)

    def _release_bad_cell(self, c: PCell) -> None:
        self.bad_free[c.chain][c.level].append(c)
        v = c.vcell
        if v is not None:
            c.vcell = None
            v.pcell = None
        for ch in c.children:
            if not ch.healthy:
                self._release_bad_cell(ch)

    # --- mapping virtual placements to physical cells ---

    def _map_to_physical(self, vleaves: Sequence[VCell], chain: str) -> dict[int, PCell] | None:
        """Bindings id(virtual leaf) -> physical leaf, or None (HiveD mapVirtualPlacement)."""
        bindings: dict[int, PCell] = {}
        pre, nonpre = _binding_paths(vleaves, bindings)
        if pre:
            free = self.free[chain].snapshot()
            free_num = dict(self.all_vc_free[chain])
        for vx in pre:
            level = vx.cell.level
            start = _lowest_free_level(free, level)
            if start and self._buddy_alloc(vx, free, start, bindings):
                free_num[level] -= 1
            elif not self._safe_relaxed_buddy_alloc(vx, free, free_num, level, bindings):
                return None
        for group in nonpre:
            vparent = group[0].cell.parent  # a bound cell (how _binding_paths grouped them)
            assert vparent is not None and vparent.pcell is not None
            if self._map_cells(group, vparent.pcell.children, bindings) is None:
                return None
        return bindings

    def _buddy_alloc(self, vx: _Vertex, free: dict[int, list[PCell]], level: int,
                     bindings: dict[int, PCell]) -> bool:
        if level == vx.cell.level:
            picked = self._map_cells([vx], free[level], bindings)
            if picked is None:
                return False
            for c in picked:
                swap_remove(free[level], c)
            return True
        for c in _Usable(free[level]):
            free[level - 1] = free[level - 1] + list(c.children)
            if self._buddy_alloc(vx, free, level - 1, bindings):
                swap_remove(free[level], c)
                return True
            free[level - 1] = []
        return False

    def _safe_relaxed_buddy_alloc(self, vx: _Vertex, free: dict[int, list[PCell]],
                                  free_num: dict[int, int], level: int,
                                  bindings: dict[int, PCell]) -> bool:
        """Split higher cells the VCs do not need when buddy allocation hit bad cells."""
        top = max(free)
        splittable: dict[int, int] = {}
        cell: PCell | None = None
        for lv in range(top, level, -1):
            splittable[lv] = len(free[lv]) - free_num.get(lv, 0)
            if lv < top and cell is not None:
                splittable[lv] += splittable[lv + 1] * len(cell.children)
            if cell is None and free[lv]:
                cell = free[lv][0]
            elif cell is not None:
                cell = cell.children[0]
            if splittable[lv] < 0:
                raise SimError(f"hived: VC safety broken at chain {vx.cell.chain!r} level {lv}")
        for lv in range(level + 1, top + 1):
            n = min(len(free[lv]), splittable[lv])
            if n <= 0:
                continue
            split = []
            for _ in range(n):  # HiveD takes the head n times, each by swap-with-last
                head = free[lv][0]
                split.append(head)
                swap_remove(free[lv], head)
            splittable[lv] -= n
            for _ in range(lv, level, -1):
                split = [ch for c in split for ch in c.children]
            free[level] = split + free[level]
            picked = self._map_cells([vx], free[level], bindings)
            if picked is not None:
                for c in picked:
                    swap_remove(free[level], c)
                return True
        return False

    def _map_cells(self, verts: Sequence[_Vertex], candidates: Sequence[PCell],
                   bindings: dict[int, PCell]) -> list[PCell] | None:
        """Map virtual cells onto distinct candidates, recursively (backtracking search)."""
        if len(verts) == 1:  # the search below for one cell: the first candidate that maps
            vx = verts[0]
            for c in _Usable(candidates):
                if c.level == 1:
                    bindings[id(vx.cell)] = c
                    return [c]
                if self._map_cells(vx.children, c.children, bindings) is not None:
                    return [c]
            return None
        cands = _Usable(candidates)
        if not cands.has(len(verts)):
            return None
        picked: list[PCell] = []
        return picked if self._assign(0, verts, cands, set(), picked, bindings) else None

    def _assign(self, i: int, verts: Sequence[_Vertex], cands: _Usable, used: set[int],
                picked: list[PCell], bindings: dict[int, PCell]) -> bool:
        """`_map_cells`' backtracking search, from vertex `i` on.

        A method, not a closure: compiled, a recursive closure and its frame are a
        reference cycle per call, which only the cyclic collector frees.
        """
        if i == len(verts):
            return True
        vx = verts[i]
        j = -1
        while cands.has(j + 2):
            j += 1
            c = cands[j]
            if j in used:
                continue
            if c.level == 1:
                bindings[id(vx.cell)] = c
                ok = True
            else:
                ok = self._map_cells(vx.children, c.children, bindings) is not None
            if ok:
                used.add(j)
                picked.append(c)
                if self._assign(i + 1, verts, cands, used, picked, bindings):
                    return True
                used.discard(j)
                picked.pop()
        return False

    # --- queries for tests and reports ---

    def vc_has_bad_cells(self, vc: str) -> bool:
        """True when some of the VC's preassigned cells are bound to bad physical cells."""
        return any(self.vc_doomed[vc][ch][lv] for ch in self.vc_doomed[vc]
                   for lv in self.vc_doomed[vc][ch])

    def doomed_count(self, vc: str) -> int:
        """Preassigned cells of the VC currently doomed to bad hardware."""
        return sum(len(cells) for per in self.vc_doomed[vc].values() for cells in per.values())


# --- helpers ---


def _collect(root: VCell, by_level: dict[int, list[VCell]]) -> None:
    stack = [root]
    while stack:
        c = stack.pop()
        by_level.setdefault(c.level, []).append(c)
        stack.extend(reversed(c.children))


def _bind(pc: PCell, v: VCell) -> None:
    """Bind a virtual cell and its unbound ancestors to a physical cell's (HiveD bindCell)."""
    p: PCell | None = pc
    vv: VCell | None = v
    while vv is not None and vv.pcell is None and p is not None:
        p.vcell = vv
        vv.pcell = p
        vv = vv.parent
        p = p.parent


def _unbind(pc: PCell) -> None:
    """Unbind a leaf and its ancestors no other bound child holds (HiveD unbindCell)."""
    v = pc.vcell
    while v is not None and v.pcell is not None and not v.pcell.pinned:
        p = v.pcell
        v.pcell = None
        p.vcell = None
        parent = v.parent
        if parent is None or any(ch.pcell is not None for ch in parent.children):
            return
        v = parent


def _unbound(cells: Iterable[VCell]) -> VCell | None:
    for c in cells:
        if c.pcell is None:
            return c
    return None


def _unbound_child(v: VCell) -> VCell | None:
    return _unbound(v.children)


class _Usable:
    """Unbound, not-bad candidates, fewest opportunistic leaves first (HiveD's stable sort).

    Built lazily: cells free of opportunistic leaves come out in list order as they are
    met, so the usual search stops after a few cells instead of sorting the free list.
    """

    __slots__ = ("_src", "_i", "_out", "_later", "_done")

    def __init__(self, candidates: Sequence[PCell]) -> None:
        self._src = candidates
        self._i = 0
        self._out: list[PCell] = []
        self._later: list[PCell] = []
        self._done = False

    def has(self, n: int) -> bool:
        """True when at least `n` usable candidates exist (materializing as needed)."""
        out = self._out
        if len(out) >= n:
            return True
        if self._done:
            return False
        src = self._src
        i = self._i
        while len(out) < n:
            if i < len(src):
                c = src[i]
                i += 1
                if c.vcell is None and (c.multi_node or c.healthy):
                    if c.used.get(OPP):
                        self._later.append(c)
                    else:
                        out.append(c)
            else:
                self._later.sort(key=lambda c: c.used[OPP])
                out.extend(self._later)
                self._done = True
                break
        self._i = i
        return len(out) >= n

    def __getitem__(self, j: int) -> PCell:
        return self._out[j]

    def __iter__(self) -> Iterator[PCell]:
        j = 0
        while self.has(j + 1):
            yield self._out[j]
            j += 1


def _lowest_free_level(free: dict[int, list[PCell]], level: int) -> int:
    top = max(free)
    for lv in range(level, top + 1):
        if free[lv]:
            return lv
    return 0


def _binding_paths(vleaves: Sequence[VCell], bindings: dict[int, PCell]
                   ) -> tuple[list[_Vertex], list[list[_Vertex]]]:
    """Unbound virtual cells to bind, as trees (HiveD groupVirtualPlacement.toBindingPaths)."""
    vertices: dict[int, _Vertex] = {}
    pre: list[_Vertex] = []
    nonpre: list[list[_Vertex]] = []
    groups: dict[int, list[_Vertex]] = {}
    for leaf in vleaves:
        if leaf.pcell is not None:
            bindings[id(leaf)] = leaf.pcell
            continue
        path: list[VCell] = []
        c: VCell | None = leaf
        while c is not None:
            if c.pcell is not None or id(c) in vertices:
                break
            path.append(c)
            c = c.parent
        root = path[-1]
        vx = _Vertex(root)
        vertices[id(root)] = vx
        parent = root.parent
        if parent is None:
            pre.append(vx)
        elif parent.pcell is not None:
            grp = groups.get(id(parent))
            if grp is None:
                grp = groups[id(parent)] = []
                nonpre.append(grp)
            grp.append(vx)
        else:
            vertices[id(parent)].children.append(vx)
        for cell in reversed(path[:-1]):
            child = _Vertex(cell)
            vertices[id(cell.parent)].children.append(child)
            vertices[id(cell)] = child
    return pre, nonpre
