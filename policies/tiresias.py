"""Tiresias (NSDI 2019): discretized two-dimensional LAS and Gittins-index scheduling.

Rules, as the Tiresias simulator (SymbioticLab/Tiresias, `dlas-gpu` and
`dlas-gpu-gittins`) applies them:

1. A job's service is its attained GPU time (GPUs x seconds holding them, all attempts)
   since it last entered the top queue. `num_queues` queues (3) split service by
   `thresholds` (3250,7200,18000 GPU-s, as the simulator ships them; with K queues the
   first K-1 apply, so the default splits at 3250 and 7200). A new job enters queue 0.
2. A running job that crosses its queue's threshold is demoted to the next queue at that
   instant and joins its end, behind the jobs already waiting there: in the pass of its
   demotion those waiting jobs come first, and it is preempted at once if they take its
   GPUs (`demoted=behind`, the simulator's append to the lower queue;
   `demoted=running-first` keeps it ahead of them, as a queue's running jobs are). The
   simulator only looks for demotions at its events (arrivals, ends) and at a
   "queue jump" timer it re-arms at each event at (threshold - run seconds) // GPUs,
   which for a job of g > 1 GPUs comes later than the crossing (run seconds are not
   GPU-seconds); it demotes one queue a time. `demotion_timer=simulator` reproduces
   that (its events: arrivals and ends), `crossing` (default) demotes at the crossing.
3. Queues are served in order. Inside a queue running jobs come first (a waiting job
   never preempts a running one of its own queue, except in the pass of a demotion,
   rule 2), then waiting jobs: first-come first-served by the time they entered the
   queue (`tiresias-las`; with `requeue=front` a preempted job waits ahead of the jobs
   already waiting in its queue, as the simulator's queues keep it: each pass moves the
   waiting jobs behind the running ones, so a job running until now is ahead of them),
   or by the Gittins index of their service, highest first
   (`tiresias-gittins`; equal indices by the time they entered the queue, where the
   simulator takes the earliest submission first: it sorts by (index, -submit time)
   descending, the same order for jobs that entered in submission order). The
   simulator re-sorts running and waiting jobs of a queue together at every event for
   Gittins; with the engine's checkpoint and restore costs that made jobs of one queue
   preempt each other at every event (38,623 preemptions on the bundled default trace),
   so both variants keep Tiresias' rule that preemption happens at queue changes
   (`order=waiting`, the default); `order=all` is the simulator's order (running and
   waiting jobs together, highest rank first, then earliest submission).

Whose behaviour each default follows (issue 49). The paper: `num_queues`, `thresholds`
(as the simulator ships them too), `demotion_timer=crossing`, `requeue=entry`,
`order=waiting`, `gittins_index=exact` (P/E at the attained service). The authors'
simulator: `demoted=behind`, `promote_knob=0` (its `dlas-gpu`), `gittins_delta=3250`.
schedlab's choice: `stop=suspend`, `gittins_samples=history` (the simulator reads a fixed
file, `yarn-gput1000.csv`, for every trace). The authors' mode, which reproduces their
simulator job by job (benchmarks/crosscheck/tiresias.py): `demotion_timer=simulator
requeue=front` and, for Gittins, `gittins_samples=<their file> gittins_index=simulator
order=all`. On the 60-job trace and its x10 variants schedlab's defaults give Gittins
mean JCTs 13-30% below the simulator's (its in-queue preemptions, 259 on the x10
trace against 37, cost it); the authors' mode agrees in every start and end.
4. A waiting job that cannot be placed takes the GPUs of running jobs of lower priority
   (lowest first, only as many as the placer needs): preemption happens when queues
   change, paying the engine's checkpoint and restore costs (see `stop`). Jobs that do not
   fit are skipped, not waited for (the simulator's count-based scan does the same).
5. Starvation: with `promote_knob` P > 0, a waiting job outside queue 0 whose waiting
   time since it last ran after a promotion reaches P x its run time since that
   promotion goes back to queue 0 with its service counted from zero (the simulator's
   `solve_starvation`; 0, its default for `dlas-gpu`, disables it). With promotions on,
   a resumed job is demoted only after its queue's service counted from the end of its
   restore pause (`restore_overhead`; the simulator has none): otherwise jobs whose
   pause outlasts their slice (threshold / GPUs) were demoted and stopped for the next
   promoted job before making any progress, and a run never ended.

Preemption uses `stop`: `suspend` (default) checkpoints the job first, as Tiresias does
(its simulator loses no work; see the engine's `checkpoint_on_suspend`), and the job pays
the restore overhead when it resumes; `preempt` loses the work done since the job's last
checkpoint (all of it for jobs without `checkpoint_interval`, as in the Philly traces,
which on the bundled default trace costs LAS ~10,000 GPU-hours and 57% more mean JCT).
With `promote_knob` > 0 and `preempt`, jobs that never checkpoint and thresholds below
their length would livelock (each promotion preempts a job that then loses all its work):
the engine fails such a job after `stop_retries` stops without checkpointed progress.

Gittins index of service a with quantum D (`gittins_delta`, the simulator's 3250):
P(S - a <= D | S > a) / E[min(S - a, D) | S > a] over a sample of job GPU times S: the
GPU times of the jobs completed so far in this run (`gittins_samples=history`, refreshed
each time the sample grows by 10%), or a file of samples. A job past every sample gets 0.
"""

