"""Kueue's topology-aware scheduling (TAS) over schedlab's cells.

A port of `pkg/cache/scheduler/tas_flavor_snapshot.go` (`findTopologyAssignment`) for one
pod set without slices, leaders or node affinity, at Kueue's default feature gates
(TASProfileMixed on: an unconstrained request takes the least free domains; balanced
placement off). A Kueue `Topology` names its levels by node label keys, top first; each
maps to a schedlab cell level (`label_level`), the last to `node`, so Kueue's domains are
schedlab's cells and its leaves are nodes. Pods fitting a node are its free whole GPUs
over a pod's GPUs (and its free CPUs and memory, where the topology models them).

- required level: every pod in one domain of that level (the best fit: the fullest
  domain that still holds them all), else no fit;
- preferred level: the same, else the level above, up to the top, where the pods are
  spread over the fewest domains (largest first, the last one a best fit);
- unconstrained (also implied: no request in a ClusterQueue of TAS flavors only): the
  node with the least free capacity that holds all pods, else nodes from the least free.
Then, level by level down, the chosen domains' children are sorted (most free first;
least free first when unconstrained; ties by name) and filled to the pod count, the
last one a best fit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from schedlab.policies.placement.base import take_gpus
from schedlab.sim.interfaces import ClusterView
from schedlab.sim.model import JobSpec, Level

if TYPE_CHECKING:
    from schedlab.topologies.tree import Topology

HOSTNAME = "kubernetes.io/hostname"
REQUIRED, PREFERRED, UNCONSTRAINED = "required", "preferred", "unconstrained"
COLUMNS = ("topology_required", "topology_preferred", "topology_unconstrained")
"""Pass-through trace columns of a job's topology request (Kueue's pod-set annotations
`kueue.x-k8s.io/podset-required-topology`, `-preferred-topology`,
`-unconstrained-topology`)."""

LEVEL_WORDS = {
    "hostname": Level.NODE, "host": Level.NODE, "node": Level.NODE,
    "rack": Level.RACK, "subblock": Level.RACK,
    "block": Level.CLUSTER, "superblock": Level.CLUSTER, "zone": Level.CLUSTER,
    "cluster": Level.CLUSTER, "datacenter": Level.CLUSTER,
}
"""The last word of a node label key (after '/', '-' or '.') -> the schedlab level it
names (our choice: schedlab nodes carry no labels; `schedlab.io/<level>` names any)."""


def label_level(label: str) -> Level | None:
    """The schedlab cell level a Topology level's node label stands for (None: unknown)."""
    if label == HOSTNAME:
        return Level.NODE
    if label.startswith("schedlab.io/"):
        try:
            return Level.parse(label.partition("/")[2])
        except ValueError:
            return None
    word = label.rsplit("/", 1)[-1].replace(".", "-").rsplit("-", 1)[-1].lower()
    return LEVEL_WORDS.get(word)


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """A Kueue `Topology`: its level label keys, top first, and their schedlab levels."""

    name: str
    labels: tuple[str, ...]
    levels: tuple[Level, ...]

    def index(self, level: str) -> int | None:
        """The level index a request names: a label key, or a schedlab level name."""
        if level in self.labels:
            return self.labels.index(level)
        try:
            lv = Level.parse(level)
        except ValueError:
            return None
        return self.levels.index(lv) if lv in self.levels else None


@dataclass(frozen=True, slots=True)
class Request:
    """A job's topology request: mode and level ('' when unconstrained)."""

    mode: str
    level: str = ""
    implied: bool = False  # no request, in a ClusterQueue of TAS flavors only


TRUE, FALSE = ("1", "1.0", "true", "yes"), ("0", "0.0", "false", "no", "")


def request_of(values: dict[str, str]) -> Request | str | None:
    """The request the job's columns make (None: none; a str: why it is invalid)."""
    req, pref = values.get(COLUMNS[0], ""), values.get(COLUMNS[1], "")
    unc = values.get(COLUMNS[2], "")
    if req and pref:
        return (f"topology_required ({req}) and topology_preferred ({pref}) both given; "
                "allowed: one of them (Kueue's pod-set topology annotations are exclusive)")
    if req:
        return Request(REQUIRED, req)
    if pref:
        return Request(PREFERRED, pref)
    u = unc.strip().lower()
    if u not in TRUE + FALSE:
        return (f"topology_unconstrained {unc!r}; allowed: true or false (Kueue's "
                "podset-unconstrained-topology annotation)")
    if u in TRUE:
        return Request(UNCONSTRAINED)
    return None


