"""Jobs made of roles (issue 16): what a job's roles add up to, and what the engine runs.

Model layer: imports only `schedlab.sim.model` and `schedlab.sim.errors`. The trace schema
(`schedlab.traces.schema`) parses the `tasks` column into `TaskRole`s; `role_totals` gives the
job-level columns the roles imply (filled in or checked by validation). `not_simulated`
is the one engine-facing gate: a job with roles (not one gang of identical GPU tasks:
`has_roles`) runs only under a policy that declares `supports_roles`, others reject it at
submission; container jobs run as task runs (`schedlab.sim.containers`), not here.

A job with roles runs as its gang: every gang task placed at once, each on one node
(`schedlab.sim.model.TaskPlacement`), held and released together; its non-gang tasks (an
evaluator) are placed by the engine when capacity allows while the gang runs (`side`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from schedlab.sim.errors import InvalidDecision
from schedlab.sim.model import MILLI, JobSpec, TaskPlacement, TaskRole

__all__ = [
    "ROLES_NOT_SIMULATED", "RoleTotals", "gang_tasks",
    "drop_side_on", "drop_tasks", "free_task", "free_tasks", "has_roles", "hold_task",
    "is_plain_gang", "no_roles_reason", "not_simulated", "role_of", "role_totals",
    "side_gpu_seconds", "side_tasks", "with_tasks",
]

ROLES_NOT_SIMULATED = "a job of task roles the engine does not run"
"""Reject reason of a job of roles no policy can run (fractional, elastic, inconsistent)."""



@dataclass(frozen=True, slots=True)
class RoleTotals:
    """The job-level request a job's roles imply (docs/contract.md#sec-2 columns).

    `num_gpus` is the gang roles' GPU total; `num_cpus` and `mem_gb` add up every role
    (gang or not); `gpus_per_task` and `disk_gb` are those of the gang's GPU tasks when
    they all agree (0 otherwise).
    """

    num_gpus: int
    gpus_per_task: int
    num_cpus: float
    mem_gb: float
    disk_gb: float


def role_totals(tasks: tuple[TaskRole, ...]) -> RoleTotals:
    """What the roles add up to (see `RoleTotals`)."""
    gang_gpu = [r for r in tasks if r.gang and r.gpus > 0]
    per_task = {r.gpus for r in gang_gpu}
    disks = {r.disk_gb for r in gang_gpu}
    return RoleTotals(
        num_gpus=sum(r.count * r.gpus for r in tasks if r.gang),
        gpus_per_task=next(iter(per_task)) if len(per_task) == 1 else 0,
        num_cpus=sum(r.count * r.cpus for r in tasks),
        mem_gb=sum(r.count * r.mem_gb for r in tasks),
        disk_gb=next(iter(disks)) if len(disks) == 1 else 0.0,
    )


def is_plain_gang(tasks: tuple[TaskRole, ...], duration: float) -> bool:
    """True when the roles are one gang of identical GPU tasks (what the engine runs today).

    Every role is a gang role of GPU tasks asking the same GPUs, CPUs, memory and disk
    per task, with no duration of its own other than the job's.
    """
    if not tasks:
        return False
    kinds = {(r.gpus, r.cpus, r.mem_gb, r.disk_gb) for r in tasks}
    return (len(kinds) == 1 and all(r.gang and r.gpus > 0 for r in tasks)
            and all(r.duration is None or r.duration == duration for r in tasks))


def with_tasks(spec: JobSpec, tasks: tuple[TaskRole, ...]) -> JobSpec:
    """The job with these roles and the job-level request they imply (`role_totals`)."""
    t = role_totals(tasks)
    return replace(spec, tasks=tasks, num_gpus=t.num_gpus, gpus_per_task=t.gpus_per_task,
                   num_cpus=t.num_cpus, mem_gb=t.mem_gb, disk_gb=t.disk_gb)


def has_roles(spec: JobSpec) -> bool:
    """True for a job that runs task by task (roles that are not one plain gang)."""
    return bool(spec.tasks) and not is_plain_gang(spec.tasks, spec.duration)


def gang_tasks(spec: JobSpec) -> list[tuple[TaskRole, int]]:
    """(role, index) of every gang task, in role order."""
    return [(r, i) for r in spec.tasks if r.gang for i in range(r.count)]


def side_tasks(spec: JobSpec) -> list[tuple[TaskRole, int]]:
    """(role, index) of every non-gang task, in role order."""
    return [(r, i) for r in spec.tasks if not r.gang for i in range(r.count)]


def role_of(spec: JobSpec, name: str) -> TaskRole | None:
    """The job's role of this name, or None."""
    return next((r for r in spec.tasks if r.role == name), None)


def no_roles_reason(policy_name: str) -> str:
    """The Reject reason of a job with roles under a policy that does not support them."""
    return f"policy {policy_name} does not support task roles"


def _roles_unsupported(spec: JobSpec) -> str:
    """Why the engine cannot run this job with roles ('' when it can)."""
    if spec.gpu_share < 1.0:
        return f"{ROLES_NOT_SIMULATED}: gpu_share {spec.gpu_share:g} with task roles"
    if spec.min_gpus is not None or spec.max_gpus is not None:
        return f"{ROLES_NOT_SIMULATED}: an elastic job (min_gpus/max_gpus) with task roles"
    for r in spec.tasks:
        if r.gang and r.duration is not None and r.duration != spec.duration:
            return (f"{ROLES_NOT_SIMULATED}: gang role {r.role!r} has its own duration "
                    f"{r.duration:g} (gang roles stop together; only a non-gang role's "
                    "duration may differ from the job's)")
    return ""


