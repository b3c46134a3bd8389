"""`fgd`: fragmentation gradient descent (Weng et al., USENIX ATC 2023, Alibaba "openb").

A node's fragmentation against a workload is the free GPU capacity that a task drawn
from the workload could not use there. For each task shape (GPUs, milli-GPU per GPU,
CPUs, GPU type) of probability p it is p x (all the node's free GPU capacity) when the
task cannot run there (wrong GPU type, not enough CPU, or no GPUs with room for it), and
p x (the free capacity of partly used GPUs too small for it) when it can. FGD places a
task on the node, and a GPU share on the GPU, where this expected fragmentation grows
least (the "gradient"). This is the authors' `NodeGpuShareFragAmountScore` (their
kubernetes-scheduler-simulator, fgd_score.go); the `fragmentation_fgd` metric is the
same measure without the CPU term.

Choices and simplifications, stated (where this departs from the paper):
* The workload is learned online, as the jobs seen so far, refreshed (when next asked
  for) once their number has grown by 10%; a fixed workload can be given instead. In a
  run the engine shows the placer every submitted job (`observe`), and then only those
  count; a placer never observed learns from the jobs it is asked to place. The authors
  compute the workload from the whole trace beforehand.
* Ties (equal gradient) go to the node left with the least free GPU capacity, then the
  lowest node index (the authors' scheduler picks randomly among equal integer scores).
* Inside a node, whole GPUs come from its tightest cell (switch, then socket), so FGD
  does not pay needless locality slowdowns; a share goes on the best partly used GPU.
* A task larger than a node cannot be scored per node: it goes to `fallback`
  (consolidated by default, the engine's default placer). CPU-only pods are left out of
  the workload: in the authors' experiments they are in it, but a CPU-only shape counts
  all of a node's free GPU capacity as fragmented whether it fits or not, which moves
  every candidate's gradient by the same amount (its probability x the task's GPUs) and
  so never changes the choice.
* A CPU-only job that asks for CPUs, memory or disk is placed as the authors' scorer does
  it: on the node whose fragmentation grows least when those CPUs are gone (a node
  without GPUs, or with none free, grows none), ties as above (so nodes without free GPU
  capacity first, then the lowest index); the other placers best-fit CPU-only jobs by
  free CPUs (`place_host`).
* The tasks of a gang are placed one by one, each by FGD on the state the earlier ones
  leave, on a scratch twin of the cluster (`sandbox()`): the placer never changes the
  state it reads.
Nodes with equal state (GPU type and size, free GPU multiset, free CPUs) score alike, so
they are grouped and each group is scored once. The groups of each cluster object the
placer is asked about (the live state, its scratch twin, ...) are kept current from that
cluster's change set (`watch()`), so a placement re-reads only the nodes that changed
since the last one on the same cluster, and switching between clusters never rescans.
"""

from __future__ import annotations

import math
import weakref
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from typing import Any

from schedlab.policies.placement.base import (
    candidate_types,
    host_need,
    host_text,
    place_host,
    reject_early,
    speed_tiers,
)
from schedlab.policies.placement.consolidated import ConsolidatedPlacer
from schedlab.sim.fragmentation import unusable_gpus
from schedlab.sim.interfaces import ClusterView, Placer
from schedlab.sim.model import (
    MILLI,
    HostPlacement,
    JobSpec,
    Level,
    Placement,
    Unschedulable,
    job_milli,
)
from schedlab.sim.roles import has_roles

__all__ = ["FgdPlacer", "NodeGroups", "ShapeCounter", "node_fragmentation", "shape_of"]

Shape = tuple[int, int, float, str]  # GPUs per task, milli per GPU, CPUs per task, type
Workload = tuple[tuple[Shape, float], ...]  # shapes with their probabilities
# a node's scoring state: GPU type, GPUs, whole free GPUs, free milli of shared GPUs
# (sorted), free CPUs (inf when the node does not model CPUs)
State = tuple[str, int, int, tuple[int, ...], float]


