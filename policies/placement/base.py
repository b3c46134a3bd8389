"""The shared search of the built-in placers: tightest cells from the cluster's indexes.

Every placer answers from the cluster state's indexes (tightest cell per level, nodes
bucketed by free GPUs), so a placement costs O(levels x types) lookups plus the size of
the chosen cells, not a scan of the cluster. Multi-node placements walk nodes from the
most free down and stop as soon as the job is covered. A gang (several tasks) is placed
task by task on a scratch twin of the state (`sandbox()`), so a placer only ever reads
the state it is asked about.

A CPU-only job (no GPUs) that asks for CPUs, memory or disk goes on one node, the same
for every placer (`place_host`): best fit by free CPUs among the healthy nodes that have
all three free, nodes without GPUs before nodes with GPUs (so CPU work leaves the GPU
nodes' CPUs to GPU jobs), from the cluster's host index. One that asks for nothing holds
nothing and is placed at once (`()`).

A job with roles (contract.md#sec-2 `tasks`, `schedlab.sim.roles.has_roles`) is placed task by task
(`place_roles`): the gang's GPU tasks all or nothing, the largest first, each on one node
through the placer's own one-node search (`_single_node`), then its CPU-only gang tasks
(TensorFlow `ps`) on host capacity, preferring the nodes of the GPU tasks in the order they
were placed, else best fit by free CPUs as for a CPU-only job. Non-gang tasks are not
part of the placement: the engine asks `place_side` for each while the gang runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from itertools import islice
from operator import itemgetter
from typing import Any, ClassVar, Final

from mypy_extensions import mypyc_attr

from schedlab.sim.cfuncs import bisect_left
from schedlab.sim.cluster import ClusterState
from schedlab.sim.interfaces import ClusterView
from schedlab.sim.jobstate import plain_spec
from schedlab.sim.model import (
    MILLI,
    HostPlacement,
    JobSpec,
    Level,
    Placement,
    RolePlacement,
    TaskPlacement,
    TaskRole,
    Unschedulable,
    job_milli,
)
from schedlab.sim.roles import gang_tasks, has_roles

__all__ = ["BasePlacer", "OneNode", "candidate_types", "host_need", "place_host",
           "place_role_task", "place_roles", "role_task_spec", "speed_tiers", "take_gpus"]


def candidate_types(job: JobSpec, cluster: ClusterView) -> list[str]:
    """GPU types the job may run on (all types when the trace leaves it open)."""
    if job.gpu_type:
        return [job.gpu_type] if job.gpu_type in cluster.topo.gpu_types else []
    return list(cluster.topo.gpu_types)


def speed_tiers(job: JobSpec, types: list[str]) -> list[list[str]]:
    """The job's allowed types grouped by its speed on them, fastest first.

    Every placer tries the tiers in turn, so a job with `gpu_speeds` goes on the fastest
    type that can hold it now, even under a type-blind policy; a job without them (or
    with one type to choose from) has one tier, the search of a single-type cluster.
    """
    if not job.gpu_speeds or len(types) < 2:
        return [types]
    tiers: dict[float, list[str]] = {}
    for t in types:
        tiers.setdefault(job.speed_on(t), []).append(t)
    return [tiers[v] for v in sorted(tiers, reverse=True)]


def take_gpus(cluster: ClusterView, cell: int, n: int) -> list[int]:
    """Pick n whole free GPUs under `cell`, filling the fullest sub-cells first.

    Best fit: the fullest child that still holds all n, else the children from the most
    free down. Inside a GPU parent (as many children as GPUs) that is simply the first n
    free GPUs, and a cell with exactly n free gives all of them: both are read off the
    GPUs' free counts directly (the same GPUs the search picks; callers sort them).
    """
    free_milli = cluster.gpu_free
    if isinstance(cluster, ClusterState):  # the common cases, from its tables
        lo, hi = cluster.layout.gpu_span[cell]
        if hi:
            if n == 1:
                for g in range(lo, hi):
                    if free_milli[g] == MILLI:
                        return [g]
            else:
                first: list[int] = []
                for g in range(lo, hi):
                    if free_milli[g] == MILLI:
                        first.append(g)
                        if len(first) == n:
                            return first
    if cluster.cell_free[cell] == n:
        whole = cluster.topo.cells[cell]
        return [g for g in range(whole.gpu_lo, whole.gpu_hi) if free_milli[g] == MILLI]
    topo = cluster.topo
    c = topo.cells[cell]
    if c.level == Level.GPU:
        return [c.gpu_lo]
    if n == 1 and c.gpu_hi - c.gpu_lo == len(c.children):  # a GPU parent: first free GPU
        gf = cluster.gpu_free
        for g in range(c.gpu_lo, c.gpu_hi):
            if gf[g] == MILLI:
                return [g]
    free = cluster.cell_free
    kids = [k for k in c.children if free[k] > 0]
    fit = [k for k in kids if free[k] >= n]
    if fit:  # best fit: the fullest child that still holds all n
        best = min(fit, key=lambda k: (free[k], k))
        return take_gpus(cluster, best, n)
    out: list[int] = []
    for k in sorted(kids, key=lambda k: (-free[k], k)):
        m = min(free[k], n - len(out))
        out.extend(take_gpus(cluster, k, m))
        if len(out) == n:
            break
    return out


def host_need(job: JobSpec, k: int) -> tuple[float, float, float]:
    """CPUs, memory and disk that k of the job's GPUs bring with them (CPU-only: all).

    `num_cpus` and `mem_gb` are the job's totals, `disk_gb` is per task; all are spread
    over the job's GPUs in proportion.
    """
    disk = job.disk_gb * job.num_tasks if job.disk_gb else 0.0
    if job.num_gpus <= 0:
        return job.num_cpus, job.mem_gb, disk
    f = k / job.num_gpus
    return job.num_cpus * f, job.mem_gb * f, disk * f


def host_text(job: JobSpec) -> str:
    """' with 8 CPUs, 32 GB memory' for a job's host asks ('' when it asks for none)."""
    total = (job.num_cpus, job.mem_gb, job.disk_gb * job.num_tasks)
    ask = ", ".join(f"{v:g} {unit}" for v, unit in zip(
        total, ("CPUs", "GB memory", "GB disk"), strict=True) if v > 0)
    return f" with {ask}" if ask else ""