@dataclass(frozen=True, slots=True)
class Pods:
    """A workload as Kueue's pod set: `count` pods of `gpus` GPUs, `cpus`, `mem` GB each."""

    count: int
    gpus: int
    cpus: float
    mem: float


def pods_of(spec: JobSpec) -> Pods:
    """The job's pods (our choice; see below).

    Its tasks when `gpus_per_task` is given, else one pod
    a GPU (schedlab's placer may spread such a job GPU by GPU); a CPU-only job: one pod.
    Host asks are the job's totals over its pods.
    """
    if spec.num_gpus <= 0:
        return Pods(1, 0, spec.num_cpus, spec.mem_gb)
    if spec.gpus_per_task:
        n, g = spec.num_tasks, spec.task_gpus
    else:
        n, g = spec.num_gpus, 1
    return Pods(n, g, spec.num_cpus / n, spec.mem_gb / n)


class Domain:
    """A topology domain: the level values naming it, its children, its pod count."""

    __slots__ = ("values", "children", "count", "leaf")

    def __init__(self, values: tuple[str, ...], leaf: int) -> None:
        self.values = values
        self.children: list[Domain] = []
        self.count = 0
        self.leaf = leaf  # the leaf's id (a node index); -1 above the leaves

    def __repr__(self) -> str:
        return f"Domain({'/'.join(self.values)}: {self.count})"


class Tree:
    """Kueue's domains of one flavor: per level, top first; leaves are the lowest level.

    `leaves`: per leaf, its level values (names) and keys (identities), top first, and
    its id. Domains are told apart by their keys and sorted by their names.
    """

    def __init__(self, name: str, depth: int,
                 leaves: Sequence[tuple[tuple[str, ...], tuple[Hashable, ...], int]]) -> None:
        self.name = name
        self.per_level: list[list[Domain]] = [[] for _ in range(depth)]
        self.leaves: list[Domain] = []
        made: dict[tuple[Hashable, ...], Domain] = {}
        for names, keys, leaf in leaves:
            parent: Domain | None = None
            for i in range(depth):
                k = keys[:i + 1]
                d = made.get(k)
                if d is None:
                    d = made[k] = Domain(names[:i + 1], leaf if i == depth - 1 else -1)
                    self.per_level[i].append(d)
                    if parent is not None:
                        parent.children.append(d)
                parent = d
            assert parent is not None
            self.leaves.append(parent)

    def fill(self, fit: Callable[[int], int]) -> None:
        """Phase 1: pods fitting each leaf (`fit(leaf id)`), summed up the levels."""
        for d in self.leaves:
            d.count = fit(d.leaf)
        for level in reversed(self.per_level[:-1]):
            for d in level:
                d.count = sum(c.count for c in d.children)


def _sorted(domains: Sequence[Domain], least_free: bool) -> list[Domain]:
    """sortedDomains: most pods first (least first when unconstrained), then by name."""
    if least_free:
        return sorted(domains, key=lambda d: (d.count, d.values))
    return sorted(domains, key=lambda d: (-d.count, d.values))


def _best_fit(domains: Sequence[Domain], needed: int) -> Domain:
    """findBestFitDomain: the first domain of the fewest pods >= needed (else the first)."""
    best, best_count = domains[0], None
    for d in domains:
        if d.count >= needed and (best_count is None or d.count < best_count):
            best, best_count = d, d.count
    return best


def _not_fit(name: str, fit: int, total: int) -> str:
    if fit <= 0:
        return f'topology "{name}" doesn\'t allow to fit any of {total} pod(s)'
    return f'topology "{name}" allows to fit only {fit} out of {total} pod(s)'


def _level_with_fit(tree: Tree, idx: int, count: int, mode: str
                    ) -> tuple[int, list[Domain]] | str:
    """findLevelWithFitDomains: the level and domains the pods go to (or why none)."""
    domains = tree.per_level[idx]
    if not domains:
        return f"no topology domains at level: {idx}"
    unconstrained = mode == UNCONSTRAINED
    ordered = _sorted(domains, unconstrained)
    top = ordered[0]
    if not unconstrained and top.count >= count:
        top = _best_fit(ordered, count)
    if unconstrained:
        for d in ordered:
            if d.count >= count:
                return idx, [d]
    if top.count < count:
        if mode == REQUIRED:
            return _not_fit(tree.name, top.count, count)
        if idx > 0 and not unconstrained:
            return _level_with_fit(tree, idx - 1, count, mode)
        out: list[Domain] = []
        left = count
        for i, d in enumerate(ordered):
            if left <= 0:
                break
            if not unconstrained and d.count >= left:
                d = _best_fit(ordered[i:], left)
            out.append(d)
            left -= d.count
        if left > 0:
            return _not_fit(tree.name, count - left, count)
        return idx, out
    return idx, [top]


