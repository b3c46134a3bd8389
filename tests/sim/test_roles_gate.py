"""Jobs of roles at submission (issue 16): one gang of identical GPU
tasks runs as the existing gang; other role mixes run under policies that declare
`supports_roles` and are rejected under the others ("policy X does not support task
roles"); all in one place (`schedlab.sim.roles.not_simulated`). Container jobs run
(`schedlab.sim.containers`, tests/sim/test_containers.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec, TaskRole
from schedlab.sim.roles import (
    ROLES_NOT_SIMULATED,
    no_roles_reason,
    not_simulated,
    with_tasks,
)
from schedlab.traces.synthetic import from_records

TF = [{"role": "ps", "count": 2, "gpus": 0, "cpus": 2},
      {"role": "worker", "count": 4, "gpus": 2, "cpus": 2},
      {"role": "chief", "count": 1, "gpus": 1},
      {"role": "evaluator", "count": 1, "gpus": 1, "gang": False}]


def run(records, topo, policy="fifo"):
    r = Simulation(from_records(records), topo, policy, seed=0).run()
    return r.jobs.set_index("job_id"), r.events


def test_single_role_gang_runs_exactly_as_the_plain_gang(dgx2) -> None:
    roles = [{"role": "worker", "count": 4, "gpus": 2, "cpus": 2}]
    as_roles = [{"job_id": "w", "submit_time": 0, "num_gpus": 8, "duration": 100,
                 "tasks": json.dumps(roles)},
                {"job_id": "x", "submit_time": 5, "num_gpus": 10, "duration": 50}]
    plain = [{"job_id": "w", "submit_time": 0, "num_gpus": 8, "duration": 100,
              "gpus_per_task": 2, "num_cpus": 8},
             {"job_id": "x", "submit_time": 5, "num_gpus": 10, "duration": 50}]
    a, ea = run(as_roles, dgx2)
    b, eb = run(plain, dgx2)
    # w: 0..100 on 8 GPUs of one node; x (10 GPUs) waits for w: 100..150
    assert list(a.status) == ["completed", "completed"]
    assert list(a.start_time) == list(b.start_time) == [0.0, 100.0]
    assert list(a.end_time) == list(b.end_time) == [100.0, 150.0]
    assert ea[["time", "job_id", "kind", "cells"]].equals(eb[["time", "job_id", "kind", "cells"]])


def test_identical_roles_make_one_gang(dgx2) -> None:
    # PyTorch master + 3 workers, each 1 GPU and 2 CPUs alike: a gang of 4 one-GPU tasks
    roles = [{"role": "master", "count": 1, "gpus": 1, "cpus": 2},
             {"role": "worker", "count": 3, "gpus": 1, "cpus": 2}]
    j, _ = run([{"job_id": "pt", "submit_time": 0, "num_gpus": 4, "duration": 60,
                 "tasks": json.dumps(roles)}], dgx2)
    assert (j.status["pt"], j.start_time["pt"], j.end_time["pt"]) == ("completed", 0.0, 60.0)


@pytest.mark.parametrize("policy", ["fifo", "fifo-backfill", "drf", "gandiva", "sjf"])
def test_roles_run_or_are_rejected_and_container_jobs_run(dgx2, policy: str) -> None:
    records = [
        {"job_id": "tf", "submit_time": 0, "num_gpus": 9, "duration": 100,
         "tasks": json.dumps(TF)},
        {"job_id": "c", "submit_time": 1, "num_gpus": 1, "duration": 10, "completions": 5,
         "parallelism": 2},
        {"job_id": "mixed", "submit_time": 2, "num_gpus": 3, "duration": 10,
         "tasks": json.dumps([{"role": "chief", "count": 1, "gpus": 1},
                              {"role": "worker", "count": 1, "gpus": 2}])},
        {"job_id": "own-duration", "submit_time": 3, "num_gpus": 2, "duration": 10,
         "tasks": json.dumps([{"role": "worker", "count": 2, "gpus": 1, "duration": 5}])},
        {"job_id": "plain", "submit_time": 4, "num_gpus": 2, "duration": 10},
    ]
    j, ev = run(records, dgx2, policy)
    rejects = ev[ev.kind == "reject"]
    got = list(zip(rejects.time, rejects.job_id, rejects.detail, strict=True))
    if policy == "gandiva":  # does not support roles: every job with roles is rejected
        no = no_roles_reason("gandiva")
        assert no == "policy gandiva does not support task roles"
        assert dict(j.status) == {"tf": "rejected", "c": "completed", "mixed": "rejected",
                                  "own-duration": "rejected", "plain": "completed"}
        assert got == [(0.0, "tf", no), (2.0, "mixed", no), (3.0, "own-duration", no)]
        return
    assert dict(j.status) == {"tf": "completed", "c": "completed", "mixed": "completed",
                              "own-duration": "rejected", "plain": "completed"}
    # the container job's 5 task runs, 2 at once, 10 s each: 1..11, 11..21, 21..31
    assert float(j.end_time["c"]) == 31.0
    assert got == [
        (3.0, "own-duration", f"{ROLES_NOT_SIMULATED}: gang role 'worker' has its own "
         "duration 5 (gang roles stop together; only a non-gang role's duration may "
         "differ from the job's)")]
    assert ROLES_NOT_SIMULATED == "a job of task roles the engine does not run"


def test_not_simulated_on_specs_built_in_code() -> None:
    roles = (TaskRole("worker", 2, 2, cpus=4.0),)
    base = JobSpec("a", 0.0, 0, 10.0)
    ok = with_tasks(base, roles)
    assert (ok.num_gpus, ok.gpus_per_task, ok.num_cpus) == (4, 2, 8.0)
    assert not_simulated(ok) == "" and not_simulated(base) == ""
    # roles that disagree with the job-level columns (a spec built by hand) are refused
    wrong = replace(ok, num_gpus=6)
    assert not_simulated(wrong).startswith(
        f"{ROLES_NOT_SIMULATED}: its num_gpus, gpus_per_task, num_cpus, mem_gb, disk_gb "
        "(6, 2, 8.0, 0.0, 0.0) are not its roles' totals (4, 2, 8.0, 0.0, 0.0)")
    assert not_simulated(replace(base, completions=3)) == ""
    cpu_only = with_tasks(base, (TaskRole("ps", 1, 0, cpus=4.0),))
    assert not_simulated(cpu_only) == "policy ? does not support task roles"

    class Yes:
        name = "yes"
        supports_roles = True

    class No:
        name = "no"

    assert not_simulated(cpu_only, Yes()) == ""
    assert not_simulated(cpu_only, No()) == "policy no does not support task roles"
    assert not_simulated(replace(cpu_only, num_gpus=2), Yes()) == (
        f"{ROLES_NOT_SIMULATED}: its num_gpus 2 is not its gang roles' GPU total 0 "
        "(schedlab.sim.roles.with_tasks)")