from __future__ import annotations

import csv
import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Final

import numpy as np
from mypy_extensions import mypyc_attr

from schedlab.policies.priority import STOP_PARAM, Ctx, Key, PriorityPolicy
from schedlab.sim.cfuncs import bisect_left, bisect_right, heappop, heappush, insort
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.jobstate import PENDING, RUNNING, JobState
from schedlab.sim.model import MILLI
from schedlab.sim.params import Param, as_choice, as_float, as_int

EPS: Final = 1e-6


def as_thresholds(v: Any) -> tuple[float, ...]:
    """Comma-separated increasing GPU-second thresholds (or a sequence of numbers)."""
    parts = [p for p in str(v).replace(";", ",").split(",") if p.strip()] \
        if isinstance(v, str) else list(v) if isinstance(v, list | tuple) else [v]
    try:
        out = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        raise ValueError("expected comma-separated numbers of GPU-seconds") from None
    if not out or any(x <= 0 or not math.isfinite(x) for x in out):
        raise ValueError("expected positive finite GPU-seconds")
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError("expected strictly increasing thresholds")
    return out


def as_samples(v: Any) -> str:
    """`history` or the path of an existing file of GPU-time samples."""
    t = str(v).strip()
    if t == "history":
        return t
    p = Path(t).expanduser()
    if not p.is_file():
        raise ValueError("expected 'history' or the path of an existing CSV of GPU-seconds")
    return str(p.resolve())


LAS_PARAMS: dict[str, Param] = {
    "num_queues": Param(3, as_int(1), "number of priority queues K"),
    "thresholds": Param(
        (3250.0, 7200.0, 18000.0), as_thresholds,
        "GPU-second service limits of the queues, increasing (the first K-1 apply)",
    ),
    "promote_knob": Param(
        0.0, as_float(0.0),
        "promote a waiting job to queue 0 after waiting this many times its run time since "
        "its last promotion (0: never)",
    ),
    "stop": STOP_PARAM,
    "demoted": Param(
        "behind", as_choice("behind", "running-first"),
        "a job demoted while running: behind (joins the lower queue behind its waiting "
        "jobs and is preempted at once if they take its GPUs, as Tiresias) or "
        "running-first (stays ahead of them, as running jobs of a queue do)",
    ),
    "requeue": Param(
        "entry", as_choice("entry", "front"),
        "where a preempted job waits in its queue: entry (by the time it entered the "
        "queue) or front (ahead of the jobs already waiting there, as in Tiresias' "
        "simulator, whose queues keep running jobs ahead of waiting ones; a resumed "
        "job then runs behind the jobs that ran while it waited)",
    ),
    "demotion_timer": Param(
        "crossing", as_choice("crossing", "simulator"),
        "when a running job is demoted: crossing (the instant its service crosses the "
        "threshold) or simulator (as Tiresias' simulator: at the first scheduling event "
        "after the crossing, one queue a time, with its queue-jump timer at "
        "(threshold - run seconds) // GPUs)",
    ),
}


