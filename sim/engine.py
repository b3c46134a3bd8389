"""The discrete-event engine: one SimPy environment per run, no module-level state.

Time advances from one instant to the next on a single SimPy process. Arrivals come from
the sorted trace, completions and timers from a version-stamped heap (SimPy has no
cancel: a rate change pushes a new completion and the old one is dropped as stale; the
heap is compacted when dead entries outnumber live ones). At each instant the engine
applies every due event, then runs one scheduling pass, applying each decision the policy
yields before asking for the next, and samples the cluster state if it changed.
"""

from __future__ import annotations

import heapq
import math
import time as _time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import simpy
from sortedcontainers import SortedList

from policies.base import Policy
from sim.cluster import MILLI, ClusterState
from sim.context import SchedContext
from sim.engine_params import ENGINE_PARAMS, split_params
from sim.errors import InvalidDecision, InvalidParameter, SimError
from sim.failures import read_failures
from sim.fragmentation import fgd_node, size_distribution
from sim.jobstate import HELD, PENDING, RETRYING, RUNNING, TRANSITIONS, WAITING, JobState
from sim.model import (
    Decision,
    JobSpec,
    Migrate,
    Preempt,
    Reject,
    Resize,
    Resume,
    Start,
    Suspend,
    Unschedulable,
    job_milli,
    resized,
)
from sim.params import resolve
from sim.registry import PLACERS, POLICIES
from topologies.tree import Topology
from traces.base import Trace

TIMELINE_COLUMNS = (
    "time", "gpus_total", "gpus_busy", "utilization", "fragmentation", "fragmentation_fgd",
    "pending_jobs", "running_jobs", "blocked_free_gpus",
)

# heap entry kinds
_FINISH, _FAIL, _RETRY, _TIMER, _LIFETIME, _TICK, _NODE_FAIL, _NODE_REPAIR = range(8)
_VERSIONED = (_FINISH, _FAIL, _RETRY)


class _Group:
    """Jobs co-located on the same GPUs: taking turns (timeshare) or together (pack)."""

    __slots__ = ("gpus", "mode", "members")

    def __init__(self, gpus: tuple[int, ...], mode: str, members: list[JobState]) -> None:
        self.gpus = gpus
        self.mode = mode
        self.members = members


