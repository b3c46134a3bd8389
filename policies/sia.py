"""Sia (SOSP'23): heterogeneity-aware, goodput-optimised allocation by an integer program.

Every `round` seconds (Sia's 60) each job that names a model gets at most one
configuration (GPU type, nodes, GPUs), chosen jointly by a MILP (scipy's HiGHS):

- Configurations per type: 1, 2, 4, ... GPUs on one node up to a node's GPUs, then whole
  nodes (2, 3, ... nodes) up to 64 GPUs and the type's node count (Sia's CONFIGS_4GPU /
  CONFIGS_8GPU, generalised to any GPUs per node).
- A job's value of a configuration is its goodput there (`ctx.perf.goodput`: the batch
  size re-tuned for an adaptive job), normalised so that its smallest goodput over the
  types it has run on is 1. A type it has not run on yet offers only one GPU, valued 1
  (Sia learns a type's throughput by running there), and on a type it has run on it may
  take up to twice the most GPUs it has held there (Sia's `max_replicas`), at most
  `max_gpus`, 64, and the model's largest batch over its smallest per-GPU batch when the
  backend says so. A rigid job (not elastic, or a model Sia treats as rigid: `ncf`) has
  one configuration per type, its `num_gpus`, valued by throughput normalised so the
  slowest type is worth `num_gpus`.
- Restart penalty: every configuration but the job's current one is scaled by
  max(age - restarts x penalty, 0) / (age + penalty) (Pollux's re-allocation factor; 1
  while the job is younger than its penalty).
- Objective: minimise sum_jc x_jc A_jc + lambda_n (jobs - sum_jc x_jc) for p < 0
  (maximise for p > 0), A = value ** p rounded to 2 decimals and clipped at 3000,
  invalid configurations 1e-4 before the power; one configuration per job; per type, the
  GPUs of the chosen configurations fit the type's GPUs. A job still in its restart
  pause (its model's restart cost since its last change) keeps its configuration.
Decisions: jobs with no configuration are suspended, jobs whose configuration changed
are resized (count or type changed) or started on concrete GPUs: multi-node
configurations on whole free nodes, single-node ones best-fit, largest first, keeping a
job's own GPUs where they fit. Jobs that name no model (Sia has none) start in arrival
order on the GPUs left free, as `fifo` (schedlab's choice).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.policies.base import Policy
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision, Migrate, Resize, Start, Suspend, Unschedulable
from schedlab.sim.params import Param, as_float

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext

ZERO_ALLOC_GAIN = 1e-4
"""Value of a configuration a job cannot use (Sia's code)."""
MAX_CONFIG_GPUS = 64
"""Largest configuration (Sia's code: 64 GPUs)."""
RESTART_PENALTY = {"deepspeech": 25.0, "imagenet": 250.0, "cifar": 30.0, "bert": 120.0,
                   "yolov3": 45.0}
"""Sia's measured restart penalties by model name (its `get_restart_penalty`)."""
RIGID_MODELS = ("ncf",)
"""Models Sia's simulator treats as rigid on one GPU."""


@dataclass(frozen=True, slots=True)
class Config:
    """One allocation choice: `gpus` GPUs of `gpu_type` on `nodes` nodes."""

    gpu_type: str
    nodes: int
    gpus: int


def configs_for(gpu_type: str, per_node: int, num_nodes: int) -> list[Config]:
    """Sia's configurations of one type: powers of two within a node, then whole nodes."""
    out = []
    k = 1
    while k < per_node:
        out.append(Config(gpu_type, 1, k))
        k *= 2
    for n in range(1, num_nodes + 1):
        if n * per_node > MAX_CONFIG_GPUS:
            break
        out.append(Config(gpu_type, n, n * per_node))
    return out


def solve(values: np.ndarray, gpus: np.ndarray, types: np.ndarray, capacity: np.ndarray,
          p: float, lambda_n: float, fixed: dict[int, int] | None = None) -> np.ndarray:
    """Sia's integer program: the chosen configuration per job (-1: none).

    Args:
        values: Jobs x configurations, each job's normalised goodput (ZERO_ALLOC_GAIN:
            cannot use it).
        gpus: GPUs of each configuration.
        types: Type index of each configuration.
        capacity: GPUs of each type.
        p: Fairness power (< 0: minimise, > 0: maximise).
        lambda_n: Penalty per job left without a configuration.
        fixed: Job -> configuration it must keep.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix, vstack

    nj, nc = values.shape
    if nj == 0 or nc == 0:
        return np.full(nj, -1)
    a = np.round(np.power(np.maximum(values, ZERO_ALLOC_GAIN), p), 2)
    a = np.minimum(a, 3000.0)
    c = (a - lambda_n).reshape(-1)  # + lambda_n * jobs, a constant
    if p > 0:
        c = -c
    rows = np.repeat(np.arange(nj), nc)
    one = coo_matrix((np.ones(nj * nc), (rows, np.arange(nj * nc))), shape=(nj, nj * nc))
    cap = coo_matrix((np.tile(gpus, nj).astype(float), (np.tile(types, nj),
                                                         np.arange(nj * nc))),
                     shape=(len(capacity), nj * nc))
    lo = np.zeros(nj * nc)
    for j, k in (fixed or {}).items():
        lo[j * nc + k] = 1.0
    cons = LinearConstraint(vstack([one, cap]).tocsr(), -np.inf,
                            np.concatenate([np.ones(nj), capacity.astype(float)]))
    res = milp(c, constraints=cons, integrality=np.ones(nj * nc),
               bounds=Bounds(lo, np.ones(nj * nc)),
               options={"mip_rel_gap": 1e-4})
    if res.x is None:
        if fixed:  # the kept allocations do not fit (a node failed): drop them
            return solve(values, gpus, types, capacity, p, lambda_n)
        return np.full(nj, -1)
    x = np.round(res.x).reshape(nj, nc)
    return np.where(x.sum(axis=1) > 0.5, x.argmax(axis=1), -1)


class SiaPolicy(Policy):
    """Sia's goodput-normalised configuration MILP, every round."""

    name = "sia"
    orders = False
    description = "Sia (SOSP'23): per-round MILP over (GPU type, nodes, GPUs) by goodput"
    params = {
        "round": Param(60.0, as_float(1.0), "seconds between re-allocations (Sia: 60)"),
        "p": Param(-0.5, as_float(), "fairness power of normalised goodput (Sia: -0.5)"),
        "lambda_n": Param(1.1, as_float(), "objective penalty per unallocated job (Sia: 1.1)"),
        "restart_penalty": Param(30.0, as_float(0.0),
                                 "restart seconds of a model Sia has no measurement of"),
    }

    def attach(self, ctx: PolicyContext) -> None:
        """Per-run state: configurations per type, what each job ran on."""
        if self.p["p"] == 0:
            raise ValueError("sia: p must not be 0")
        topo = ctx.topology
        self.round = float(self.p["round"])
        self.next_round = 0.0
        self.last_round = -1.0
        self.node_gpus: dict[int, list[int]] = {}
        for g, n in enumerate(topo.gpu_node):
            self.node_gpus.setdefault(n, []).append(g)
        per: dict[str, list[int]] = {}
        for n in sorted(self.node_gpus):
            per.setdefault(topo.nodes[n].gpu_type, []).append(n)
        self.type_nodes = per
        self.types = sorted(per)
        self.configs: list[Config] = []
        for t in self.types:
            size = max(len(self.node_gpus[n]) for n in per[t])
            self.configs += configs_for(t, size, len(per[t]))
        self.cfg_gpus = np.array([c.gpus for c in self.configs])
        self.cfg_type = np.array([self.types.index(c.gpu_type) for c in self.configs])
        self.current: dict[int, int] = {}  # job idx -> configuration index
        self.seen: dict[int, dict[str, int]] = {}  # job idx -> type -> most GPUs held
        self.restarts: dict[int, int] = {}
        self.changed_at: dict[int, float] = {}
        self.solves = 0

    def metrics(self) -> dict[str, Any]:
        """MILPs solved."""
        return {"milp_solves": self.solves}

    def _penalty(self, job: JobState) -> float:
        model = job.spec.model
        for key, v in RESTART_PENALTY.items():
            if key in model:
                return v
        return float(self.p["restart_penalty"])

    def _rigid(self, job: JobState) -> bool:
        s = job.spec
        return (s.min_gpus is None and s.max_gpus is None) or s.model in RIGID_MODELS

    def schedule(self, ctx: PolicyContext) -> Iterator[Decision]:
        """At round boundaries: solve, then suspend, resize and start."""
        yield from self._round(ctx)
        yield from self._plain(ctx)

    def _plain(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Jobs naming no model: arrival order into GPUs left free (as `fifo`)."""
        perf = ctx.perf
        for job in list(ctx.pending()):
            if perf is not None and perf.knows(job):
                continue
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                return
            yield Start(job.job_id, got)

    def _round(self, ctx: PolicyContext) -> Iterator[Decision]:
        """At a round boundary, Sia's allocation of the jobs naming a model."""
        now = ctx.now
        r = now / self.round
        if abs(r - round(r)) > 1e-9:  # between rounds: wait for the next one
            if self.current or (ctx.perf is not None and ctx.pending_count):
                ctx.wake_at(math.ceil(r) * self.round)
            return
        if now == self.last_round:
            return
        self.last_round = now
        self.next_round = (round(r) + 1) * self.round
        perf = ctx.perf
        jobs = [j for j in list(ctx.running().values()) + list(ctx.pending())
                if perf is not None and perf.knows(j)]
        if jobs:
            ctx.wake_at(self.next_round)
        if not jobs:
            return
        jobs.sort(key=lambda j: j.idx)
        values = np.array([self._row(ctx, j) for j in jobs])
        # capacity: GPUs on nodes that are up, less those of jobs this policy leaves alone
        ours = {j.idx for j in jobs}
        cluster = ctx.cluster
        cap = np.zeros(len(self.types))
        blocked: set[int] = set()
        holders = cluster.gpu_holders
        for t_i, t in enumerate(self.types):
            for n in self.type_nodes[t]:
                if not cluster.node_up[n]:
                    blocked.update(self.node_gpus[n])
                    continue
                for g in self.node_gpus[n]:
                    if any(h not in ours for h in holders[g]):
                        blocked.add(g)
                    else:
                        cap[t_i] += 1
        fixed = {i: self.current[j.idx] for i, j in enumerate(jobs)
                 if j.idx in self.current and j.gpus
                 and now - self.changed_at.get(j.idx, -math.inf) < _restart_cost(perf, j)}
        choice = solve(values, self.cfg_gpus, self.cfg_type, cap, float(self.p["p"]),
                       float(self.p["lambda_n"]), fixed)
        self.solves += 1
        yield from self._apply(ctx, jobs, choice, blocked)

    def _row(self, ctx: PolicyContext, job: JobState) -> np.ndarray:
        """The job's normalised goodput per configuration, restart penalty applied."""
        perf = ctx.perf
        s = job.spec
        row = np.full(len(self.configs), ZERO_ALLOC_GAIN)
        seen = self.seen.get(job.idx, {})
        rigid = self._rigid(job)
        lo, hi = (s.min_gpus or 1), (s.max_gpus or s.num_gpus)
        if not s.adaptive:
            hi = min(hi, s.num_gpus)
        cap = _batch_cap(perf, job)
        raw: dict[int, float] = {}
        explore: list[int] = []
        for k, c in enumerate(self.configs):
            if s.gpu_type and c.gpu_type != s.gpu_type:
                continue
            if rigid:
                want = 1 if s.model in RIGID_MODELS else s.num_gpus
                if c.gpus == want:
                    raw[k] = perf.goodput(job, c.gpus, c.nodes, c.gpu_type)
                continue
            if c.gpu_type not in seen:
                if c.gpus == 1:
                    explore.append(k)
                continue
            top = min(hi, max(2 * seen[c.gpu_type], 1), MAX_CONFIG_GPUS, cap)
            if lo <= c.gpus <= top:
                raw[k] = perf.goodput(job, c.gpus, c.nodes, c.gpu_type)
        good = [v for v in raw.values() if v > 0]
        if rigid:
            base = min(good) if good else 1.0
            for k, v in raw.items():
                if v > 0:
                    row[k] = v / base * max(1, s.num_gpus if s.model not in RIGID_MODELS
                                            else 1)
        else:
            base = min(good) if good else 1.0
            for k, v in raw.items():
                row[k] = max(v / base, ZERO_ALLOC_GAIN)
            for k in explore:
                row[k] = 1.0
        row[row <= ZERO_ALLOC_GAIN] = ZERO_ALLOC_GAIN
        prev = self.current.get(job.idx)
        if prev is not None:
            pen = self._penalty(job)
            age = ctx.now - s.submit_time
            f = 1.0 if age < pen else max(
                age - self.restarts.get(job.idx, 0) * pen, 0.0) / (age + pen)
            keep = row[prev]
            row *= f
            row[prev] = keep
            row[row <= ZERO_ALLOC_GAIN] = ZERO_ALLOC_GAIN
        return row

    def _apply(self, ctx: PolicyContext, jobs: list[JobState], choice: np.ndarray,
               blocked: set[int]) -> Iterator[Decision]:
        """Suspend, then move, then start, on concrete GPUs."""
        used: set[int] = set(blocked)
        keep: list[tuple[JobState, int]] = []
        change: list[tuple[JobState, int]] = []
        for j, k in zip(jobs, choice, strict=True):
            k = int(k)
            if k < 0:
                if j.gpus:
                    yield Suspend(j.job_id, "sia: no configuration this round")
                self.current.pop(j.idx, None)
            elif self.current.get(j.idx) == k and j.gpus:
                keep.append((j, k))
                used.update(j.gpus)
            else:
                change.append((j, k))
        change.sort(key=lambda jk: (-self.configs[jk[1]].gpus, jk[0].idx))
        placed: list[tuple[JobState, int, tuple[int, ...]]] = []
        for j, k in change:
            gpus = self._place(self.configs[k], used, set(j.gpus))
            if gpus is None:
                if j.gpus:
                    yield Suspend(j.job_id, "sia: configuration could not be placed")
                self.current.pop(j.idx, None)
                continue
            used.update(gpus)
            placed.append((j, k, gpus))
        # running jobs that move free their GPUs first: suspend those whose target
        # overlaps GPUs another moving job still holds, then start them
        moving = [x for x in placed if x[0].gpus]
        fresh = [x for x in placed if not x[0].gpus]
        held = {g for j, _, _ in moving for g in j.gpus}
        later: list[tuple[JobState, int, tuple[int, ...]]] = []
        for j, k, gpus in moving:
            own = set(j.gpus)
            held -= own
            if set(gpus) & held:
                yield Suspend(j.job_id, "sia: re-allocating")
                later.append((j, k, gpus))
                continue
            c = self.configs[k]
            if len(gpus) == len(j.gpus):
                yield Migrate(j.job_id, gpus)
            else:
                yield Resize(j.job_id, gpus)
            self._record(ctx, j, k, c)
        for j, k, gpus in fresh + later:
            yield Start(j.job_id, gpus)
            self._record(ctx, j, k, self.configs[k])

    def _record(self, ctx: PolicyContext, job: JobState, k: int, c: Config) -> None:
        if job.idx in self.current or job.idx in self.changed_at:
            self.restarts[job.idx] = self.restarts.get(job.idx, 0) + 1
        self.current[job.idx] = k
        self.changed_at[job.idx] = ctx.now
        seen = self.seen.setdefault(job.idx, {})
        seen[c.gpu_type] = max(seen.get(c.gpu_type, 0), c.gpus)

    def _place(self, c: Config, used: set[int], own: set[int]) -> tuple[int, ...] | None:
        """Concrete GPUs for a configuration: whole nodes, or the best-fitting node."""
        nodes = self.type_nodes[c.gpu_type]
        free = {n: [g for g in self.node_gpus[n] if g not in used] for n in nodes}
        if c.nodes > 1 or c.gpus >= max(len(self.node_gpus[n]) for n in nodes):
            whole = [n for n in nodes if len(free[n]) == len(self.node_gpus[n])
                     and len(free[n]) * c.nodes >= c.gpus]
            whole.sort(key=lambda n: (-len(own & set(free[n])), n))
            if len(whole) < c.nodes:
                return None
            out = [g for n in whole[:c.nodes] for g in free[n]]
            return tuple(sorted(out[:c.gpus]))
        fits = [n for n in nodes if len(free[n]) >= c.gpus]
        if not fits:
            return None
        n = min(fits, key=lambda n: (-len(own & set(free[n])), len(free[n]), n))
        mine = [g for g in free[n] if g in own]
        rest = [g for g in free[n] if g not in own]
        return tuple(sorted((mine + rest)[:c.gpus]))


def _batch_cap(perf: Any, job: JobState) -> int:
    """Largest GPU count the model's batch range allows (max batch / min per-GPU batch)."""
    jm = perf.job_model(job)
    b = getattr(jm, "backend", None)
    if jm is None or b is None or not hasattr(b, "max_batch") or not hasattr(b, "min_local"):
        return MAX_CONFIG_GPUS
    t = job.spec.gpu_type or jm.ref_type
    return max(1, int(b.max_batch(jm.model) // max(1, b.min_local(jm.model, t))))


def _restart_cost(perf: Any, job: JobState) -> float:
    """Seconds the engine pauses the job at a (re)start: its model's, else 30 (Sia's)."""
    cost = perf.restart_cost(job)
    return 30.0 if cost is None else float(cost)