class _State:
    """Tiresias' per-job bookkeeping (kept while the job is in the system)."""

    __slots__ = ("queue", "entered", "base", "exec_base", "waited", "pend_since", "seg",
                 "run_since")

    def __init__(self, now: float) -> None:
        self.queue = 0
        self.entered = now  # when the job joined its current queue
        self.base = 0.0  # attained GPU-s at the last promotion
        self.exec_base = 0.0  # run time (s) at the last promotion
        self.waited = 0.0  # waiting time since the last promotion, after having run
        self.pend_since: float | None = None  # stopped running at (None: not counting)
        self.seg = 0  # run/wait segment counter, invalidates old timers
        self.run_since = now  # running, unmoved in its queue since (requeue=front)


@mypyc_attr(allow_interpreted_subclasses=True)
class TiresiasLasPolicy(PriorityPolicy):
    """Discretized 2D-LAS: K queues by attained GPU time, FIFO inside, preemptive."""

    name = "tiresias-las"
    description = "Tiresias discretized 2D-LAS: queues by attained GPU-time, preemptive"
    params = LAS_PARAMS
    preemptive = True
    fixed_running_keys = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        k = self.p["num_queues"]
        thr = self.p["thresholds"]
        if len(thr) < k - 1:
            raise InvalidParameter(
                f"parameter thresholds={','.join(f'{x:g}' for x in thr)!r} for policy "
                f"{self.name!r}: {k} queues need at least {k - 1} thresholds"
            )
        self.limits: tuple[float, ...] = tuple(thr[: k - 1])

    def attach(self, ctx: Ctx) -> None:
        """Per-run state: job bookkeeping and the demotion / promotion timers."""
        super().attach(ctx)
        self.st: dict[int, _State] = {}
        self.timers: list[tuple[float, int, int, int]] = []  # (t, kind, idx, seg)
        # every wake-up a timer wants, not yet reached, sorted: a plain list (C bisect and
        # insort; a running job's demotion and, with promotions, a waiting job's timer)
        self.due: list[float] = []
        self.asked: list[float] = []  # the wake-ups asked of the engine, not yet reached
        self.counts = {"demotions": 0, "promotions": 0}
        self.demoted_now: set[int] = set()  # demoted in this pass, behind the waiting jobs
        self.sim_event = False  # demotion_timer=simulator: an arrival or an end since
        self.sim_jump = math.inf  # ... and the simulator's next queue jump
        self.sim_pass = False  # this pass is one of the simulator's events
        self.front = -1.0  # requeue=front: entry "times" ahead of every waiting job
        # parameters read at every pass and start, looked up once
        self.sim_timer: bool = self.p["demotion_timer"] == "simulator"
        self.knob = float(self.p["promote_knob"])
        self.front_requeue: bool = self.p["requeue"] == "front"

    def metrics(self) -> dict[str, float]:
        """Counters of this run: queue demotions and starvation promotions."""
        return dict(self.counts)

    # --- service and queues ---

    def service(self, ctx: PolicyContext, job: JobState) -> float:
        """GPU-seconds attained since the job last entered queue 0."""
        return ctx.attained_service(job) - self.st[job.idx].base

    def _queue_for(self, service: float) -> int:
        return bisect_right(self.limits, service + EPS * max(1.0, service))

    def pending_key(self, ctx: Ctx, job: JobState) -> Key:
        """(queue, 1, entry time): behind the running jobs of the same queue."""
        s = self.st[job.idx]
        return (s.queue, 1, s.entered)

    def running_key(self, ctx: Ctx, job: JobState) -> Key:
        """(queue, 0, entry time); (queue, 1, entry time) in the pass of its demotion.

        With `requeue=front`, (queue, 0 or 1, running since, entry): the simulator's
        queue keeps its running jobs in the order they stopped moving (each pass moves
        the waiting jobs behind the running ones), so a job that resumed runs behind
        every job that was running while it waited.
        """
        s = self.st[job.idx]
        if self.front_requeue:
            return (s.queue, 1 if job.idx in self.demoted_now else 0, s.run_since, s.entered)
        return (s.queue, 1 if job.idx in self.demoted_now else 0, s.entered)

    def after_walk(self, ctx: Ctx) -> None:
        """A demoted job that kept its GPUs is ahead of the waiting jobs from now on."""
        if self.sim_timer and self.sim_pass:
            self._simulator_jump(ctx)
        if self.demoted_now:
            done = sorted(self.demoted_now)
            self.demoted_now.clear()
            for idx in done:
                job = ctx.job_at(idx)
                if job.status == RUNNING and idx in self.st:
                    self.rekey_running(ctx, job)
        self._wake(ctx)

    # --- status changes ---

    def on_status(self, ctx: Ctx, job: JobState, old: str | None) -> None:
        """Create, update or drop the job's bookkeeping; arm its timers."""
        now = ctx.now
        s = self.st.get(job.idx)
        new = job.status
        if old is None or new not in (PENDING, RUNNING, "retrying"):
            self.sim_event = True  # the simulator's events: arrivals and ends
        if s is None:
            if new not in (PENDING, RUNNING):
                return
            s = self.st[job.idx] = _State(now)
        if new == RUNNING:
            s.seg += 1
            s.run_since = now
            if s.pend_since is not None:
                s.waited += now - s.pend_since
                s.pend_since = None
            self._arm_demotion(ctx, job, s)
        elif old == RUNNING:  # preempted, failed (retrying) or ended
            s.seg += 1
            s.pend_since = now
            if (new == PENDING and self.p["requeue"] == "front"
                    and job.idx not in self.demoted_now):
                # ahead of its queue's waiting jobs; victims are stopped lowest first,
                # so each later one (higher in the queue) goes ahead of the earlier ones
                s.entered = self.front
                self.front -= 1.0
            if new == PENDING:
                self._arm_promotion(ctx, job, s)
        elif new == PENDING and s.pend_since is not None:  # back after a retry delay
            s.seg += 1
            self._arm_promotion(ctx, job, s)
        if new not in (PENDING, RUNNING) and new != "retrying":
            del self.st[job.idx]

    def _arm_demotion(self, ctx: PolicyContext, job: JobState, s: _State) -> None:
        if s.queue >= len(self.limits) or self.sim_timer:
            return
        rate = len(job.gpus) * job.milli / MILLI
        if rate <= 0:
            return
        left = self.limits[s.queue] - self.service(ctx, job)
        start = ctx.now
        if self.knob > 0:
            # a resumed job gets its queue's service after its restore pause: with
            # promotions, a job whose pause outlasts its slice would otherwise be demoted
            # (and stopped for the next promoted job) before any progress, for ever
            start = max(start, job.seg_start)
        t = start + max(0.0, left) / rate
        heappush(self.timers, (t, 0, job.idx, s.seg))
        insort(self.due, max(t, ctx.now))

    def _arm_promotion(self, ctx: PolicyContext, job: JobState, s: _State) -> None:
        knob = self.knob
        if knob <= 0 or s.queue == 0 or s.pend_since is None:
            return
        executed = ctx.run_time(job) - s.exec_base
        if executed <= 0:
            return
        t = s.pend_since + knob * executed - s.waited
        t = max(t, ctx.now)
        heappush(self.timers, (t, 1, job.idx, s.seg))
        insort(self.due, t)

    # --- the simulator's demotion timing (demotion_timer=simulator) ---

    def _demote(self, ctx: PolicyContext, job: JobState, s: _State, q: int) -> None:
        s.queue = q
        s.entered = ctx.now
        s.run_since = ctx.now
        self.counts["demotions"] += 1
        if self.p["demoted"] == "behind":
            self.demoted_now.add(job.idx)
        self.rekey_running(ctx, job)

    def _simulator_demotions(self, ctx: PolicyContext) -> None:
        """At every pass, each running job past its queue's threshold drops one queue."""
        last = len(self.limits)
        for idx in sorted(ctx.running()):
            s = self.st.get(idx)
            if s is None or s.queue >= last:
                continue
            job = ctx.job_at(idx)
            if self.service(ctx, job) >= self.limits[s.queue] - EPS:
                self._demote(ctx, job, s, s.queue + 1)

    def _simulator_jump(self, ctx: PolicyContext) -> None:
        """Wake at the simulator's next queue jump: now + (threshold - run s) // GPUs."""
        now = ctx.now
        best = math.inf
        for idx, job in ctx.running().items():
            s = self.st.get(idx)
            if s is None or s.queue >= len(self.limits) or not job.gpus:
                continue
            executed = ctx.run_time(job) - s.exec_base
            # the simulator's ceil of a Python 2 integer division: the quotient's floor
            t = now + math.floor((self.limits[s.queue] - executed) / len(job.gpus) + EPS)
            best = min(best, t)
        self.sim_jump = best  # replaces the previous one, as in the simulator
        if now < best < math.inf:
            insort(self.due, best)

    # --- timers ---

    def _settled(self, ctx: PolicyContext) -> bool:
        """Whether a pass now, with nothing new, would change nothing but due timers.

        Its walk would be skipped as idle (or has no GPU job to start), no CPU-only job
        waits, no simulator event is pending, and jobs run (else the engine counts the
        pass towards giving up on the run).
        """
        return (not self.cpu_only and not self.sim_event and bool(ctx.running())
                and (not self.class_count
                     or self._idle == (ctx.cluster.version, self._ver)))

    def _wake(self, ctx: PolicyContext) -> None:
        """Ask the engine for the next pass that can change something (at a pass's end).

        `due` holds every wake-up the timers want (as each would have asked the engine
        for its own): after a pass that leaves more to do, the next one is the earliest.
        Once settled, those passes do nothing until the first that reaches a live timer
        (of a job still in the run segment it was armed for: a segment never comes
        back; dead heads are dropped) or the simulator's queue jump, within EPS; the
        rest are not asked for. An engine wake-up cannot be cancelled: each one asked
        still comes, and a pass there looks again.
        """
        due = self.due
        if not due:
            return
        now = ctx.now
        target = due[0]
        if self._settled(ctx):
            timers, st = self.timers, self.st
            while timers:
                s = st.get(timers[0][2])
                if s is not None and s.seg == timers[0][3]:
                    break
                heappop(timers)
            live = timers[0][0] if timers else math.inf
            if self.sim_jump + EPS >= now:
                live = min(live, self.sim_jump)
            if live == math.inf:
                return
            i = bisect_left(due, live - EPS)
            if i == len(due):
                return
            target = due[i]
        target = max(target, now)
        asked = self.asked
        if asked and asked[0] <= target:
            return  # that pass comes first and looks again
        heappush(asked, target)
        ctx.wake_at(target)

    def before_walk(self, ctx: Ctx) -> None:
        """Apply due demotions (running jobs) and promotions (waiting jobs)."""
        now = ctx.now
        asked = self.asked
        while asked and asked[0] <= now:  # reached: this pass or an earlier one
            heappop(asked)
        due = self.due
        if due and due[0] <= now:
            del due[:bisect_right(due, now)]
        timers = self.timers
        while timers and timers[0][0] <= now + EPS:
            _, kind, idx, seg = heappop(timers)
            s = self.st.get(idx)
            if s is None or s.seg != seg:
                continue
            job = ctx.job_at(idx)
            if kind == 0 and job.status == RUNNING:
                q = self._queue_for(self.service(ctx, job))
                if q > s.queue:
                    self._demote(ctx, job, s, q)
                self._arm_demotion(ctx, job, s)
            elif kind == 1 and job.status == PENDING and s.pend_since is not None:
                self.counts["promotions"] += 1
                s.queue = 0
                s.entered = now
                s.base = ctx.attained_service(job)
                s.exec_base = ctx.run_time(job)
                s.waited = 0.0
                s.pend_since = None
                self.rekey(ctx, job)
        if self.sim_timer:
            # only at the simulator's events: other passes (stale wake-ups) do nothing
            self.sim_pass = self.sim_event or abs(now - self.sim_jump) <= EPS
            if self.sim_pass:
                self._simulator_demotions(ctx)
            self.sim_event = False


