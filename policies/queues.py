"""Shared pieces of the multi-tenant policies (`drf`, `capacity`).

* `Resources`: the cluster's GPU, CPU and memory totals and the dominant share of a
  demand vector over them (a resource the topology does not model, total 0, is ignored).
* `EngineMirror`: what the engine did between two passes (arrivals, jobs queued again,
  jobs that stopped running), found without scanning the queue or the running jobs, so a
  policy can keep its own per-tenant index of pending jobs.
* Queue trees for capacity scheduling: the `queues:` form of docs/contract.md#sec-3 read from a YAML
  file, or derived from the trace's VCs, flattened into `QueueTree`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mypy_extensions import mypyc_attr

from schedlab.policies.base import Ctx, owner
from schedlab.sim.cfuncs import heappop, heappush
from schedlab.sim.errors import InvalidParameter, InvalidTopology
from schedlab.sim.jobstate import PENDING, RETRYING, RUNNING, WAITING, JobState
from schedlab.sim.model import MILLI, JobSpec, job_milli
from schedlab.topologies.native import load_yaml, parse_queues
from schedlab.topologies.tree import QueueSpec, Topology

EPS: Final = 1e-9


Vec = tuple[float, float, float]  # GPUs (whole-GPU units), CPUs, memory GB


# --- resources ---


@mypyc_attr(allow_interpreted_subclasses=True)
class Resources:
    """Cluster totals of (GPUs, CPUs, memory GB); a total of 0 means "not modelled".

    `share(v)` is the dominant share of a vector: the largest fraction of a modelled
    resource it takes (built once as a closure: it is on every policy's hot path).
    """

    __slots__ = ("totals", "share")

    def __init__(self, totals: Vec) -> None:
        self.totals = totals
        a, b, c = (1.0 / t if t > 0 else 0.0 for t in totals)
        self.share: Callable[[Sequence[float]], float]
        if b == 0.0 and c == 0.0:
            self.share = lambda v: v[0] * a
        else:
            self.share = lambda v: max(v[0] * a, v[1] * b, v[2] * c)

    @classmethod
    def of(cls, topo: Topology) -> Resources:
        """Totals over every node of a topology."""
        return cls((float(topo.num_gpus), float(sum(n.num_cpus for n in topo.nodes)),
                    float(sum(n.mem_gb for n in topo.nodes))))

    @staticmethod
    def demand(spec: JobSpec) -> Vec:
        """What a job holds while it runs: GPUs (fractions count), CPUs, memory."""
        gpus = spec.num_gpus * job_milli(spec) / MILLI if spec.num_gpus else 0.0
        return (gpus, float(spec.num_cpus), float(spec.mem_gb))


def add(a: list[float], b: Sequence[float], sign: float = 1.0) -> None:
    """In place: a += sign * b (3-vectors)."""
    a[0] += sign * b[0]
    a[1] += sign * b[1]
    a[2] += sign * b[2]


def due(t: float, now: float) -> bool:
    """True when time `t` has come: the engine's clock may sit a rounding error below it."""
    return t <= now + 1e-9 * max(1.0, abs(now))


def finish_time(job: JobState) -> float:
    """When a running job completes if nothing interrupts it (the engine's own formula)."""
    if job.rate <= 0:
        return math.inf
    return job.seg_start + job.remaining_work / job.rate


# --- following the engine ---


@dataclass(frozen=True, slots=True)
class Changes:
    """What happened in the engine since the previous pass, as one policy needs it.

    `queued`: jobs that entered the pending queue (arrivals, retries, jobs whose
    dependencies completed); `stopped`: jobs the policy started that no longer run
    (completed, failed, killed, interrupted by a node failure); `rebuilt`: when not None,
    the whole pending queue: the mirror lost track and the policy must rebuild its index.
    """

    queued: tuple[JobState, ...]
    stopped: tuple[JobState, ...]
    rebuilt: tuple[JobState, ...] | None


@mypyc_attr(allow_interpreted_subclasses=True)
class EngineMirror:
    """Follows the pending queue and the jobs a policy started, in O(changes) per pass.

    Arrivals are seen by walking the submit-ordered job list up to the first job the engine
    has not submitted yet (still `waiting`), keeping only the jobs the context `owns` when
    it is narrowed to part of the run (an ordering inside hived); completions by a
    heap of predicted finish times; other stops (failures, kills, node failures) by the
    count of running jobs, which only the policy can raise. Jobs queued again (retries,
    released dependents) follow from the stops. A cheap count check against the engine's
    queue catches anything else (e.g. a queued job killed by `max_lifetime`) and rebuilds
    from the engine's queue, which costs O(pending) but is rare.
    """

    def __init__(self) -> None:
        self._next = 0  # index of the next job whose arrival we have not seen
        self._next_run = 0  # index of the next container task run we have not seen
        self._running: dict[int, int] = {}  # job index -> its version after our Start
        self._ends: list[tuple[float, int, int]] = []  # (predicted finish, idx, version)
        self._later: list[tuple[float, int]] = []  # (time it queues again, idx): retries
        self.pending = 0  # jobs we believe are in the engine's queue
        self.rebuilds = 0  # times the pending queue was rebuilt from the engine's
        self.scans = 0  # times the running jobs were scanned for unpredicted stops

    def sync(self, ctx: Ctx) -> Changes:
        """Everything that changed since the previous call."""
        now = ctx.now
        queued: dict[int, JobState] = {}
        stopped: list[JobState] = []
        i = self._next
        # trace jobs up to the first not yet submitted; task runs of container jobs
        # (`ctx.trace_jobs` onwards, never waiting) by a cursor of their own
        trace: int | None = getattr(ctx, "trace_jobs", None)
        while trace is None or i < trace:
            try:
                job = ctx.job_at(i)
            except IndexError:
                break
            if job.status == WAITING:  # the engine submits in this order: not yet arrived
                break
            if job.status == PENDING:
                queued[i] = job
            i += 1
        self._next = i
        if trace is not None:  # container jobs' task runs, appended as they are spawned
            r = max(self._next_run, trace)
            while r < ctx.num_jobs:
                job = ctx.job_at(r)
                if job.status == PENDING:
                    queued[r] = job
                r += 1
            self._next_run = r
        ends = self._ends
        again = []
        while ends and due(ends[0][0], now):
            _, idx, ver = heappop(ends)
            if self._running.get(idx) != ver:
                continue
            job = ctx.job_at(idx)
            if job.status == RUNNING and job.version == ver:
                again.append((max(finish_time(job), now), idx, ver))
            else:
                self._stopped(ctx, job, stopped, queued)
        for e in again:
            heappush(ends, e)
        running = ctx.running()
        if len(running) != len(self._running):
            self.scans += 1
            for idx in [i for i in self._running if i not in running]:
                self._stopped(ctx, ctx.job_at(idx), stopped, queued)
        later = self._later
        back = []
        while later and due(later[0][0], now):
            t, idx = heappop(later)
            job = ctx.job_at(idx)
            if job.status == PENDING:
                queued[idx] = job
            elif job.status == RETRYING:
                back.append((t, idx))
        for t, idx in back:
            heappush(later, (max(t, now), idx))
        owns = owner(ctx)
        if owns is not None:
            # a context narrowed to part of the run (hived's per-VC queues): arrivals and
            # released dependents of other queues are not ours
            # (`schedlab.policies.priority.JobFeed`)
            queued = {i: j for i, j in queued.items() if owns(j)}
        self.pending += len(queued)
        if self.pending != ctx.pending_count:
            self.rebuilds += 1
            everything = tuple(ctx.pending())
            self.pending = len(everything)
            return Changes((), tuple(stopped), everything)
        return Changes(tuple(queued.values()), tuple(stopped), None)

    def _stopped(self, ctx: Ctx, job: JobState, stopped: list[JobState],
                 queued: dict[int, JobState]) -> None:
        del self._running[job.idx]
        stopped.append(job)
        if job.status == RETRYING:
            heappush(self._later,
                           (job.queued_since + ctx.params.get("retry_delay", 0.0), job.idx))
        elif job.status == "completed":
            for d in job.dependents:
                dep = ctx.job_at(d)
                if dep.status == PENDING:
                    queued[d] = dep

    def started(self, job: JobState) -> None:
        """Call after the engine applied our Start of `job`."""
        self.pending -= 1
        self._running[job.idx] = job.version
        t = finish_time(job)
        if t < math.inf:
            heappush(self._ends, (t, job.idx, job.version))

    def rejected(self) -> None:
        """Call after the engine applied our Reject of a pending job."""
        self.pending -= 1

    def preempted(self, job: JobState) -> None:
        """Call after the engine applied our Preempt (or Suspend) of `job`: it is queued."""
        del self._running[job.idx]
        self.pending += 1


# --- queue trees (capacity scheduling) ---


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One queue of a flattened tree, with capacities made absolute (fractions of the cluster).

    `abs_capacity` is the product of `capacity` down the path from the root,
    `abs_max_capacity` that of `max_capacity`; `user_limit` is the most one user of a leaf
    may hold: min(user_limit_factor x abs_capacity, abs_max_capacity).
    """

    id: int
    name: str
    parent: int  # -1 under the implicit root
    children: tuple[int, ...]
    capacity: float
    max_capacity: float
    user_limit_factor: float
    abs_capacity: float
    abs_max_capacity: float
    user_limit: float
    path: tuple[int, ...]  # this queue and its ancestors, bottom up

    @property
    def leaf(self) -> bool:
        """True for a queue that holds jobs (no child queues)."""
        return not self.children


class QueueTree:
    """A queue hierarchy flattened in depth-first order; leaves are found by name."""

    def __init__(self, queues: tuple[QueueSpec, ...], source: str) -> None:
        self.source = source
        self.queues: list[QueueInfo] = []
        slots: list[QueueInfo | None] = []  # by id; a queue's id is taken before its children's
        self.top: tuple[int, ...] = tuple(self._add(slots, q, -1, 1.0, 1.0, ()) for q in queues)
        self.queues.extend(info for info in slots if info is not None)
        self.leaves: dict[str, int] = {q.name: q.id for q in self.queues if q.leaf}
        self.parents: frozenset[str] = frozenset(q.name for q in self.queues if not q.leaf)

    def _add(self, slots: list[QueueInfo | None], q: QueueSpec, parent: int, cap: float,
             mx: float, path: tuple[int, ...]) -> int:
        qid = len(slots)
        slots.append(None)  # placeholder, set below
        abs_cap, abs_max = cap * q.capacity, mx * q.max_capacity
        here = (qid, *path)
        kids = tuple(self._add(slots, c, qid, abs_cap, abs_max, here) for c in q.children)
        slots[qid] = QueueInfo(
            qid, q.name, parent, kids, q.capacity, q.max_capacity, q.user_limit_factor,
            abs_cap, abs_max, min(q.user_limit_factor * abs_cap, abs_max),
            here,
        )
        return qid


def load_queue_file(path: str | Path) -> tuple[QueueSpec, ...]:
    """Queues from a YAML file: `queues: [...]` (docs/contract.md#sec-3) or the bare list.

    Validation (names unique, sibling capacities summing to 1, max_capacity >= capacity,
    known keys) is the topology reader's, so both sources accept exactly the same queues.
    """
    data: Any = load_yaml(path, "queues file")
    if isinstance(data, dict):
        extra = sorted(str(k) for k in data if k != "queues")
        if extra or "queues" not in data:
            raise InvalidTopology(
                f"{path}: expected a mapping with the single key 'queues' (or a list of "
                f"queues); got keys {', '.join(map(str, data)) or '(none)'}")
        data = data["queues"]
    if not data:
        raise InvalidTopology(f"{path}: queues: got {data!r}; allowed: a non-empty list")
    return parse_queues(path, data, "queues", set())


def queues_for_vcs(vcs: Iterable[str]) -> tuple[QueueSpec, ...]:
    """One leaf queue per VC, equal capacities, elastic up to the whole cluster.

    A VC here is usually one user, so `user_limit_factor` is set to let that user reach
    the queue's `max_capacity` (1.0) instead of YARN's default of the queue's capacity.
    """
    names = sorted(set(vcs)) or ["default"]
    cap = 1.0 / len(names)
    return tuple(QueueSpec(n, cap, 1.0, float(len(names))) for n in names)


def parse_queue_param(path: str | None) -> tuple[QueueSpec, ...] | None:
    """Load the `queues` parameter's file now, so a bad file fails before the run starts."""
    if path is None:
        return None
    try:
        return load_queue_file(path)
    except InvalidTopology as e:
        raise InvalidParameter(f"parameter queues={path!r}: {e}") from None
