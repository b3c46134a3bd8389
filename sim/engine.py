"""The discrete-event engine: the loop and the application of decisions.

One SimPy environment per run, no module-level state. Time advances from one instant to
the next on a single SimPy process: arrivals come from the sorted trace, everything else
from the agenda (`schedlab.sim.agenda`). At each instant the engine applies every due event, then
runs one scheduling pass, applying each decision the policy yields before asking for the
next, and samples the cluster state if it changed. The run's state lives in parts
(`schedlab.sim.lifecycle.RunState`); this module validates and applies decisions.

Control can be inverted for a stepping driver (the Gym environment, `schedlab.app.rl`): a
policy may yield `Await` mid-pass instead of a decision; the loop then waits on a SimPy
event that only `Run.advance` triggers, so the driver runs the simulation from one such
point to the next (`Simulation.start`, `Run.advance`, `Simulation.result`) without a
thread and without a second copy of the loop. `Simulation.run` refuses a policy that
awaits: it has nobody to answer.

Two drives of the one loop: `Simulation.start` registers it as a SimPy process that yields
one timeout per instant (every event due at an instant is applied from the agenda's own
heap), so a stepping driver steps the environment; `Simulation.run` drives the same
generator directly and sets the clock from instant to instant itself, since nothing else
is on SimPy's schedule (fewer calls per instant, same instants and outputs). A run with a
user's processes (`schedlab.sim.processes`) is always driven on SimPy's schedule.

`events_processed` counts every engine event: each arrival, each live agenda entry
applied (completion, failure, retry, timer, tick, node failure or repair, lifetime), each
decision applied (start, preempt, suspend, resume, migrate, resize, reject: a policy's
round of suspensions counts each one) and each rejection when the run settles.

Compiled builds: this module and the other per-event modules (`setup.py` lists them)
can be compiled by mypyc from this typed source, with the same semantics and outputs;
`SCHEDLAB_PURE=1` at install time keeps everything pure Python. Compiled classes allow
interpreted subclasses; a class attribute a subclass overrides and the compiled code reads
is a `ClassVar`, else the compiled read would miss the override.

Garbage collector: a run builds millions of long-lived objects (job specs, job states,
recorded rows) and frees almost everything it allocates per event by reference
counting, so Python's cyclic collector would mostly rescan live objects. `Simulation.run`
therefore freezes everything that exists before and after set-up (`gc.freeze`: moved to
a permanent generation the collector never scans) and raises the collection thresholds
(`GC_THRESHOLDS`) for the set-up, the loop and the result build; on exit it unfreezes and
restores the caller's thresholds, whatever happened (`quiet_collector`; the CLI also
wraps trace loading in it). Cycles made during the run are still collected, less often.
"""

from __future__ import annotations

import gc
import math
import time as _time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import numpy as np
import simpy
from mypy_extensions import mypyc_attr

from schedlab.sim.agenda import Due
from schedlab.sim.cfuncs import heappop
from schedlab.sim.context import SchedContext
from schedlab.sim.engine_params import ENGINE_PARAMS, split_params
from schedlab.sim.errors import InvalidDecision, InvalidParameter
from schedlab.sim.jobstate import PENDING, RUNNING, JobState, plain_spec
from schedlab.sim.lifecycle import RunState
from schedlab.sim.model import (
    MILLI,
    Await,
    Decision,
    EventKind,
    JobSpec,
    JobStatus,
    Level,
    Migrate,
    Preempt,
    Reject,
    Resize,
    Resume,
    Start,
    Suspend,
    TaskPlacement,
    job_milli,
)
from schedlab.sim.params import resolve
from schedlab.sim.perf.run import resolve_jobs
from schedlab.sim.processes import Process, RunHandle
from schedlab.sim.recorder import TIMELINE_COLUMNS
from schedlab.sim.registry import POLICIES
from schedlab.sim.role_tasks import end_side, place_side, take_tasks
from schedlab.sim.roles import has_roles
from schedlab.sim.rounds import Rounds
from schedlab.sim.settle import IDLE_PASS_LIMIT, settle
from schedlab.sim.speed import roles_level
from schedlab.topologies.tree import Topology
from schedlab.traces.base import Trace

__all__ = ["ENGINE_PARAMS", "TIMELINE_COLUMNS", "Run", "Simulation"]