class _Run:
    """All mutable state of one simulation run."""

    def __init__(self, sim: Simulation, until: float | None,
                 progress: Callable[[float], None] | None) -> None:
        self.sim = sim
        self.topo = sim.topology
        self.engine_params = sim.engine_params
        self.until = until
        self.progress_cb = progress
        seeds = np.random.SeedSequence(sim.seed).spawn(3)
        self.policy_rng = np.random.default_rng(seeds[0])
        self.fail_rng = np.random.default_rng(seeds[1])
        self.env = simpy.Environment()
        self.fgd_cache: dict[tuple, float] = {}
        self.size_dist = size_distribution(sim.jobs)
        self.cluster = ClusterState(self.topo, fgd=self._node_fgd)
        self.placer = PLACERS.get(self.engine_params["placer"])()
        self.jobs = [JobState(i, spec) for i, spec in enumerate(sim.jobs)]
        self.index = {j.spec.job_id: j.idx for j in self.jobs}
        self.missing_deps: dict[int, list[str]] = {}
        for j in self.jobs:
            for dep in j.spec.depends_on:
                d = self.index.get(dep)
                if d is None:  # cut off by max_jobs: the job can never become eligible
                    self.missing_deps.setdefault(j.idx, []).append(dep)
                else:
                    j.deps_left += 1
                    self.jobs[d].dependents.append(j.idx)
        self.node_rng = np.random.default_rng(seeds[2])
        self.node_log: list[tuple[float, str, str, int]] = []  # + index into events
        self.node_failures = 0
        self.failure_lost_gpu_s = 0.0
        self.down_since: dict[int, float] = {}
        self.decisions = 0
        self.groups: dict[tuple[int, ...], _Group] = {}
        self.sharing = {"time_slice": 60.0, "switch_cost": 0.5, "pack_penalty": 0.1}
        self.pending: SortedList = SortedList()
        self.classes: dict[tuple, SortedList] = {}
        self.demand_count: dict[int, int] = {}
        self.running: dict[int, JobState] = {}
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.dead = 0
        self.seq = 0
        self.next_arrival = 0
        self.events_processed = 0
        self.events: list[tuple] = []
        self.tl: list[tuple] = []  # rows of TIMELINE_COLUMNS
        self._last_sample: tuple | None = None
        self.loc = self.engine_params["locality_factors"]
        self.open_jobs = len(self.jobs)
        self.empty: ClusterState | None = None
        self.infeasible_cache: dict[tuple, str] = {}
        self.tick_armed = False
        self.ctx = SchedContext(self)
        pol = sim.policy
        self.notify = pol.notify if type(pol).notify is not Policy.notify else None
        self._schedule_node_failures()

    # --- heap ---

    def push(self, t: float, kind: int, idx: int, version: int) -> None:
        """Schedule an engine event; stale ones are recognised by their version."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, idx, version))

    def wake(self, t: float) -> None:
        """A policy's timer: a scheduling pass at time t."""
        self.push(t, _TIMER, -1, 0)

    def _stale(self, entry: tuple) -> bool:
        _, _, kind, idx, version = entry
        return kind in _VERSIONED and self.jobs[idx].version != version

    def _bump(self, job: JobState) -> None:
        job.version += 1
        self.dead += 1
        if self.dead > 1024 and self.dead * 2 > len(self.heap):
            self.heap = [e for e in self.heap if not self._stale(e)]
            heapq.heapify(self.heap)
            self.dead = 0

    # --- FGD metric helpers ---

    def _node_fgd(self, capacity: int, free_whole: int, partial: tuple[int, ...]) -> float:
        key = (capacity, free_whole, partial)
        v = self.fgd_cache.get(key)
        if v is None:
            v = fgd_node(capacity, free_whole, partial, self.size_dist)
            if len(self.fgd_cache) < 100_000:
                self.fgd_cache[key] = v
        return v

    # --- records ---

    def record(self, job: JobState, kind: str, detail: str = "") -> None:
        """Append one row of events.parquet and tell the policy, if it listens."""
        self.events.append((self.env.now, job.spec.job_id, kind, job.spec.num_gpus,
                            self._cells(job.gpus), detail))
        if self.notify is not None:
            self.notify(self.ctx, job, kind)

    def _cells(self, gpus: tuple[int, ...]) -> str:
        if not gpus:
            return ""
        topo = self.topo
        counts: dict[int, int] = {}
        for g in gpus:
            n = topo.gpu_node[g]
            counts[n] = counts.get(n, 0) + 1
        return ";".join(f"{topo.nodes[n].name}:{k}" for n, k in counts.items())

    def sample(self) -> None:
        """Add a timeline row if the cluster or queue changed since the last one."""
        c = self.cluster
        busy = c.busy_milli / MILLI
        state = (busy, c.free_whole, c.free_in_free_nodes, len(self.pending), len(self.running),
                 c.healthy_gpus, c.fgd_sum)
        if state == self._last_sample:
            return
        self._last_sample = state
        now = self.env.now
        npend, nrun, healthy = state[3], state[4], state[5]
        free = healthy - busy
        blocked = 0.0
        if self.demand_count and free > 0 and min(self.demand_count) <= free * MILLI + 1e-6:
            blocked = free
        row = (now, healthy, busy, busy / healthy if healthy else 0.0, c.fragmentation,
               c.fragmentation_fgd, npend, nrun, blocked)
        tl = self.tl
        if tl and tl[-1][0] == now:
            tl[-1] = row
        else:
            tl.append(row)

    # --- queue ---

    @staticmethod
    def _class_key(s: JobSpec) -> tuple:
        return (s.num_gpus, s.task_gpus, s.gpu_type, s.gpu_share, s.num_cpus, s.mem_gb)

    def set_status(self, job: JobState, new: str) -> None:
        """Move a job along the state machine; an impossible transition is an engine bug."""
        if new not in TRANSITIONS.get(job.status, ()):
            raise SimError(
                f"engine bug: job {job.job_id!r} cannot go from {job.status} to {new}"
            )
        job.status = new

    def enqueue(self, job: JobState) -> None:
        """Put a job in the pending queue (and its request class)."""
        self.set_status(job, PENDING)
        job.queued_since = self.env.now
        key = (job.spec.submit_time, job.idx)
        self.pending.add(key)
        ck = self._class_key(job.spec)
        lst = self.classes.get(ck)
        if lst is None:
            lst = self.classes[ck] = SortedList()
        lst.add(key)
        if job.spec.num_gpus > 0:
            d = round(job.spec.num_gpus * job_milli(job.spec))
            self.demand_count[d] = self.demand_count.get(d, 0) + 1

    def dequeue(self, job: JobState) -> None:
        """Take a job out of the pending queue, adding the time it waited."""
        key = (job.spec.submit_time, job.idx)
        self.pending.remove(key)
        ck = self._class_key(job.spec)
        lst = self.classes[ck]
        lst.remove(key)
        if not lst:
            del self.classes[ck]
        if job.spec.num_gpus > 0:
            d = round(job.spec.num_gpus * job_milli(job.spec))
            left = self.demand_count[d] - 1
            if left:
                self.demand_count[d] = left
            else:
                del self.demand_count[d]
        job.queue_time += self.env.now - job.queued_since

    # --- progress ---

    def placement_speed(self, spec: JobSpec, gpus: tuple[int, ...]) -> float:
        """Speed of a job on these GPUs alone: the slowest type's speed x locality."""
        if not gpus:
            return 1.0
        topo = self.topo
        types = {topo.nodes[topo.gpu_node[g]].gpu_type for g in gpus}
        speed = min(spec.speed_on(t) for t in sorted(types))
        if len(gpus) > 1 and spec.locality_sensitivity > 0:
            actual = topo.lowest_common_level(gpus)
            best = topo.best_level(len(gpus))
            slow = self.loc.get(actual, 1.0) / self.loc.get(best, 1.0)
            if slow > 1.0:
                speed /= 1.0 + spec.locality_sensitivity * (slow - 1.0)
        return speed

    def _rate(self, job: JobState) -> float:
        spec = job.spec
        if not job.gpus:
            return 1.0
        speed = self.placement_speed(spec, job.gpus)
        k, n = len(job.gpus), spec.num_gpus
        if k != n and n > 0:  # an elastic job away from its nominal size
            if self.engine_params["elastic_scaling"] == "linear":
                speed *= k / n
            else:
                f = self.engine_params["serial_fraction"]
                speed *= (f + (1 - f) / n) / (f + (1 - f) / k)
        if job.group is not None:
            speed *= self._group_factor(job)
        return speed

    def _advance(self, job: JobState) -> None:
        """Bring `work` and the last checkpoint up to now."""
        now = self.env.now
        if job.status != RUNNING or now <= job.seg_start:
            return
        c = job.spec.checkpoint_interval
        if c:
            k = math.floor((now - job.run_start) / c + 1e-9)
            tc = job.run_start + k * c
            if k >= 1 and tc >= job.seg_start:
                job.ckpt_work = min(job.spec.duration, job.work + job.rate * (tc - job.seg_start))
        job.work = min(job.spec.duration, job.work + job.rate * (now - job.seg_start))
        job.seg_start = now

    def _schedule_finish(self, job: JobState) -> None:
        if job.rate <= 0:
            return
        t = job.seg_start + job.remaining_work / job.rate
        self.push(t, _FINISH, job.idx, job.version)

    def _release(self, job: JobState) -> None:
        now = self.env.now
        if job.gpus:
            self.cluster.release(job.idx, job.gpus, job.milli, *job.host)
        job.host = (0.0, 0.0)
        held = now - job.held_since
        job.run_time += held
        job.gpu_seconds += held * len(job.gpus) * job.milli / MILLI
        del self.running[job.idx]
        job.gpus = ()
        job.rate = 0.0
        self._bump(job)
        if job.group is not None:
            self._group_remove(job)

    # --- co-location groups (time-slicing and packing) ---

    def _group_factor(self, job: JobState) -> float:
        """Speed factor of a job in a co-location group (1 alone)."""
        g = self.groups[job.group]  # type: ignore[index]
        n = len(g.members)
        if n <= 1:
            return 1.0
        sh = self.sharing
        if g.mode == "timeshare":
            # N jobs take turns in slices of T s, each switch costs c s of no progress
            return max(0.0, 1.0 - sh["switch_cost"] / sh["time_slice"]) / n
        load = sum(m.spec.gpu_util for m in g.members)
        return min(1.0, 1.0 / load) * (1.0 - sh["pack_penalty"]) if load > 0 else 1.0

    def _rebalance(self, key: tuple[int, ...], newcomer: JobState | None = None) -> None:
        """Split a group's GPUs among its members and reset their rates (work kept)."""
        g = self.groups[key]
        now = self.env.now
        old = [m for m in g.members if m is not newcomer]
        for m in old:
            self._advance(m)
            held = now - m.held_since
            m.run_time += held
            m.gpu_seconds += held * len(m.gpus) * m.milli / MILLI
            m.held_since = now
            self.cluster.release(m.idx, m.gpus, m.milli)
        n = len(g.members)
        for i, m in enumerate(g.members):
            m.milli = MILLI // n + (MILLI % n if i == 0 else 0)
            self.cluster.allocate(m.idx, m.gpus, m.milli)
        for m in old:
            if n == 1:
                m.group = None
            m.rate = self._rate(m)
            if m.seg_start < now:
                m.seg_start = now
            self._bump(m)
            self._schedule_finish(m)
        if n == 1:
            del self.groups[key]

    def _group_join(self, job: JobState, gpus: tuple[int, ...], mode: str) -> None:
        """Validate a co-located start and register the job in the group of `gpus`."""
        if mode not in ("timeshare", "pack"):
            raise InvalidDecision(
                f"Start {job.job_id!r}: share {mode!r} unknown; allowed: timeshare, pack")
        key = tuple(sorted(gpus))
        g = self.groups.get(key)
        if g is None:
            holders = {h for gpu in key for h in self.cluster.gpu_holders[gpu]}
            owner = self.jobs[next(iter(holders))] if len(holders) == 1 else None
            if owner is None or tuple(sorted(owner.gpus)) != key or owner.milli != MILLI:
                raise InvalidDecision(
                    f"Start {job.job_id!r} with share={mode}: GPUs {key} must be held, whole, "
                    f"by one running job or one group (holders: {sorted(holders)})")
            g = self.groups[key] = _Group(key, mode, [owner])
            owner.group = key
        elif g.mode != mode:
            raise InvalidDecision(
                f"Start {job.job_id!r} with share={mode}: the GPUs are shared by {g.mode}")
        if mode == "pack":
            node = self.topo.nodes[self.topo.gpu_node[key[0]]]
            mem = sum(m.spec.gpu_mem_gb for m in g.members) + job.spec.gpu_mem_gb
            if node.gpu_mem_gb > 0 and mem > node.gpu_mem_gb + 1e-9:
                raise InvalidDecision(
                    f"Start {job.job_id!r} packed on {node.name}: GPU memory {mem:g} GB of the "
                    f"pack exceeds the {node.gpu_mem_gb:g} GB per GPU")
        g.members.append(job)
        job.group = key
        self._rebalance(key, newcomer=job)

    def _stop(self, job: JobState, keep_all: bool, kind: str, detail: str) -> None:
        """Stop a running job; it keeps all work (checkpointed) or work to its checkpoint."""
        self._advance(job)
        if keep_all:
            job.ckpt_work = job.work
        lost = job.work - job.ckpt_work
        job.lost_work += lost
        job.work = job.ckpt_work
        self.record(job, kind, detail or (f"lost_work={lost:g}" if lost else ""))
        self._release(job)

    # --- decisions ---

    def apply(self, d: Decision) -> None:
        """Validate and apply one decision; an invalid one raises InvalidDecision."""
        idx = self.index.get(d.job_id)
        if idx is None:
            raise InvalidDecision(f"{type(d).__name__}: unknown job {d.job_id!r}")
        job = self.jobs[idx]
        if isinstance(d, Start | Resume):
            self._start(job, tuple(d.gpus), type(d).__name__, d.share)
        elif isinstance(d, Preempt):
            self._need(job, RUNNING, d)
            job.preemptions += 1
            self._stop(job, False, "preempt", d.reason)
            self.enqueue(job)
        elif isinstance(d, Suspend):
            self._need(job, RUNNING, d)
            job.preemptions += 1
            job.suspended = True
            self._stop(job, self.engine_params["checkpoint_on_suspend"], "suspend", d.reason)
            self.enqueue(job)
        elif isinstance(d, Migrate):
            self._need(job, RUNNING, d)
            self._move(job, tuple(d.gpus), "migrate", d.pause)
        elif isinstance(d, Resize):
            self._need(job, RUNNING, d)
            s = job.spec
            if s.min_gpus is None and s.max_gpus is None:
                raise InvalidDecision(
                    f"Resize {d.job_id!r}: not an elastic job (no min_gpus/max_gpus)"
                )
            self._move(job, tuple(d.gpus), "resize", d.pause)
        elif isinstance(d, Reject):
            self._need(job, PENDING, d)
            self.dequeue(job)
            self._finalize(job, "rejected", "reject", d.reason)
        else:
            raise InvalidDecision(f"unknown decision {d!r}")
        self.decisions += 1

    def _need(self, job: JobState, status: str, d: Decision) -> None:
        if job.status != status:
            raise InvalidDecision(
                f"{type(d).__name__} {job.job_id!r}: job is {job.status}, must be {status}"
            )

    def _check_gpus(self, job: JobState, gpus: tuple[int, ...], what: str) -> None:
        s = job.spec
        if s.min_gpus is not None or s.max_gpus is not None:
            lo, hi = s.min_gpus or s.num_gpus, s.max_gpus or s.num_gpus
            if not lo <= len(gpus) <= hi:
                raise InvalidDecision(
                    f"{what} {s.job_id!r}: {len(gpus)} GPUs given, the elastic job takes "
                    f"{lo}..{hi}"
                )
        elif len(gpus) != s.num_gpus:
            raise InvalidDecision(
                f"{what} {s.job_id!r}: {len(gpus)} GPUs given, the gang needs {s.num_gpus} "
                "(all or nothing)"
            )
        if s.gpu_type:
            for g in gpus:
                if 0 <= g < self.topo.num_gpus:
                    t = self.topo.nodes[self.topo.gpu_node[g]].gpu_type
                    if t != s.gpu_type:
                        raise InvalidDecision(
                            f"{what} {s.job_id!r}: GPU {g} is {t}, job needs {s.gpu_type}"
                        )

    def _start(self, job: JobState, gpus: tuple[int, ...], what: str, share: str = "") -> None:
        if job.status != PENDING:
            raise InvalidDecision(f"{what} {job.job_id!r}: job is {job.status}, must be pending")
        self._check_gpus(job, gpus, what)
        s = job.spec
        now = self.env.now
        if share:
            if not gpus:
                raise InvalidDecision(f"{what} {job.job_id!r}: share={share} needs GPUs")
            self.dequeue(job)
            job.gpus = gpus
            self.set_status(job, RUNNING)
            job.held_since = now
            self.running[job.idx] = job
            self._group_join(job, gpus, share)
            job.host = (0.0, 0.0)
        else:
            milli = job_milli(s)
            self.cluster.allocate(job.idx, gpus, milli, s.num_cpus, s.mem_gb)
            job.host = (s.num_cpus, s.mem_gb)
            self.dequeue(job)
            job.gpus = gpus
            job.milli = milli
            self.set_status(job, RUNNING)
        job.held_since = now
        job.rate = self._rate(job)
        resumed = job.started_before
        note = f"{share} N={len(self.groups[job.group].members)}" if job.group else ""
        overhead = self.engine_params["restore_overhead"] if resumed and job.work > 0 else 0.0
        job.seg_start = now + overhead
        job.run_start = job.seg_start
        job.attempt_start = now
        self.running[job.idx] = job
        self._bump(job)
        if not resumed:
            job.first_start = now
            job.started_before = True
            if gpus:
                job.locality_level = int(self.topo.lowest_common_level(gpus))
            self.record(job, "start", note)
            if s.max_lifetime:
                self.push(now + s.max_lifetime, _LIFETIME, job.idx, -1)
        else:
            self.record(job, "resume", ";".join(
                x for x in (note, f"restore={overhead:g}" if overhead else "") if x))
        job.suspended = False
        self._schedule_finish(job)
        self._schedule_failure(job)

    def _schedule_failure(self, job: JobState) -> None:
        s = job.spec
        t = s.fail_at if s.fail_at is not None else math.inf
        rate = self.engine_params["failure_rate"]
        if rate > 0:
            t = min(t, float(self.fail_rng.exponential(3600.0 / rate)))
        if t < math.inf:
            self.push(job.attempt_start + t, _FAIL, job.idx, job.version)

    def _move(self, job: JobState, gpus: tuple[int, ...], kind: str,
              pause: float | None = None) -> None:
        self._check_gpus(job, gpus, kind)
        self._advance(job)
        old = job.gpus
        old_milli = job.milli
        grouped = job.group is not None
        milli = job_milli(job.spec) if grouped else job.milli
        self.cluster.release(job.idx, old, old_milli)
        try:
            self.cluster.allocate(job.idx, gpus, milli)
        except InvalidDecision:
            self.cluster.allocate(job.idx, old, old_milli)
            raise
        now = self.env.now
        held = now - job.held_since
        job.run_time += held
        job.gpu_seconds += held * len(old) * old_milli / MILLI
        job.held_since = now
        job.gpus = gpus
        job.milli = milli
        if grouped:  # moving out of a time-share or pack group
            self._group_remove(job)
        if kind == "migrate":
            job.migrations += 1
        job.rate = self._rate(job)
        job.ckpt_work = job.work
        job.seg_start = now + (self.engine_params["restore_overhead"] if pause is None
                               else pause)
        job.run_start = job.seg_start
        self._bump(job)
        self.record(job, kind)
        self._schedule_finish(job)

    def _group_remove(self, job: JobState) -> None:
        """Take a job out of its group (its GPUs already released) and rebalance the rest."""
        key = job.group
        job.group = None
        g = self.groups[key]  # type: ignore[index]
        g.members.remove(job)
        if g.members:
            self._rebalance(key)  # type: ignore[arg-type]
        else:
            del self.groups[key]  # type: ignore[arg-type]

    def _finalize(self, job: JobState, status: str, kind: str | None,
                  detail: str = "") -> None:
        """End a job for good; dependents of a job that did not complete are killed."""
        self.set_status(job, status)
        job.end_time = self.env.now
        job.reason = detail
        self.open_jobs -= 1
        self._bump(job)
        if kind is not None:
            self.record(job, kind, detail)
        if status == "completed":
            for d in job.dependents:
                dep = self.jobs[d]
                dep.deps_left -= 1
                if dep.deps_left == 0 and dep.status == HELD:
                    self.enqueue(dep)
        else:
            why = f"dependency {job.job_id} {status}"
            for d in job.dependents:
                dep = self.jobs[d]
                if dep.status == HELD:
                    self._finalize(dep, "killed", "kill", why)
                elif dep.status == WAITING and not dep.doom:
                    dep.doom = why  # killed when it arrives

    # --- engine events ---

    def _arrive(self, job: JobState) -> None:
        self.events_processed += 1
        s = job.spec
        self.record(job, "submit", "waiting for " + ";".join(s.depends_on)
                    if job.deps_left else "")
        if job.doom:
            self._finalize(job, "killed", "kill", job.doom)
            return
        missing = self.missing_deps.get(job.idx)
        if missing:
            self._finalize(job, "rejected", "reject",
                           f"depends on jobs not in this run: {';'.join(missing)}")
            return
        bad = self._infeasible(s if s.min_gpus is None else resized(s, s.min_gpus))
        if bad:
            self._finalize(job, "rejected", "reject", bad)
            return
        if job.deps_left:
            self.set_status(job, HELD)
        else:
            self.enqueue(job)

    def _infeasible(self, s: JobSpec) -> str:
        """Why no placement could ever hold the job ('' when one can), cached per class."""
        if s.num_gpus == 0:
            return ""
        key = self._class_key(s)
        why = self.infeasible_cache.get(key)
        if why is None:
            if self.empty is None:
                self.empty = ClusterState(self.topo)
            got = self.placer.place(s, self.empty)
            why = ""
            if isinstance(got, Unschedulable):
                why = got.reason if not got.resolvable else (
                    "cannot be placed even on an empty cluster by placer "
                    f"{self.engine_params['placer']!r}: {got.reason}")
            self.infeasible_cache[key] = why
        return why

    def _on_entry(self, entry: tuple) -> None:
        t, _, kind, idx, version = entry
        if kind in (_TIMER, _TICK):
            if kind == _TICK:
                self.tick_armed = False
            self.events_processed += 1
            return
        if kind == _NODE_FAIL:
            self._node_fail(idx, version)
            return
        if kind == _NODE_REPAIR:
            self._node_repair(idx, version)
            return
        job = self.jobs[idx]
        if kind == _LIFETIME:
            if job.status in (RUNNING, PENDING, RETRYING):
                self.events_processed += 1
                if job.status == RUNNING:
                    self._advance(job)
                    self._release(job)
                elif job.status == PENDING:
                    self.dequeue(job)
                self._finalize(job, "killed", "kill", "max_lifetime")
            return
        if job.version != version:
            return
        self.events_processed += 1
        if kind == _FINISH:
            self._advance(job)
            job.work = job.spec.duration
            self._release(job)
            self._finalize(job, "completed", "finish")
        elif kind == _FAIL:
            self._interrupt(job, "attempt failed", counts_retry=True)
        elif kind == _RETRY:
            waited = self.env.now - job.queued_since
            self.record(job, "retry")
            self.enqueue(job)
            job.queued_since -= waited  # the retry delay counts as queueing

    def _interrupt(self, job: JobState, why: str, counts_retry: bool) -> float:
        """A running attempt fails: lose work since the checkpoint, retry or fail for good.

        Returns the work lost. A node failure retries the job without using up its
        `max_retries` (the job did nothing wrong); its own failure does use one.
        """
        self._advance(job)
        lost = job.work - job.ckpt_work
        job.lost_work += lost
        job.work = job.ckpt_work
        gpus = len(job.gpus) * job.milli / MILLI
        self.record(job, "fail", f"{why}; lost_work={lost:g}")
        self._release(job)
        if counts_retry and job.restarts >= job.spec.max_retries:
            self._finalize(job, "failed", None, "max_retries exhausted")
            return lost * gpus
        job.restarts += 1
        self.set_status(job, RETRYING)
        job.queued_since = self.env.now
        self.push(self.env.now + self.engine_params["retry_delay"], _RETRY, job.idx,
                  job.version)
        return lost * gpus

    # --- node failures ---

    def _schedule_node_failures(self) -> None:
        """Push the explicit failure schedule, or each node's first random failure."""
        path = self.engine_params["failures"]
        if path:
            for node, fail, repair in read_failures(path, self.topo):
                self.push(fail, _NODE_FAIL, node, 0)
                self.push(repair, _NODE_REPAIR, node, 0)
        elif self.engine_params["mtbf"]:
            mtbf = self.engine_params["mtbf"]
            for n in range(len(self.topo.nodes)):
                self.push(float(self.node_rng.exponential(mtbf)), _NODE_FAIL, n, 1)

    def _node_fail(self, node: int, generated: int) -> None:
        self.events_processed += 1
        if self.cluster.node_up[node]:
            name = self.topo.nodes[node].name
            for idx in self.cluster.jobs_on_node(node):
                job = self.jobs[idx]
                self.failure_lost_gpu_s += self._interrupt(job, f"node {name} failed", False)
            self.cluster.fail_node(node)
            self.node_failures += 1
            self.down_since[node] = self.env.now
            self.node_log.append((self.env.now, name, "fail", len(self.events)))
        if generated:
            mttr = self.engine_params["mttr"]
            self.push(self.env.now + float(self.node_rng.exponential(mttr)), _NODE_REPAIR,
                      node, 1)

    def _node_repair(self, node: int, generated: int) -> None:
        self.events_processed += 1
        if not self.cluster.node_up[node]:
            self.cluster.repair_node(node)
            self.down_since.pop(node, None)
            self.node_log.append((self.env.now, self.topo.nodes[node].name, "repair",
                                  len(self.events)))
        if generated:
            mtbf = self.engine_params["mtbf"]
            self.push(self.env.now + float(self.node_rng.exponential(mtbf)), _NODE_FAIL,
                      node, 1)

    # --- main loop ---

    def _has_job_events(self) -> bool:
        """True when a live job event or policy timer is still due (not only node churn)."""
        return any(e[2] not in (_NODE_FAIL, _NODE_REPAIR, _TICK) and not self._stale(e)
                   for e in self.heap)

    def _has_future(self) -> bool:
        """True when the heap holds a live event other than the periodic tick."""
        return any(e[2] != _TICK and not self._stale(e) for e in self.heap)

    def _next_time(self) -> float:
        heap = self.heap
        while heap and self._stale(heap[0]):
            heapq.heappop(heap)
            self.dead = max(0, self.dead - 1)
        t = heap[0][0] if heap else math.inf
        if self.next_arrival < len(self.jobs):
            t = min(t, self.jobs[self.next_arrival].spec.submit_time)
        return t

    def process(self) -> Iterator[simpy.Event]:
        """The SimPy process driving the run."""
        env = self.env
        policy = self.sim.policy
        period = policy.period
        jobs = self.jobs
        n = len(jobs)
        while self.open_jobs > 0:
            t = self._next_time()
            if t == math.inf:
                break
            if self.until is not None and t > self.until:
                break
            if t > env.now:
                yield env.timeout(t - env.now)
            while self.next_arrival < n and jobs[self.next_arrival].spec.submit_time <= t:
                self._arrive(jobs[self.next_arrival])
                self.next_arrival += 1
            heap = self.heap
            while heap and heap[0][0] <= t:
                self._on_entry(heapq.heappop(heap))
            before = self.decisions
            for d in policy.schedule(self.ctx):
                self.apply(d)
            if (not self.running and self.decisions == before and self.next_arrival >= n
                    and self.cluster.healthy_gpus == self.cluster.total_gpus
                    and not self._has_job_events()):
                # nothing runs, nothing can arrive, every node is up and the policy starts
                # nothing: only random node failures are left, which can never help
                self.sample()
                break
            if period and not self.tick_armed and (self.pending or self.running):
                # tick only while something can change: running jobs, future events, or
                # a pass that just did something; otherwise the queue is stuck for good
                if (self.running or self.decisions > before or self._has_future()
                        or self.next_arrival < n):
                    self.tick_armed = True
                    self.push(env.now + period, _TICK, -1, 0)
            self.sample()
            if self.progress_cb is not None:
                self.progress_cb(env.now)


