"""Optimus (EuroSys'18) as Pollux's simulator runs it (Optimus+Oracle): greedy marginal gain.

Every `interval` s each active job gets its minimum GPUs (1 for an elastic job, in
arrival order, while GPUs last); the rest go one at a time to the job whose remaining
time drops the most with one more GPU: remaining work x (1/goodput(k) - 1/goodput(k+1)),
goodput from the run's performance model at the job's batch size (`ctx.perf`; a job
without a model scales linearly over its `num_gpus`). Placement keeps every job whose
count did not change where it is; the others, fewest GPUs first, take GPUs from the node
with the most free ones. A job whose allocation changes is checkpointed and restarts on
its new GPUs (its model's restart cost). Defaults and rules follow Pollux's simulator
(`simulator/optimus.py`, OSDI'21 artifact): the 60 s interval, the first round at 60 s,
min 1 GPU, the oracle's step times; the original Optimus fits its speed curve online.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from schedlab.policies.allocation import (
    RoundClock,
    all_rigid,
    apply_allocation,
    held_nodes,
    node_fill,
    start_cpu_only,
)
from schedlab.policies.base import Ctx, Policy
from schedlab.policies.elastic import bounds
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision
from schedlab.sim.params import Param, as_float

__all__ = ["OptimusPolicy", "marginal_gain"]


def goodput_of(ctx: Ctx, job: JobState, k: int) -> float:
    """Work per second on k GPUs: the model's, else linear in k/num_gpus (ideal s)."""
    if k <= 0:
        return 0.0
    perf = ctx.perf
    if perf is not None and perf.knows(job):
        return float(perf.goodput(job, k))
    return k / max(1, job.spec.num_gpus)


def most_gpus(ctx: Ctx, job: JobState) -> int:
    """The job's `max_gpus` (else `num_gpus`), and its model's limit at its batch size."""
    hi = bounds(job)[1]
    perf = ctx.perf
    cap = perf.max_gpus(job) if perf is not None and perf.knows(job) else None
    return hi if cap is None else min(hi, int(cap))


def remaining_units(ctx: Ctx, job: JobState) -> float:
    """Work left in the unit `goodput_of` counts."""
    left = max(0.0, job.spec.duration - ctx.progress(job))
    perf = ctx.perf
    if perf is not None and perf.knows(job):
        return left * float(perf.reference(job))
    return left


def marginal_gain(remaining: float, g_k: float, g_next: float) -> float:
    """Seconds of remaining time saved by going from goodput g_k to g_next."""
    if g_k <= 0 or g_next <= 0:
        return 0.0
    return remaining * (1.0 / g_k - 1.0 / g_next)


class OptimusPolicy(Policy):
    """Greedy marginal-gain GPU allocation every interval (Optimus+Oracle)."""

    name = "optimus"
    description = ("Optimus as in Pollux's simulator: every interval, GPUs one at a time to "
                   "the job whose remaining time drops most (performance-model oracle)")
    params = {
        "interval": Param(60.0, as_float(0.0, lo_open=True),
                          "seconds between reallocations (Pollux's simulator: 60)"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.clock = RoundClock(self.p["interval"])
        self._static = False  # no job's count can change between events (set by attach)
        self._seen: tuple[int, int, int] | None = None

    def attach(self, ctx: Ctx) -> None:
        """Whether rounds without events can be skipped: no model, no elastic range."""
        self._static = all_rigid(ctx)

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """A reallocation at each round boundary; nothing between them.

        Jobs that ask no GPU start at once, at any pass.
        """
        yield from start_cpu_only(ctx)
        if not self.clock.due(ctx):
            return
        # rigid jobs of no model: a round after no arrival, end or failure decides the same
        seen = (ctx.cluster.version, ctx.pending_count, len(ctx.running()))
        if self._static and seen == self._seen:
            return
        active = sorted([*ctx.running().values(), *ctx.pending()],
                        key=lambda j: (j.spec.submit_time, j.idx))
        active = [j for j in active if j.spec.num_gpus > 0]
        counts = self.counts(ctx, active)
        yield from apply_allocation(ctx, self.place(ctx, active, counts), "optimus")
        self._seen = (ctx.cluster.version, ctx.pending_count, len(ctx.running()))

    def counts(self, ctx: Ctx, jobs: list[JobState]) -> dict[int, int]:
        """GPUs per job: minimums in order, then the largest marginal gain first."""
        free = sum(1 for g, n in enumerate(ctx.topology.gpu_node) if ctx.cluster.node_up[n])
        num: dict[int, int] = {}
        gain: dict[int, float] = {}
        rem = {j.idx: remaining_units(ctx, j) for j in jobs}
        by_idx = {j.idx: j for j in jobs}
        most = {j.idx: most_gpus(ctx, j) for j in jobs}

        def next_gain(j: JobState, left: int) -> float:
            k = num[j.idx]
            if k + 1 > most[j.idx] or left < 1:
                return 0.0
            return marginal_gain(rem[j.idx], goodput_of(ctx, j, k), goodput_of(ctx, j, k + 1))

        for j in sorted(jobs, key=lambda j: max(1, bounds(j)[0])):
            lo = max(1, bounds(j)[0])  # an elastic job's min_gpus (1 in Pollux's runs)
            if lo > free:
                num[j.idx], gain[j.idx] = 0, 0.0
                continue
            num[j.idx] = lo
            free -= lo
            gain[j.idx] = next_gain(j, free)
        while free > 0 and gain and max(gain.values()) > 0:
            key = max(gain, key=lambda i: gain[i])
            num[key] += 1
            gain[key] = next_gain(by_idx[key], free)
            free -= 1
        return num

    def place(self, ctx: Ctx, jobs: list[JobState], num: dict[int, int]
              ) -> dict[int, list[int]]:
        """Keep jobs whose count is unchanged; place the rest, fewest GPUs first.

        Each takes GPUs from the nodes with the most free ones (`node_fill`).
        """
        topo = ctx.topology
        up = ctx.cluster.node_up
        free = [n.num_gpus if up[i] else 0 for i, n in enumerate(topo.nodes)]
        plan: dict[int, list[int]] = {}
        for j in jobs:
            if j.gpus and len(j.gpus) == num.get(j.idx, 0):
                plan[j.idx] = held_nodes(ctx, j)
                for n in plan[j.idx]:
                    free[n] -= 1
        todo = [(j.idx, num[j.idx]) for j in sorted(jobs, key=lambda j: num[j.idx])
                if num[j.idx] > 0 and j.idx not in plan]
        for idx, nodes in node_fill(todo, free).items():
            if len(nodes) == num[idx]:
                plan[idx] = nodes
        return plan