def shape_of(spec: JobSpec) -> Shape:
    """The FGD shape of one task of a GPU job."""
    tasks = spec.num_tasks
    return (spec.task_gpus, job_milli(spec), spec.num_cpus / tasks, spec.gpu_type)


def node_fragmentation(state: State, workload: Workload) -> float:
    """Expected free GPU capacity (GPUs) of a node that a task of `workload` cannot use."""
    gpu_type, capacity, whole, partial, cpu_free = state
    free_total = whole + sum(partial) / MILLI
    if free_total <= 0:
        return 0.0
    frag = 0.0
    for (gpus, milli, cpus, typ), p in workload:
        if (typ and typ != gpu_type) or cpus > cpu_free + 1e-9:
            frag += p * free_total  # wrong GPU type or too few CPUs: nothing is usable
        else:
            frag += p * unusable_gpus(capacity, whole, partial, gpus, milli)
    return frag


class ShapeCounter:
    """Online workload: counts of task shapes, as a Workload."""

    def __init__(self) -> None:
        self.counts: dict[Shape, int] = {}
        self.total = 0
        self.built_at = 0
        self.workload: Workload = ()

    def add(self, spec: JobSpec) -> None:
        """Count the tasks of one GPU job."""
        if spec.num_gpus > 0:
            k = shape_of(spec)
            self.counts[k] = self.counts.get(k, 0) + spec.num_tasks
            self.total += spec.num_tasks

    def current(self) -> Workload:
        """The mix, rebuilt when the count grew by 10% since the last build."""
        if self.total and self.total >= max(self.built_at + 1, 1.1 * self.built_at):
            self.built_at = self.total
            self.workload = tuple((k, c / self.total) for k, c in sorted(self.counts.items()))
        return self.workload


def _pick(cluster: ClusterView, cell: int, n: int) -> list[int]:
    """Pick `n` whole free GPUs under `cell`: best fit among sub-cells, else fullest first.

    Strict best fit at every level (unlike `take_gpus`, no first-free-GPU shortcut): the
    sub-cell with the fewest free GPUs that still holds n, ties to the lowest id. The
    descent is a loop (it runs on every placement); only a spread over sub-cells recurses.
    """
    cells = cluster.topo.cells
    free = cluster.cell_free
    c = cells[cell]
    while c.level != Level.GPU:
        best = -1
        best_free = 0
        for k in c.children:
            f = free[k]
            if f >= n and f > 0 and (best < 0 or f < best_free
                                     or (f == best_free and k < best)):
                best, best_free = k, f
        if best < 0:
            return _spread(cluster, c.children, n)
        c = cells[best]
    return [c.gpu_lo]


def _spread(cluster: ClusterView, kids: Iterable[int], n: int) -> list[int]:
    """`n` whole free GPUs over sibling cells none of which holds them all, fullest first."""
    free = cluster.cell_free
    out: list[int] = []
    for k in sorted((k for k in kids if free[k] > 0), key=lambda k: (-free[k], k)):
        out.extend(_pick(cluster, k, min(free[k], n - len(out))))
        if len(out) == n:
            break
    return out