class Simulation:
    """One policy on one trace and one topology; `run()` returns a SimResult."""

    def __init__(
        self,
        trace: Trace | str | Path,
        topology: Topology | str | Path,
        policy: Policy | str,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
        *,
        max_jobs: int | None = None,
    ) -> None:
        if not isinstance(trace, Trace):
            from traces import load_trace

            trace = load_trace(trace)
        if not isinstance(topology, Topology):
            from topologies import load_topology

            topology = load_topology(topology)
        self.trace: Trace = trace
        self.topology: Topology = topology
        params = dict(params or {})
        engine_given, policy_given = split_params(policy, params)
        if not isinstance(policy, str) and policy_given:
            raise InvalidParameter(
                f"parameters {', '.join(sorted(policy_given))} for policy {policy.name!r}: "
                "the policy instance was built already: pass its parameters to it")
        if isinstance(policy, str):
            policy = POLICIES.get(policy)(**policy_given)
        self.policy = policy
        self.engine_params = resolve(engine_given, ENGINE_PARAMS, "the engine")
        self.params_given = params
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise InvalidParameter(f"seed {seed!r}: expected an integer >= 0")
        self.seed = int(seed)
        # stable: jobs submitted at the same time keep their trace order
        jobs = tuple(sorted(self.trace.jobs, key=lambda s: s.submit_time))
        if max_jobs is not None:
            if max_jobs < 0:
                raise InvalidParameter(f"max_jobs {max_jobs}: expected an integer >= 0")
            jobs = jobs[:max_jobs]
        self.jobs: tuple[JobSpec, ...] = jobs
        self.max_jobs = max_jobs

    def run(self, until: float | None = None,
            progress: Callable[[float], None] | None = None) -> Any:
        """Simulate until every job is final (or `until` seconds); return a SimResult."""
        from sim.results import build_result

        if until is not None and until < 0:
            raise InvalidParameter(f"until {until}: expected seconds >= 0")
        wall0 = _time.perf_counter()
        run = _Run(self, until, progress)
        self.policy.attach(run.ctx)
        run.env.process(run.process())
        run.env.run()
        end = run.env.now if until is None else max(run.env.now, until)
        return build_result(self, run, end, _time.perf_counter() - wall0)