def _to_minimum(domains: list[Domain], count: int, unconstrained: bool) -> list[Domain]:
    """updateCountsToMinimum: take domains in order until `count` pods; trim the last."""
    out: list[Domain] = []
    left = count
    for i, d in enumerate(domains):
        if not unconstrained and d.count >= left:
            d = _best_fit(domains[i:], left)
        if d.count >= left:
            d.count = left
            out.append(d)
            return out
        left -= d.count
        out.append(d)
    raise AssertionError(f"TAS: {left} of {count} pods left over")  # phase 1 guarantees


def assign(tree: Tree, count: int, mode: str, level: int,
           fit: Callable[[int], int]) -> dict[int, int] | str:
    """Pods per leaf id for `count` pods of a request, or the reason they do not fit.

    `mode` at level index `level` (unconstrained: the lowest level).
    """
    tree.fill(fit)
    lowest = len(tree.per_level) - 1
    got = _level_with_fit(tree, lowest if mode == UNCONSTRAINED else level, count, mode)
    if isinstance(got, str):
        return got
    at, chosen = got
    unconstrained = mode == UNCONSTRAINED
    chosen = _to_minimum(chosen, count, unconstrained)
    for _ in range(at, lowest):
        lower = _sorted([c for d in chosen for c in d.children], unconstrained)
        chosen = _to_minimum(lower, count, unconstrained)
    return {d.leaf: d.count for d in chosen if d.count > 0}


def cell_tree(topo: Topology, spec: TopologySpec, gpu_type: str | None) -> Tree:
    """The domains of a flavor: the topology's cells at the Topology's levels.

    Those above its nodes of `gpu_type` (None: every node); a node without a cell at a level
    is left out
    (as a node without the level's label is in Kueue).
    """
    leaves = []
    for node in topo.nodes:
        if gpu_type is not None and node.gpu_type != gpu_type:
            continue
        at = {topo.cells[c].level: c for c in topo.ancestors(node.cell)}
        cells = [at.get(lv) for lv in spec.levels]
        if any(c is None for c in cells):
            continue
        keys = tuple(c for c in cells if c is not None)
        leaves.append((tuple(topo.cells[c].name for c in keys), keys, node.index))
    return Tree(spec.name, len(spec.levels), leaves)


def node_fit(cluster: ClusterView, pods: Pods) -> Callable[[int], int]:
    """Pods fitting a node now, as a function of the node index.

    Its free whole GPUs, CPUs and memory over a pod's asks (a host resource of capacity 0 is
    not modelled); none on a failed node.
    """
    topo = cluster.topo
    up, free = cluster.node_up, cluster.cell_free
    cpu_free, mem_free = cluster.node_cpu_free, cluster.node_mem_free

    def fit(n: int) -> int:
        if not up[n]:
            return 0
        node = topo.nodes[n]
        k = free[node.cell] // pods.gpus if pods.gpus else pods.count
        if pods.cpus > 0 and node.num_cpus > 0:
            k = min(k, int(cpu_free[n] / pods.cpus + 1e-9))
        if pods.mem > 0 and node.mem_gb > 0:
            k = min(k, int(mem_free[n] / pods.mem + 1e-9))
        return max(k, 0)

    return fit


def node_total(topo: Topology, pods: Pods) -> Callable[[int], int]:
    """Pods fitting a node when the cluster is empty (Kueue's simulateEmpty)."""

    def fit(n: int) -> int:
        node = topo.nodes[n]
        k = node.num_gpus // pods.gpus if pods.gpus else pods.count
        if pods.cpus > 0 and node.num_cpus > 0:
            k = min(k, int(node.num_cpus / pods.cpus + 1e-9))
        if pods.mem > 0 and node.mem_gb > 0:
            k = min(k, int(node.mem_gb / pods.mem + 1e-9))
        return k

    return fit


def gpus_for(cluster: ClusterView, per_node: dict[int, int], pods: Pods) -> tuple[int, ...]:
    """The GPUs of an assignment: each node's pods' GPUs, best fit inside the node."""
    out: list[int] = []
    nodes = cluster.topo.nodes
    for n, k in sorted(per_node.items()):
        if pods.gpus:
            out.extend(take_gpus(cluster, nodes[n].cell, k * pods.gpus))
    return tuple(sorted(out))


__all__ = ["COLUMNS", "HOSTNAME", "PREFERRED", "REQUIRED", "UNCONSTRAINED", "Domain",
           "Pods", "Request", "TopologySpec", "Tree", "assign", "cell_tree", "gpus_for",
           "label_level", "node_fit", "node_total", "pods_of", "request_of"]