def place_host(job: JobSpec, cluster: ClusterView) -> Placement:
    """Where a CPU-only job goes: best fit by free CPUs (see the module docstring).

    `()` for a job that asks for no host resources; Unschedulable when no node has them
    free now (resolvable) or could ever hold them (not resolvable).
    """
    cpus, mem, disk = host_need(job, 0)
    if cpus <= 0 and mem <= 0 and disk <= 0:
        return ()
    for node in cluster.host_nodes(cpus):
        if cluster.node_fits_host(node, cpus, mem, disk):
            return HostPlacement(node)
    never = cluster.host_capacity_shortfall(cpus, mem, disk)
    if never:
        return Unschedulable(never, False)
    return Unschedulable(f"no healthy node has{host_text(job)[5:]} free now", True)


def reject_early(job: JobSpec, cluster: ClusterView, types: list[str]) -> Placement | None:
    """The answer every placer gives before searching, or None when it must search.

    A CPU-only job's placement (`place_host`); no allowed type, more GPUs than the
    allowed types have, or (whole GPUs) more than are free now.
    """
    if job.num_gpus == 0:
        return place_host(job, cluster)
    if not types:
        return Unschedulable(f"no GPU of type {job.gpu_type!r} in the topology", False)
    capacity = sum(cluster.topo.gpu_types[t] for t in types)
    if job.num_gpus > capacity:
        return Unschedulable(
            f"needs {job.num_gpus} GPUs, the topology has {capacity} of the allowed types",
            False,
        )
    if job_milli(job) == MILLI and job.num_gpus > sum(cluster.free_by_type[t] for t in types):
        return Unschedulable(
            f"needs {job.num_gpus} GPUs, {cluster.free_whole} are free now", True
        )
    return None


