"""Kueue (kubernetes-sigs/kueue), simulated from its own configuration objects.

The `config` parameter is a multi-document YAML as `kubectl apply -f` takes it:
ResourceFlavors, ClusterQueues, Cohorts (nested), LocalQueues, WorkloadPriorityClasses
and optionally Kueue's Configuration for fair sharing (docs/kueue.md). A job is a
workload of one pod set: `num_gpus` of `nvidia.com/gpu`, `num_cpus` of `cpu` and
`mem_gb` GiB of `memory`, submitted to the LocalQueue of its trace column `queue`
(`namespace/name`, or `name` in namespace `default`; the job's `vc` when the column is
absent), with the value of the WorkloadPriorityClass of its column `priority_class`
(else its trace `priority`).

Each scheduling pass runs Kueue's scheduling cycles (`pkg/scheduler/scheduler.go`) until
one admits, preempts or parks nothing: the head of every ClusterQueue (by priority, then
submission; StrictFIFO keeps a head that cannot be admitted at the head,
BestEffortFIFO parks it as inadmissible until usage in its cohort tree drops) gets a
flavor assignment (`flavors.py`), the entries are taken in Kueue's order (not borrowing
first, then priority, then submission; with fair sharing, the tournament of lowest
dominant resource share), re-checked against the usage the earlier ones added, and
admitted or their preemption targets (`preemption.py`) evicted at once (the evicted
workloads go back to their queues at their original position).

Topology-aware scheduling (`tas.py`): a ResourceFlavor with `topologyName` places a
workload's pods by Kueue's TAS rules on the cells of the Topology's levels (trace columns
`topology_required` / `topology_preferred` / `topology_unconstrained`; implied
unconstrained in a ClusterQueue of TAS flavors only); quota that fits where the pods do
not is Kueue's Preempt (a preemption search that also checks the freed nodes), NoFit
when not even an empty cluster holds them.

Departures (ours): a workload on a flavor without a Topology is admitted only when the
run's placer also finds its GPUs on a node of its flavor's GPU type now (without TAS,
pods of an admitted workload may wait for kube-scheduler), else it waits as inadmissible
until a job stops; evictions take effect at once (no graceful termination); the flavor
search always restarts at the first flavor (Kueue resumes after the last flavor tried
for a workload it requeued); admission checks, partial admission, waitForPodsReady,
admission fair sharing, and in TAS slices, leader/worker pod groups, node affinity,
balanced placement and node replacement are not modelled.
Without `config`: one ClusterQueue per queue name of the trace, in one cohort, the
cluster's GPUs split evenly as nominal quota, everything else at Kueue's defaults
(BestEffortFIFO, no preemption) (our choice, so that the policy runs on any trace).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

from schedlab.policies.base import Ctx, Policy
from schedlab.policies.kueue import preemption
from schedlab.policies.kueue.config import (
    CPU,
    GPU,
    MEMORY,
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorQuotas,
    KueueConfig,
    Quota,
    ResourceGroup,
    load_config,
)
from schedlab.policies.kueue.flavors import (
    FIT,
    NO_CANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    assign,
)
from schedlab.policies.kueue.quota import (
    FR,
    Node,
    build_subtree,
    lowest_fitting_height,
    share_key,
)
from schedlab.policies.kueue.tas import (
    COLUMNS as TAS_COLUMNS,
)
from schedlab.policies.kueue.tas import (
    UNCONSTRAINED,
    Request,
    TopologySpec,
    Tree,
    cell_tree,
    gpus_for,
    node_fit,
    node_total,
    pods_of,
    request_of,
)
from schedlab.policies.kueue.tas import (
    assign as tas_assign,
)
from schedlab.policies.kueue.workload import Workload
from schedlab.policies.queues import EngineMirror
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.interfaces import ClusterView
from schedlab.sim.jobstate import PENDING, JobState
from schedlab.sim.model import (
    Decision,
    HostPlacement,
    JobSpec,
    Placement,
    Preempt,
    Reject,
    Start,
    Unschedulable,
)
from schedlab.sim.params import Param, as_choice, as_optional, as_path
from schedlab.sim.queue import SortedKeys

GIB = float(2**30)
MAX_NOMINATIONS = 3
"""Preemptions one workload may issue at one instant before it waits for a change (ours:
guarantees that a pass ends when evicted workloads take the quota back)."""


def extra_column(spec: JobSpec, name: str) -> str:
    """A pass-through column of the trace ('' when absent or empty)."""
    for k, v in spec.extra:
        if k == name:
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return ""
            return str(v).strip()
    return ""


def queue_of(spec: JobSpec) -> str:
    """The job's LocalQueue as `namespace/name` (column `queue`, else its `vc`)."""
    q = extra_column(spec, "queue") or spec.vc or "default"
    return q if "/" in q else f"default/{q}"