def not_simulated(spec: JobSpec, policy: object = None) -> str:
    """Why the engine cannot run this job ('' when it can), for a Reject at submission.

    A job of one gang of identical GPU tasks runs as the existing gang (its job-level
    columns are the roles' totals, as validation fills them in). Other role mixes run
    task by task under a `policy` whose class declares `supports_roles`; under any other
    the reason is "policy X does not support task roles". Container jobs are not gated
    here (`schedlab.sim.containers`).
    """
    if not spec.tasks:
        return ""
    if not is_plain_gang(spec.tasks, spec.duration):
        if not getattr(policy, "supports_roles", False):
            return no_roles_reason(str(getattr(policy, "name", "?")))
        gang = role_totals(spec.tasks).num_gpus
        if spec.num_gpus != gang:
            return (f"{ROLES_NOT_SIMULATED}: its num_gpus {spec.num_gpus} is not its gang "
                    f"roles' GPU total {gang} (schedlab.sim.roles.with_tasks)")
        return _roles_unsupported(spec)
    t = role_totals(spec.tasks)
    got = (spec.num_gpus, spec.task_gpus, spec.num_cpus, spec.mem_gb, spec.disk_gb)
    want = (t.num_gpus, t.gpus_per_task, t.num_cpus, t.mem_gb, t.disk_gb)
    if any(abs(a - b) > 1e-9 for a, b in zip(got, want, strict=True)):
        return (f"{ROLES_NOT_SIMULATED}: its num_gpus, gpus_per_task, num_cpus, mem_gb, "
                f"disk_gb {got} are not its roles' totals {want} (schedlab.sim.roles.with_tasks)")
    return ""


# --- holding and releasing tasks (duck-typed on schedlab.sim.cluster.ClusterState / JobState) ---


def hold_task(cluster: Any, job: int, t: TaskPlacement, r: TaskRole) -> None:
    """Take one task's GPUs and host asks on its node, or raise InvalidDecision unchanged.

    A GPU task takes whole GPUs and its CPUs, memory and disk on their node; a CPU-only
    task takes its asks on its node (`take_host`, even of nothing, so that the node's
    failure finds the job).
    """
    if t.gpus:
        why = cluster.host_shortfall(t.node, r.cpus, r.mem_gb, r.disk_gb)
        if why:
            raise InvalidDecision(f"node {cluster.topo.nodes[t.node].name} {why}")
        cluster.allocate(job, t.gpus, MILLI, r.cpus, r.mem_gb, r.disk_gb)
    else:  # held even when it asks for nothing: a failure of its node stops it
        cluster.take_host(job, t.node, r.cpus, r.mem_gb, r.disk_gb)


def free_task(cluster: Any, job: int, t: TaskPlacement, r: TaskRole) -> None:
    """Give back what `hold_task` took."""
    if t.gpus:
        cluster.release(job, t.gpus, MILLI, r.cpus, r.mem_gb, r.disk_gb)
    else:
        cluster.give_host(job, t.node, r.cpus, r.mem_gb, r.disk_gb)


def free_tasks(cluster: Any, job: Any) -> None:
    """Give back every task a running job with roles holds (gang and non-gang).

    Touches only the cluster (also used on a what-if twin); `drop_tasks` also clears
    the job's placement.
    """
    roles = {r.role: r for r in job.spec.tasks}
    for t in job.tasks:
        free_task(cluster, job.idx, t, roles[t.role])
    for v in (job.side or {}).values():
        if v:
            free_task(cluster, job.idx, v[0], roles[v[0].role])


def drop_tasks(cluster: Any, job: Any, side_jobs: dict[int, Any], now: float) -> None:
    """The job's gang stops: free every task, count its non-gang GPU time, clear it all."""
    free_tasks(cluster, job)
    job.gpu_seconds += side_gpu_seconds(job, now)
    job.tasks = ()
    job.side = None
    side_jobs.pop(job.idx, None)


def held_gpus(job: Any) -> tuple[int, ...]:
    """Every GPU a running job holds: its gang's (`job.gpus`) and its non-gang tasks'."""
    side = job.side
    if not side:
        return job.gpus
    return (*job.gpus, *(g for v in side.values() if v for g in v[0].gpus))


def held_nodes(job: Any, gpu_node: Any) -> set[int]:
    """Every node where a running job holds GPUs or host resources (tasks of roles too)."""
    nodes = {gpu_node[g] for g in held_gpus(job)}
    nodes.update(t.node for t in job.tasks)
    nodes.update(v[0].node for v in (job.side or {}).values() if v)
    if job.node >= 0:  # a CPU-only job's host placement
        nodes.add(job.node)
    return nodes


def side_gpu_seconds(job: Any, now: float) -> float:
    """GPU-seconds the job's running non-gang tasks have held since they started."""
    return sum((now - v[2]) * len(v[0].gpus) for v in (job.side or {}).values() if v)


def drop_side_on(cluster: Any, side_jobs: dict[int, Any], node: int, now: float) -> None:
    """A node fails: its non-gang tasks stop (placed again later); their gangs run on."""
    for job in side_jobs.values():
        roles = {r.role: r for r in job.spec.tasks}
        for key, v in job.side.items():
            if v and v[0].node == node:
                free_task(cluster, job.idx, v[0], roles[key[0]])
                job.gpu_seconds += (now - v[2]) * len(v[0].gpus)
                job.side[key] = None