def read_samples(path: str) -> np.ndarray:
    """GPU-second samples from a CSV: column `gpu_time` or `duration`, else the first."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise InvalidParameter(f"gittins_samples {path}: empty file; expected GPU-seconds")
    head = [c.strip().lower() for c in rows[0]]
    col, start = 0, 0
    try:
        float(head[0])
    except (ValueError, IndexError):
        start = 1
        for name in ("gpu_time", "duration"):
            if name in head:
                col = head.index(name)
                break
    out = []
    for line, row in enumerate(rows[start:], start=start + 1):
        if not row or not "".join(row).strip():
            continue
        try:
            x = float(row[col])
        except (ValueError, IndexError):
            raise InvalidParameter(
                f"gittins_samples {path}, line {line}: {row!r} has no number in column "
                f"{col + 1}; expected GPU-seconds > 0"
            ) from None
        if not x > 0:
            raise InvalidParameter(
                f"gittins_samples {path}, line {line}: {x:g}; expected GPU-seconds > 0")
        out.append(x)
    if not out:
        raise InvalidParameter(f"gittins_samples {path}: no samples; expected GPU-seconds")
    return np.sort(np.asarray(out, dtype=float))


@mypyc_attr(allow_interpreted_subclasses=True)
class GittinsIndex:
    """Gittins index of attained service over an empirical sample of job sizes."""

    def __init__(self, samples: np.ndarray, delta: float) -> None:
        self.s = np.sort(np.asarray(samples, dtype=float))
        self.cum = np.concatenate(([0.0], np.cumsum(self.s)))
        self.delta = delta
        # the sorted sizes as a list: one index costs two C bisects, not two numpy calls
        # on a scalar (the same positions: `searchsorted(side="right")` is `bisect_right`)
        self._sorted: list[float] = self.s.tolist()

    def __call__(self, a: float) -> float:
        """P(S - a <= D | S > a) / E[min(S - a, D) | S > a]; 0 past the largest sample."""
        s, n = self._sorted, len(self._sorted)
        i = bisect_right(s, a)
        alive = n - i
        if alive <= 0:
            return 0.0
        j = bisect_right(s, a + self.delta)
        done = j - i
        e = (self.cum[j] - self.cum[i] - done * a + self.delta * (n - j)) / alive
        return (done / alive) / e if e > 0 else 0.0


def _round2(x: float, places: int) -> float:
    """Python 2's `round`: the exact value, halves away from zero (Python 3: to even)."""
    q = Decimal(x).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return float(q)