def requests_of(spec: JobSpec) -> dict[str, float]:
    """The workload's requests in Kueue's integer units (GPUs, millicores, bytes)."""
    out: dict[str, float] = {}
    if spec.num_gpus > 0:
        out[GPU] = float(spec.num_gpus)
    if spec.num_cpus > 0:
        out[CPU] = float(math.ceil(spec.num_cpus * 1000 - 1e-9))
    if spec.mem_gb > 0:
        out[MEMORY] = float(math.ceil(spec.mem_gb * GIB - 1e-6))
    return out


def default_config(queues: list[str], gpus: int) -> KueueConfig:
    """One ClusterQueue per LocalQueue name, in one cohort, GPUs split evenly."""
    names = sorted(set(queues)) or ["default/default"]
    share, extra = divmod(gpus, len(names))
    cqs = []
    for i, q in enumerate(names):
        nominal = float(share + (1 if i < extra else 0))
        group = ResourceGroup((GPU,), (FlavorQuotas("default-flavor",
                                                    ((GPU, Quota(nominal)),)),))
        cqs.append(ClusterQueue(q.replace("/", "-"), "all", (group,)))
    return KueueConfig("(default: one ClusterQueue per queue)",
                       (Flavor("default-flavor", None),), tuple(cqs), (Cohort("all", None),),
                       tuple((q, q.replace("/", "-")) for q in names), ())


class _Queue:
    """A ClusterQueue's pending workloads, active and parked (inadmissible).

    Active ones are kept by (-priority, submit time, index); only a BestEffortFIFO queue
    parks.
    """

    __slots__ = ("conf", "node", "active", "members", "parked", "strict", "hold")

    def __init__(self, conf: ClusterQueue, node: Node) -> None:
        self.conf = conf
        self.node = node
        self.active = SortedKeys()
        self.members: set[int] = set()  # job indices in `active`
        self.parked: dict[int, tuple[int, float, int]] = {}
        self.strict = conf.strategy == "StrictFIFO"
        self.hold = conf.stop_policy != "None"


def _key(w: Workload) -> tuple[int, float, int]:
    return (-w.priority, w.timestamp, w.idx)