class NodeGroups:
    """Healthy nodes of one cluster grouped by scoring state, kept current node by node.

    Nodes without GPUs are grouped too (state `('', 0, 0, (), free CPUs)`): only CPU-only
    jobs are placed on them.

    Holds that cluster's change set (`watch()`), not the cluster itself.
    """

    def __init__(self, cluster: ClusterView) -> None:
        n = len(cluster.topo.nodes)
        self.raw: list[tuple | None] = [None] * n  # per node: (GPU frees, CPUs, up) seen
        self.state: list[State | None] = [None] * n
        # per state: its nodes, sorted (plain lists: bisect moves a node in a few us,
        # a SortedList costs several times that and groups hold at most every node)
        self.groups: dict[State, list[int]] = {}
        self.changed = cluster.watch()  # starts with every node

    def sync(self, cluster: ClusterView) -> None:
        """Re-read the nodes that changed since the last sync (the cluster it watches)."""
        if self.changed:
            self.refresh(cluster, sorted(self.changed))
            self.changed.clear()

    def refresh(self, cluster: ClusterView, nodes: Iterable[int]) -> None:
        """Recompute the state of these nodes and move them between groups."""
        topo = cluster.topo
        gf = cluster.gpu_free
        groups = self.groups
        for i in nodes:
            spec = topo.nodes[i]
            cell = topo.cells[spec.cell]
            frees = tuple(gf[cell.gpu_lo:cell.gpu_hi])
            cpu = cluster.node_cpu_free[i] if spec.num_cpus > 0 else math.inf
            raw = (frees, cpu, cluster.node_up[i])
            if raw == self.raw[i]:
                continue
            self.raw[i] = raw
            old = self.state[i]
            if old is not None:
                grp = groups[old]
                del grp[bisect_left(grp, i)]
                if not grp:
                    del groups[old]
            new: State | None = None
            if cluster.node_up[i]:
                new = (spec.gpu_type, spec.num_gpus, *_split(frees), cpu)
                into = groups.get(new)
                if into is None:
                    groups[new] = [i]
                else:
                    insort(into, i)
            self.state[i] = new