_NO_NODES: Final[frozenset[int]] = frozenset()
_LAST: Final = itemgetter(-1)  # the cell of a tightest-cell index key
_PLAIN: Final[dict[type, bool]] = {}  # per placer class: is its one-task search the base one?
_NO_FIT: Final[dict[tuple[int, int], Unschedulable]] = {}
"""`_place_plain`'s refusals by (GPUs asked, whole GPUs free): most placements on a
contended cluster fail, and each would otherwise build the same answer again."""


def _some_node_has(cluster: ClusterState, types: list[str], n: int) -> bool:
    """Whether a node of one of `types` has at least n whole GPUs free (its buckets).

    A cell's free GPUs are at most its node's, so without such a node no cell fits n.
    """
    for t in types:
        buckets = cluster.node_buckets[t]
        for k in range(len(buckets) - 1, n - 1, -1):
            if buckets[k]:
                return True
    return False


def _first_usable(keys: Iterable[Any], cell_of: Callable[[Any], int], cluster: ClusterView,
                  avoid: frozenset[int], cpus: float, mem: float, disk: float) -> Any:
    """The first index key whose cell's node is not avoided and has the host asks free.

    `cell_of`: a key's cell (keys of `cells_fitting`, or `ClusterState.index_codes`).
    """
    cells = cluster.topo.cells
    for key in keys:
        node = cells[cell_of(key)].node
        if node not in avoid and cluster.node_fits_host(node, cpus, mem, disk):
            return key
    return None


