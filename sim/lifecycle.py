"""The parts of a run and the job lifecycle: arrival, completion, failure, retry, the end.

`RunState` builds the run's parts, each owning its state: the agenda (future events),
the pending queue, progress and the speed chain, co-location groups, node health and the
recorder; it also holds the job table and moves jobs along their state machine
(`schedlab.sim.jobstate.TRANSITIONS`). The engine (`schedlab.sim.engine.Run`) adds the loop and the
application of the policy's decisions on top.

One clock: the run's `Instant` (`instant.t`), a native field the per-event code reads.
SimPy's environment (`Clock`) keeps its time in that same field (its `_now` is a
property over it), so SimPy's own stepping moves the run's clock and the engine never
touches SimPy's private state: a subclass over copying SimPy's `step`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import simpy
from mypy_extensions import mypyc_attr

from schedlab.sim.agenda import Agenda, Due, Entry
from schedlab.sim.cluster import ClusterState
from schedlab.sim.colocation import Colocation
from schedlab.sim.containers import Containers
from schedlab.sim.faces import SimInputs
from schedlab.sim.failure_health import ComponentHealth
from schedlab.sim.failure_layer import FailureLayer, build_layer
from schedlab.sim.instant import Instant
from schedlab.sim.jobstate import (
    COMPLETED,
    FAILED,
    HELD,
    KILLED,
    PENDING,
    REJECTED,
    RETRYING,
    RUNNING,
    WAITING,
    JobState,
    plain_spec,
    transition,
)
from schedlab.sim.model import (
    MILLI,
    EventKind,
    JobSpec,
    JobStatus,
    Unschedulable,
    request_class,
    resized,
)
from schedlab.sim.nodes import NodeHealth
from schedlab.sim.progress import Progress
from schedlab.sim.queue import PendingQueue
from schedlab.sim.recorder import FgdMetric, Recorder
from schedlab.sim.registry import PLACERS
from schedlab.sim.roles import drop_side_on, drop_tasks, not_simulated
from schedlab.sim.speed import (
    ColocationSpeed,
    ElasticSpeed,
    GpuTypeSpeed,
    LocalitySpeed,
    SpeedChain,
)

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext

_FINISH: Final = Due.FINISH
_SUBMIT: Final = EventKind.SUBMIT
_FINISHED: Final = EventKind.FINISH


@mypyc_attr(allow_interpreted_subclasses=True)
class Clock(simpy.Environment):
    """SimPy's environment whose time is the run's one clock, an `Instant` (`clock.t`).

    SimPy keeps its time in `_now`, which its own code reads and writes (`step`,
    `schedule`); here `_now` is a property over `clock.t`, so SimPy and the engine share
    one field and the engine never touches SimPy's private state: it sets `clock.t`.

    SimPy advances by adding a delay to `now`, and `now + (t - now)` can miss `t` by an
    ulp (4.909 + (14.699 - 4.909) is 14.698999999999998, and no delay gives 14.699): a
    job would start 1.8e-15 s before its submit time. `land(t)` moves the clock onto `t`
    when it stopped within a few ulps of it, never past an event already scheduled.
    """

    def __init__(self, clock: Instant) -> None:
        self.clock = clock
        super().__init__(clock.t)

    @property
    def _now(self) -> float:
        return self.clock.t

    @_now.setter
    def _now(self, t: float) -> None:
        self.clock.t = t

    @property
    def now(self) -> float:
        """The current simulation time (the run's clock)."""
        return self.clock.t

    def land(self, t: float) -> None:
        """Set the clock to `t` if it is within a few ulps of it."""
        clock = self.clock
        now = clock.t
        if now != t and abs(now - t) <= 4 * math.ulp(t) and self.peek() >= t:
            clock.t = t


@mypyc_attr(allow_interpreted_subclasses=True)
class RunState:
    """All mutable state of one run, in parts, and the lifecycle of its jobs."""

    ctx: PolicyContext

    def __init__(self, sim: SimInputs, until: float | None) -> None:
        self.sim = sim
        self.topo = sim.topology
        self.engine_params = params = sim.engine_params
        self.until = until
        seeds = np.random.SeedSequence(sim.seed).spawn(3)
        self.policy_rng = np.random.default_rng(seeds[0])
        self.fail_rng = np.random.default_rng(seeds[1])
        # the run's one clock: a native field the per-event code reads (`schedlab.sim.instant`);
        # SimPy's time is a view of it (`Clock`)
        self.instant = clock = Instant()
        self.env = Clock(clock)
        self.cluster = ClusterState(self.topo, fgd=FgdMetric(sim.jobs))
        self.placer: Any = PLACERS.get(sim.placer_name)()
        self.jobs = [JobState(i, spec) for i, spec in enumerate(sim.jobs)]
        # the jobs by trace id (the states themselves: no int object a job, 28 MB at 1M)
        self.by_id: dict[str, JobState] = {j.spec.job_id: j for j in self.jobs}
        self.num_trace = len(self.jobs)  # the trace's jobs; task runs follow (sim.containers)
        self.containers = Containers(self) if any(
            not plain_spec(s) and s.completions is not None for s in sim.jobs) else None
        self.missing_deps = self._link_dependencies()
        self.agenda = Agenda(self.jobs)
        self.queue = PendingQueue()
        self.running: dict[int, JobState] = {}
        self.side_jobs: dict[int, JobState] = {}  # running jobs with non-gang tasks (roles)
        self.recorder = Recorder(self.topo, clock)
        self.colocation = Colocation(self.cluster, self.jobs)
        builtin: list[Any] = [
            GpuTypeSpeed(self.topo), LocalitySpeed(self.topo, params["locality_factors"]),
            ElasticSpeed(params["elastic_scaling"], params["serial_fraction"]),
            ColocationSpeed(self.colocation)]
        if sim.perf is None:
            chain = SpeedChain(builtin, params["speed_factors"], self)
        else:  # jobs naming a model: their speed from the performance model
            from schedlab.sim.perf.speed import ModelColocation, ModelSpeed, SkipModelJobs

            model = ModelSpeed(sim.perf, self.topo, self.jobs, self.colocation)
            chain = SpeedChain(
                [model, *(SkipModelJobs(f) for f in builtin[:3]),
                 ModelColocation(self.colocation, model)], params["speed_factors"], self,
                placement=3, model=model)
        self.progress = Progress(self.agenda, chain, clock)
        if chain.model is not None:
            self.progress.on_rate = self._note_rate
        self.colocation.progress = self.progress
        # the failure layer (schedlab.sim.failure_layer): None unless a failure model or
        # checkpoint costs are asked for
        self.layer: FailureLayer | None = build_layer(params, self.topo)
        self.soft_fail: dict[int, tuple[int, str]] = {}  # idx -> version, cause
        layer = self.layer
        if layer is not None and layer.model is not None:
            self.health: NodeHealth = ComponentHealth(
                self.cluster, self.agenda, self.recorder, params,
                np.random.default_rng(seeds[2]), clock, layer.model)
        else:
            self.health = NodeHealth(self.cluster, self.agenda, self.recorder, params,
                                     np.random.default_rng(seeds[2]), clock)
        if isinstance(self.health, ComponentHealth):
            self.health.progress = self.progress
        if layer is not None:
            self.progress.plan = layer.plan
            self.progress.stats = layer.stats
        self.failure_rate = float(params["failure_rate"])  # read at every start
        self.decisions = 0
        self.tick_armed = False
        self.next_arrival = 0
        self.events_processed = 0
        self.open_jobs = len(self.jobs)
        self.in_pass = False  # the policy's scheduling pass is under way
        self.futile: dict[int, str] = {}  # job index -> why: stopped once too often this pass
        self._empty: ClusterState | None = None
        self._infeasible_cache: dict[tuple[Any, ...], str] = {}
        self._observe = getattr(self.placer, "observe", None)
        pol = sim.policy
        listens = not getattr(type(pol).notify, "__schedlab_noop__", False)
        self.notify = pol.notify if listens else None
        # a policy that places some jobs by its own rules (Kueue's topology-aware
        # scheduling) says which: the run's placer is not asked whether they could ever fit
        self.places_itself: Callable[[JobSpec], bool] | None = getattr(
            pol, "places_itself", None)
        self.health.schedule()

    # the read-only face speed factors see (schedlab.sim.interfaces.RunView)
    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        return self.instant.t

    @property
    def topology(self) -> Any:
        """The run's topology."""
        return self.topo

    @property
    def params(self) -> Any:
        """The resolved engine parameters."""
        return self.engine_params

    def nodes_coming_back(self) -> bool:
        """Whether a node is down, or drained for a maintenance window, to come back."""
        if self.cluster.nodes_down:
            return True
        health = self.health
        return isinstance(health, ComponentHealth) and bool(health.maint_drained)

    def schedule_failure(self, job: JobState) -> None:
        """Put the attempt's failure on the agenda: its `fail_at`, or drawn at `failure_rate`."""
        rate = self.failure_rate
        layer = self.layer
        if rate <= 0 and plain_spec(job.spec) and layer is None:
            return  # the common case: no failure to schedule
        s = job.spec
        soft = layer is not None and layer.software
        if s.fail_at is None and rate <= 0 and not soft:
            return
        t = s.fail_at if s.fail_at is not None else math.inf
        if rate > 0:
            t = min(t, float(self.fail_rng.exponential(3600.0 / rate)))
        if soft:  # the failure model's software failures (restart, no retry used up)
            assert layer is not None
            self.soft_fail.pop(job.idx, None)
            ts, cause = layer.software_failure(job, self.fail_rng)
            if ts < t:
                t = ts
                self.soft_fail[job.idx] = (job.version, cause)
        if t < math.inf:
            self.agenda.schedule(job.attempt_start + t, Due.FAIL, job.idx, job.version)

    def _link_dependencies(self) -> dict[int, list[str]]:
        """Count each job's dependencies; those cut off by max_jobs can never complete."""
        missing: dict[int, list[str]] = {}
        for j in self.jobs:
            if plain_spec(j.spec):
                continue  # no dependencies
            for dep in j.spec.depends_on:
                d = self.by_id.get(dep)
                if d is None:
                    missing.setdefault(j.idx, []).append(dep)
                else:
                    j.deps_left += 1
                    d.add_dependent(j.idx)
        return missing

    def record(self, job: JobState, kind: EventKind, detail: str = "") -> None:
        """Append one row of events.parquet and tell the policy, if it listens.

        A container job's own events are not told (the policy sees its task runs, whose
        events `schedlab.sim.containers` records under the job's id).
        """
        if job.idx >= self.num_trace:
            assert self.containers is not None
            self.containers.record(job, kind, detail)
            return
        self.recorder.event(job, kind, detail)
        if self.notify is not None and (plain_spec(job.spec) or job.spec.completions is None):
            self.notify(self.ctx, job, kind)

    def _note_rate(self, job: JobState) -> None:
        """A `rate` row when a job of a model runs at a new speed or batch size."""
        model = self.progress.chain.model
        detail = model.note(job) if model is not None else None
        if detail is not None and job.idx < self.num_trace:
            self.recorder.event(job, EventKind.RATE, detail)

    def enqueue(self, job: JobState) -> None:
        """Queue a job now (a container job spawns its task runs instead)."""
        if not plain_spec(job.spec) and job.spec.completions is not None:
            assert self.containers is not None
            self.containers.begin(job)
            return
        self.queue.add(job, self.instant.t)

    def dequeue(self, job: JobState) -> None:
        """Take a job out of the queue now."""
        self.queue.remove(job, self.instant.t)

    def release(self, job: JobState) -> None:
        """A running job gives back its GPUs and host resources (work already advanced)."""
        if job.tasks:  # a job with roles: task by task (schedlab.sim.roles)
            drop_tasks(self.cluster, job, self.side_jobs, self.instant.t)
        elif job.gpus:
            cpus, mem, disk = job.host  # unpacked: *job.host makes a generic call
            self.cluster.release(job.idx, job.gpus, job.milli, cpus, mem, disk)
        elif job.node >= 0:
            cpus, mem, disk = job.host
            self.cluster.release_host(job.idx, job.node, cpus, mem, disk)
        job.host = (0.0, 0.0, 0.0)
        job.node = -1
        del self.running[job.idx]
        self.progress.stop(job)
        if job.group is not None:
            self.colocation.remove(job)

    def finalize(self, job: JobState, status: JobStatus, kind: EventKind | None,
                 detail: str = "") -> None:
        """End a job for good; dependents of a job that did not complete are killed."""
        transition(job, status)
        job.forget_class()  # kept while the job was in the run (`JobState.request_class`)
        job.end_time = self.instant.t
        job.reason = detail
        self.agenda.bump(job)
        if kind is not None:
            self.record(job, kind, detail)
        if job.idx >= self.num_trace:  # a container job's task run
            assert self.containers is not None
            self.containers.ended(job)
            return
        self.open_jobs -= 1
        if status == COMPLETED:
            for d in job.dependents:
                dep = self.jobs[d]
                dep.deps_left -= 1
                if dep.deps_left == 0 and dep.status == HELD:
                    self.enqueue(dep)
            return
        why = f"dependency {job.job_id} {status}"
        for d in job.dependents:
            dep = self.jobs[d]
            if dep.status == HELD:
                self.finalize(dep, KILLED, EventKind.KILL, why)
            elif dep.status == WAITING and not dep.doom:
                dep.doom = why  # killed when it arrives

    def arrive(self, job: JobState) -> None:
        """A job is submitted: held for its dependencies, queued, or rejected at once."""
        self.events_processed += 1
        s = job.spec
        self.record(job, _SUBMIT, "waiting for " + ";".join(s.depends_on)
                    if job.deps_left else "")
        if self._observe is not None:
            self._observe(s)
        if job.doom:
            self.finalize(job, KILLED, EventKind.KILL, job.doom)
            return
        missing = self.missing_deps.get(job.idx)
        if missing:
            self.finalize(job, REJECTED, EventKind.REJECT,
                          f"depends on jobs not in this run: {';'.join(missing)}")
            return
        plain = plain_spec(s)  # no roles, no container, not elastic: none of their checks
        own = self.places_itself is not None and self.places_itself(s)
        if plain:
            bad = "" if own else self.infeasible(s, job.request_class())
        else:
            bad = (not_simulated(s, self.sim.policy) if s.tasks else "") or (
                self.containers.refuse(s) if self.containers and s.completions else "") \
                or ("" if own else self.infeasible(s, job.request_class())
                    if s.min_gpus is None else self.infeasible(resized(s, s.min_gpus)))
        if bad:
            self.finalize(job, REJECTED, EventKind.REJECT, bad)
            return
        if not plain and s.min_gpus is not None and s.min_gpus < s.num_gpus:
            job.fit_gpus = self._elastic_fit(s)
        if job.deps_left:
            transition(job, HELD)
        else:
            self.enqueue(job)

    def _elastic_fit(self, s: JobSpec) -> int:
        """0 when an elastic job fits at num_gpus; else the largest size that ever fits."""
        if not self.infeasible(s):
            return 0
        assert s.min_gpus is not None  # the caller checked min_gpus fits
        return next(n for n in range(s.num_gpus - 1, s.min_gpus - 1, -1)
                    if not self.infeasible(resized(s, n)))

    def infeasible(self, s: JobSpec, key: tuple[Any, ...] | None = None) -> str:
        """Why no placement could ever hold the job ('' when one can), cached per class.

        `key`: the spec's `request_class`, when the caller has it. A CPU-only job asks
        the placer too: for a node with its CPUs, memory and disk.
        """
        if s.num_gpus == 0 and s.num_cpus <= 0 and s.mem_gb <= 0 and s.disk_gb <= 0:
            return ""
        if key is None:
            key = request_class(s)
        why = self._infeasible_cache.get(key)
        if why is None:
            if self._empty is None:
                self._empty = ClusterState(self.topo, layout=self.cluster.layout)
            got = self.placer.place(s, self._empty)
            why = ""
            if isinstance(got, Unschedulable):
                why = got.reason if not got.resolvable else (
                    "cannot be placed even on an empty cluster by placer "
                    f"{self.sim.placer_name!r}: {got.reason}")
            self._infeasible_cache[key] = why
        return why

    def on_entry(self, entry: Entry) -> None:
        """Apply one agenda entry that is due now (a stale one is ignored)."""
        _, _, kind, idx, version = entry
        if kind is _FINISH:  # the common case first (the same test as below)
            job = self.jobs[idx]
            if job.version == version:
                self.events_processed += 1
                self._job_event(job, kind)
        elif kind is Due.TIMER or kind is Due.TICK:
            if kind is Due.TICK:
                self.tick_armed = False
            self.events_processed += 1
        elif kind is Due.NODE_FAIL:
            self.events_processed += 1
            if self.side_jobs:  # non-gang tasks on the node stop alone (schedlab.sim.roles)
                drop_side_on(self.cluster, self.side_jobs, idx, self.instant.t)
            self.health.fail(idx, version, self.jobs,
                             lambda j, why: self.interrupt(j, why, counts_retry=False))
        elif kind is Due.NODE_REPAIR:
            self.events_processed += 1
            self.health.repair(idx, version)
        elif kind is Due.LIFETIME:
            self._lifetime(self.jobs[idx])
        elif self.jobs[idx].version == version:
            self.events_processed += 1
            self._job_event(self.jobs[idx], kind)

    def _lifetime(self, job: JobState) -> None:
        if job.spec.completions is not None:  # a container job's active_deadline
            assert self.containers is not None
            self.containers.deadline(job)
            return
        if job.status not in (RUNNING, PENDING, RETRYING):
            return
        self.events_processed += 1
        if not self._withdraw(job):  # waiting out its retry delay: queueing too (as on RETRY)
            job.queue_time += self.instant.t - job.queued_since
        self.finalize(job, KILLED, EventKind.KILL, "max_lifetime")

    def _withdraw(self, job: JobState) -> bool:
        """Take a running or pending job out of the run before it is finalized, else False.

        A running job's work up to now is accounted and its GPUs released; a pending one
        leaves the queue.
        """
        if job.status == RUNNING:
            self.progress.advance(job)
            self.release(job)
        elif job.status == PENDING:
            self.dequeue(job)
        else:
            return False
        return True

    def _job_event(self, job: JobState, kind: Due) -> None:
        if kind is _FINISH:
            self.progress.advance(job)
            if (self.progress.chain.model is not None
                    and job.work < job.spec.duration * (1.0 - 1e-9)):
                self.progress.set_rate(job)  # a horizon of its model: asked again
                return
            job.work = job.spec.duration
            self.release(job)
            self.finalize(job, COMPLETED, _FINISHED)
        elif kind is Due.FAIL:
            soft = self.soft_fail.pop(job.idx, None) if self.soft_fail else None
            if soft is not None and soft[0] == job.version:
                assert isinstance(self.health, ComponentHealth)
                self.health.count_software(job, soft[1])
                self.interrupt(job, f"software failure ({soft[1]})", counts_retry=False)
            else:
                self.interrupt(job, "attempt failed", counts_retry=True)
        elif kind is Due.RETRY:
            waited = self.instant.t - job.queued_since
            self.record(job, EventKind.RETRY)
            self.enqueue(job)
            job.queued_since -= waited  # the retry delay counts as queueing

    def interrupt(self, job: JobState, why: str, counts_retry: bool) -> float:
        """A running attempt fails: lose work since the checkpoint, retry or fail for good.

        Returns the GPU-seconds of work lost. A node failure retries the job without using
        up its `max_retries` (the job did nothing wrong); its own failure does use one. A
        container job's task run fails by its job's restart policy (`schedlab.sim.containers`).
        """
        if counts_retry and job.idx >= self.num_trace:
            assert self.containers is not None
            return self.containers.run_failed(job)
        self.progress.advance(job)
        lost = job.work - job.ckpt_work
        job.lost_work += lost
        job.work = job.ckpt_work
        gpus = len(job.gpus) * job.milli / MILLI
        self.record(job, EventKind.FAIL, f"{why}; lost_work={lost:g}")
        self.release(job)
        if counts_retry and job.restarts >= job.spec.max_retries:
            self.finalize(job, FAILED, None, "max_retries exhausted")
            return lost * gpus
        why = "" if counts_retry else self._futile_restart(job, stop=False)
        if why:
            self.finalize(job, FAILED, None, why)
            return lost * gpus
        job.restarts += 1
        transition(job, RETRYING)
        job.queued_since = self.instant.t
        self.agenda.schedule(self.instant.t + self.engine_params["retry_delay"], Due.RETRY,
                             job.idx, job.version)
        return lost * gpus

    def stopped(self, job: JobState) -> None:
        """The policy stopped a running job (its work saved or lost already): queue it again.

        A stop is a restart for the futile-restart count (`_futile_restart`); a job
        stopped once too often is failed at the end of this scheduling pass
        (`fail_futile`), so the policy's decisions of the pass stay valid.
        """
        self.enqueue(job)
        why = self._futile_restart(job, stop=True)
        if why:
            self.futile[job.idx] = why

    def fail_futile(self) -> None:
        """Fail the jobs this pass stopped once too often, in stop order.

        One the policy restarted in the same pass (a move by stop and start) is failed
        too: no time passed, so it made no progress since, and a policy that moves a job
        with loss at every pass would otherwise never let it end.
        """
        for idx, why in self.futile.items():
            job = self.jobs[idx]
            if self._withdraw(job):  # else it ended otherwise within the pass
                self.finalize(job, FAILED, EventKind.FAIL, why)
        self.futile.clear()

    def _futile_restart(self, job: JobState, *, stop: bool) -> str:
        """Count a restart (node failure, or policy stop); why the job must fail, or ''.

        One counter for both causes: restarts in a row while no checkpointed progress was
        made between them. A job that checkpoints keeps going however often it is
        restarted; one that cannot (no checkpoints, or lossy stops and failures faster than
        its checkpoints) fails once the count passes the limit of this restart's cause,
        `node_failure_retries` or `stop_retries`, instead of running forever.
        """
        if job.ckpt_work > job.ckpt_at_restart:
            job.futile_restarts = job.futile_stops = 0
        job.ckpt_at_restart = job.ckpt_work
        job.futile_restarts += 1
        job.futile_stops += stop
        key = "stop_retries" if stop else "node_failure_retries"
        limit = self.engine_params[key]
        n, k = job.futile_restarts, job.futile_stops
        if n <= limit:
            return ""
        policy = f"stops by policy {self.sim.policy.name!r}"
        if not k:
            what = f"node failures: {n} restarts in a row"
        elif k == n:
            what = f"{policy}: {n} restarts in a row"
        else:
            f = n - k
            what = (f"node failures and {policy}: {n} restarts in a row ({f} node "
                    f"failure{'s' if f > 1 else ''}, {k} stop{'s' if k > 1 else ''})")
        return f"{what} without checkpointed progress ({key}={limit})"
