"""Round-based reallocation, shared by the schedulers that re-plan every job each round.

Pollux, Optimus and Sia decide a GPU count (and nodes) for every active job at fixed
intervals, and a job whose allocation changes restarts on its new GPUs (a checkpoint,
then its model's restart cost). `RoundClock` says when a round is due; `node_fill`
places counts on nodes as Optimus does; `apply_allocation` turns a plan into decisions:
suspend every job whose GPUs change, then start each on its new GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from schedlab.sim.jobstate import RUNNING, JobState
from schedlab.sim.model import MILLI, Decision, Start, Suspend, Unschedulable

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext


class RoundClock:
    """Rounds at k x interval (k >= `first`): `due(ctx)` is true once per boundary."""

    def __init__(self, interval: float, first: int = 1) -> None:
        self.interval = interval
        self._next = first * interval

    def due(self, ctx: PolicyContext) -> bool:
        """Whether a round starts now (then the next boundary is asked for)."""
        now = ctx.now
        if now + 1e-9 < self._next:
            ctx.wake_at(self._next)
            return False
        k = math.floor(now / self.interval + 1e-9)
        self._next = (k + 1) * self.interval
        ctx.wake_at(self._next)
        return True


def all_rigid(ctx: PolicyContext) -> bool:
    """No job names a model nor has an elastic range: counts never change between events."""
    return ctx.perf is None and not any(
        ctx.job_at(i).spec.min_gpus is not None or ctx.job_at(i).spec.max_gpus is not None
        for i in range(ctx.num_jobs))


def start_cpu_only(ctx: PolicyContext) -> Iterator[Decision]:
    """Start pending jobs that ask no GPU, in arrival order, wherever the placer puts them.

    Round-based GPU schedulers leave them to this (at every pass): only the request
    classes of no GPU are looked at, never the whole queue.
    """
    classes = ctx.pending_classes()
    heads = [key for key in classes if key[0] == 0]
    for key in heads:
        for _, idx in list(classes.get(key, ())):
            job = ctx.job_at(idx)
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                break  # the rest of the class fails alike
            yield Start(job.job_id, got)


def node_gpus(ctx: PolicyContext) -> list[list[int]]:
    """Per node, its GPUs that are up and wholly free now, in index order."""
    topo = ctx.topology
    free = ctx.cluster.gpu_free
    up = ctx.cluster.node_up
    out: list[list[int]] = [[] for _ in topo.nodes]
    for g, n in enumerate(topo.gpu_node):
        if up[n] and free[g] >= MILLI:
            out[n].append(g)
    return out


def held_nodes(ctx: PolicyContext, job: JobState) -> list[int]:
    """The node of each GPU the job holds (one entry a GPU)."""
    gnode = ctx.topology.gpu_node
    return sorted(gnode[g] for g in job.gpus)


def node_fill(counts: Sequence[tuple[int, int]], free: list[int]) -> dict[int, list[int]]:
    """Optimus' placement: each (job, count) in turn fills from the fullest-free node.

    A job takes GPUs from the node with the most free ones (the first on a tie), as many
    as it still needs there, then the next. `free`: free GPUs per node (updated).
    Returns job -> a node per GPU; a job that does not fit gets what there was.
    """
    out: dict[int, list[int]] = {}
    for job, count in counts:
        got: list[int] = []
        while len(got) < count:
            best = max(range(len(free)), key=lambda n: (free[n], -n), default=-1)
            if best < 0 or free[best] <= 0:
                break
            take = min(free[best], count - len(got))
            got.extend([best] * take)
            free[best] -= take
        out[job] = got
    return out


def apply_allocation(ctx: PolicyContext, plan: Mapping[int, Sequence[int]],
                     reason: str, held: Callable[[JobState], list[int]] | None = None
                     ) -> Iterator[Decision]:
    """Decisions that make the running set equal `plan` (job index -> a node per GPU).

    A running job whose nodes are unchanged keeps its GPUs; every other running job is
    suspended (checkpointed: no work lost), then each planned job starts on free GPUs of
    its nodes. Jobs absent from `plan` (or with an empty entry) hold nothing. `held`:
    the nodes a running job holds (`held_nodes`, or the caller's memo of it).
    """
    nodes_of = held if held is not None else (lambda j: held_nodes(ctx, j))
    moving = []
    for idx, job in list(ctx.running().items()):
        want = sorted(plan.get(idx, ()))
        if want != nodes_of(job):
            moving.append(job)
    for job in moving:
        yield Suspend(job.job_id, reason)
    yield from start_planned(ctx, plan)


def start_planned(ctx: PolicyContext, plan: Mapping[int, Sequence[int]]
                  ) -> Iterator[Decision]:
    """Start each planned job that is not running on free GPUs of its nodes.

    Running jobs are left alone (those in `plan` already hold their nodes).
    """
    free = node_gpus(ctx)
    for idx, nodes in plan.items():
        job = ctx.job_at(idx)
        if not nodes or job.status == RUNNING:
            continue
        s = job.spec
        if s.gpu_type or s.num_cpus or s.mem_gb or s.disk_gb or s.gpu_share < 1.0 or s.tasks:
            # a GPU type, host asks, shares, roles: where the run's placer puts that many
            got = ctx.place(job, num_gpus=len(nodes))
            if not isinstance(got, Unschedulable):
                yield Start(job.job_id, got)
                free = node_gpus(ctx)
            continue
        gpus: list[int] = []
        for n in nodes:
            if free[n]:
                gpus.append(free[n].pop(0))
        if len(gpus) == len(nodes):
            yield Start(job.job_id, tuple(sorted(gpus)))