@mypyc_attr(allow_interpreted_subclasses=True)
class BasePlacer:
    """Shared search logic; subclasses choose the order and whether to spread."""

    # class-level, as subclasses set it: compiled, the class would read an instance
    # default instead, blind to an interpreted subclass's own value (setup.py)
    name = "base"
    spread: ClassVar[bool] = True  # may a job that fits one node be spread over several?

    def place(self, job: JobSpec, cluster: ClusterView) -> Placement:
        """GPU indices for the whole gang (sorted), or Unschedulable (Placer protocol).

        A job with roles gets a `RolePlacement` (`place_roles`).
        """
        if (type(cluster) is ClusterState and job.num_gpus > 0
                and (plain_spec(job) or (
                    not job.tasks and not job.gpus_per_task and job.gpu_share >= 1.0
                    and not job.gpu_speeds and not (job.num_cpus or job.mem_gb or job.disk_gb)))
                and (_PLAIN.get(type(self)) or self._is_plain())):
            return self._place_plain(job, cluster)
        if job.tasks and has_roles(job):
            return place_roles(job, cluster, self._one_node)
        if isinstance(cluster, ClusterState):
            types, tiers = self._type_plan(job, cluster)
        else:
            types = candidate_types(job, cluster)
            tiers = speed_tiers(job, types)
        early = reject_early(job, cluster, types)
        if early is not None:
            return early
        milli = job_milli(job)
        got = None
        for tier in tiers:  # the fastest types that can hold it
            if milli < MILLI:
                got = self._place_fraction(job, cluster, tier, milli)
            elif job.num_tasks == 1:
                got = self._place_task(job, cluster, tier, job.num_gpus)
            else:
                got = self._place_gang(job, cluster, tier)
            if got is not None:
                break
        if got is None:
            return Unschedulable(
                f"no placement for {job.num_gpus} GPUs{host_text(job)} now "
                f"({cluster.free_whole} free)", True
            )
        return tuple(sorted(got))

    def _is_plain(self) -> bool:
        """True when this placer's one-task search is the base one (`_place_plain` applies)."""
        cls = type(self)
        plain = _PLAIN.get(cls)
        if plain is None:
            plain = _PLAIN[cls] = all(getattr(cls, m) is getattr(BasePlacer, m) for m in (
                "_place_task", "_single_node", "_single_node_indexed", "_search_plan",
                "_type_plan", "_host_need"))
        return plain

    def _place_plain(self, job: JobSpec, cluster: ClusterState) -> Placement:
        """`place` of one task of whole GPUs asking no host resources and no speeds.

        The common case (93 % of Philly's jobs ask one GPU and nothing else) searched
        inline: the same checks, index lists and answers as `place`, fewer calls.
        """
        n = job.num_gpus
        types = self._type_plan(job, cluster)[0]
        by_type = cluster.free_by_type
        size = cluster.topo.gpu_types
        cap = free = 0
        for t in types:
            cap += size[t]
            free += by_type[t]
        if not types or n > cap or n > free:  # `reject_early` answers: its reasons
            early = reject_early(job, cluster, types)
            assert early is not None
            return early
        got = self._single_node_indexed(cluster, types, n, _NO_NODES, False, 0.0, 0.0, 0.0)
        if got is not None:
            return (got[0],) if n == 1 else tuple(sorted(got))
        if self.spread or n > max(cluster.max_node_gpus.get(t, 0) for t in types):
            multi = self._multi_node(job, cluster, types, n, _NO_NODES)
            if multi is not None:
                return tuple(sorted(multi))
        free_now = cluster.free_whole
        no = _NO_FIT.get((n, free_now))
        if no is None:  # the answer is immutable: one per (size, free GPUs), shared
            if len(_NO_FIT) >= 65_536:  # (a long-lived worker runs many clusters)
                _NO_FIT.clear()
            no = _NO_FIT[(n, free_now)] = Unschedulable(
                f"no placement for {n} GPUs now ({free_now} free)", True)
        return no

    # -- fractional jobs share a GPU: best-fit among partly used GPUs, else a whole one --
    def _place_fraction(self, job: JobSpec, cluster: ClusterView, types: list[str],
                        milli: int) -> list[int] | None:
        best: tuple[int, int] | None = None
        cpus, mem, disk = host_need(job, 1)
        for t in types:
            lst = cluster.partial[t]
            for free, g in lst[bisect_left(lst, (milli, -1)):]:
                if cluster.node_fits_host(cluster.topo.gpu_node[g], cpus, mem, disk):
                    if best is None or (free, g) < best:
                        best = (free, g)
                    break
        if best is not None:
            return [best[1]]
        return self._place_task(job, cluster, types, 1)

    # -- one task of n GPUs --
    def _place_task(self, job: JobSpec, cluster: ClusterView, types: list[str],
                    n: int, avoid: frozenset[int] = frozenset()) -> list[int] | None:
        got = self._single_node(job, cluster, types, n, avoid)
        if got is not None:
            return got
        # the largest node of the allowed types, not of the whole cluster
        if not self.spread and n <= max(cluster.max_node_gpus.get(t, 0) for t in types):
            return None
        return self._multi_node(job, cluster, types, n, avoid)

    _host_need = staticmethod(host_need)  # CPUs, memory, disk that k GPUs bring with them

    def _single_node(self, job: JobSpec, cluster: ClusterView, types: list[str], n: int,
                     avoid: frozenset[int]) -> list[int] | None:
        topo = cluster.topo
        cpus, mem, disk = self._host_need(job, n)
        if isinstance(cluster, ClusterState):  # read its index directly (it stays still)
            return self._single_node_indexed(cluster, types, n, avoid,
                                             cpus > 0 or mem > 0 or disk > 0, cpus, mem, disk)
        for level in topo.levels:
            if level > Level.NODE or (level == Level.GPU and n > 1):
                continue
            best: tuple[int, ...] | None = None
            for t in types:
                # one GPU: the tightest GPU-parent cell (GPUs themselves are not indexed)
                where = cluster.gpu_parent_levels[t] if level == Level.GPU else (level,)
                for lv in where:
                    key = _first_usable(cluster.cells_fitting(t, lv, n), _LAST, cluster, avoid,
                                        cpus, mem, disk)
                    if key is not None and (best is None or key < best):
                        best = key
            if best is not None:
                return take_gpus(cluster, best[-1], n)
        return None

    def _type_plan(self, job: JobSpec, cluster: ClusterState
                   ) -> tuple[list[str], list[list[str]]]:
        """`candidate_types` and `speed_tiers` of the job, memoised per type and speeds."""
        if self._plans_layout is not cluster.layout:
            self._plans = {}
            self._plans_layout = cluster.layout
        key = ("types", job.gpu_type, () if plain_spec(job) else job.gpu_speeds)
        got = self._plans.get(key)
        if got is None:
            types = candidate_types(job, cluster)
            got = self._plans[key] = (types, speed_tiers(job, types))
        return got

    def _search_plan(self, cluster: ClusterState, types: list[str], n: int
                     ) -> tuple[tuple[tuple[str, Level], ...], ...]:
        """The (type, level) index lists `_single_node` reads, level by level (memoised)."""
        if self._plans_layout is not cluster.layout:
            self._plans = {}
            self._plans_layout = cluster.layout
        key = (n, *types)
        plan = self._plans.get(key)
        if plan is None:
            steps = []
            for level in cluster.topo.levels:
                if level > Level.NODE or (level == Level.GPU and n > 1):
                    continue
                steps.append(tuple(
                    (t, lv) for t in types
                    for lv in (cluster.gpu_parent_levels[t] if level == Level.GPU else (level,))))
            plan = self._plans[key] = tuple(steps)
        return plan

    _plans: dict[tuple[Any, ...], Any]  # memoised search plans (`_search_plan`, `_type_plan`)
    _plans_layout: Any = None  # the layout the memoised plans are of (set on first use)

    def _single_node_indexed(self, cluster: ClusterState, types: list[str], n: int,
                             avoid: frozenset[int], host: bool, cpus: float, mem: float,
                             disk: float) -> list[int] | None:
        """`_single_node` on a ClusterState: the same search over its index lists.

        Nothing changes the state during the search, so each index list is brought up to
        date once and bisected directly. When no node of the types has n whole GPUs free
        (the node buckets say so at once), no cell has: the search fails without reading
        (and so re-keying) any list, as most searches of a contended cluster do.
        """
        if not _some_node_has(cluster, types, n):
            return None
        codec = cluster.codec
        check = host or avoid
        start = codec.probe(n)
        for step in self._search_plan(cluster, types, n):
            best = -1  # the smallest code found (codes compare as their keys do)
            for t, lv in step:
                lst = cluster.index_codes(t, lv)
                if not lst:
                    continue
                i = bisect_left(lst, start)
                if not check:  # the first key that fits is the list's tightest cell
                    key = lst[i] if i < len(lst) else -1
                else:
                    got = _first_usable(islice(lst, i, None), codec.last, cluster, avoid,
                                        cpus, mem, disk)
                    key = -1 if got is None else got
                if key >= 0 and (best < 0 or key < best):
                    best = key
            if best >= 0:
                return take_gpus(cluster, codec.last(best), n)
        return None

    def _nodes_by_free(self, cluster: ClusterView, t: str) -> Iterator[int]:
        """Nodes of type t with free GPUs, most free first (stops when the caller does)."""
        buckets = cluster.node_buckets[t]
        for k in range(len(buckets) - 1, 0, -1):
            yield from buckets[k]

    def _multi_node(self, job: JobSpec, cluster: ClusterView, types: list[str], n: int,
                    avoid: frozenset[int]) -> list[int] | None:
        topo = cluster.topo
        best: list[int] | None = None
        best_key: tuple[int, int] | None = None
        for t in types:
            chosen: list[tuple[int, int]] = []
            remaining = n
            # without spreading, a job takes no more nodes than its size needs: once that
            # many are chosen short of n, it does not fit this type
            most = 0 if self.spread else -(-n // cluster.max_node_gpus[t])
            for node in self._nodes_by_free(cluster, t):
                if node in avoid:
                    continue
                free = cluster.cell_free[topo.nodes[node].cell]
                take = min(free, remaining)
                cpus, mem, disk = self._host_need(job, take)
                if not cluster.node_fits_host(node, cpus, mem, disk):
                    continue
                chosen.append((node, take))
                remaining -= take
                if remaining == 0 or len(chosen) == most:
                    break
            if remaining:
                continue
            gpus: list[int] = []
            for node, take in chosen:
                gpus.extend(take_gpus(cluster, topo.nodes[node].cell, take))
            key = (len(chosen), topo.walk.lowest_common_level(gpus))
            if best_key is None or key < best_key:
                best, best_key = gpus, key
        return best

    # -- several tasks: one by one on a scratch twin, each seeing the earlier ones --
    def _place_gang(self, job: JobSpec, cluster: ClusterView, types: list[str]
                    ) -> list[int] | None:
        for t in types:
            taken: list[int] = []
            with cluster.sandbox() as scratch:
                for _ in range(job.num_tasks):
                    got = self._place_task(job, scratch, [t], job.task_gpus)
                    if got is None:
                        break
                    # with its host share, so later tasks see what earlier ones take
                    scratch.allocate(-1, got, MILLI, *host_need(job, len(got)))
                    taken.extend(got)
                else:
                    return taken
        return None

    # -- jobs with roles (docs/contract.md#sec-2 `tasks`) --
    def _one_node(self, task: JobSpec, cluster: ClusterView, gpu_type: str, n: int
                  ) -> list[int] | None:
        """The GPUs (n) of one node of `gpu_type` for one task with its host asks, or None."""
        return self._single_node(task, cluster, [gpu_type], n, frozenset())

    def place_side(self, job: JobSpec, role: TaskRole, cluster: ClusterView,
                   near: tuple[int, ...] = ()) -> TaskPlacement | None:
        """Where one non-gang task of `role` goes now (index 0), or None (engine hook)."""
        return place_role_task(job, role, 0, cluster, self._one_node, near)


OneNode = Callable[[JobSpec, ClusterView, str, int], "list[int] | None"]
"""A placer's one-node search: (task as a job, cluster, GPU type, GPUs) -> GPUs or None."""


def role_task_spec(job: JobSpec, role: TaskRole) -> JobSpec:
    """One task of a role as a one-task job (what a placer's one-node search is asked)."""
    return replace(job, num_gpus=role.gpus, gpus_per_task=0, num_cpus=role.cpus,
                   mem_gb=role.mem_gb, disk_gb=role.disk_gb, tasks=(), min_gpus=None,
                   max_gpus=None)


def _host_node(role: TaskRole, cluster: ClusterView, near: Iterator[int] | tuple[int, ...]
               ) -> int | None:
    """A healthy node for a CPU-only task, or None when none has its asks free.

    The first of `near` with its asks free, else best fit by free CPUs (`host_nodes`).
    """
    up = cluster.node_up
    for node in near:
        if up[node] and cluster.node_fits_host(node, role.cpus, role.mem_gb, role.disk_gb):
            return node
    for node in cluster.host_nodes(role.cpus):
        if cluster.node_fits_host(node, role.cpus, role.mem_gb, role.disk_gb):
            return node
    return None


def place_role_task(job: JobSpec, role: TaskRole, index: int, cluster: ClusterView,
                    one_node: OneNode, near: tuple[int, ...] = ()) -> TaskPlacement | None:
    """Where one task of `role` goes now, on one node, or None (nothing is taken).

    A GPU task goes through the placer's one-node search over the job's allowed types,
    fastest first; a CPU-only task on host capacity, preferring the nodes `near`.
    """
    if role.gpus <= 0:
        node = _host_node(role, cluster, near)
        return None if node is None else TaskPlacement(role.role, index, node)
    task = role_task_spec(job, role)
    for tier in speed_tiers(job, candidate_types(job, cluster)):
        for t in tier:
            got = one_node(task, cluster, t, role.gpus)
            if got is not None:
                gpus = tuple(sorted(got))
                return TaskPlacement(role.role, index, cluster.topo.gpu_node[gpus[0]], gpus)
    return None


def _roles_on(job: JobSpec, cluster: ClusterView, gpu_type: str,
              gang: list[tuple[TaskRole, int]], one_node: OneNode
              ) -> RolePlacement | None:
    """Every gang task on GPUs of `gpu_type` (largest first) and host capacity, or None."""
    topo = cluster.topo
    order = {r.role: k for k, r in enumerate(job.tasks)}
    gpu_tasks = sorted((t for t in gang if t[0].gpus > 0), key=lambda t: -t[0].gpus)
    placed: list[TaskPlacement] = []
    near: list[int] = []
    with cluster.sandbox() as scratch:
        for role, i in gpu_tasks:
            got = one_node(role_task_spec(job, role), scratch, gpu_type, role.gpus)
            if got is None:
                return None
            gpus = tuple(sorted(got))
            node = topo.gpu_node[gpus[0]]
            scratch.allocate(-1, gpus, MILLI, role.cpus, role.mem_gb, role.disk_gb)
            placed.append(TaskPlacement(role.role, i, node, gpus))
            if node not in near:
                near.append(node)
        for role, i in gang:
            if role.gpus > 0:
                continue
            host = _host_node(role, scratch, tuple(near))
            if host is None:
                return None
            if role.cpus > 0 or role.mem_gb > 0 or role.disk_gb > 0:
                scratch.take_host(-1, host, role.cpus, role.mem_gb, role.disk_gb)
            placed.append(TaskPlacement(role.role, i, host))
    placed.sort(key=lambda p: (order[p.role], p.index))
    return RolePlacement(tuple(sorted(g for p in placed for g in p.gpus)), tuple(placed))


def place_roles(job: JobSpec, cluster: ClusterView, one_node: OneNode) -> Placement:
    """The gang tasks of a job with roles, all or nothing (see the module docstring)."""
    gang = gang_tasks(job)
    widest = max((r.gpus for r, _ in gang), default=0)
    if widest <= 0:  # CPU-only gang: no GPU type to choose
        got = _roles_on(job, cluster, "", gang, one_node)
        if got is None:
            return Unschedulable(f"no nodes hold the CPU-only tasks of {job.job_id!r} now",
                                 True)
        return got
    types = candidate_types(job, cluster)
    if not types:
        return Unschedulable(f"no GPU of type {job.gpu_type!r} in the topology", False)
    largest = max(cluster.max_node_gpus.get(t, 0) for t in types)
    if widest > largest:
        return Unschedulable(f"a task needs {widest} GPUs on one node, the largest node of "
                             f"the allowed types has {largest}", False)
    if job.num_gpus > sum(cluster.free_by_type[t] for t in types):
        return Unschedulable(f"needs {job.num_gpus} GPUs, {cluster.free_whole} are free now",
                             True)
    for tier in speed_tiers(job, types):
        for t in tier:
            if cluster.max_node_gpus.get(t, 0) < widest:
                continue
            got = _roles_on(job, cluster, t, gang, one_node)
            if got is not None:
                return got
    return Unschedulable(f"no placement for the {len(gang)} gang tasks "
                         f"({job.num_gpus} GPUs{host_text(job)}) now "
                         f"({cluster.free_whole} free)", True)