def _split(frees: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(whole free GPUs, free milli of the shared ones, sorted) of a node's GPU frees.

    Counted in C (`tuple.count`); the shared ones are sorted only when there are some.
    """
    whole = frees.count(MILLI)
    if whole + frees.count(0) == len(frees):
        return whole, ()
    return whole, tuple(sorted(f for f in frees if 0 < f < MILLI))


def _hold(cluster: ClusterView) -> Callable[[], Any]:
    """A weak reference to `cluster`, or a strong one for a view that cannot be weakly held."""
    try:
        return weakref.ref(cluster)
    except TypeError:
        return lambda: cluster


class FgdPlacer:
    """Place each task where the node's expected fragmentation grows least (FGD)."""

    name = "fgd"
    spread = False  # a task that fits a node always goes on one node

    def __init__(self, workload: Iterable[tuple[Shape, float]] | None = None,
                 fallback: Placer | None = None) -> None:
        self.given: Workload | None = tuple(workload) if workload is not None else None
        self.fallback: Placer = fallback or ConsolidatedPlacer()
        self.learned = ShapeCounter()
        self.observing = False  # set by `observe`: then only observed jobs are learned
        self._seen: set[str] = set()  # jobs learned from placement requests
        # per cluster object (by id): a reference to it and its node groups
        self._views: dict[int, tuple[Callable[[], Any], NodeGroups]] = {}
        self._frag: dict[State, float] = {}
        self._best: dict[tuple, tuple[float, int, int] | None] = {}
        self._for: Workload | None = None

    # --- workload and fragmentation ---

    def observe(self, job: JobSpec) -> None:
        """Learn the workload from a submitted job (the engine calls this on each one)."""
        self.observing = True
        self.learned.add(job)

    def workload(self) -> Workload:
        """The workload to score against: the given one, else the learned mix."""
        return self.given if self.given is not None else self.learned.current()

    def frag(self, state: State) -> float:
        """Fragmentation of a node state against the current workload (cached)."""
        v = self._frag.get(state)
        if v is None:
            v = node_fragmentation(state, self._for or ())
            if len(self._frag) < 500_000:
                self._frag[state] = v
        return v

    def option(self, state: State, n: int, milli: int, cpus: float
               ) -> tuple[float, int, int] | None:
        """(gradient, free milli left, shared GPU's room or -1) of the best spot, or None.

        A share may go on a shared GPU with enough room (one option per distinct room)
        or on a whole free GPU; whole GPUs simply become busy.
        """
        key = (state, n, milli, cpus)
        if key in self._best:
            return self._best[key]
        gpu_type, capacity, whole, partial, cpu = state
        out: tuple[float, int, int] | None = None
        if cpus <= cpu + 1e-9:
            before = self.frag(state)
            total = whole * MILLI + sum(partial)
            rest_cpu = cpu - cpus
            if milli == MILLI:
                if whole >= n:
                    after = self.frag((gpu_type, capacity, whole - n, partial, rest_cpu))
                    out = (after - before, total - n * MILLI, -1)
            else:
                for f in sorted(set(partial)):
                    if f < milli:
                        continue
                    rest = list(partial)
                    rest.remove(f)
                    if f > milli:
                        rest.append(f - milli)
                    after = self.frag((gpu_type, capacity, whole, tuple(sorted(rest)),
                                       rest_cpu))
                    if out is None or after - before < out[0]:
                        out = (after - before, total - milli, f)
                if whole:
                    after = self.frag((gpu_type, capacity, whole - 1,
                                       tuple(sorted((*partial, MILLI - milli))), rest_cpu))
                    if out is None or after - before < out[0]:
                        out = (after - before, total - milli, -1)
        if len(self._best) < 500_000:
            self._best[key] = out
        return out

    # --- placement ---

    def place(self, job: JobSpec, cluster: ClusterView) -> Placement:
        """GPU indices for the whole gang, or Unschedulable (Placer protocol).

        A job with roles is placed by the fallback placer (`place_roles`).
        """
        if job.tasks and has_roles(job):
            return self.fallback.place(job, cluster)
        if job.num_gpus == 0:
            return self._host(job, cluster)
        types = candidate_types(job, cluster)
        early = reject_early(job, cluster, types)
        if early is not None:
            return early
        if not self.observing and job.job_id not in self._seen:
            self._seen.add(job.job_id)
            self.learned.add(job)
        n = job.task_gpus
        if n > max(cluster.max_node_gpus.get(t, 0) for t in types):
            return self.fallback.place(job, cluster)
        self._refresh()
        got = None
        for tier in speed_tiers(job, types):  # the fastest types that can hold it
            if n > max(cluster.max_node_gpus.get(t, 0) for t in tier):
                continue
            got = self._task(job, cluster, tier, n, job_milli(job)) \
                if job.num_tasks == 1 else self._gang(job, cluster, tier, n)
            if got is not None:
                break
        if got is None:
            return Unschedulable(
                f"no node fits {job.num_gpus} GPUs{host_text(job)} now "
                f"({cluster.free_whole} free)", True)
        return tuple(sorted(got))

    def place_side(self, job: JobSpec, role: Any, cluster: ClusterView,
                   near: tuple[int, ...] = ()) -> Any:
        """One non-gang task of a job with roles: the fallback placer's answer."""
        side = getattr(self.fallback, "place_side", None)
        return None if side is None else side(job, role, cluster, near)

    def _refresh(self) -> None:
        """Drop the cached scores when the workload they were computed for changed."""
        workload = self.workload()
        if workload is not self._for:
            self._frag, self._best, self._for = {}, {}, workload

    def _host(self, job: JobSpec, cluster: ClusterView) -> Placement:
        """A CPU-only job: the node scored best for its CPUs (n = 0 GPUs), with its memory."""
        cpus, mem, disk = host_need(job, 0)
        if cpus <= 0 and mem <= 0 and disk <= 0:
            return ()
        self._refresh()
        groups = self.groups_for(cluster)
        scored = []
        for state, members in groups.groups.items():
            opt = self.option(state, 0, MILLI, cpus)
            if opt is not None:
                scored.append((opt[0], opt[1], members[0], opt[2], state))
        best = self._choose(cluster, groups, scored, mem, disk)
        if best is None:  # no node has room: place_host says why
            return place_host(job, cluster)
        return HostPlacement(best[0])

    def groups_for(self, cluster: ClusterView) -> NodeGroups:
        """The node groups of this cluster object, brought up to date."""
        entry = self._views.get(id(cluster))
        if entry is None or entry[0]() is not cluster:
            for key in [k for k, (ref, _) in self._views.items() if ref() is None]:
                del self._views[key]  # clusters gone since (e.g. a dropped twin)
            entry = self._views[id(cluster)] = (_hold(cluster), NodeGroups(cluster))
        entry[1].sync(cluster)
        return entry[1]

    def _gang(self, job: JobSpec, cluster: ClusterView, types: list[str], n: int
              ) -> list[int] | None:
        """Tasks one by one, each by FGD on the state the earlier ones leave (a twin)."""
        taken: list[int] = []
        cpus, mem, disk = host_need(job, n)
        with cluster.sandbox() as scratch:
            for _ in range(job.num_tasks):
                got = self._task(job, scratch, types, n, MILLI)
                if got is None:
                    return None
                scratch.allocate(-1, got, MILLI, cpus, mem, disk)
                taken.extend(got)
        return taken

    @staticmethod
    def _candidates(groups: NodeGroups, types: list[str], n: int, milli: int
                    ) -> list[State]:
        """Distinct states of the nodes that may hold the task, read off the node groups.

        Nodes with k >= n whole free GPUs, or for a share a whole free GPU or a shared
        one with room (the nodes the cluster's `node_buckets` and `partial` indexes
        give). The groups are few (equal nodes share one), so this reads far fewer
        entries than a walk over those indexes' nodes.
        """
        if milli == MILLI:
            return [st for st in groups.groups if st[2] >= n and st[0] in types]
        return [st for st in groups.groups
                if (st[2] > 0 or (st[3] and st[3][-1] >= milli)) and st[0] in types]

    def _task(self, job: JobSpec, cluster: ClusterView, types: list[str], n: int,
              milli: int) -> list[int] | None:
        """The best (node, GPUs) for one task of n GPUs (n = 1 for a share)."""
        groups = self.groups_for(cluster)
        cpus = job.num_cpus / job.num_tasks
        _, mem, disk = host_need(job, n)
        scored = []
        for state in self._candidates(groups, types, n, milli):
            opt = self.option(state, n, milli, cpus)
            if opt is not None:
                scored.append((opt[0], opt[1], groups.groups[state][0], opt[2], state))
        best = self._choose(cluster, groups, scored, mem, disk)
        if best is None:
            return None
        return self._gpus_on(cluster, best[0], best[1], n if milli == MILLI else 1)

    @staticmethod
    def _choose(cluster: ClusterView, groups: NodeGroups, scored: list, mem: float,
                disk: float) -> tuple[int, int] | None:
        """(node, room) of the best scored state with a node that has `mem` and `disk` free.

        `scored` holds (score, left, first node, room, state), lower is better; among
        equal (score, left) the lowest node that fits wins.
        """
        scored.sort()
        i = 0
        while i < len(scored):
            j = i
            while j < len(scored) and scored[j][:2] == scored[i][:2]:
                j += 1
            best: tuple[int, int] | None = None
            for _, _, _, room, state in scored[i:j]:
                for node in groups.groups[state]:
                    if best is not None and node >= best[0]:
                        break
                    if (mem <= 0 and disk <= 0) or cluster.node_fits_host(node, 0.0, mem,
                                                                            disk):
                        best = (node, room)
                        break
            if best is not None:
                return best
            i = j
        return None

    def _gpus_on(self, cluster: ClusterView, node: int, room: int, n: int) -> list[int]:
        """The GPUs of the chosen spot: n whole ones, or the shared GPU with `room` free."""
        topo = cluster.topo
        cell = topo.nodes[node].cell
        if room < 0:
            return _pick(cluster, cell, n)
        c = topo.cells[cell]
        gf = cluster.gpu_free
        return [next(g for g in range(c.gpu_lo, c.gpu_hi) if gf[g] == room)]
