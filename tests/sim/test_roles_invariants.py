"""Invariants of jobs with roles, checked on the live state at every scheduling pass.

A gang role is never partly running; every task sits on one node with its role's GPU
count; GPUs, CPUs and memory are never over-committed and are exactly what the running
tasks hold; jobs that do not run hold nothing; non-gang tasks run only with their gang.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import RUNNING
from schedlab.sim.model import MILLI, JobSpec, TaskRole
from schedlab.sim.registry import POLICIES
from schedlab.sim.roles import gang_tasks, has_roles, role_of, with_tasks
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace

TOPO = uniform_topology(2, sockets=2, switches_per_socket=1, gpus_per_switch=2,
                        num_cpus=16.0, mem_gb=64.0, name="small")


def check_state(run: Any) -> None:
    """Raise AssertionError on any broken invariant of the run's live state."""
    topo, c = run.topo, run.cluster
    gpu_use = [0] * topo.num_gpus
    cpu_use = [0.0] * len(topo.nodes)
    mem_use = [0.0] * len(topo.nodes)
    for job in run.jobs:
        s = job.spec
        if job.status != RUNNING:
            assert job.tasks == () and job.side is None, job
            assert job.idx not in run.side_jobs
            continue
        if not (s.tasks and has_roles(s)):
            for g in job.gpus:  # a plain gang: its host share in proportion to its GPUs
                gpu_use[g] += job.milli
                cpu_use[topo.gpu_node[g]] += job.host[0] / len(job.gpus)
                mem_use[topo.gpu_node[g]] += job.host[1] / len(job.gpus)
            continue
        want = {(r.role, i) for r, i in gang_tasks(s)}
        assert {(t.role, t.index) for t in job.tasks} == want, "gang partly running"
        assert job.gpus == tuple(sorted(g for t in job.tasks for g in t.gpus))
        placed = list(job.tasks) + [v[0] for v in (job.side or {}).values() if v]
        for t in placed:
            r = role_of(s, t.role)
            assert r is not None and len(t.gpus) == r.gpus
            assert all(topo.gpu_node[g] == t.node for g in t.gpus), "task over two nodes"
            assert c.node_up[t.node]
            for g in t.gpus:
                gpu_use[g] += MILLI
            cpu_use[t.node] += r.cpus
            mem_use[t.node] += r.mem_gb
        for key in job.side or {}:
            r = role_of(s, key[0])
            assert r is not None and not r.gang
    for g in range(topo.num_gpus):
        node = topo.gpu_node[g]
        held = sum(m for j, m in c.gpu_holders[g].items() if j >= 0)
        assert held == gpu_use[g] <= MILLI, f"GPU {g}: {held} held, {gpu_use[g]} by tasks"
        if not c.node_up[node]:
            assert gpu_use[g] == 0
    for n, spec in enumerate(topo.nodes):
        assert abs(c.node_cpu_free[n] - (spec.num_cpus - cpu_use[n])) < 1e-6, n
        assert abs(c.node_mem_free[n] - (spec.mem_gb - mem_use[n])) < 1e-6, n
        assert c.node_cpu_free[n] >= -1e-9 and c.node_mem_free[n] >= -1e-9


def checked(name: str) -> Any:
    """The registered policy, checking the live state before each of its passes."""
    base = POLICIES.get(name)

    class Checked(base):  # type: ignore[misc, valid-type]
        def schedule(self, ctx: Any) -> Any:
            check_state(ctx._run)
            yield from super().schedule(ctx)

    Checked.name = name
    return Checked()


role = st.builds(
    lambda name, count, gpus, cpus, mem, gang, dur: TaskRole(
        name, count, gpus, cpus=cpus, mem_gb=mem, gang=gang,
        duration=dur if not gang else None),
    st.sampled_from(["ps", "worker", "chief", "evaluator"]), st.integers(1, 3),
    st.integers(0, 4), st.sampled_from([0.0, 2.0, 6.0]), st.sampled_from([0.0, 8.0, 24.0]),
    st.booleans(), st.one_of(st.none(), st.sampled_from([5.0, 40.0])))


@st.composite
def jobs(draw: Any) -> list[JobSpec]:
    out = []
    for i in range(draw(st.integers(1, 8))):
        t = float(draw(st.integers(0, 200)))
        dur = float(draw(st.integers(5, 150)))
        ckpt = draw(st.sampled_from([None, 20.0]))
        base = JobSpec(f"j{i}", t, 0, dur, user=f"u{i % 2}", checkpoint_interval=ckpt)
        if draw(st.booleans()):
            roles = draw(st.lists(role, min_size=1, max_size=3,
                                  unique_by=lambda r: r.role))
            if not any(r.gang for r in roles):
                roles[0] = TaskRole(roles[0].role, roles[0].count, roles[0].gpus,
                                    cpus=roles[0].cpus, mem_gb=roles[0].mem_gb)
            out.append(with_tasks(base, tuple(roles)))
        else:
            g = draw(st.sampled_from([1, 2, 4, 6]))
            out.append(JobSpec(base.job_id, t, g, dur, user=base.user, num_cpus=2.0 * g,
                               checkpoint_interval=ckpt))
    return out


@settings(max_examples=30, deadline=None)
@given(specs=jobs(), policy=st.sampled_from(["fifo", "srtf", "tiresias-las", "drf",
                                             "easy-backfill", "themis-ftf"]),
       failures=st.booleans())
def test_roles_never_partly_running_nor_over_committed(specs: list[JobSpec], policy: str,
                                                       failures: bool) -> None:
    params = {"mtbf": 300.0, "mttr": 50.0, "retry_delay": 5.0} if failures else {}
    sim = Simulation(Trace("roles", tuple(specs)), TOPO, checked(policy), seed=1,
                     params=params)
    run = sim.start()
    run.env.run()
    check_state(run)
    r = sim.result(run, 0.0)
    assert not (r.jobs.status == "unfinished").any()
    assert run.cluster.free_whole == TOPO.num_gpus - sum(
        n.num_gpus for i, n in enumerate(TOPO.nodes) if not run.cluster.node_up[i])
    assert run.cluster.node_cpu_free == [16.0, 16.0]


@pytest.mark.parametrize("policy", ["srtf", "tiresias-las"])
def test_a_victim_holds_its_non_gang_tasks_gpus_too(policy: str) -> None:
    """j2's non-gang worker holds GPUs 0-2 (its gang only 4-5) when j0 arrives: freeing
    j2 is what makes room for j0, so j2 must be stopped before j0 starts there (once, a
    victim whose gang held none of the chosen GPUs was left running: an invalid Start)."""
    specs = (
        JobSpec("j0", 6.0, 4, 5.0, user="u0", num_cpus=8.0),
        JobSpec("j1", 0.0, 0, 5.0, user="u1", tasks=(TaskRole("ps", 1, 0),)),
        JobSpec("j2", 0.0, 2, 12.0, user="u0", gpus_per_task=2,
                tasks=(TaskRole("ps", 1, 2), TaskRole("worker", 1, 3, gang=False))),
        JobSpec("j3", 0.0, 4, 5.0, user="u1", num_cpus=8.0),
    )
    sim = Simulation(Trace("roles", specs), TOPO, checked(policy), seed=1)
    run = sim.start()
    run.env.run()
    check_state(run)
    r = sim.result(run, 0.0)
    assert (r.jobs.status == "completed").all()
