"""Gandiva (Xiao et al., OSDI 2018): affinity placement, time-slicing, and introspection.

No official code exists; this follows the paper and the seeds' digest (MISSION.md).

Reactive mode, on every arrival and completion. Each node carries an affinity label: the
GPU count of the jobs placed on it (none while it is empty). A job of k GPUs that fits in
one node goes to, in order: (1) a node labelled k with k free GPUs, least loaded first;
(2) an empty (unlabelled) node, the smallest that fits; (3) a node of another label with
k free GPUs, least loaded first; (4) oversubscription: time-slicing with a running job (or
group) of the same size, fewest sharers first, at most `max_timeshare` per GPU set;
otherwise it queues. A job with `gpu_speeds` on a cluster of several GPU types tries
(1)-(3) on its fastest types first, then the slower ones (the paper is type-blind).
Inside a node the tightest cell is used. A job larger than any node
takes whole free nodes through the run's placer and labels them. Time-slicing is modelled
analytically by the engine: N jobs on the same GPUs each progress at
(1 - switch_cost / time_slice) / N, with no event per slice.

Introspective mode, every `introspection_interval` while there is something to improve
(never on an idle or settled cluster):
* de-oversubscription: a time-sliced job moves to free GPUs as soon as they exist;
* migration: a job placed with worse locality than its size allows moves to a tighter
  cell when one frees up; defragmentation moves the jobs off the busy node with the most
  free GPUs onto the fullest other busy nodes, while the share of free GPUs that sit on
  busy nodes (the `fragmentation` metric) exceeds `migration_threshold`, at most
  `max_migrations` moves per round. A migration costs `migration_cost` +
  `migration_cost_per_gb` x the job's `gpu_mem_gb` seconds of no progress;
* packing: when jobs wait and no GPU is free, a waiting job is packed onto the GPUs of a
  running job of the same size when their GPU memory fits and the pair's throughput under
  the engine's interference model, 2 x min(1, 1 / (u1 + u2)) x (1 - pack_penalty), beats
  time-slicing's (1 - switch_cost / time_slice). When both jobs name a model and the
  run's performance model measured the pair both ways (`ctx.perf.pair`: Gavel's packed
  pairs, Lucid's co-location table, `partner` rows), the pair's throughput is instead the
  sum of each job's packed throughput over its throughput alone on that GPU type, which
  is also the speed the engine runs the pair at (Gandiva: a pack is kept when its
  throughput beats time-slicing, undone when it does not). Partners are tried in order of
  utilization, as Gandiva's greedy; a measured pair that loses is skipped for the next
  partner, an unmeasured one falls back to the heuristic. Utilizations and tables are
  static, so a pair that beats time-slicing when formed keeps doing so: the check before
  packing is Gandiva's keep-or-unpack check, and pairs are never unpacked;
* grow-shrink: elastic jobs grow into idle GPUs when nobody waits and shrink back (to
  num_gpus, then min_gpus) when jobs queue; each resize pays a checkpoint/restore. Jobs
  with `target_util` grow by utilization instead (`schedlab.policies.elastic`): one task per
  `scale_interval` while min(1, gpu_util x num_gpus / n) is above target and nobody
  waits, on their own timers (not the introspection rounds); they shrink in the rounds
  like the others, whatever `resize_interval` says.
`gandiva` with `introspective=false` is the reactive-only variant.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mypy_extensions import mypyc_attr

from schedlab.policies.base import Ctx, Policy
from schedlab.policies.elastic import ElasticRules, bounds, is_elastic
from schedlab.policies.fifo_elastic import start_elastic
from schedlab.policies.placement.base import candidate_types, speed_tiers, take_gpus
from schedlab.sim.cfuncs import heapify, heappop, heappush
from schedlab.sim.interfaces import ClusterView
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision, Level, Migrate, Start, Unschedulable
from schedlab.sim.params import Param, as_bool, as_float, as_int
from schedlab.sim.queue import SortedKeys

HOLD: Final = ("start", "resume", "migrate", "resize")
DROP: Final = ("preempt", "suspend", "fail", "finish", "kill")


@mypyc_attr(allow_interpreted_subclasses=True)
class GandivaPolicy(Policy):
    """Affinity-based placement with time-slicing, migration, packing and grow-shrink."""

    name = "gandiva"
    orders = False  # places jobs itself
    description = "Gandiva: affinity placement, time-slicing, migration, packing, grow-shrink"
    params = {
        "time_slice": Param(60.0, as_float(0.0, lo_open=True), "time-slice length (s)"),
        "switch_cost": Param(0.5, as_float(0.0),
                             "no-progress seconds per time-slice switch (suspend/resume)"),
        "max_timeshare": Param(4, as_int(1), "most jobs time-sliced on one GPU set"),
        "introspective": Param(True, as_bool, "false: reactive mode only"),
        "introspection_interval": Param(60.0, as_float(0.0, lo_open=True),
                                        "seconds between introspection rounds"),
        "migration": Param(True, as_bool, "migrate for locality and defragmentation"),
        "packing": Param(True, as_bool, "pack low-utilization jobs under overload"),
        "grow_shrink": Param(True, as_bool, "grow/shrink elastic jobs"),
        "migration_cost": Param(10.0, as_float(0.0), "seconds of no progress per migration"),
        "migration_cost_per_gb": Param(0.5, as_float(0.0),
                                       "extra migration seconds per GB of job GPU memory"),
        "migration_threshold": Param(0.75, as_float(0.0, 1.0),
                                     "defragment while this share of free GPUs is on busy "
                                     "nodes"),
        "max_migrations": Param(8, as_int(0), "most migrations per introspection round"),
        "pack_penalty": Param(0.1, as_float(0.0, 0.99),
                              "interference penalty of a packed pair (fraction of speed)"),
        "resize_interval": Param(300.0, as_float(0.0), "seconds between resizes of a job"),
    }

    # --- per-run state ---

    def attach(self, ctx: Ctx) -> None:
        """Build the affinity, time-share and packing indexes for this run."""
        p = self.p
        self._tier: frozenset[str] | None = None  # GPU types a search is limited to
        ctx.configure_sharing(time_slice=p["time_slice"], switch_cost=p["switch_cost"],
                              pack_penalty=p["pack_penalty"])
        topo = ctx.topology
        n = len(topo.nodes)
        self.node_jobs: list[dict[int, int]] = [{} for _ in range(n)]
        self.label = [0] * n
        self.by_label: dict[int, SortedKeys] = {}  # label -> (-free, node) of labelled nodes
        self.node_key: dict[int, tuple[int, int, int]] = {}  # node -> (label, -free, node)
        self.empty: dict[int, SortedKeys] = {}  # capacity -> empty healthy nodes
        for node in topo.nodes:
            if node.num_gpus:
                self.empty.setdefault(node.num_gpus, SortedKeys()).add(node.index)
        self.empty_caps = sorted(self.empty)
        self.held: dict[int, tuple[int, ...]] = {}
        self.ts: dict[int, SortedKeys] = {}  # size -> (sharers, gpus) time-shareable sets
        self.ts_key: dict[tuple[int, ...], tuple[int, int, tuple[int, ...]]] = {}
        self.dirty_nodes: set[int] = set()
        self.dirty_sets: set[tuple[int, ...]] = set()
        self.poor: SortedKeys = SortedKeys()  # running jobs placed below their best level
        self.alone: dict[int, SortedKeys] = {}  # size -> (gpu_util, idx) packing partners
        self.alone_key: dict[int, tuple[int, float, int]] = {}
        self.next_round: float | None = None
        self.elastic_running: set[int] = set()
        self.generation = 0  # grows whenever a job lets GPUs go: new room to improve into
        self.futile_at = -1  # generation at which the last locality/defrag round did nothing
        self.health = ctx.cluster.healthy_gpus
        self.up = list(ctx.cluster.node_up)
        self.elastic = ElasticRules(p["resize_interval"], nominal_first=True)
        self.mig_cost_fixed = p["migration_cost"]
        self.ts_factor = max(0.0, 1.0 - p["switch_cost"] / p["time_slice"])

    # --- index maintenance from job events ---

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Track which jobs hold which GPUs; mark the nodes and GPU sets that changed."""
        idx = job.idx
        old = self.held.pop(idx, None)
        if old is not None:
            self._forget(ctx, idx, old)
            self.generation += 1
        self.elastic_running.discard(idx)
        if kind in HOLD and job.gpus:
            self._remember(ctx, job)
            if is_elastic(job):
                self.elastic_running.add(idx)
        self.elastic.util.notice(ctx, job, kind)

    def _nodes_of(self, ctx: Ctx, gpus: tuple[int, ...]) -> dict[int, int]:
        out: dict[int, int] = {}
        for g in gpus:
            nd = ctx.topology.gpu_node[g]
            out[nd] = out.get(nd, 0) + 1
        return out

    def _forget(self, ctx: Ctx, idx: int, gpus: tuple[int, ...]) -> None:
        for nd in self._nodes_of(ctx, gpus):
            self.node_jobs[nd].pop(idx, None)
            self.dirty_nodes.add(nd)
        key = tuple(sorted(gpus))
        self.dirty_sets.add(key)
        if idx in self.poor:
            self.poor.remove(idx)
        ak = self.alone_key.pop(idx, None)
        if ak is not None:
            self.alone[ak[0]].remove(ak[1:])

    def _remember(self, ctx: Ctx, job: JobState) -> None:
        gpus = job.gpus
        self.held[job.idx] = gpus
        size = len(gpus)
        for nd, k in self._nodes_of(ctx, gpus).items():
            self.node_jobs[nd][job.idx] = k
            if not self.label[nd]:
                self.label[nd] = size
            self.dirty_nodes.add(nd)
        self.dirty_sets.add(tuple(sorted(gpus)))
        walk = ctx.topology.walk
        if size > 1 and walk.lowest_common_level(gpus) > walk.best_level(size):
            self.poor.add(job.idx)
        # a packing partner holds its GPUs whole and alone: a fractional job shares its GPU
        # through the milli-GPU accounting and cannot found a pack (the engine refuses it)
        if ctx.share_mode(job) == "" and job.spec.num_gpus == size and job.spec.gpu_share >= 1:
            key = (size, job.spec.gpu_util, job.idx)
            self.alone_key[job.idx] = key
            self.alone.setdefault(size, SortedKeys()).add(key[1:])

    def _refresh(self, ctx: Ctx) -> None:
        """Re-key the nodes and GPU sets touched since the last pass (sorted: deterministic)."""
        cluster = ctx.cluster
        topo = ctx.topology
        if cluster.healthy_gpus != self.health:  # a node failed or came back
            self.health = cluster.healthy_gpus
            for nd, up in enumerate(cluster.node_up):
                if up != self.up[nd]:
                    self.up[nd] = up
                    self.dirty_nodes.add(nd)
                    self.generation += 1
        for nd in sorted(self.dirty_nodes):
            node = topo.nodes[nd]
            old = self.node_key.pop(nd, None)
            if old is not None:
                self.by_label[old[0]].remove(old[1:])
            if not self.node_jobs[nd]:
                self.label[nd] = 0
            if node.num_gpus:
                empty = self.empty[node.num_gpus]
                if nd in empty:
                    empty.remove(nd)
                if self.label[nd] == 0 and cluster.node_up[nd] \
                        and cluster.cell_free[node.cell] == node.num_gpus:
                    empty.add(nd)
            if self.label[nd]:
                key = (self.label[nd], -cluster.cell_free[node.cell], nd)
                self.node_key[nd] = key
                self.by_label.setdefault(key[0], SortedKeys()).add(key[1:])
        self.dirty_nodes.clear()
        for gpus in sorted(self.dirty_sets):
            old_set = self.ts_key.pop(gpus, None)
            if old_set is not None:
                self.ts[old_set[0]].remove(old_set[1:])
            holders = {h for g in gpus for h in cluster.gpu_holders[g]}
            if not holders or min(holders) < 0:
                continue
            members = ctx.group_of(ctx.job_at(min(holders)))
            if len(holders) != len(members) or any(tuple(sorted(m.gpus)) != gpus
                                                   for m in members):
                continue  # not one whole GPU set (fractional jobs, packs across sets)
            if ctx.share_mode(members[0]) == "pack" or \
                    (len(members) == 1 and members[0].milli != 1000):
                continue  # packed, or a fractional job: not a GPU set to time-slice
            set_key = (len(gpus), len(members), gpus)
            self.ts_key[gpus] = set_key
            self.ts.setdefault(len(gpus), SortedKeys()).add(set_key[1:])
        self.dirty_sets.clear()

    # --- reactive placement ---

    def _in_node(self, ctx: Ctx, nd: int, k: int,
                 cluster: ClusterView | None = None) -> tuple[int, ...] | None:
        """The tightest k free GPUs inside node `nd` (None when they do not fit).

        `cluster`: the state to read (the run's by default; a scratch twin in what-ifs).
        """
        topo = ctx.topology
        cluster = ctx.cluster if cluster is None else cluster
        node = topo.nodes[nd]
        if cluster.cell_free[node.cell] < k or not cluster.node_up[nd]:
            return None
        best = None
        cells = topo.cells
        stack = [node.cell]
        while stack:
            c = stack.pop()
            cell = cells[c]
            f = cluster.cell_free[c]
            if f >= k and cell.level > Level.GPU:
                key = (cell.level, f, c)
                if best is None or key < best:
                    best = key
                stack.extend(cell.children)
        if best is None:
            return None
        return tuple(sorted(take_gpus(cluster, best[2], k)))

    def _fits_type(self, ctx: Ctx, job: JobState, nd: int,
                   cluster: ClusterView | None = None) -> bool:
        t = job.spec.gpu_type
        node = ctx.topology.nodes[nd]
        if t and node.gpu_type != t:
            return False
        if self._tier is not None and node.gpu_type not in self._tier:
            return False
        view = ctx.cluster if cluster is None else cluster
        s = job.spec
        return view.node_fits_host(nd, s.num_cpus, s.mem_gb, s.disk_gb * s.num_tasks)

    def _labelled(self, ctx: Ctx, job: JobState, label: int, k: int
                  ) -> tuple[int, ...] | None:
        lst = self.by_label.get(label)
        if not lst:
            return None
        for negfree, nd in lst:
            if -negfree < k:
                break  # sorted most free first: nobody after this one fits
            if self._fits_type(ctx, job, nd):
                got = self._in_node(ctx, nd, k)
                if got is not None:
                    return got
        return None

    def _reactive(self, ctx: Ctx, job: JobState) -> Start | None:
        k = job.spec.num_gpus
        if k == 0 or job.spec.gpu_share < 1 or is_elastic(job) \
                or k > ctx.topology.max_node_gpus or job.spec.num_tasks > 1:
            # CPU-only, fractional, elastic and multi-node jobs: the run's placer
            start = start_elastic(ctx, job)
            if start is not None or k == 0 or job.spec.gpu_share < 1 or is_elastic(job):
                return start
            return self._timeshare(ctx, job)
        got = None
        for tier in speed_tiers(job.spec, candidate_types(job.spec, ctx.cluster)):
            # a job with gpu_speeds: the fastest types that hold it first
            self._tier = frozenset(tier)
            got = self._free_spot(ctx, job, k)
            if got is not None:
                break
        self._tier = None
        if got is not None:
            return Start(job.job_id, got)
        if self.p["introspective"] and self.p["packing"]:  # (4a) pack when it pays
            pack = self._pack_partner(ctx, job)
            if pack is not None:
                return pack
        return self._timeshare(ctx, job)  # (4) oversubscribe by time-slicing

    def _free_spot(self, ctx: Ctx, job: JobState, k: int
                   ) -> tuple[int, ...] | None:
        """Steps (1) to (3): free GPUs by affinity, then an empty node, then another label."""
        got = self._labelled(ctx, job, k, k)  # (1) same affinity
        if got is None:
            got = self._empty_node(ctx, job, k)  # (2)
        if got is None:
            got = self._other_label(ctx, job, k)  # (3)
        return got

    def _empty_node(self, ctx: Ctx, job: JobState, k: int) -> tuple[int, ...] | None:
        """Step (2): an empty node, the smallest that fits."""
        for cap in self.empty_caps:
            if cap < k:
                continue
            for nd in self.empty[cap]:
                if self._fits_type(ctx, job, nd):
                    got = self._in_node(ctx, nd, k)
                    if got is not None:
                        return got
        return None

    def _other_label(self, ctx: Ctx, job: JobState, k: int) -> tuple[int, ...] | None:
        """Step (3): another affinity with room, least loaded first."""
        best: tuple[int, int] | None = None
        for label, lst in self.by_label.items():
            if label == k or not lst or -lst[0][0] < k:
                continue
            for negfree, nd in lst:
                if -negfree < k:
                    break
                if self._fits_type(ctx, job, nd) and (best is None or (negfree, nd) < best):
                    best = (negfree, nd)
                    break
        return None if best is None else self._in_node(ctx, best[1], k)

    def _timeshare(self, ctx: Ctx, job: JobState) -> Start | None:
        lst = self.ts.get(job.spec.num_gpus)
        if not lst:
            return None
        t = job.spec.gpu_type
        for n, gpus in lst:
            if n >= self.p["max_timeshare"]:
                return None  # sorted by sharers: all the rest are full too
            if t and any(ctx.topology.nodes[ctx.topology.gpu_node[g]].gpu_type != t
                         for g in gpus):
                continue  # every GPU of the group (it may span types) must be of its type
            if any(not ctx.cluster.node_up[ctx.topology.gpu_node[g]] for g in gpus):
                continue
            return Start(job.job_id, gpus, "timeshare")
        return None

    # --- the pass ---

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Reactive placement of waiting jobs; introspection when its round is due."""
        yield from self._place_waiting(ctx)
        if not self.p["introspective"]:
            return
        due = self.next_round is not None and ctx.now >= self.next_round - 1e-9
        if due:
            self.next_round = None
            changed = False
            for d in self._introspect(ctx):
                changed = True
                yield d
            if changed:  # room made by shrinks and moves goes to waiting jobs at once
                yield from self._place_waiting(ctx)
        if self.p["grow_shrink"] and not ctx.pending_count:
            yield from self.elastic.util.scale_out(ctx)
        if self.next_round is None and self._improvable(ctx):
            self.next_round = ctx.now + self.p["introspection_interval"]
            ctx.wake_at(self.next_round)

    def _place_waiting(self, ctx: Ctx) -> Iterator[Decision]:
        self._refresh(ctx)
        classes = ctx.pending_classes()
        # class heads in arrival order; a class whose head cannot start waits this pass
        heap = [(lst[0], ck) for ck, lst in classes.items()]
        heapify(heap)
        while heap:
            key, ck = heappop(heap)
            start = self._reactive(ctx, ctx.job_at(key[1]))
            if start is None:
                continue
            yield start
            self._refresh(ctx)
            lst = classes.get(ck)
            if lst:
                heappush(heap, (lst[0], ck))

    # --- introspection ---

    def _improvable(self, ctx: Ctx) -> bool:
        cluster = ctx.cluster
        p = self.p
        free = cluster.free_whole
        # a GPU set time-sliced by two or more jobs (each list's last key has the most;
        # `lst[-1]` is the sorted list's direct read, where a slice walks its Python)
        shared = any(lst and lst[-1][0] > 1 for lst in self.ts.values())
        if free and shared:
            return True
        if p["migration"] and free and self.futile_at != self.generation and (
                self.poor or (len(self.node_key) > 1
                              and cluster.fragmentation > p["migration_threshold"])):
            return True  # defragmenting needs two busy nodes: one to empty, one to fill
        if p["packing"] and ctx.pending_count and not free and any(self.alone.values()):
            return True
        if p["grow_shrink"] and self.elastic_running:
            jobs = [ctx.job_at(i) for i in sorted(self.elastic_running)]
            if ctx.pending_count:
                return any(len(j.gpus) > bounds(j)[0] for j in jobs)
            return bool(free) and any(len(j.gpus) < bounds(j)[1] and j.spec.target_util is None
                                      for j in jobs)
        return False

    def _cost(self, job: JobState) -> float:
        return self.mig_cost_fixed + self.p["migration_cost_per_gb"] * job.spec.gpu_mem_gb

    def _introspect(self, ctx: Ctx) -> Iterator[Decision]:
        p = self.p
        budget = p["max_migrations"]
        # de-oversubscribe: a time-sliced job takes free GPUs of its own
        for size in sorted(self.ts):
            for n, gpus in list(self.ts[size])[::-1]:
                if n < 2 or budget <= 0 or ctx.cluster.free_whole < size:
                    break
                mover = ctx.group_of(ctx.job_at(min(
                    h for g in gpus for h in ctx.cluster.gpu_holders[g])))[-1]
                got = self._placement_for(ctx, mover)
                if got is not None:
                    budget -= 1
                    yield Migrate(mover.job_id, got, self._cost(mover))
                    self._refresh(ctx)
        if p["migration"] and self.futile_at != self.generation:
            before = budget
            attempts = 4 * max(1, budget)
            for idx in list(self.poor):  # locality: move to a tighter cell when one frees
                attempts -= 1
                if budget <= 0 or attempts < 0:
                    break
                job = ctx.job_at(idx)
                if ctx.share_mode(job):
                    continue
                tighter = ctx.place_if_freed(job, [job])
                walk = ctx.topology.walk
                if not isinstance(tighter, Unschedulable) and \
                        walk.lowest_common_level(tighter) < walk.lowest_common_level(job.gpus):
                    budget -= 1
                    yield Migrate(job.job_id, tighter, self._cost(job))
                    self._refresh(ctx)
            for d in self._defragment(ctx, budget):
                budget -= 1
                yield d
            if budget == before:
                self.futile_at = self.generation  # nothing to gain until GPUs free up
        if p["packing"]:
            yield from self._pack(ctx)
        if p["grow_shrink"]:
            if ctx.pending_count:
                heads = [ctx.job_at(lst[0][1]) for lst in ctx.pending_classes().values()]
                head = min(heads, key=lambda j: (j.spec.submit_time, j.idx))
                need = bounds(head)[0] - ctx.cluster.free_whole
                yield from self.elastic.shrink_for(ctx, need)
            else:
                yield from self.elastic.grow(ctx)

    def _placement_for(self, ctx: Ctx, job: JobState) -> tuple[int, ...] | None:
        k = len(job.gpus)
        if k > ctx.topology.max_node_gpus:
            placed = ctx.place(job)
            return None if isinstance(placed, Unschedulable) else placed
        for label in (k, *sorted(x for x in self.by_label if x != k)):
            got = self._labelled(ctx, job, label, k)
            if got is not None:
                return got
        for cap in self.empty_caps:
            for nd in self.empty.get(cap, ()):
                if cap >= k and self._fits_type(ctx, job, nd):
                    got = self._in_node(ctx, nd, k)
                    if got is not None:
                        return got
        return None

    def _defragment(self, ctx: Ctx, budget: int) -> Iterator[Decision]:
        """Empty the least-used busy node into the fullest other busy nodes."""
        cluster = ctx.cluster
        topo = ctx.topology
        tried: set[int] = set()
        while budget > 0 and cluster.fragmentation > self.p["migration_threshold"]:
            source = None
            for lst in self.by_label.values():
                for negfree, nd in lst:
                    if nd not in tried and -negfree < topo.nodes[nd].num_gpus:
                        if source is None or (negfree, nd) < source:
                            source = (negfree, nd)
                        break
            if source is None:
                return
            nd = source[1]
            tried.add(nd)
            jobs = [ctx.job_at(i) for i in sorted(self.node_jobs[nd])]
            if not jobs or len(jobs) > budget or any(
                    ctx.share_mode(j) or len({topo.gpu_node[g] for g in j.gpus}) > 1
                    for j in jobs):
                continue
            plan = self._refit(ctx, jobs, nd)
            if plan is None:
                continue
            for job, gpus in plan:
                budget -= 1
                yield Migrate(job.job_id, gpus, self._cost(job))
            self._refresh(ctx)

    def _refit(self, ctx: Ctx, jobs: list[JobState], source: int
               ) -> list[tuple[JobState, tuple[int, ...]]] | None:
        """GPUs on other busy nodes (fullest first) for every job of `source`, or None.

        The jobs are fitted one by one on a scratch twin of the cluster, each seeing the
        GPUs the earlier ones took; the run's state is never touched. Candidate nodes come
        from the affinity index (`by_label`, as of the last refresh); their free GPUs are
        read on the twin.
        """
        plan: list[tuple[JobState, tuple[int, ...]]] = []
        nodes = ctx.topology.nodes
        with ctx.cluster.sandbox() as scratch:
            for job in jobs:
                k = len(job.gpus)
                best = None
                for lst in self.by_label.values():
                    # fullest node that still has k free: the last entry with -free <= -k
                    i = lst.bisect_right((-k, len(nodes)))
                    for j in range(i - 1, -1, -1):
                        negfree, nd = lst[j]
                        if nd != source and self._fits_type(ctx, job, nd, scratch) \
                                and scratch.cell_free[nodes[nd].cell] >= k:
                            if best is None or (-negfree, nd) < best:
                                best = (-negfree, nd)
                            break
                if best is None:
                    return None
                got = self._in_node(ctx, best[1], k, scratch)
                if got is None:
                    return None
                scratch.allocate(-3, got, 1000)  # seen by the next job's search
                plan.append((job, got))
        return plan

    def _pack_partner(self, ctx: Ctx, job: JobState) -> Start | None:
        """Pack `job` with the least-utilized running same-size job, when that pays."""
        k = job.spec.num_gpus
        partners = self.alone.get(k)
        if not partners or job.spec.gpu_share < 1 or is_elastic(job):
            return None
        u = job.spec.gpu_util
        penalty = self.p["pack_penalty"]
        perf = ctx.perf
        by_table = perf is not None and perf.knows(job)  # pairs may be measured
        guess_open = True  # the heuristic may still accept a (busier) unmeasured partner
        gains: dict[tuple[str, int | None, str], float | None] = {}
        for util, idx in partners:
            other = ctx.job_at(idx)
            gain = self._table_gain(ctx, job, other, gains) if by_table else None
            if gain is None:
                if not guess_open:
                    continue
                pair = 2 * min(1.0, 1.0 / (u + util)) * (1 - penalty) if u + util > 0 else 0.0
                if pair <= self.ts_factor:
                    if not by_table:
                        return None  # partners sorted by utilization: the rest are busier
                    guess_open = False  # only measured partners can still pay
                    continue
            elif gain <= self.ts_factor:
                continue  # measured: this pair would not beat time-slicing
            if ctx.share_mode(other) or other.status != "running":
                continue
            if not self._fits_on(ctx, job, other):
                continue
            return Start(job.job_id, tuple(sorted(other.gpus)), "pack")
        return None

    @staticmethod
    def _fits_on(ctx: Ctx, job: JobState, other: JobState) -> bool:
        """Whether `job` may share every GPU of `other`.

        Its GPU type on each of their nodes (a job may span types), and the pair's GPU
        memory on each.
        """
        topo = ctx.topology
        mem = job.spec.gpu_mem_gb + other.spec.gpu_mem_gb
        want = job.spec.gpu_type
        for n in {topo.gpu_node[g] for g in other.gpus}:
            node = topo.nodes[n]
            if want and node.gpu_type != want:
                return False
            if node.gpu_mem_gb > 0 and mem > node.gpu_mem_gb:
                return False  # the pair's GPU memory does not fit
        return True

    def _table_gain(self, ctx: Ctx, job: JobState, other: JobState,
                    seen: dict[tuple[str, int | None, str], float | None]) -> float | None:
        """The pair's throughput in solo units from the performance model (None: unmeasured).

        Each job's packed throughput over its throughput alone on the partner's GPU type,
        summed; `seen` caches it per (partner model, batch size, type) within one search.
        """
        perf = ctx.perf
        if not other.gpus or not other.spec.model or not perf.knows(other):
            return None
        gtype = ctx.topology.nodes[ctx.topology.gpu_node[other.gpus[0]]].gpu_type
        key = (other.spec.model, other.spec.batch_size, gtype)
        if key in seen:
            return seen[key]
        gain = None
        mine, theirs = perf.pair(job, other, gtype), perf.pair(other, job, gtype)
        if mine is not None and theirs is not None:
            alone = perf.throughput(job, gtype, job.spec.num_gpus)
            alone_other = perf.throughput(other, gtype, other.spec.num_gpus)
            if alone > 0 and alone_other > 0:
                gain = mine / alone + theirs / alone_other
        seen[key] = gain
        return gain

    def _pack(self, ctx: Ctx) -> Iterator[Decision]:
        """Under overload, pack class heads that time-slicing could not take."""
        if not ctx.pending_count or ctx.cluster.free_whole:
            return
        for lst in list(ctx.pending_classes().values()):
            if lst:
                start = self._pack_partner(ctx, ctx.job_at(lst[0][1]))
                if start is not None:
                    yield start
                    self._refresh(ctx)