class KueuePolicy(Policy):
    """Kueue's admission rules over ClusterQueues and cohorts read from Kueue's YAML."""

    name = "kueue"
    description = ("Kueue from its own YAML (ResourceFlavor, ClusterQueue, Cohort, "
                   "LocalQueue, WorkloadPriorityClass, Topology): quotas, borrowing, "
                   "preemption, fair sharing, topology-aware scheduling")
    supports_roles = True
    orders = False  # its own queues and quotas: not an ordering inside another policy
    tenant_kinds = ("clusterqueue", "cohort")
    """tenants.parquet has a row per ClusterQueue and per cohort too (`tenant_names`)."""
    params = {
        "config": Param(None, as_optional(as_path),
                        "Kueue objects, a multi-document YAML as kubectl apply takes it "
                        "(default: one ClusterQueue per queue, GPUs split evenly)"),
        "undeclared": Param("ignore", as_choice("ignore", "nofit"),
                            "a request of a resource no resource group covers: ignore "
                            "it, or never admit the workload (Kueue without "
                            "excludeResourcePrefixes)"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.cfg: KueueConfig | None = (load_config(self.p["config"])
                                        if self.p["config"] else None)

    # --- setup ---

    def attach(self, ctx: Ctx) -> None:
        """Build the quota tree and the queues from the config."""
        cfg = self.cfg
        if cfg is None:
            names = []
            i = 0
            while True:
                try:
                    names.append(queue_of(ctx.job_at(i).spec))
                except IndexError:
                    break
                i += 1
            cfg = default_config(names, ctx.cluster.total_gpus)
        self.config = cfg
        types = set(ctx.topology.gpu_types)
        self.flavors = {f.name: f for f in cfg.flavors}
        for f in cfg.flavors:
            if f.gpu_type is not None and f.gpu_type not in types:
                raise InvalidParameter(
                    f"{cfg.path}: ResourceFlavor/{f.name}: spec.nodeLabels: got GPU type "
                    f"{f.gpu_type!r}; allowed: the topology's GPU types "
                    f"{', '.join(sorted(types))}")
        self.nodes, self.cohorts = build_tree(cfg)
        self.topos: dict[str, TopologySpec] = {t.name: t for t in cfg.topologies}
        have = set(ctx.topology.levels)
        for t in cfg.topologies:
            for i, (label, lv) in enumerate(zip(t.labels, t.levels, strict=True)):
                if lv not in have:
                    raise InvalidParameter(
                        f"{cfg.path}: Topology/{t.name}: spec.levels[{i}].nodeLabel: got "
                        f"{label!r} (schedlab level {lv.label}); allowed: labels of the "
                        "topology's levels: " + ", ".join(x.label for x in sorted(have)))
        self.trees: dict[tuple[str, str | None], Tree] = {}
        fl_by = {f.name: f for f in cfg.flavors}
        self.tas_only = {cq.name for cq in cfg.cluster_queues
                         if cq.groups and all(fl_by[fq.flavor].topology is not None
                                              for g in cq.groups for fq in g.flavors)}
        self.queues = {cq.name: _Queue(cq, self.nodes[cq.name]) for cq in cfg.cluster_queues}
        self.lqs = dict(cfg.local_queues)
        self.pcs = dict(cfg.priority_classes)
        self.mirror = EngineMirror()
        self.wls: dict[int, Workload] = {}
        self.admitted: dict[str, dict[int, Workload]] = {n: {} for n in self.nodes}
        self.waiting_gpus: set[int] = set()  # parked for lack of GPUs (not quota)
        self.nominated: dict[int, Assignment] = {}  # evicted for these: they go first,
        # on the flavors they evicted for (Kueue's nomination mapping)
        self.tries: dict[int, int] = {}  # preemptions issued per workload this instant
        self.gen = 0  # bumped by every admission, eviction and stop: the quota state
        self.last_search: tuple[Any, list[preemption.Target]] = (None, [])
        self.failed: dict[tuple[Any, ...], int] = {}  # request class -> gen it failed at
        self.specs: dict[tuple[int, str], JobSpec] = {}
        self.healthy = -1
        self.cycles = 0
        self.evictions = 0

    # --- the pass ---

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Sync with the engine, then Kueue's scheduling cycles until nothing changes."""
        self.ctx = ctx
        ch = self.mirror.sync(ctx)
        if ch.rebuilt is not None:
            for q in self.queues.values():
                q.active = SortedKeys()
                q.members.clear()
                q.parked.clear()
            self.waiting_gpus.clear()
        for job in ch.stopped:
            self._release(job)
        rejects: list[tuple[str, str]] = []
        for job in (ch.rebuilt if ch.rebuilt is not None else ch.queued):
            why = self._enqueue(job)
            if why:
                rejects.append((job.job_id, why))
        for job in ch.stopped:
            if job.status == PENDING:
                self._enqueue(job)
        for jid, why in rejects:
            yield Reject(jid, why)
            self.mirror.rejected()
        self.tries.clear()
        healthy = ctx.cluster.healthy_gpus
        self.gen += 1  # GPUs may have been freed or repaired since the last pass
        self.failed.clear()
        if healthy != self.healthy:
            self.healthy = healthy
            self._wake_all()
        while True:
            self.cycles += 1
            progress = False
            for d in self._cycle(ctx):
                progress = True
                if d is not None:
                    yield d
                    self._applied(ctx, d)
            if not progress:
                break

    def _cycle(self, ctx: Ctx) -> Iterator[Decision | None]:
        """One scheduling cycle; yields its decisions, and None for other progress."""
        entries: list[tuple[Workload, Assignment]] = []
        for q in self.queues.values():
            while q.active and not q.hold:
                idx = q.active[0][2]
                if self.nominated:
                    for n in self.nominated.keys() & q.members:  # a preemptor stays head
                        idx = n
                w = self.wls[idx]
                key = (w.cq.name, w.priority, w.gpu_type, w.tas, w.pods,
                       *w.requests.items())
                if self.failed.get(key) == self.gen:  # an equal request failed just now
                    if self._park(q, w):
                        continue  # as Kueue's next cycle would: the next head
                    entries.append((w, Assignment(mode=NOFIT, reason="as an equal request")))
                    break
                a = self._nominated_fit(w) or self._assign(w)
                if a.mode == FIT and a.tas is not None:
                    self._tas_mode(ctx, w, a)
                a.key, a.gen = key, self.gen
                entries.append((w, a))
                break
        if not entries:
            return
        preempted: set[int] = set()
        reserved: list[tuple[Node, dict[FR, float]]] = []
        try:
            yield from self._process(ctx, entries, preempted, reserved)
        finally:  # a preemptor's quota is held for it until the end of the cycle
            for node, usage in reserved:
                for fr, v in usage.items():
                    node.remove_usage(fr, v)

    def _process(self, ctx: Ctx, entries: list[tuple[Workload, Assignment]],
                 preempted: set[int], reserved: list[tuple[Node, dict[FR, float]]]
                 ) -> Iterator[Decision | None]:
        """ProcessEntry for each entry in Kueue's order."""
        for w, a in self._ordered(entries):
            q = self.queues[w.cq.name]
            if a.mode == NOFIT:
                if a.key is not None:
                    self.failed[a.key] = a.gen
                if self._park(q, w):
                    yield None
                continue
            if a.mode == PREEMPT:
                targets = self._targets(w, a)
                if targets and not self._fits_if_freed(ctx, w, a, targets):
                    targets = []  # its GPUs would not be free even then: evict nobody
                tries = self.tries[w.idx] = self.tries.get(w.idx, 0) + 1
                if tries > MAX_NOMINATIONS:
                    targets = []  # evicted for it this often at this instant: wait
                if not targets:
                    if a.key is not None and tries <= 1:
                        self.failed[a.key] = a.gen
                    if self._park(q, w, gpus=a.tas_blocked):
                        yield None
                    continue
                if any(t.workload.idx in preempted for t in targets):
                    continue
                self.nominated[w.idx] = a
                for t in targets:
                    preempted.add(t.workload.idx)
                    self.evictions += 1
                    yield Preempt(t.workload.job_id,
                                  f"Kueue: {t.reason} by {w.job_id} ({w.cq.name})")
                for fr, v in a.usage.items():  # cq.AddUsage: later entries see it used
                    w.cq.add_usage(fr, v)
                reserved.append((w.cq, a.usage))
                continue
            if any(v > w.cq.available(fr) for fr, v in a.usage.items()):
                continue  # no longer fits after another admission of this cycle
            job = ctx.job_at(w.idx)
            got = (self._tas_place(ctx.cluster, w, a) if a.tas is not None
                   else ctx.place(self._spec(job, a.gpu_type)))
            if isinstance(got, Unschedulable):
                if a.key is not None and a.gen == self.gen:
                    self.failed[a.key] = a.gen
                if self._park(q, w, gpus=True):
                    yield None
                continue
            self.nominated.pop(w.idx, None)
            w.usage = a.usage
            w.admitted_at = ctx.now
            w.add()
            q.active.remove(_key(w))
            q.members.discard(w.idx)
            self.admitted[w.cq.name][w.idx] = w
            yield Start(w.job_id, got)

    # --- topology-aware scheduling (tas.py) ---

    def _tas_check(self, w: Workload, fl: Flavor) -> str:
        """checkPodSetAndFlavorMatchForTAS: why flavor `fl` does not suit `w` ('' : it does)."""
        req = w.tas
        if req is None:
            return (f'Flavor "{fl.name}" supports only TopologyAwareScheduling'
                    if fl.topology is not None else "")
        if req.implied:
            return ""
        if fl.topology is None:
            return f'Flavor "{fl.name}" does not support TopologyAwareScheduling'
        if req.level and self.topos[fl.topology].index(req.level) is None:
            return f'Flavor "{fl.name}" does not contain the requested level'
        return ""

    def _tas_assign(self, cluster: ClusterView, w: Workload, fl: Flavor,
                    gpu_type: str | None, empty: bool = False) -> dict[int, int] | str:
        """Pods per node for `w` on TAS flavor `fl` now (`empty`: on an empty cluster)."""
        assert fl.topology is not None and w.tas is not None and w.pods is not None
        topo = self.topos[fl.topology]
        gtype = gpu_type if gpu_type is not None else (w.gpu_type or None)
        tree = self.trees.get((topo.name, gtype))
        if tree is None:
            tree = self.trees[(topo.name, gtype)] = cell_tree(cluster.topo, topo, gtype)
        level = topo.index(w.tas.level) if w.tas.level else 0
        fit = node_total(cluster.topo, w.pods) if empty else node_fit(cluster, w.pods)
        return tas_assign(tree, w.pods.count, w.tas.mode, level or 0, fit)

    def _tas_mode(self, ctx: Ctx, w: Workload, a: Assignment) -> None:
        """A quota fit whose pods do not fit the nodes now: Preempt (or NoFit).

        NoFit when they would not fit an empty cluster either (Kueue's flavor assigner
        after TAS).
        """
        assert a.tas is not None
        got = self._tas_assign(ctx.cluster, w, a.tas, a.gpu_type)
        if not isinstance(got, str):
            return
        never = self._tas_assign(ctx.cluster, w, a.tas, a.gpu_type, empty=True)
        if isinstance(never, str):
            a.mode, a.reason = NOFIT, never
            return
        a.mode, a.preempt, a.reason, a.tas_blocked = PREEMPT, set(a.usage), got, True

    def _tas_place(self, cluster: ClusterView, w: Workload, a: Assignment) -> Placement:
        """The GPUs Kueue's topology assignment gives `w` now, or why there are none."""
        assert a.tas is not None
        got = self._tas_assign(cluster, w, a.tas, a.gpu_type)
        if isinstance(got, str):
            return Unschedulable(f"Kueue TAS: {got}", True)
        assert w.pods is not None
        if not w.pods.gpus:
            return HostPlacement(next(iter(got)))
        return gpus_for(cluster, got, w.pods)

    def _fits_if_freed(self, ctx: Ctx, w: Workload, a: Assignment,
                       targets: list[preemption.Target]) -> bool:
        """Whether `w` would be placed once `targets` released their GPUs."""
        victims = [ctx.job_at(t.workload.idx) for t in targets]
        if a.tas is None:
            return not isinstance(ctx.place_if_freed(
                self._spec(ctx.job_at(w.idx), a.gpu_type), victims), Unschedulable)
        with ctx.what_if(victims) as view:
            return isinstance(self._tas_assign(view.cluster, w, a.tas, a.gpu_type), dict)

    def _tas_fit(self, w: Workload, fl: Flavor, gpu_type: str | None
                 ) -> Callable[[], bool]:
        """For a preemption search: whether `w`'s pods fit the nodes freed so far.

        Freed: by the admitted workloads whose usage the search took out (`Workload.out`).
        """
        pctx = self.ctx
        # candidates come from its ClusterQueue and its cohort tree only
        queues = [self.admitted[cq.name] for cq in w.cq.root().subtree_cqs()]

        def fit() -> bool:
            victims = [pctx.job_at(x.idx) for q in queues for x in q.values() if x.out]
            with pctx.what_if(victims) as view:
                return isinstance(self._tas_assign(view.cluster, w, fl, gpu_type), dict)

        return fit

    def _nominated_fit(self, w: Workload) -> Assignment | None:
        """A preemptor's flavors once its evictions made room there (else None)."""
        a = self.nominated.get(w.idx)
        if a is None or any(v > w.cq.available(fr) for fr, v in a.usage.items()):
            return None
        return Assignment(FIT, a.borrow, dict(a.usage), set(), a.gpu_type, tas=a.tas)

    def _applied(self, ctx: Ctx, d: Decision) -> None:
        """Bookkeeping after the engine applied one of our decisions."""
        self.gen += 1
        if isinstance(d, Start):
            self.mirror.started(ctx.job(d.job_id))
        elif isinstance(d, Preempt):
            job = ctx.job(d.job_id)
            self.mirror.preempted(job)
            self._release(job)
            self._enqueue(job)
            w = self.wls[job.idx]
            q = self.queues[w.cq.name]
            q.active.remove(_key(w))  # inadmissible until quota is released again
            q.members.discard(w.idx)
            q.parked[w.idx] = _key(w)

    def _ordered(self, entries: list[tuple[Workload, Assignment]]
                 ) -> Iterator[tuple[Workload, Assignment]]:
        """The classical iterator, or fair sharing's tournament per cohort tree."""
        if not self.config.fair_sharing:
            nom = self.nominated
            entries.sort(key=lambda e: (e[0].idx not in nom, e[1].borrow, -e[0].priority,
                                        e[0].timestamp, e[0].idx))
            yield from entries
            return
        first = [e for e in entries if e[0].idx in self.nominated]
        yield from first
        left = {e[0].cq.name: e for e in entries if e[0].idx not in self.nominated}
        while left:
            w, a = next(iter(left.values()))
            if w.cq.parent is not None:
                w, a = self._tournament(w.cq.root(), left)
            del left[w.cq.name]
            yield w, a

    def _tournament(self, root: Node, left: dict[str, tuple[Workload, Assignment]]
                    ) -> tuple[Workload, Assignment]:
        """runTournament: the entry whose subtree has the lowest share after admission.

        At each cohort, non-borrowing entries first, then by dominant resource share.
        """
        keys: dict[tuple[int, str], tuple[bool, tuple[int, float]]] = {}
        for cq in root.subtree_cqs():
            e = left.get(cq.name)
            if e is None:
                continue
            w, a = e
            for fr, v in a.usage.items():
                cq.add_usage(fr, v)
            node = cq
            for anc in cq.path_to_root():
                ratio, _ = node.drs()
                borrowing = any(node.borrowing(fr) for fr in a.usage)
                keys[(id(anc), cq.name)] = (borrowing, share_key(ratio, node.weight))
                node = anc
            for fr, v in a.usage.items():
                cq.remove_usage(fr, v)

        def run(c: Node) -> tuple[Workload, Assignment] | None:
            cands = [x for x in (run(ch) for ch in c.child_cohorts) if x is not None]
            cands += [left[cq.name] for cq in c.child_cqs if cq.name in left]
            if not cands:
                return None
            best = cands[0]
            for cur in cands[1:]:
                kc, kb = keys[(id(c), cur[0].cq.name)], keys[(id(c), best[0].cq.name)]
                if (kc, -cur[0].priority, cur[0].timestamp, cur[0].idx) < (
                        kb, -best[0].priority, best[0].timestamp, best[0].idx):
                    best = cur
            return best

        won = run(root)
        assert won is not None
        return won

    # --- flavors and preemption ---

    def _assign(self, w: Workload) -> Assignment:
        conf = self.queues[w.cq.name].conf
        return assign(w.requests, w.cq, conf, self.flavors, w.gpu_type, GPU,
                      lambda fr, v: self._oracle(w, conf, fr, v),
                      self.config.fair_sharing, self.p["undeclared"] == "nofit",
                      (lambda fl: self._tas_check(w, fl))
                      if self.topos or w.tas is not None else None)

    def _search(self, w: Workload, conf: ClusterQueue, frs: set[FR],
                requests: dict[FR, float]) -> list[preemption.Target]:
        tas_fit = None
        fl = next((self.flavors[f] for f, _ in requests
                   if self.flavors[f].topology is not None), None) if w.tas else None
        if fl is not None:
            gpu_fl = next((self.flavors[f] for f, r in requests if r == GPU), None)
            tas_fit = self._tas_fit(w, fl, gpu_fl.gpu_type if gpu_fl else None)
        ctx = preemption.Ctx(w, conf, frs, requests, self.admitted, tas_fit)
        if self.config.fair_sharing:
            return preemption.fair(ctx, self.config.strategies)
        return preemption.classical(ctx)

    def _oracle(self, w: Workload, conf: ClusterQueue, fr: FR, val: float
                ) -> tuple[int, int]:
        """SimulatePreemption for one flavor-resource."""
        targets = self._search(w, conf, {fr}, {fr: val})
        self.last_search = ((w.idx, self.gen, fr, val), targets)
        if not targets:
            return NO_CANDIDATES, lowest_fitting_height(w.cq, fr, val)[0]
        for t in targets:
            t.workload.remove()
        after = lowest_fitting_height(w.cq, fr, val)[0]
        for t in targets:
            t.workload.add()
        if any(t.workload.cq is w.cq for t in targets):
            return PREEMPT, after
        return RECLAIM, after

    def _targets(self, w: Workload, a: Assignment) -> list[preemption.Target]:
        if len(a.usage) == 1 and len(a.preempt) == 1:  # the oracle's search, if still valid
            (fr, val), = a.usage.items()
            key, targets = self.last_search
            if key == (w.idx, self.gen, fr, val):
                return targets
        return self._search(w, self.queues[w.cq.name].conf, a.preempt, a.usage)

    # --- queues ---

    def _enqueue(self, job: JobState) -> str:
        """Queue a pending job in its ClusterQueue; the reason when it has none."""
        w = self.wls.get(job.idx)
        if w is None:
            spec = job.spec
            lq = queue_of(spec)
            cq = self.lqs.get(lq)
            if cq is None:
                return (f"Kueue: LocalQueue {lq} does not exist in {self.config.path} "
                        f"(known: {', '.join(sorted(self.lqs)) or 'none'})")
            pc = extra_column(spec, "priority_class")
            if pc:
                if pc not in self.pcs:
                    return (f"Kueue: WorkloadPriorityClass {pc} does not exist in "
                            f"{self.config.path} (known: {', '.join(sorted(self.pcs)) or 'none'})")
                prio = self.pcs[pc]
            else:
                prio = spec.priority
            w = Workload(job.idx, job.job_id, self.nodes[cq], prio, spec.submit_time,
                         requests_of(spec), spec.gpu_type)
            why = self._tas_request(w, spec)
            if why:
                return f"Kueue: {why}"
            self.wls[job.idx] = w
        q = self.queues[w.cq.name]
        k = _key(w)
        if w.idx not in q.parked and w.idx not in q.members:
            q.active.add(k)
            q.members.add(w.idx)
        return ""

    def places_itself(self, spec: JobSpec) -> bool:
        """Whether topology-aware scheduling places the job.

        It does for a job with a topology request, or in a ClusterQueue of TAS flavors
        only. The engine then does not ask the run's placer at submission whether the job
        could ever fit: TAS decides, and rejects with Kueue's message.
        """
        got = request_of({c: extra_column(spec, c) for c in TAS_COLUMNS})
        if isinstance(got, str) or spec.tasks or spec.gpu_share < 1.0:
            return False  # refused when queued, with its reason
        if got is not None:
            return True
        cq = self.lqs.get(queue_of(spec))
        return cq is not None and cq in self.tas_only

    def _tas_request(self, w: Workload, spec: JobSpec) -> str:
        """Read the job's topology request into `w`; why it cannot be had ('' : fine)."""
        got = request_of({c: extra_column(spec, c) for c in TAS_COLUMNS})
        if isinstance(got, str):
            return got
        if got is None and w.cq.name in self.tas_only:
            got = Request(UNCONSTRAINED, implied=True)
        if got is None:
            return ""
        if spec.tasks or spec.gpu_share < 1.0:
            return ("topology-aware scheduling of a job with task roles or a GPU share is "
                    "not modelled (its pods are not alike)")
        w.tas, w.pods = got, pods_of(spec)
        return ""

    def _park(self, q: _Queue, w: Workload, gpus: bool = False) -> bool:
        """A head that cannot be admitted: parked (True) unless its queue is StrictFIFO."""
        self.nominated.pop(w.idx, None)
        if q.strict:
            return False
        k = _key(w)
        q.active.remove(k)
        q.members.discard(w.idx)
        q.parked[w.idx] = k
        if gpus:
            self.waiting_gpus.add(w.idx)
        return True

    def _release(self, job: JobState) -> None:
        """A workload stopped or was evicted: free its quota, wake its cohort tree.

        The parked workloads of its cohort tree and those waiting for GPUs are active again.
        """
        self.gen += 1
        w = self.wls.get(job.idx)
        if w is None:
            return
        if self.admitted[w.cq.name].pop(w.idx, None) is not None:
            w.remove()
            w.usage = {}
        root = w.cq.root()
        for cq in root.subtree_cqs():
            self._wake(self.queues[cq.name])
        for idx in list(self.waiting_gpus):
            wl = self.wls[idx]
            q = self.queues[wl.cq.name]
            k = q.parked.pop(idx, None)
            if k is not None:
                q.active.add(k)
                q.members.add(idx)
        self.waiting_gpus.clear()

    def _wake(self, q: _Queue) -> None:
        for idx, k in q.parked.items():
            q.active.add(k)
            q.members.add(idx)
            self.waiting_gpus.discard(idx)
        q.parked.clear()

    def _wake_all(self) -> None:
        for q in self.queues.values():
            self._wake(q)

    def _spec(self, job: JobState, gpu_type: str | None) -> JobSpec:
        if gpu_type is None or gpu_type == job.spec.gpu_type:
            return job.spec
        key = (job.idx, gpu_type)
        s = self.specs.get(key)
        if s is None:
            s = self.specs[key] = dataclasses.replace(job.spec, gpu_type=gpu_type)
        return s

    # --- reporting ---

    def explain(self, ctx: Ctx, job: JobState) -> str:
        """Why a waiting workload can never be admitted (asked when the run is stuck)."""
        w = self.wls.get(job.idx)
        if w is None:
            return ""
        q = self.queues[w.cq.name]
        if q.hold:
            return f"Kueue: ClusterQueue {q.conf.name} is stopped (stopPolicy {q.conf.stop_policy})"
        a = self._assign(w)
        if a.mode == NOFIT:
            return f"Kueue: ClusterQueue {q.conf.name}: {a.reason}"
        if a.mode == FIT and a.tas is not None:
            never = self._tas_assign(ctx.cluster, w, a.tas, a.gpu_type, empty=True)
            if isinstance(never, str):
                return f"Kueue TAS: {never} (even on an empty cluster)"
            got = self._tas_place(ctx.cluster, w, a)
            if isinstance(got, Unschedulable):
                return f"Kueue: admitted by quota but {got.reason}"
        elif a.mode == FIT:
            got = ctx.place(self._spec(job, a.gpu_type))
            if isinstance(got, Unschedulable):
                return f"Kueue: admitted by quota but {got.reason}"
        return ""

    def tenant_names(self, idx: int) -> tuple[str, str]:
        """The job's ClusterQueue and that queue's cohort ('' : none, or no LocalQueue)."""
        w = self.wls.get(idx)
        if w is None:
            return ("", "")
        return (w.cq.name, self.queues[w.cq.name].conf.cohort or "")

    def metrics(self) -> dict[str, Any]:
        """Scheduling cycles run and workloads evicted."""
        return {"cycles": self.cycles, "evictions": self.evictions}


def build_tree(cfg: KueueConfig) -> tuple[dict[str, Node], dict[str, Node]]:
    """The quota tree of a config: ClusterQueue nodes and Cohort nodes by name."""
    cohorts: dict[str, Node] = {}
    for c in cfg.cohorts:
        cohorts[c.name] = Node(c.name, False, _quotas(c.groups), c.weight)
    for c in cfg.cohorts:
        if c.parent is not None:
            cohorts[c.name].parent = cohorts[c.parent]
            cohorts[c.parent].child_cohorts.append(cohorts[c.name])
    nodes: dict[str, Node] = {}
    for cq in cfg.cluster_queues:
        n = Node(cq.name, True, _quotas(cq.groups), cq.weight)
        if cq.cohort is not None:
            n.parent = cohorts[cq.cohort]
            cohorts[cq.cohort].child_cqs.append(n)
        nodes[cq.name] = n
    for n in [*cohorts.values(), *nodes.values()]:
        if n.parent is None:
            build_subtree(n)
    return nodes, cohorts


def _quotas(groups: tuple[ResourceGroup, ...]) -> dict[FR, Quota]:
    return {(fq.flavor, r): q for g in groups for fq in g.flavors for r, q in fq.quotas}


__all__ = ["KueuePolicy", "FIT", "NOFIT", "PREEMPT"]
