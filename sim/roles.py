"""Jobs made of roles (issue 16): what a job's roles add up to, and what the engine runs.

Model layer: imports only `sim.model`. The trace schema (`traces.schema`) parses the
`tasks` column into `TaskRole`s; `role_totals` gives the job-level columns the roles
imply (filled in or checked by validation); `not_simulated` is the one engine-facing
gate: until the engine places roles, a job whose roles are not one gang of identical GPU
tasks is rejected at submission with its reason (container jobs run: `sim.containers`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sim.model import JobSpec, TaskRole

__all__ = [
    "ROLES_NOT_SIMULATED", "RoleTotals", "is_plain_gang",
    "not_simulated", "role_totals", "with_tasks",
]

ROLES_NOT_SIMULATED = "task roles are not simulated yet (issue 16)"
"""Reject reason of a job whose roles are not one gang of identical GPU tasks."""


@dataclass(frozen=True, slots=True)
class RoleTotals:
    """The job-level request a job's roles imply (SPEC sec. 2 columns).

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


def not_simulated(spec: JobSpec) -> str:
    """Why the engine cannot run this job yet ('' when it can), for a Reject at submission.

    A job of one gang of identical GPU tasks runs as the existing gang (its job-level
    columns are the roles' totals, as validation fills them in); other role mixes wait
    for the engine part of issue 16.
    """
    if not spec.tasks:
        return ""
    if not is_plain_gang(spec.tasks, spec.duration):
        return ROLES_NOT_SIMULATED
    t = role_totals(spec.tasks)
    got = (spec.num_gpus, spec.task_gpus, spec.num_cpus, spec.mem_gb, spec.disk_gb)
    want = (t.num_gpus, t.gpus_per_task, t.num_cpus, t.mem_gb, t.disk_gb)
    if any(abs(a - b) > 1e-9 for a, b in zip(got, want, strict=True)):
        return (f"{ROLES_NOT_SIMULATED}: its num_gpus, gpus_per_task, num_cpus, mem_gb, "
                f"disk_gb {got} are not its roles' totals {want} (sim.roles.with_tasks)")
    return ""