@mypyc_attr(allow_interpreted_subclasses=True)
class SimulatorGittinsTable:
    """Tiresias' simulator's Gittins rank table (`parse_job_dist`, `get_gittins_index`).

    The authors' code, as it runs (SymbioticLab/Tiresias @959f9b0, `run_sim.py`): for
    each sorted sample v the rank is computed once at v - 1 by `cal_r_gittins_index`,
    whose expectation sums the samples themselves (not S - a) with Python 2's integer
    division, counts the last sample as alive when a + D passes it, and rounds P to 5
    places, E likewise and P x 1e6 / E to 4; a service a then takes the rank of the first
    sample above it (0 past the second largest). A step function, not P/E at a.
    """

    def __init__(self, samples: np.ndarray, delta: float) -> None:
        data = [int(x) for x in np.sort(np.asarray(samples, dtype=float))]
        self.data = data
        self.delta = int(delta)
        self.ranks = [self._rank(v - 1) for v in data]

    def _rank(self, a: int) -> float:
        data, n, d = self.data, len(self.data), self.delta
        if a > data[-1] - 1:
            return 0.0
        i = bisect_right(data, a)
        j = n - 1 if a + d > data[-1] - 1 else bisect_right(data, a + d)
        p = _round2((j - i) / (n - i), 5)
        e = float((sum(data[i:j]) + d * (n - j)) // (n - i))
        return _round2(p * 1000000 / e, 4) if e > 0 else 0.0

    def __call__(self, a: float) -> float:
        """The rank of attained service `a` (GPU-s, cut to an integer as the simulator)."""
        k = int(a + EPS)
        if len(self.data) < 2 or k > self.data[-2]:
            return 0.0
        return self.ranks[bisect_right(self.data, k)]


@mypyc_attr(allow_interpreted_subclasses=True)
class TiresiasGittinsPolicy(TiresiasLasPolicy):
    """Discretized 2D-Gittins: Tiresias' queues, each ordered by the Gittins index."""

    name = "tiresias-gittins"
    description = "Tiresias 2D-Gittins: LAS queues ordered by Gittins index of GPU-time"
    params = {
        **LAS_PARAMS,
        "gittins_delta": Param(3250.0, as_float(0.0, lo_open=True),
                               "service quantum D of the Gittins index (GPU-s)"),
        "gittins_samples": Param(
            "history", as_samples,
            "job GPU-time distribution: history (jobs completed so far in the run) or a "
            "CSV file of GPU-seconds (column gpu_time or duration)",
        ),
        "gittins_index": Param(
            "exact", as_choice("exact", "simulator"),
            "exact (P/E at the attained service, schedlab's and the paper's formula) or "
            "simulator (Tiresias' simulator's rank table: a step function of the samples "
            "with its rounding and integer division; use with its sample file)",
        ),
        "order": Param(
            "waiting", as_choice("waiting", "all"),
            "waiting (a queue's running jobs stay ahead; its waiting jobs by index: "
            "preemption only at queue changes) or all (running and waiting jobs of a "
            "queue sorted together by index, then submission time, re-ranked at each "
            "pass, so a waiting job of higher index preempts: Tiresias' simulator)",
        ),
    }

    def attach(self, ctx: Ctx) -> None:
        """Load the sample file, or start an empty history."""
        super().attach(ctx)
        self.history: list[float] = []
        self.built_at = 0
        src = self.p["gittins_samples"]
        self.index: GittinsIndex | SimulatorGittinsTable | None = None
        self.all_order: bool = self.p["order"] == "all"
        if src != "history":
            self.index = self._make_index(read_samples(src))

    def _make_index(self, samples: np.ndarray) -> GittinsIndex | SimulatorGittinsTable:
        if self.p["gittins_index"] == "simulator":
            return SimulatorGittinsTable(samples, self.p["gittins_delta"])
        return GittinsIndex(samples, self.p["gittins_delta"])

    def gittins(self, service: float) -> float:
        """The index of a service level (0 while no sample exists: FIFO order)."""
        return 0.0 if self.index is None else self.index(service)

    def pending_key(self, ctx: Ctx, job: JobState) -> Key:
        """(queue, 1, -index, entry time): highest index first, behind running jobs.

        With `order=all`: (queue, -index, submit time, 1), on one scale with the
        running jobs' (queue, -index, submit time, 0).
        """
        s = self.st[job.idx]
        if self.all_order:
            return (s.queue, -self.gittins(self.service(ctx, job)), job.spec.submit_time, 1)
        return (s.queue, 1, -self.gittins(self.service(ctx, job)), s.entered)

    def running_key(self, ctx: Ctx, job: JobState) -> Key:
        """With `order=all` the index now, as a waiting job's; else LAS' running key."""
        if self.all_order:
            s = self.st[job.idx]
            return (s.queue, -self.gittins(self.service(ctx, job)), job.spec.submit_time, 0)
        return super().running_key(ctx, job)

    def on_status(self, ctx: Ctx, job: JobState, old: str | None) -> None:
        """Record the GPU time of completed jobs in the history."""
        if job.status == "completed" and self.p["gittins_samples"] == "history" \
                and job.gpu_seconds > 0:
            self.history.append(job.gpu_seconds)
        super().on_status(ctx, job, old)

    def before_walk(self, ctx: Ctx) -> None:
        """Refresh the index when the history grew by 10%, then the LAS timers."""
        if self.p["gittins_samples"] == "history" and self.history \
                and len(self.history) >= max(self.built_at + 1, 1.1 * self.built_at):
            self.built_at = len(self.history)
            self.index = self._make_index(np.asarray(self.history))
            for _, idx in self.queued():
                self.rekey(ctx, ctx.job_at(idx))
        super().before_walk(ctx)
        if self.all_order and (not self.sim_timer or self.sim_pass):
            # the simulator re-ranks its running jobs at each of its events
            for idx in sorted(ctx.running()):
                if idx in self.st:
                    self.rekey_running(ctx, ctx.job_at(idx))
