"""The `hived` policy: HiveD's VCs and buddy cell allocation, with an ordering inside each VC.

Trace mapping: `vc` -> virtual cluster; `priority` -1 -> opportunistic, 0..1000 ->
guaranteed (higher first); `gpu_type` -> leaf cell type (any when empty);
`gpus_per_task` -> the pods of the gang (a task larger than a node is split into
node-sized pods, since HiveD puts one pod on one node); an optional pass-through column
`pinned_cell_id` asks for one of the VC's pinned cells. A job of an unknown VC, with a
priority out of range, or of a leaf type its VC has no cells of, is rejected with the
reason in `jobs.parquet`. With no VCs in the topology (and no `vcs` file), one VC
`default` owns every cell and every job belongs to it, whatever its `vc`.

Each VC keeps its guaranteed jobs in a queue, highest priority first then arrival; one
more queue holds the opportunistic jobs of every VC. An instance of the `order` policy
runs on each queue and sees only that queue through a context whose `place` answers with
HiveD's placement (and whose preemption what-ifs always say no: victims are HiveD's
choice). When the ordering starts a job, HiveD binds its cells, preempts the victims
(opportunistic gangs, or lower-priority gangs of the same VC) and starts it.

Preemption follows HiveD: a victim's own `lazy_preemption` (the trace column; empty: the
run's parameter) decides whether it is downgraded to opportunistic or preempted; a
preemptor's cells are reserved for it at once while its victims keep running (being
preempted) until they end or `preemption_delay` s have passed, then it starts; a higher
priority may cancel a preemption under way (the victims get their cells back).

A job of roles (contract.md#sec-2 `tasks`) is one affinity group whose members differ: each gang GPU
task a pod of its `gpus` leaf cells on one node (`Request.members`), placed and preempted
as one gang; its CPU-only gang tasks go on host capacity by the placers' `place_roles`
(fed HiveD's pods), its non-gang tasks are the engine's. The GPUs of running non-gang
tasks are booked in HiveD's cells as opportunistic leaves (HiveD looks elsewhere); a
guaranteed job whose only placement would preempt one waits (the engine stops a non-gang
task only with its gang).

A job of a VC that can never hold it (more GPUs than its cells, a pod larger than its
node-level cells) waits, as in HiveD, and blocks its VC under a strict `fifo` order.
Fractional jobs (`gpu_share` < 1) take a whole leaf cell; elastic jobs run at `num_gpus`.

Per pass the policy looks only at what changed (`tracking.JobTracker`: ended and new
jobs from the engine's events, arrivals by index), node health (a list comparison), and
reruns a queue's ordering only when that queue changed (arrivals, requeues, releases in
its VC, health, doomed cells returned) unless the ordering has a `period`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from schedlab.policies.base import Policy
from schedlab.policies.hived.algorithm import HivedAlgorithm, Plan, Request
from schedlab.policies.hived.cells import MAX_GUARANTEED, MIN_GUARANTEED, OPP
from schedlab.policies.hived.config import DEFAULT_VC, build_physical, resolve_vcs
from schedlab.policies.hived.tracking import Ctx, JobTracker
from schedlab.sim.context import live_keys
from schedlab.sim.errors import InvalidDecision, InvalidParameter, SimError, did_you_mean
from schedlab.sim.jobstate import PENDING, JobState
from schedlab.sim.model import (
    MILLI,
    Decision,
    EventKind,
    JobSpec,
    Placement,
    Preempt,
    Reject,
    Resume,
    RolePlacement,
    Start,
    Suspend,
    Unschedulable,
    is_missing,
)
from schedlab.sim.params import Param, as_bool, as_float, as_optional, as_path
from schedlab.sim.roles import gang_tasks, has_roles

if TYPE_CHECKING:
    from schedlab.sim.interfaces import WhatIfView

PINNED_COLUMN = "pinned_cell_id"
SIDE_BASE = 1 << 40  # gang ids of non-gang tasks booked in HiveD's cells (above job indices)


def as_order(v: Any) -> str:
    """A registered policy name other than `hived`, used to order jobs inside each VC."""
    from schedlab.policies.registry import policy_class
    from schedlab.sim.errors import UnknownName

    name = str(v).strip()
    if name == HivedPolicy.name:
        raise ValueError("hived cannot order the jobs of its own VCs; allowed: another "
                         "registered policy such as fifo or fifo-backfill")
    try:
        cls = policy_class(name)
    except UnknownName as e:
        raise ValueError(str(e)) from None
    if not cls.orders:
        from schedlab.policies.registry import orderings

        raise ValueError(
            f"{name} schedules the whole cluster by rules of its own (placement, sizes, "
            "time-slicing or tenant quotas), so it cannot order the jobs of one hived VC; "
            f"allowed: {', '.join(orderings())}")
    return name


@dataclass(eq=False)
class _Queue:
    """Pending and running jobs of one VC (or of every opportunistic job), with its order."""

    name: str
    policy: Policy
    pos: int  # processing order: the VCs in config order, then the opportunistic queue
    keys: SortedList = field(default_factory=SortedList)  # (-priority, submit, idx)
    classes: dict[tuple, SortedList] = field(default_factory=dict)  # -> (submit, idx)
    running: dict[int, JobState] = field(default_factory=dict)
    ctx: Ctx | None = None  # a _QueueContext standing in for one (set in attach)
    listens: bool = False  # the ordering keeps indexes from job events (overrides `notify`)
    by_class: bool = True  # the ordering may read `classes` (else they are not kept)

    def __post_init__(self) -> None:
        self.listens = not getattr(type(self.policy).notify, "__schedlab_noop__", False)
        self.by_class = _reads_classes(self.policy)


def _reads_classes(policy: Policy) -> bool:
    """Whether an ordering may ask for its queue's pending classes.

    Strict `fifo` (its pass, not overridden) walks `pending()` only, so a queue it orders
    keeps no class index: that saves two sorted-list updates per job. Any other ordering
    gets the index kept as jobs come and go (its dict order is their arrival order).
    """
    from schedlab.policies.fifo import FifoPolicy

    return type(policy).schedule is not FifoPolicy.schedule


def _asks_host(s: JobSpec) -> bool:
    return s.num_cpus > 0 or s.mem_gb > 0 or s.disk_gb > 0


def _class_key(s: JobSpec, pinned: str) -> tuple:
    return (s.num_gpus, s.task_gpus, s.gpu_type, s.gpu_share, s.num_cpus, s.mem_gb,
            s.priority, pinned, s.tasks)


def _same_start(d: Decision, kind: type, job_id: str, gpus: Any, node: int,
                tasks: tuple) -> bool:
    """Whether decision `d` equals `kind(job_id, gpus, node=node, tasks=tasks)`.

    The ordering's Start usually carries the very GPUs hived starts the job on; passing
    it on saves building an equal (frozen) one per start. Plain GPU tuples only: a
    placement of another type is converted by the decision's constructor.
    """
    return (isinstance(d, Start | Resume) and type(d) is kind and type(gpus) is tuple
            and type(d.gpus) is tuple and d.job_id == job_id and d.gpus == gpus
            and d.node == node and d.tasks == tasks and not d.share)


def _pod_gpus(leaves: Sequence[Any], req: Request) -> list[tuple[int, ...]]:
    """The GPUs of each pod of a gang of `req` on these leaves (in the plan's pod order).

    HiveD's scheduler returns pods smallest first; the leaves of a gang are its pods'
    leaves one pod after the other.
    """
    sizes = sorted(req.members) if req.members else [len(leaves)]
    out = []
    i = 0
    for n in sizes:
        out.append(tuple(c.gpu for c in leaves[i:i + n]))
        i += n
    return out


class _QueueContext:
    """What an ordering policy sees of one queue: a `PolicyContext` narrowed to the queue.

    The queue's own members answer for the queue (pending, running, place, wake_at, owns);
    the rest forward to the run's context.
    """

    def __init__(self, owner: HivedPolicy, queue: _Queue, ctx: Ctx) -> None:
        self._owner = owner
        self._q = queue
        self._ctx = ctx
        self.topology = ctx.topology
        self.cluster = ctx.cluster
        self.rng = ctx.rng
        self.params = ctx.params

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        return self._ctx.now

    @property
    def pending_count(self) -> int:
        """Jobs waiting in this queue."""
        return len(self._q.keys)

    def pending(self) -> Iterator[JobState]:
        """This queue's pending jobs, highest priority first, then in arrival order."""
        for key in live_keys(self._q.keys):
            job = self._ctx.job_at(key[2])
            if job.status != PENDING:  # left the queue behind our back (e.g. killed)
                self._owner._dequeue(job)
                continue
            yield job

    def pending_classes(self) -> dict[tuple, SortedList]:
        """This queue's pending jobs grouped by identical request, keys (submit, idx).

        A queue whose ordering never asks (strict fifo, `_reads_classes`) keeps no index;
        asked all the same, it builds it now from its jobs and keeps it from then on.
        """
        q = self._q
        if not q.by_class:
            self._owner._index_classes(q, self._ctx)
        return q.classes

    def running(self) -> Mapping[int, JobState]:
        """This queue's running jobs by index."""
        return self._q.running

    def job_at(self, idx: int) -> JobState:
        """A job's state by index."""
        return self._ctx.job_at(idx)

    def watch_progress(self) -> set[int]:
        """The run's watch of version moves (every job's; the queue's are among them)."""
        return self._ctx.watch_progress()

    def job(self, job_id: str) -> JobState:
        """A job's state by trace id."""
        return self._ctx.job(job_id)

    def place(self, job: JobState | JobSpec, num_gpus: int | None = None) -> Placement:
        """HiveD's placement for the job now (preemption included), or why not."""
        spec = job.spec if isinstance(job, JobState) else job
        if num_gpus is not None and num_gpus != spec.num_gpus:
            return Unschedulable("hived places a job at its num_gpus only", False)
        state = job if isinstance(job, JobState) else self._ctx.job(spec.job_id)
        if not spec.num_gpus and isinstance(self._owner._request(state), Request):
            return self._ctx.place(state)  # no cells: a node with its CPUs, memory, disk
        return self._owner._place(state, self._ctx)

    def place_if_freed(self, job: JobState | JobSpec, victims: Sequence[JobState],
                       num_gpus: int | None = None) -> Placement:
        """Always no: under hived, HiveD alone chooses preemption victims."""
        return Unschedulable("hived chooses preemption victims itself", False)

    def run_time(self, job: JobState) -> float:
        """Seconds the job has held GPUs so far."""
        return self._ctx.run_time(job)

    def attained_service(self, job: JobState) -> float:
        """GPU-seconds received so far."""
        return self._ctx.attained_service(job)

    def progress(self, job: JobState) -> float:
        """Work done by the job so far (ideal seconds)."""
        return self._ctx.progress(job)

    @property
    def num_jobs(self) -> int:
        """Jobs in the run (indices are the run's, every queue's jobs among them)."""
        return self._ctx.num_jobs

    @property
    def trace_jobs(self) -> int:
        """Jobs of the run's trace: indices 0 .. trace_jobs - 1, in submit order."""
        return self._ctx.trace_jobs

    def what_if(self, victims: Sequence[JobState] = ()) -> AbstractContextManager[WhatIfView]:
        """The run's what-if view of the whole cluster as if `victims` released their GPUs."""
        return self._ctx.what_if(victims)

    def placement_speed(self, job: JobState | JobSpec, gpus: tuple[int, ...]) -> float:
        """Speed of `job` on `gpus` alone (type x locality)."""
        return self._ctx.placement_speed(job, gpus)

    @property
    def perf(self) -> Any:
        """The run's performance models (`schedlab.sim.perf.speed.PerfView`; None: none)."""
        return self._ctx.perf

    def configure_sharing(self, *, time_slice: float | None = None,
                          switch_cost: float | None = None,
                          pack_penalty: float | None = None) -> None:
        """Set the run's co-location model."""
        self._ctx.configure_sharing(time_slice=time_slice, switch_cost=switch_cost,
                                    pack_penalty=pack_penalty)

    def group_of(self, job: JobState) -> list[JobState]:
        """The jobs sharing `job`'s GPUs (itself included)."""
        return self._ctx.group_of(job)

    def share_mode(self, job: JobState) -> str:
        """'timeshare', 'pack' or ''."""
        return self._ctx.share_mode(job)

    def wake_at(self, t: float) -> None:
        """Ask for a pass of this queue's ordering at time `t`."""
        self._owner.wakes.add((t, self._q.pos))
        self._ctx.wake_at(t)

    def owns(self, job: JobState) -> bool:
        """True when the job belongs to this queue (its VC, or the opportunistic queue)."""
        return self._owner._queue_of(job) is self._q

    def __getattr__(self, name: str) -> Any:
        """Anything else the run's context offers beyond the protocol, unchanged."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._ctx, name)


@mypyc_attr(allow_interpreted_subclasses=True)
class HivedPolicy(Policy):
    """HiveD (OSDI'20): guaranteed jobs in VCs of multi-level cells, buddy cell allocation."""

    name = "hived"
    supports_roles = True  # a job with roles is one affinity group of unequal pods
    tenant_field = "vc"
    orders = False  # places jobs itself
    ordering_param = "order"
    description = ("HiveD: VCs of multi-level cells bound to physical cells by buddy "
                   "allocation; guaranteed and opportunistic jobs, (lazy) preemption")
    params = {
        "order": Param("fifo", as_order,
                       "registered policy ordering the jobs inside each VC (and the "
                       "opportunistic queue); HiveD chooses cells and victims"),
        "lazy_preemption": Param(
            False, as_bool, "a guaranteed gang preempted inside its VC is first downgraded "
            "to opportunistic and keeps running until its cells are really needed; the "
            "default of the trace column lazy_preemption (HiveD's per-job flag)"),
        "preemption_delay": Param(
            30.0, as_float(0.0),
            "s a preemption takes: the preemptor's cells are reserved at once and its "
            "victims keep running (being preempted) until they stop by themselves or this "
            "delay ends (Kubernetes' default termination grace period, 30 s); a higher "
            "priority can cancel the preemption meanwhile; 0 preempts and starts at once"),
        "vcs": Param(
            None, as_optional(as_path),
            "YAML of virtual clusters overriding the topology's: vc -> {level: count} or "
            "vc -> {virtualCells: [{cellType, cellNumber}], pinnedCells: [...]}"),
    }

    def attach(self, ctx: Ctx) -> None:
        """Build the cells, check VC safety, and make one ordering instance per queue."""
        from schedlab.policies.registry import make_policy

        topo = ctx.topology
        pc = build_physical(topo)
        data = None
        source = topo.source or topo.name
        if self.p["vcs"]:
            from schedlab.topologies.native import load_yaml

            try:
                data = load_yaml(self.p["vcs"], "VC file")
            except SimError as e:
                raise InvalidParameter(f"parameter vcs: {e}") from None
            source = self.p["vcs"]
        vcs, self.explicit_vcs = resolve_vcs(topo, pc, data, source)
        self.algo = HivedAlgorithm(pc, vcs, lazy=self.p["lazy_preemption"], source=source)
        self._empty_args = (topo, vcs, source)
        self._empty_algo: HivedAlgorithm | None = None  # built on first need
        self._ever_fits: dict[tuple, str] = {}
        self._refusals: dict[tuple, str] = {}  # see _make_request
        self._plain: dict[tuple, tuple[str, str]] = {}  # shape -> (refusal, VC): ditto
        order = self.p["order"]
        self.queues: dict[str, _Queue] = {
            vc: _Queue(vc, make_policy(order), i) for i, vc in enumerate(vcs)}
        self.opp = _Queue("(opportunistic)", make_policy(order), len(vcs))
        self.by_pos = self._all_queues()
        self.dirty: set[int] = set(range(len(self.by_pos)))  # queues that changed
        self.wakes: SortedList = SortedList()  # (time, queue pos) its ordering asked for
        for q in self._all_queues():
            # what the ordering sees: a PolicyContext narrowed to the queue
            qctx: Ctx = _QueueContext(self, q, ctx)
            q.ctx = qctx
            q.policy.attach(qctx)
        self.listening = any(q.listens for q in self._all_queues())  # some ordering hears events
        periods = [q.policy.period for q in self._all_queues() if q.policy.period]
        self.period = min(periods) if periods else None
        self.timed = {q.pos for q in self._all_queues() if q.policy.period}
        self.jobs = JobTracker()  # running / pending job -> its queue
        self.requests: dict[int, Request | str] = {}
        self.listed: dict[int, tuple] = {}  # jobs in a queue's indexes -> their class key
        # last dry-run plan per job: (HiveD's version, plan, cluster version, its start)
        self.plans: dict[int, tuple[int, Plan, int, tuple[int, ...]]] = {}
        self.up = list(ctx.cluster.node_up)
        self.all_up = all(self.up)
        self.sync_hooks = (self._gone, self._enqueue, self._dequeue)  # the tracker's
        self.lazy_preemptions = 0
        self.preempting: dict[int, tuple[float, type]] = {}  # job -> (victims' deadline, kind)
        self.downgraded: set[str] = set()  # ids of jobs ever lazily preempted
        self.preemptions = 0
        # running jobs with GPU non-gang roles -> (role, index) -> (gang id, GPUs) booked
        self.side_held: dict[int, dict[tuple[str, int], tuple[int, tuple[int, ...]]]] = {}
        self.side_owner: dict[int, int] = {}  # booked gang id -> its job's index
        self.next_side = SIDE_BASE

    def _all_queues(self) -> list[_Queue]:
        return [*self.queues.values(), self.opp]

    # --- the pass ---

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Catch up with the engine, then run the ordering of each queue that changed."""
        yield from self._sync(ctx)
        if self.preempting:
            yield from self._advance(ctx)
        while self.wakes and self.wakes[0][0] <= ctx.now:  # orderings' own timers
            self.dirty.add(self.wakes.pop(0)[1])
        done = -1
        dirty = self.dirty
        timed = self.timed
        by_pos = self.by_pos
        while True:
            if self.algo.touched_vcs:
                self._touch_doomed()
            # the changed queues after the last one run, in order; empty ones are passed
            # over at once (nothing changes until an ordering runs)
            ran = False
            for i in sorted(dirty | timed if timed else dirty):
                if i <= done:
                    continue
                done = i
                dirty.discard(i)
                q = by_pos[i]
                if q.keys:
                    yield from self._run(ctx, q)
                    ran = True
                    break
            if not ran:
                return

    def _mark(self, q: _Queue) -> None:
        self.dirty.add(q.pos)

    def _touch_doomed(self) -> None:
        touched = self.algo.touched_vcs
        if touched:
            for vc in touched:
                self._mark(self.queues[vc])
            touched.clear()

    def _run(self, ctx: Ctx, q: _Queue) -> Iterator[Decision]:
        assert q.ctx is not None  # set in attach
        self.refused: set[str] = set()
        for d in q.policy.schedule(q.ctx):
            if d.job_id in self.refused:
                return  # the ordering insists on a start HiveD just refused: next pass
            yield from self._apply(ctx, q, d)

    def _apply(self, ctx: Ctx, q: _Queue, d: Decision) -> Iterator[Decision]:
        job = ctx.job(d.job_id)
        if isinstance(d, Start | Resume):
            if job.status != PENDING:
                self._dequeue(job)
                return
            if job.idx in self.preempting:
                return  # already reserved its cells; starts when its victims are gone
            if self.jobs.pending.get(job.idx) is not q:
                raise InvalidDecision(f"hived: order policy {q.policy.name!r} started "
                                      f"{job.job_id!r}, which is not in queue {q.name!r}")
            req = self._request(job)
            if isinstance(req, str):
                return
            plan: Plan | None = None
            start: tuple[int, ...] | None = None
            if job.spec.num_gpus:
                cached = self.plans.pop(job.idx, None)
                if cached is not None and cached[0] == self.algo.version:
                    # where it starts, unless the engine's cluster changed since `place`
                    start = (cached[3] if cached[2] == ctx.cluster.version
                             else self._start_of(ctx, job, cached[1]))
                    if start is not None:
                        plan = cached[1]  # nothing changed since `place` computed it
                        self.algo.commit(plan)
                if plan is None:
                    if _asks_host(job.spec) or req.members or self.side_owner:
                        probe = self.algo.schedule(req, commit=False)  # a dry run first
                        if isinstance(probe, str) or self._start_of(ctx, job, probe) is None:
                            self.refused.add(job.job_id)
                            return
                    got = self.algo.schedule(req, commit=True)
                    if isinstance(got, str):
                        self.refused.add(job.job_id)
                        return  # the state changed since `place`: the job keeps waiting
                    plan = got
                    start = self._start_of(ctx, job, plan)
                    if start is None:  # GPUs a non-gang task took behind HiveD's back
                        self._released(self.algo.release(job.idx), job.idx)
                        self._drain_cancelled(ctx)
                        self.refused.add(job.job_id)
                        return
                if plan.lazy:
                    self.lazy_preemptions += len(plan.lazy)
                    self.downgraded.update(ctx.job_at(i).job_id for i in plan.lazy)
                if self.algo.cancelled:
                    self._drain_cancelled(ctx)
                if plan.victims:
                    delay = self.p["preemption_delay"]
                    if delay > 0:  # its cells are reserved; the victims stop later
                        self.preempting[job.idx] = (ctx.now + delay, type(d))
                        self._unlist(job, q)
                        ctx.wake_at(ctx.now + delay)
                        return
                    for v in plan.victims:
                        yield from self._preempt_victim(ctx, v, job)
                    self.algo.allocate(job.idx)
            else:
                self.algo.add_empty(req)
            assert plan is None or start is not None  # set with the plan
            yield from self._started(ctx, q, job, type(d), start or (),
                                     d.node if plan is None else -1,
                                     d.tasks if plan is None else (), d)
        elif isinstance(d, Preempt | Suspend):
            if self.jobs.running.get(job.idx) is not q:
                raise InvalidDecision(f"hived: order policy {q.policy.name!r} stopped "
                                      f"{job.job_id!r}, which is not running in {q.name!r}")
            self.jobs.running.pop(job.idx)
            q.running.pop(job.idx, None)
            self._released(self.algo.release(job.idx), job.idx)
            self._drop_side(job.idx)
            yield d
            self._enqueue_after(ctx, job)
        elif isinstance(d, Reject):
            self._dequeue(job)
            yield d
        else:
            raise InvalidDecision(
                f"hived: order policy {q.policy.name!r} yielded {type(d).__name__}; hived "
                "supports orderings that start, preempt, suspend or reject jobs")

    def _started(self, ctx: Ctx, q: _Queue, job: JobState, kind: type,
                 gpus: tuple[int, ...], node: int, tasks: tuple = (),
                 asked: Decision | None = None) -> Iterator[Decision]:
        """Book a job as running in its queue and start it.

        `gpus` may be a `RolePlacement` (a job with roles), which carries its tasks;
        `tasks` places the CPU-only gang of a job with roles (the placer's answer).
        `asked`, the ordering's own decision, is passed on as it is when it says the same.
        """
        self._dequeue(job)
        self.jobs.running[job.idx] = q
        q.running[job.idx] = job
        if not self.all_up:  # else every node is up this pass (checked in `_sync`)
            self._check_healthy(ctx, job, gpus)
        spec = job.spec
        if (spec.tasks and any(not r.gang and r.gpus > 0 for r in spec.tasks)
                and has_roles(spec)):
            self.side_held[job.idx] = {}  # its evaluators are booked once the engine places them
        if asked is not None and _same_start(asked, kind, job.job_id, gpus, node, tasks):
            yield asked
        else:
            yield kind(job.job_id, gpus, node=node, tasks=tasks)

    def _advance(self, ctx: Ctx) -> Iterator[Decision]:
        """Preemptions under way: stop victims whose delay ended, start ready preemptors.

        A preemptor whose reserved cells sit on a failed node gives them up and waits
        again (HiveD cancels a preemption whose placement is no longer healthy).
        """
        if not self.preempting:
            return
        now = ctx.now
        up = ctx.cluster.node_up
        gpu_node = ctx.topology.gpu_node
        for idx, (due, kind) in sorted(self.preempting.items(), key=lambda t: (t[1][0], t[0])):
            if idx not in self.preempting:
                continue  # cancelled by a start earlier in this loop
            job = ctx.job_at(idx)
            q = self.jobs.pending[idx]
            g = self.algo.groups[idx]
            if not all(up[gpu_node[leaf.gpu]] for leaf in g.leaves):
                self.algo.cancel(idx)
                self._drain_cancelled(ctx)
                continue
            if due <= now:
                for v in self.algo.victims_of(idx):
                    yield from self._preempt_victim(ctx, v, job)
            if self.algo.ready(idx):
                start = self._start_on(ctx, job, _pod_gpus(g.leaves, self._known_request(job)),
                                       ())
                if start is None:
                    # another job took the host share of its nodes during the delay
                    # (HiveD's cells are GPUs only): give the cells up and wait again
                    self.algo.cancel(idx)
                    self._drain_cancelled(ctx)
                    continue
                del self.preempting[idx]
                self.algo.allocate(idx)
                yield from self._started(ctx, q, job, kind, start, -1)

    def _drain_cancelled(self, ctx: Ctx) -> None:
        """Preemptions HiveD cancelled (a higher priority took the cells): wait again."""
        cancelled = self.algo.cancelled
        while cancelled:
            idx = cancelled.pop()
            if self.preempting.pop(idx, None) is None:
                continue
            job = ctx.job_at(idx)
            q = self.jobs.pending.get(idx)
            if q is not None and job.status == PENDING:
                self._list(job, q)
                self._mark(q)

    def _preempt_victim(self, ctx: Ctx, idx: int, by: JobState) -> Iterator[Decision]:
        victim = ctx.job_at(idx)
        q = self.jobs.running.pop(idx)
        q.running.pop(idx, None)
        self._released(self.algo.release(idx), idx)
        if self.side_held:
            self._drop_side(idx)
        self._drain_cancelled(ctx)
        self._mark(self.queues[self._known_request(victim).vc])
        self._mark(self.opp)
        self.preemptions += 1
        spec = by.spec
        yield Preempt(victim.job_id, f"hived: job {spec.job_id} (VC {self._vc_of(spec)}, "
                                     f"priority {spec.priority}) needs its cells")
        self._enqueue_after(ctx, victim)

    def _enqueue_after(self, ctx: Ctx, job: JobState) -> None:
        """Requeue a job the engine just put back in its queue (no rejection possible)."""
        if job.status == PENDING:
            self._enqueue(job)
        else:
            self.jobs.requeued(job)

    def _check_healthy(self, ctx: Ctx, job: JobState, gpus: tuple[int, ...]) -> None:
        up = ctx.cluster.node_up
        gn = ctx.topology.gpu_node
        bad = [g for g in gpus if not up[gn[g]]]
        if bad:
            raise SimError(f"hived: internal error, {job.job_id!r} placed on failed nodes "
                           f"(GPUs {bad})")

    # --- placement for the orderings ---

    def _place(self, job: JobState, ctx: Ctx) -> Placement:
        req = self.requests.get(job.idx) or self._request(job)
        if isinstance(req, str):
            return Unschedulable(req, False)
        if not job.spec.num_gpus:
            return ()
        got = self.algo.schedule(req, commit=False)
        if isinstance(got, str):
            return Unschedulable(got, False)
        start = self._start_of(ctx, job, got)
        if start is None:
            return Unschedulable("hived: the nodes of its cells lack the CPUs, memory or "
                                 "disk it asks for now", True)
        if not got.lazy:
            self.plans[job.idx] = (self.algo.version, got, ctx.cluster.version, start)
        return start

    def explain(self, ctx: Ctx, job: JobState) -> str:
        """A job whose HiveD cells lack the CPUs, memory or disk it asks for (at the end).

        HiveD picks cells by GPUs alone, the same ones in the same state, so such a job
        would wait for ever.
        """
        s = job.spec
        if not s.num_gpus or not _asks_host(s):
            return ""
        req = self._request(job)
        if isinstance(req, str):
            return ""
        got = self.algo.schedule(req, commit=False)
        if isinstance(got, str) or self._start_of(ctx, job, got) is not None:
            return ""
        topo = ctx.topology
        nodes = sorted({topo.nodes[topo.gpu_node[g]].name for g in got.gpus})
        return (f"hived: the cells HiveD picks for it (on {', '.join(nodes)}) lack the CPUs, "
                "memory or disk it asks for (HiveD places by GPU cells only)")

    def _start_of(self, ctx: Ctx, job: JobState, plan: Plan
                  ) -> tuple[int, ...] | None:
        """What the job starts on with this plan once its victims stopped, or None.

        HiveD's cells are GPUs only; the CPUs, memory and disk of the plan's nodes, and
        GPUs a running job's non-gang task (placed by the engine) holds, may not allow it.
        """
        if self.side_owner and any(v in self.side_owner for v in plan.victims):
            return None  # the engine cannot stop another job's evaluator alone: wait
        pods = [tuple([c.gpu for c in pod]) for pod in plan.pods]
        return self._start_on(ctx, job, pods, plan.victims)

    def _start_on(self, ctx: Ctx, job: JobState, pods: list[tuple[int, ...]],
                  victims: Sequence[int]) -> tuple[int, ...] | None:
        """The GPUs (a `RolePlacement` for a job with roles) of these pods, or None.

        None when a GPU is held by other than `victims` or the nodes lack the host asks.
        """
        holders = ctx.cluster.gpu_holders
        for pod in pods:
            for g in pod:
                held = holders[g]  # job index -> its share of the GPU
                if held and (not victims or any(h not in victims for h in held)):
                    return None
        if self._known_request(job).members:
            return self._roles_on(ctx, job, pods, victims)
        gpus = (tuple(sorted(pods[0])) if len(pods) == 1
                else tuple(sorted([g for pod in pods for g in pod])))
        if _asks_host(job.spec) and not self._host_fits_on(ctx, job, gpus, victims):
            return None
        return gpus

    def _roles_on(self, ctx: Ctx, job: JobState, pods: list[tuple[int, ...]],
                  victims: Sequence[int]) -> RolePlacement | None:
        """The tasks of a job with roles on HiveD's pods, once `victims` stopped, or None.

        Each gang GPU task takes a pod of its size (tasks of one size in role order, pods
        in HiveD's order); the CPU-only gang tasks go on host capacity by the placers'
        shared rule (`place_roles`, fed HiveD's pods as its one-node search).
        """
        from schedlab.policies.placement.base import place_roles

        gpu_node = ctx.topology.gpu_node

        def one_node(task: JobSpec, cluster: Any, gpu_type: str, n: int) -> list[int] | None:
            free = cluster.gpu_free
            for pod in pods:
                if (len(pod) == n and all(free[g] >= MILLI for g in pod)
                        and cluster.node_fits_host(gpu_node[pod[0]], task.num_cpus,
                                                   task.mem_gb, task.disk_gb)):
                    return list(pod)
            return None

        with ctx.what_if([ctx.job_at(i) for i in victims]) as view:
            got = place_roles(job.spec, view.cluster, one_node)
        return got if isinstance(got, RolePlacement) else None

    def _host_fits_on(self, ctx: Ctx, job: JobState, gpus: tuple[int, ...],
                      victims: Sequence[int]) -> bool:
        """Whether the nodes of `gpus` hold the job's host share once `victims` stopped."""
        s = job.spec
        if not _asks_host(s):
            return True
        host = (s.num_cpus, s.mem_gb, s.disk_gb * s.num_tasks)
        per_node: dict[int, int] = {}
        for g in gpus:
            n = ctx.topology.gpu_node[g]
            per_node[n] = per_node.get(n, 0) + 1
        with ctx.what_if([ctx.job_at(i) for i in victims]) as view:
            c = view.cluster
            return all(c.node_fits_host(n, *(v * k / len(gpus) for v in host))
                       for n, k in per_node.items())

    def _vc_of(self, spec: JobSpec) -> str:
        return spec.vc if self.explicit_vcs else DEFAULT_VC

    def _request(self, job: JobState) -> Request | str:
        """The job's gang request, or why it can never run (cached per job)."""
        got = self.requests.get(job.idx)
        if got is None:
            got = self.requests[job.idx] = self._make_request(job.idx, job.spec)
        return got

    def _known_request(self, job: JobState) -> Request:
        """The request of a job hived queued or started: never a refusal."""
        req = self.requests.get(job.idx)  # cached once queued (looked up on hot paths)
        if req is None:
            req = self._request(job)
        assert isinstance(req, Request)  # refused jobs are neither queued nor started
        return req

    def _make_request(self, idx: int, s: JobSpec) -> Request | str:
        """The request of a job or why it is refused (`_request` caches it per job).

        A job with no pass-through columns and no roles is judged by a few fields alone:
        the verdict (VC, refusal) is memoized per such shape; others take the full path.
        """
        if s.extra or s.tasks:
            return self._make_full_request(idx, s)
        shape = (s.vc, s.priority, s.gpu_type, bool(s.num_gpus), s.task_gpus, s.num_tasks)
        got = self._plain.get(shape)
        if got is None:
            full = self._make_full_request(idx, s)
            self._plain[shape] = (full, "") if isinstance(full, str) else ("", full.vc)
            return full
        why, vc = got
        if why:
            return why
        return Request(idx, vc, s.priority, s.gpu_type, s.task_gpus, s.num_tasks, "",
                       s.lazy_preemption, ())

    def _make_full_request(self, idx: int, s: JobSpec) -> Request | str:
        """`_make_request` reading every field (pinned cell column, roles)."""
        vc = self._vc_of(s)
        pinned = ""
        if s.extra:
            raw = dict(s.extra).get(PINNED_COLUMN)
            pinned = "" if is_missing(raw) else str(raw).strip()
        vkey = (vc, s.priority, pinned, s.gpu_type, bool(s.num_gpus))
        why = self._refusals.get(vkey)
        if why is None:  # the checks read only these fields: once per combination
            why = self._refusals[vkey] = self._refusal(vc, s, pinned)
        if why:
            return why
        members = (tuple(r.gpus for r, _ in gang_tasks(s) if r.gpus > 0)
                   if has_roles(s) else ())
        req = Request(idx, vc, s.priority, s.gpu_type, s.task_gpus, s.num_tasks, pinned,
                      s.lazy_preemption, members)
        if s.num_gpus:
            why = self._never_fits(req)
            if why:
                return why
        return req

    def _refusal(self, vc: str, s: JobSpec, pinned: str) -> str:
        """Why a job of this VC, priority, pinned cell and leaf type is refused ('' if not)."""
        algo = self.algo
        if vc not in algo.vcs:
            known = list(algo.vcs)
            return (f"hived: unknown VC {s.vc!r}{did_you_mean(s.vc, known)}; known: "
                    f"{', '.join(known)}")
        p = s.priority
        if p != OPP and not MIN_GUARANTEED <= p <= MAX_GUARANTEED:
            return (f"hived: priority {p} out of range; allowed: -1 (opportunistic) or "
                    f"{MIN_GUARANTEED}..{MAX_GUARANTEED} (guaranteed)")
        st = algo.vcs[vc]
        if pinned:
            if p == OPP:
                return f"hived: an opportunistic job cannot use pinned cell {pinned!r}"
            if pinned not in st.pinned:
                return (f"hived: VC {vc!r} has no pinned cell {pinned!r}; its pinned cells: "
                        f"{', '.join(st.pinned) or 'none'}")
            leaf = algo.chains[st.pinned[pinned].chain].leaf_type
            if s.gpu_type and s.gpu_type != leaf:
                return (f"hived: pinned cell {pinned!r} has {leaf} leaves, the job asks for "
                        f"{s.gpu_type}")
        elif s.num_gpus:
            if s.gpu_type and s.gpu_type not in algo.chains_of_type:
                return (f"hived: no cells of leaf type {s.gpu_type!r}; known: "
                        f"{', '.join(algo.chains_of_type)}")
            if p != OPP and not algo.vc_chains(vc, s.gpu_type):
                types = sorted({algo.chains[c].leaf_type for c in st.views})
                return (f"hived: VC {vc!r} has no cells of leaf type "
                        f"{s.gpu_type or 'any'!r}; its types: {', '.join(types) or 'none'}")
        return ""

    def _never_fits(self, req: Request) -> str:
        """Why a gang cannot be placed even in the empty cluster ('' when it can).

        Such a job would wait for ever (HiveD leaves its pods pending); the simulator
        rejects it instead, so a run ends. Dry-run on an empty twin, cached per shape.
        """
        key = (req.vc, req.prio >= MIN_GUARANTEED, req.leaf_type, req.task_gpus, req.tasks,
               req.pinned, req.members)
        why = self._ever_fits.get(key)
        if why is None:
            if self._empty_algo is None:
                topo, vcs, source = self._empty_args
                self._empty_algo = HivedAlgorithm(build_physical(topo), vcs, source=source)
            got = self._empty_algo.schedule(req, commit=False)
            shape = (" + ".join(map(str, req.members)) + " GPU pods" if req.members
                     else f"{req.tasks} x {req.task_gpus} GPUs")
            why = self._ever_fits[key] = "" if isinstance(got, Plan) else (
                f"hived: {shape} cannot be placed even in the empty cluster: {got}")
        return why

    # --- keeping up with the engine ---

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Remember jobs that left the running set or were requeued (checked next pass).

        The event goes on to the ordering of the job's queue, if it listens (a priority
        ordering keeps its index from these), once the job has a queue.
        """
        self.jobs.notify(job, kind)
        if kind == "reject":  # the engine rejected a job of a queue (at the end): rerun it
            pending = self.jobs.pending.get(job.idx)
            if pending is not None:
                self._mark(pending)
        if self.listening:
            q = self._queue_of(job)
            if q is not None:
                self._forward(q, job, kind)

    def _forward(self, q: _Queue, job: JobState, kind: str) -> None:
        if q.listens:
            assert q.ctx is not None  # set in attach
            q.policy.notify(q.ctx, job, kind)

    def _queue_of(self, job: JobState) -> _Queue | None:
        """The queue a job belongs to, once its request is known (it never changes)."""
        req = self.requests.get(job.idx)
        if req is None or isinstance(req, str):
            return None
        return self.opp if req.prio == OPP else self.queues[req.vc]

    def _sync(self, ctx: Ctx) -> Iterator[Decision]:
        """Releases, node health, arrivals and requeues since the last pass."""
        c = ctx.cluster
        up = c.node_up
        # every node up then and now (the cluster's count of failed nodes, where it keeps
        # one): no list to compare
        if self.all_up and getattr(c, "nodes_down", 1) == 0:
            changed = []
        elif up != self.up:  # failed jobs are released first (the tracker sees them below)
            changed = [n for n, (was, now) in enumerate(zip(self.up, up, strict=True))
                       if was != now]
            self.up = list(up)
            self.all_up = all(up)
        else:
            changed = []
        rejects = self.jobs.collect(ctx, *self.sync_hooks)
        if rejects:
            yield from rejects
        if self.side_held:
            self._sync_side(ctx)
        if changed:
            for n in changed:
                self.algo.set_node_health(n, up[n])
            self.dirty.update(range(len(self.by_pos)))

    def _gone(self, idx: int, q: _Queue) -> None:
        """A job of ours stopped running (finished, failed, killed): free its cells."""
        q.running.pop(idx, None)
        self._released(self.algo.release(idx), idx)
        if self.side_held:
            self._drop_side(idx)

    def _released(self, g: Any, idx: int) -> None:
        """A gang gave its cells back: its VC and the opportunistic queue may move."""
        self.dirty.add(self.opp.pos)
        if g is not None and g.orig_prio >= MIN_GUARANTEED and g.vc in self.queues:
            self.dirty.add(self.queues[g.vc].pos)

    def _sync_side(self, ctx: Ctx) -> None:
        """Book the GPUs of running jobs' non-gang tasks in HiveD's cells, free ended ones.

        The engine places an evaluator after a pass and stops it at its own end or with its
        gang; HiveD's cells see its leaves as opportunistic so its scheduler looks elsewhere.
        """
        for idx in sorted(self.side_held):
            held = self.side_held[idx]
            side = ctx.job_at(idx).side or {}
            now = {k: v[0].gpus for k, v in side.items() if v and v[0].gpus}
            for k in sorted(held):
                if now.get(k) != held[k][1]:
                    self._free_side(held.pop(k)[0])
            vc = self._known_request(ctx.job_at(idx)).vc
            g = self.algo.groups.get(idx)
            prio = g.prio if g is not None and g.vleaves is not None else OPP
            for k in sorted(now):
                if k not in held:
                    gid = self.next_side
                    if self.algo.hold_side(gid, vc, now[k], prio):
                        self.next_side += 1
                        held[k] = (gid, now[k])
                        self.side_owner[gid] = idx

    def _free_side(self, gid: int) -> None:
        """A booked non-gang task ended: its leaves are free for every queue again."""
        self.side_owner.pop(gid, None)
        self.algo.release(gid)
        self.dirty.update(range(len(self.by_pos)))

    def _drop_side(self, idx: int) -> None:
        """A job stopped: its non-gang tasks stopped with it."""
        held = self.side_held.pop(idx, None)
        for k in sorted(held or {}):
            assert held is not None
            self._free_side(held[k][0])

    def _enqueue(self, job: JobState) -> str:
        """Put a pending job in its queue; returns why it is refused ('' when queued)."""
        req = self._request(job)
        if isinstance(req, str):
            return req
        q = self.opp if req.prio == OPP else self.queues[req.vc]
        self._list(job, q)
        self.jobs.pending[job.idx] = q
        self.dirty.add(q.pos)
        if q.listens:
            self._forward(q, job, EventKind.SUBMIT)  # the ordering sees it join its queue
        return ""

    def _index_classes(self, q: _Queue, ctx: Ctx) -> None:
        """Start keeping `q`'s class index (see `_reads_classes`), from its pending jobs."""
        q.by_class = True
        for _, _, idx in list(q.keys):
            self._class_list(ctx.job_at(idx), q)

    def _list(self, job: JobState, q: _Queue) -> None:
        """Put a pending job in its queue's indexes (what the ordering sees)."""
        s = job.spec
        q.keys.add((-s.priority, s.submit_time, job.idx))
        if not q.by_class:
            self.listed[job.idx] = ()  # listed, no class index to keep
            return
        self._class_list(job, q)

    def _class_list(self, job: JobState, q: _Queue) -> None:
        """Put a pending job in its queue's class index (`pending_classes`)."""
        s = job.spec
        ck = self.listed[job.idx] = _class_key(s, self._known_request(job).pinned)
        lst = q.classes.get(ck)
        if lst is None:
            lst = q.classes[ck] = SortedList()
        lst.add((s.submit_time, job.idx))

    def _dequeue(self, job: JobState) -> None:
        q = self.jobs.pending.pop(job.idx, None)
        if q is None:
            return
        if self.preempting and self.preempting.pop(job.idx, None) is not None:  # preempting
            self._released(self.algo.cancel(job.idx), job.idx)
            self.algo.cancelled.clear()
        self._unlist(job, q)

    def _unlist(self, job: JobState, q: _Queue) -> None:
        """Take a job out of its queue's indexes (it stays pending for the tracker)."""
        ck = self.listed.pop(job.idx, None)
        if ck is None:
            return  # not listed (a preemptor waiting for its victims)
        s = job.spec
        q.keys.discard((-s.priority, s.submit_time, job.idx))
        if not q.by_class:
            return
        lst = q.classes.get(ck)
        if lst is not None:
            lst.discard((s.submit_time, job.idx))
            if not lst:
                del q.classes[ck]
