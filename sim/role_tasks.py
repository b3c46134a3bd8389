"""The engine's side of jobs with roles: taking a gang's tasks, running its side tasks.

`schedlab.sim.roles` says what a job's roles are and holds or frees one task on the cluster; this
module applies a whole `Start` of such a job (every gang task validated, then taken, all
or nothing) and runs the non-gang tasks (an evaluator) the engine places by itself while
the gang runs: after each scheduling pass through the run's placer (`place_side`), ending
each after its own `duration`. The engine (`schedlab.sim.engine.Run`) calls these; they change
only the cluster, the job and the run's side-task table they are given.
"""

from __future__ import annotations

import math
from typing import Any

from schedlab.sim.agenda import Agenda, Due
from schedlab.sim.cluster import ClusterState
from schedlab.sim.errors import InvalidDecision
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import MILLI, TaskPlacement, TaskRole
from schedlab.sim.roles import free_task, gang_tasks, has_roles, hold_task, role_of, side_tasks

__all__ = ["end_side", "place_side", "take_tasks"]

_NO_HOST = (0.0, 0.0, 0.0)


def take_tasks(cluster: ClusterState, job: JobState, gpus: tuple[int, ...],
               tasks: tuple[TaskPlacement, ...], label: str, share: str, node: int,
               side_jobs: dict[int, JobState]) -> None:
    """Validate a job with roles' task placement and take it, all or nothing.

    Every gang task exactly once, each on one existing node with its role's GPU count
    there; `gpus` must be the tasks' GPUs; each task's GPUs and host asks must be free on
    its node. Nothing changes when any check fails (InvalidDecision, prefixed `label`).
    A job with non-gang tasks joins `side_jobs`, its side tasks waiting.
    """
    s = job.spec
    if not has_roles(s):
        raise InvalidDecision(f"{label}: tasks given for a job without task roles")
    if not tasks:
        raise InvalidDecision(
            f"{label}: a job with task roles starts task by task: give tasks (a "
            "TaskPlacement per gang task; ctx.place answers a RolePlacement)")
    if share or node >= 0:
        raise InvalidDecision(f"{label}: a job with task roles takes no share or node "
                              "(each task names its node)")
    want = {(r.role, i): r for r, i in gang_tasks(s)}
    _check_tasks(cluster, tasks, want, label)
    mine = tuple(sorted(g for t in tasks for g in t.gpus))
    if mine != tuple(sorted(gpus)):
        raise InvalidDecision(f"{label}: GPUs {gpus} are not its tasks' GPUs {mine}")
    topo = cluster.topo
    done: list[tuple[TaskPlacement, TaskRole]] = []
    for t in tasks:
        r = want[(t.role, t.index)]
        try:
            if not cluster.node_up[t.node]:
                raise InvalidDecision(f"node {topo.nodes[t.node].name} is failed")
            hold_task(cluster, job.idx, t, r)
        except InvalidDecision as e:
            for u, q in reversed(done):
                free_task(cluster, job.idx, u, q)
            raise InvalidDecision(f"{label}: task {t.role}[{t.index}]: {e}") from None
        done.append((t, r))
    job.tasks = tuple(tasks)
    job.milli = MILLI
    job.host = _NO_HOST
    side = side_tasks(s)
    if side:
        job.side = {(r.role, i): None for r, i in side}
        side_jobs[job.idx] = job


def _check_tasks(cluster: ClusterState, tasks: tuple[TaskPlacement, ...],
                 want: dict[tuple[str, int], TaskRole], label: str) -> None:
    """Every gang task exactly once, on an existing node, with its role's GPUs there."""
    topo = cluster.topo
    nn = len(topo.nodes)
    seen: set[tuple[str, int]] = set()
    for t in tasks:
        key = (t.role, t.index)
        r = want.get(key)
        name = f"{label}: task {t.role}[{t.index}]"
        if r is None:
            raise InvalidDecision(f"{name} is not a gang task of the job (gang tasks: "
                                  f"{', '.join(f'{a}[{b}]' for a, b in want)})")
        if key in seen:
            raise InvalidDecision(f"{name} is placed twice")
        seen.add(key)
        if not 0 <= t.node < nn:
            raise InvalidDecision(f"{name}: node {t.node} does not exist (0..{nn - 1})")
        if len(t.gpus) != r.gpus:
            raise InvalidDecision(f"{name} has {len(t.gpus)} GPUs, its role asks "
                                  f"{r.gpus} per task")
        for g in t.gpus:
            if not 0 <= g < topo.num_gpus:
                raise InvalidDecision(f"{name}: GPU {g} does not exist "
                                      f"(0..{topo.num_gpus - 1})")
            if topo.gpu_node[g] != t.node:
                raise InvalidDecision(
                    f"{name}: GPU {g} is on node {topo.nodes[topo.gpu_node[g]].name}, "
                    f"not on its node {topo.nodes[t.node].name} (a task sits on one node)")
    if len(seen) != len(want):
        left = [f"{a}[{b}]" for a, b in want if (a, b) not in seen]
        raise InvalidDecision(f"{label}: gang tasks {', '.join(left)} not placed (a "
                              "gang starts all or nothing)")


def end_side(cluster: ClusterState, side_jobs: dict[int, JobState], now: float) -> None:
    """Non-gang tasks whose own duration is up give back what they hold."""
    for job in side_jobs.values():
        side = job.side
        assert side is not None
        for key, v in side.items():
            if v and v[1] <= now:
                r = role_of(job.spec, key[0])
                assert r is not None
                free_task(cluster, job.idx, v[0], r)
                job.gpu_seconds += (now - v[2]) * len(v[0].gpus)
                side[key] = ()


def place_side(cluster: ClusterState, placer: Any, side_jobs: dict[int, JobState],
               agenda: Agenda, now: float, record: Any = None) -> None:
    """Place waiting non-gang tasks, in gang start order, while capacity allows.

    Through the run's placer (`place_side`; a placer without it places none). A task
    with its own `duration` ends that many seconds after it starts (a timer wakes the
    engine then). `record(job, role, index, node, gpus)` writes each start's event row.
    """
    place = getattr(placer, "place_side", None)
    if place is None:
        return
    for job in side_jobs.values():
        side = job.side
        assert side is not None
        near = tuple(dict.fromkeys(t.node for t in job.tasks if t.gpus))
        for key, v in side.items():
            if v is not None:
                continue
            r = role_of(job.spec, key[0])
            assert r is not None
            got = place(job.spec, r, cluster, near)
            if got is None:
                continue
            t = TaskPlacement(r.role, key[1], got.node, got.gpus)
            hold_task(cluster, job.idx, t, r)
            if record is not None:
                record(job, t.role, t.index, t.node, t.gpus)
            end = now + r.duration if r.duration is not None else math.inf
            side[key] = (t, end, now)
            if r.duration is not None:
                agenda.schedule(end, Due.TIMER)