# Final: compiled, each is a static of the module, not a lookup by name at each use
_NO_HOST: Final = (0.0, 0.0, 0.0)
_GPU_LEVEL: Final = int(Level.GPU)  # the lowest common level of a single GPU
# decision kinds as tuples (an `A | B` union would be built again on every isinstance)
_STARTS: Final = (Start, Resume)
_STOPS: Final = (Preempt, Suspend)
_MOVES: Final = (Migrate, Resize)
_START: Final = EventKind.START
_RESUME: Final = EventKind.RESUME
_SUSPEND: Final = EventKind.SUSPEND
_PREEMPT: Final = EventKind.PREEMPT
GC_THRESHOLDS = (50_000, 50, 1000)
"""Collector thresholds during the engine loop (Python's defaults: 700, 10, 10)."""


@mypyc_attr(allow_interpreted_subclasses=True)
class Run(RunState):
    """One run: the loop and the decisions, over the parts of `RunState`."""

    def __init__(self, sim: Simulation, until: float | None,
                 progress: Callable[[float, int, int], None] | None) -> None:
        super().__init__(sim, until)
        p = self.engine_params
        mode, _, every = p["timeline"].partition(":")
        self.recorder.configure(events=p["events"], timeline=mode,
                                interval=float(every) if every else p["timeline_interval"])
        self.progress_cb = progress
        self.ctx = SchedContext(self)
        self.idle_passes = 0  # passes in a row with nothing running and nothing started
        self.paused: simpy.Event | None = None  # set while the policy awaits (`advance`)
        self.side_tried = -1  # cluster version of the last try at placing non-gang tasks
        self.done = False  # the loop has ended
        self.loop: simpy.Process | None = None  # the loop as a SimPy process (not direct)
        self.sleeping = False  # the loop waits for its next instant (a process may wake it)
        self.outside: list[simpy.Process] = []  # the user's processes (sim.processes)
        self.outside_gone = False  # set when they can never act again
        every = float(p["decision_round"])  # passes and arrivals at round boundaries only
        self.rounds: Rounds | None = Rounds(every) if every > 0 else None

    # --- the user's processes (schedlab.sim.processes) ---

    def wake(self) -> None:
        """A user's process acted: hold a scheduling pass now."""
        self.agenda.schedule(self.instant.t, Due.TIMER)
        if self.sleeping and self.loop is not None:
            self.sleeping = False
            self.loop.interrupt()

    def _outside_alive(self) -> bool:
        """Whether a user's process may still act (the loop then waits for it)."""
        return not self.outside_gone and any(p.is_alive for p in self.outside)

    # --- decisions ---

    def apply(self, d: Decision) -> None:
        """Validate and apply one decision; an invalid one raises InvalidDecision."""
        job = self.by_id.get(d.job_id)
        if job is None:
            raise InvalidDecision(f"{type(d).__name__}: unknown job {d.job_id!r}")
        if isinstance(d, _STARTS):
            self._start(job, tuple(d.gpus), type(d).__name__, d.share, d.node, d.tasks)
        elif isinstance(d, _STOPS):
            self._need(job, RUNNING, d)
            job.preemptions += 1
            if isinstance(d, Suspend):
                job.suspended = True
                self._stop(job, self.engine_params["checkpoint_on_suspend"], _SUSPEND,
                           d.reason)
            else:
                self._stop(job, False, _PREEMPT, d.reason)
            self.stopped(job)
        elif isinstance(d, _MOVES):
            self._need(job, RUNNING, d)
            s = job.spec
            if job.tasks:
                raise InvalidDecision(
                    f"{type(d).__name__} {d.job_id!r}: a job with task roles moves as a "
                    "gang: preempt it and start it again on a new placement")
            if isinstance(d, Resize) and s.min_gpus is None and s.max_gpus is None:
                raise InvalidDecision(
                    f"Resize {d.job_id!r}: not an elastic job (no min_gpus/max_gpus)")
            self._move(job, tuple(d.gpus), EventKind(type(d).__name__.lower()), d.pause)
        elif isinstance(d, Reject):
            self._need(job, PENDING, d)
            self.dequeue(job)
            self.finalize(job, JobStatus.REJECTED, EventKind.REJECT, d.reason)
        else:
            raise InvalidDecision(f"unknown decision {d!r}")
        self.decisions += 1
        self.events_processed += 1  # every applied decision is an engine event

    def _need(self, job: JobState, status: JobStatus, d: Decision) -> None:
        if job.status != status:
            raise InvalidDecision(
                f"{type(d).__name__} {job.job_id!r}: job is {job.status}, must be {status}")

    def _check_gpus(self, job: JobState, gpus: tuple[int, ...], what: str) -> None:
        s = job.spec
        if s.min_gpus is not None or s.max_gpus is not None:
            lo, hi = s.min_gpus or s.num_gpus, s.max_gpus or s.num_gpus
            if not lo <= len(gpus) <= hi:
                raise InvalidDecision(
                    f"{what} {s.job_id!r}: {len(gpus)} GPUs given, the elastic job takes "
                    f"{lo}..{hi}")
        elif len(gpus) != s.num_gpus:
            raise InvalidDecision(
                f"{what} {s.job_id!r}: {len(gpus)} GPUs given, the gang needs {s.num_gpus} "
                "(all or nothing)")
        if s.gpu_type:
            topo = self.topo
            for g in gpus:
                if 0 <= g < topo.num_gpus:
                    t = topo.nodes[topo.gpu_node[g]].gpu_type
                    if t != s.gpu_type:
                        raise InvalidDecision(
                            f"{what} {s.job_id!r}: GPU {g} is {t}, job needs {s.gpu_type}")

    @staticmethod
    def host_ask(s: JobSpec, num_gpus: int) -> tuple[float, float, float]:
        """CPUs, memory and disk a job holds on `num_gpus` GPUs (disk_gb is per task).

        An elastic job at k of its n GPUs holds k/n of it (`schedlab.sim.model.resized`).
        """
        total = (s.num_cpus, s.mem_gb, s.disk_gb * s.num_tasks)
        if num_gpus == s.num_gpus or s.num_gpus <= 0:
            return total
        f = num_gpus / s.num_gpus
        return (total[0] * f, total[1] * f, total[2] * f)

    def _take_host(self, job: JobState, gpus: tuple[int, ...], node: int, milli: int,
                   what: str) -> None:
        """Take the job's GPUs and host resources, or raise before anything changes.

        A job with GPUs holds its CPUs, memory and disk on its GPUs' nodes; a CPU-only job
        that asks for any holds them on `node` (the placer's HostPlacement).
        """
        s = job.spec
        host = self.host_ask(s, len(gpus))
        # unpacked: a call with *host goes through Python's generic call when compiled
        cpus, mem, disk = host
        asks = cpus > 0 or mem > 0 or disk > 0
        if gpus:
            if node >= 0:
                raise InvalidDecision(f"{what} {s.job_id!r}: node {node} given for a job "
                                      "with GPUs (its host resources are on its GPUs' nodes)")
            if asks:  # (check_host has nothing to check otherwise)
                self.cluster.check_host(gpus, cpus, mem, disk, f"{what} {s.job_id!r}")
            self.cluster.allocate(job.idx, gpus, milli, cpus, mem, disk)
        elif node >= 0:
            try:
                self.cluster.allocate_host(job.idx, node, cpus, mem, disk)
            except InvalidDecision as e:
                raise InvalidDecision(f"{what} {s.job_id!r}: {e}") from None
        elif asks:
            raise InvalidDecision(
                f"{what} {s.job_id!r}: a CPU-only job asking for {s.num_cpus:g} CPUs, "
                f"{s.mem_gb:g} GB memory, {disk:g} GB disk needs a node: start it on its placement "
                "(ctx.place gives a HostPlacement) or name the node")
        job.host = host
        job.node = node

    def _start(self, job: JobState, gpus: tuple[int, ...], what: str, share: str = "",
               node: int = -1, tasks: tuple[TaskPlacement, ...] = ()) -> None:
        if job.status != PENDING:
            raise InvalidDecision(f"{what} {job.job_id!r}: job is {job.status}, must be pending")
        s = job.spec
        plain = plain_spec(s)  # no roles, shares, host asks, elasticity, lifetime, failures
        if (len(gpus) != s.num_gpus or s.gpu_type or not plain and (
                s.min_gpus is not None or s.max_gpus is not None)):  # else nothing to check
            self._check_gpus(job, gpus, what)
        now = self.instant.t
        if share and not gpus:
            raise InvalidDecision(f"{what} {job.job_id!r}: share={share} needs GPUs")
        if share and node >= 0:
            raise InvalidDecision(f"{what} {job.job_id!r}: share={share} takes no node")
        if tasks or (not plain and s.tasks and has_roles(s)):  # a job with roles: by task
            self._take_tasks(job, gpus, tasks, what, share, node)
        elif not share:  # validates before anything changes
            # (no call for whole GPUs)
            milli = MILLI if plain or s.gpu_share >= 1.0 else job_milli(s)
            if gpus and node < 0 and (plain or not (s.num_cpus or s.mem_gb or s.disk_gb)):
                self.cluster.allocate(job.idx, gpus, milli)  # the common case: GPUs only
                job.host = _NO_HOST
            else:
                self._take_host(job, gpus, node, milli, what)
            job.milli = milli
        self.dequeue(job)
        job.gpus = gpus
        job.status = RUNNING  # pending -> running (checked above)
        job.held_since = now
        self.running[job.idx] = job
        if share:
            self.colocation.join(job, gpus, share)
            job.host = _NO_HOST
        resumed = job.started_before
        note = f"{share} N={len(self.colocation.members(job))}" if job.group else ""
        if job.node >= 0:
            note = f"node={self.topo.nodes[job.node].name}"
        elif job.tasks:
            names = self.topo.nodes
            note = "tasks=" + ",".join(f"{t.role}[{t.index}]@{names[t.node].name}"
                                       for t in job.tasks)
        # a model's own (re)start cost applies at every start (Pollux: each allocation)
        overhead = self.progress.chain.restart_cost(
            s, self.engine_params["restore_overhead"] if resumed and job.work > 0 else 0.0)
        job.attempt_start = now
        # `now` itself when there is no pause: one float object shared by the job's start
        # fields, not a new one (24 bytes a job at a million jobs)
        self.progress.set_rate(job, resume_at=now + overhead if overhead else now,
                               reschedule=False)
        if not resumed:
            job.first_start = now
            job.started_before = True
            if job.tasks:
                job.locality_level = int(roles_level(self.topo, gpus, job.tasks)[0])
            elif len(gpus) > 1:
                job.locality_level = int(self.topo.walk.lowest_common_level(gpus))
            elif gpus:
                job.locality_level = _GPU_LEVEL
            self.record(job, _START, note)
            if not plain and s.max_lifetime:
                self.agenda.schedule(now + s.max_lifetime, Due.LIFETIME, job.idx, -1)
        else:
            self.record(job, _RESUME, ";".join(
                x for x in (note, f"restore={overhead:g}" if overhead else "") if x))
        job.suspended = False
        self.progress.schedule_finish(job)
        self.schedule_failure(job)

    def _take_tasks(self, job: JobState, gpus: tuple[int, ...],
                    tasks: tuple[TaskPlacement, ...], what: str, share: str, node: int
                    ) -> None:
        """Take a job with roles' task placement, all or nothing (`schedlab.sim.role_tasks`)."""
        take_tasks(self.cluster, job, gpus, tasks, f"{what} {job.job_id!r}", share, node,
                   self.side_jobs)

    # --- non-gang tasks of jobs with roles: placed by the engine while the gang runs ---

    def _end_side(self) -> None:
        """Non-gang tasks whose own duration is up give back what they hold."""
        end_side(self.cluster, self.side_jobs, self.instant.t)

    def _place_side(self) -> None:
        """Place waiting non-gang tasks, unless the cluster is as at the last try."""
        cluster = self.cluster
        if self.side_tried == cluster.version:
            return
        place_side(cluster, self.placer, self.side_jobs, self.agenda, self.instant.t,
                   self.recorder.task_event)
        self.side_tried = cluster.version

    def _stop(self, job: JobState, keep_all: bool, kind: EventKind, detail: str) -> None:
        """Stop a running job; it keeps all work (checkpointed) or work to its checkpoint."""
        self.progress.advance(job)
        if keep_all:
            job.ckpt_work = job.work
        lost = job.work - job.ckpt_work
        job.lost_work += lost
        job.work = job.ckpt_work
        self.record(job, kind, detail or (f"lost_work={lost:g}" if lost else ""))
        self.release(job)

    def _move(self, job: JobState, gpus: tuple[int, ...], kind: EventKind,
              pause: float | None = None) -> None:
        self._check_gpus(job, gpus, kind)
        self.progress.advance(job)
        old, old_milli = job.gpus, job.milli
        grouped = job.group is not None
        milli = job_milli(job.spec) if grouped else job.milli
        # the host share moves with the GPUs (a grouped job held none: it takes its own);
        # a CPU-only job keeps its node
        old_host = job.host
        host = self.host_ask(job.spec, len(gpus)) if gpus else old_host
        oc, om, od = old_host  # unpacked: no generic call (see `_take_host`)
        cpus, mem, disk = host
        if old:
            self.cluster.release(job.idx, old, old_milli, oc, om, od)
        try:
            self.cluster.check_host(gpus, cpus, mem, disk, f"{kind} {job.job_id!r}")
            self.cluster.allocate(job.idx, gpus, milli, cpus, mem, disk)
        except InvalidDecision:
            if old:
                self.cluster.allocate(job.idx, old, old_milli, oc, om, od)
            raise
        job.host = host
        self.progress.account(job)
        job.gpus = gpus
        job.milli = milli
        if grouped:  # moving out of a time-share or pack group
            self.colocation.remove(job)
        if kind is EventKind.MIGRATE:
            job.migrations += 1
        job.ckpt_work = job.work
        wait = self.progress.chain.restart_cost(
            job.spec, self.engine_params["restore_overhead"]) if pause is None else pause
        self.progress.set_rate(job, resume_at=self.instant.t + wait, reschedule=False)
        self.record(job, kind)
        self.progress.schedule_finish(job)

    # --- the loop ---

    def _only_churn_left(self, before: int) -> bool:
        """Nothing runs or can arrive, every node is up and the pass started nothing.

        A node drained ahead of a maintenance window counts as down: it comes back.
        """
        return (not self.running and self.decisions == before
                and self.next_arrival >= self.num_trace
                and not self.nodes_coming_back()
                and not (self.outside and self._outside_alive())
                and not self.agenda.any_live(
                    lambda k: k not in (Due.NODE_FAIL, Due.NODE_REPAIR, Due.TICK)))

    def _arm_tick(self, period: float, before: int) -> None:
        """Tick only while something can change (else the queue is stuck for good)."""
        if self.tick_armed or not (self.queue or self.running):
            return
        if (self.running or self.decisions > before or self.next_arrival < self.num_trace
                or self.agenda.any_live(lambda k: k is not Due.TICK)):
            self.tick_armed = True
            self.agenda.schedule(self.instant.t + period, Due.TICK)

    def _idle_for_good(self, before: int) -> bool:
        """True when nothing runs or can arrive and the policy keeps starting nothing.

        Either only random node failures are left (which can never help), or the policy
        has been woken `IDLE_PASS_LIMIT` times in a row with nothing running and started
        nothing (a timer loop that can never end the run).
        """
        if self.running or self.decisions != before or self.next_arrival < self.num_trace:
            self.idle_passes = 0
            return False
        self.idle_passes += 1
        return self.idle_passes >= IDLE_PASS_LIMIT or self._only_churn_left(before)

    def process(self, direct: bool = False) -> Generator[simpy.Event, Any, None]:
        """The SimPy process driving the run (`direct`: the clock is set, not awaited).

        Driven directly (`Simulation.run`), the generator moves the clock itself and
        yields only at an `Await`; as a SimPy process (`Simulation.start`) it yields one
        timeout per instant.
        """
        env = self.env
        policy = self.sim.policy
        ctx = self.ctx
        jobs = self.jobs
        n = self.num_trace
        agenda = self.agenda
        # the run's own methods are called as methods, never through bound-method locals:
        # compiled, `self.apply(d)` is a C call through the class's vtable, where a local
        # `apply = self.apply` would be called through Python's call protocol
        recorder, cluster, queue, running = self.recorder, self.cluster, self.queue, self.running
        # a policy that only starts queued jobs decides nothing without one: no pass then
        skip_empty = policy.only_pending
        queued = queue.held  # the queued jobs (true when any)
        instant = self.instant  # the run's clock; SimPy's time is a view of it (sim.lifecycle)
        stuck = False
        # the next arrival's submit time, read once per arrival (inf: none left)
        na = self.next_arrival
        next_sub = jobs[na].spec.submit_time if na < n else math.inf
        rounds = self.rounds  # decision_round: arrivals held to the next boundary
        if rounds is not None and na < n:
            next_sub = rounds.next_boundary(next_sub)
        while self.open_jobs > 0:
            wait_only = False  # waiting for a user's process, nothing of the run's own
            t = agenda.peek()  # the next instant: the next live entry or arrival
            if next_sub < t:
                t = next_sub
            if stuck or t == math.inf:  # nothing can change any more
                if not stuck and self.outside and self._outside_alive():
                    # but a user's process may act: wait for it (or for `until`)
                    if self.until is not None and instant.t >= self.until:
                        break
                    t = math.inf if self.until is None else self.until
                    wait_only = True
                elif not settle(self):
                    break
                else:
                    t = instant.t  # some jobs were rejected: the rest may start now
            elif self.until is not None and t > self.until:
                break
            if t > instant.t:
                if direct:  # nothing else is on SimPy's schedule: set the clock
                    instant.t = t
                else:
                    self.sleeping = True
                    woken = False
                    try:
                        if t == math.inf:  # only a user's process can wake the loop
                            yield env.event()
                        else:
                            yield env.timeout(t - instant.t)
                            env.land(t)  # now + (t - now) can miss t by an ulp
                    except simpy.Interrupt:  # a user's process acted (`wake`)
                        woken = True
                    finally:
                        self.sleeping = False
                    # woken: look again from the new instant; wait_only: `until` came
                    # with nothing of the run's own due (mypyc takes no `continue` in
                    # a try/finally, hence the flag)
                    if woken or wait_only:
                        continue
            while next_sub <= t:
                self.arrive(jobs[na])
                na += 1
                self.next_arrival = na
                next_sub = jobs[na].spec.submit_time if na < n else math.inf
                if rounds is not None and na < n:
                    next_sub = rounds.next_boundary(next_sub)
            while (heap := agenda.heap) and heap[0][0] <= t:  # every entry due now
                self.on_entry(heappop(heap))
            if self.side_jobs:  # non-gang tasks of jobs with roles (schedlab.sim.roles)
                self._end_side()
            before = self.decisions
            if (queued or not skip_empty) and (rounds is None or rounds.open(t, agenda)):
                self.in_pass = True
                for d in policy.schedule(ctx):
                    if isinstance(d, Await):  # hand control to the driver (`advance`)
                        self.paused = env.event()
                        yield self.paused
                        continue
                    self.apply(d)
                self.in_pass = False
            if self.futile:
                self.fail_futile()
            if self.side_jobs:
                self._place_side()
            if (running or self.decisions != before or self.next_arrival < n
                    or (rounds is not None and rounds.waiting(t))):
                self.idle_passes = 0  # the common case of `_idle_for_good`
                stuck = False
            else:
                stuck = self._idle_for_good(before)
            if policy.period and not stuck:
                self._arm_tick(policy.period, before)
            recorder.sample(cluster, queue, len(running))
            if self.progress_cb is not None:
                self.progress_cb(instant.t, n - self.open_jobs, n)
        self.done = True

    def sample(self) -> None:
        """Add a timeline row if the cluster or the queue changed."""
        self.recorder.sample(self.cluster, self.queue, len(self.running))

    def advance(self) -> bool:
        """Run to the policy's next `Await` (True) or to the end of the run (False).

        For stepping drivers, after `Simulation.start`: each call first resumes the
        pass the policy paused (it reads its answer from wherever the driver left it),
        then steps the SimPy environment until the policy awaits again or the run ends.
        Simulated time, events and results are those of `Simulation.run`.
        """
        env = self.env
        if self.paused is not None:
            ev, self.paused = self.paused, None
            ev.succeed()
        while not self._awaiting():
            if self.done:
                return False
            try:
                env.step()
            except simpy.core.EmptySchedule:
                if self.loop is None or not self.sleeping:
                    return False
                # the user's processes wait for what never comes: the loop goes on alone
                self.outside_gone = True
                self.wake()
        return True

    def _awaiting(self) -> bool:
        """True while the policy awaits (read afresh: `env.step` sets it behind our back)."""
        return self.paused is not None


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Freeze the objects alive now and collect less often inside; restore on exit.

    Nested uses (or a caller's own `gc.freeze`) are left to the outermost: only the one
    that found nothing frozen unfreezes, and each restores the thresholds it found.
    """
    old = gc.get_threshold()
    outer = gc.get_freeze_count() == 0
    gc.freeze()
    if old[0] > 0:  # 0: the caller turned automatic collection off; keep it off
        gc.set_threshold(*(max(a, b) for a, b in zip(old, GC_THRESHOLDS, strict=True)))
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if outer:
            gc.unfreeze()


@mypyc_attr(allow_interpreted_subclasses=True)
class Simulation:
    """One policy on one trace and one topology; `run()` returns a SimResult."""

    def __init__(
        self,
        trace: Trace | str | Path,
        topology: Topology | str | Path,
        policy: Any,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
        *,
        max_jobs: int | None = None,
        processes: Sequence[Process] = (),
    ) -> None:
        if not isinstance(trace, Trace):
            from schedlab.traces import load_trace

            trace = load_trace(trace)
        if not isinstance(topology, Topology):
            from schedlab.topologies import load_topology

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
        own = getattr(type(policy), "placer", None)
        if "placer" not in engine_given and isinstance(own, str):
            engine_given["placer"] = own  # the policy's own default placer
        self.engine_params = resolve(engine_given, ENGINE_PARAMS, "the engine")
        self.placer_name: str = self.engine_params["placer"]
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
        # jobs naming a model take their duration from the run's performance models
        jobs, self.perf = resolve_jobs(jobs, self.engine_params, self.topology)
        self.jobs: tuple[JobSpec, ...] = jobs
        self.max_jobs = max_jobs
        for fn in processes:
            if not callable(fn):
                raise InvalidParameter(f"process {fn!r}: expected a function (env, run) "
                                       "returning a SimPy generator")
        self.processes: tuple[Process, ...] = tuple(processes)

    def start(self, until: float | None = None,
              progress: Callable[[float, int, int], None] | None = None) -> Run:
        """A run ready to go: policy attached, loop registered, nothing simulated yet.

        `run()` drives it to the end at once; a stepping driver calls `Run.advance()`
        until it returns False, then `result(run, wall_seconds)`.
        """
        run = self._prepare(until, progress)
        run.loop = run.env.process(run.process())
        self._add_processes(run)
        return run

    def _add_processes(self, run: Run) -> None:
        """Start the user's processes beside the loop, in the order given."""
        if self.processes:
            handle = RunHandle(run)
            run.outside = [run.env.process(fn(run.env, handle)) for fn in self.processes]

    def _prepare(self, until: float | None,
                 progress: Callable[[float, int, int], None] | None) -> Run:
        """A run with its policy attached and nothing simulated."""
        if until is not None and until < 0:
            raise InvalidParameter(f"until {until}: expected seconds >= 0")
        run = Run(self, until, progress)
        self.policy.attach(run.ctx)
        return run

    def result(self, run: Run, wall_seconds: float) -> Any:
        """The SimResult of a run that has ended (`Run.advance` returned False)."""
        from schedlab.sim.results import build_result

        now = run.instant.t
        end = now if run.until is None else max(now, run.until)
        return build_result(self, run, end, wall_seconds)

    def run(self, until: float | None = None,
            progress: Callable[[float, int, int], None] | None = None) -> Any:
        """Simulate until every job is final (or `until` seconds); return a SimResult.

        `progress(now, jobs_final, jobs_total)` is called after each scheduling pass.
        """
        wall0 = _time.perf_counter()
        with quiet_collector():
            if self.processes:  # the loop runs on SimPy's schedule beside them
                run = self.start(until, progress)
                gc.freeze()
                run.advance()
            else:
                run = self._prepare(until, progress)
                gc.freeze()  # the set-up's objects (job states, indexes) live for the run
                # driven directly: the loop sets the clock from instant to instant itself
                # (no SimPy timeout, step and resume per instant); it yields only at an Await
                next(run.process(direct=True), None)
            if run.paused is not None:
                raise InvalidDecision(
                    f"policy {self.policy.name!r} yielded Await (it waits for an answer "
                    "from outside the run): drive it with Simulation.start() and "
                    "Run.advance(), as the Gym environment (schedlab.app.rl) does")
            return self.result(run, _time.perf_counter() - wall0)
