"""srtf's running-key columns, kept across passes, answer as a fresh read.

At every victim search of a run (shared GPUs, checkpoints, failures and container jobs
whose task runs restart in place, which change a job's progress without an event), the
pool built from the kept columns equals one built from `running_key` job by job, and
its victims handed out as jobs (`lowest_jobs`) are those of `lowest_first`.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policies.priority as priority
import policies.victims as victims
from policies.sjf import SrtfPolicy
from sim.engine import Simulation
from sim.jobstate import JobState
from sim.model import JobSpec, RestartPolicy
from topologies.build import uniform_topology
from traces.base import Trace


def _checked(pol: SrtfPolicy, seen: list[int]) -> Any:
    """A `find_victims` that checks the pool against `running_key` first."""
    real = victims.find_victims

    def check(ctx: Any, job: JobState, key: Any, pool: victims.VictimPool) -> Any:
        if isinstance(pool, victims.ArrayPool) and not pool._gone and not pool._plain:
            # the jobs running when the pass built it (starts since are not in it)
            kept = pool.below(())
            assert kept == sorted((pol.running_key(ctx, ctx.job_at(i)), i) for _, i in kept)
        got = list(pool.lowest_jobs(ctx, key))
        assert [j.idx for j in got] == list(pool.lowest_first(key))
        assert all(j is ctx.job_at(j.idx) for j in got)
        seen.append(1)
        return real(ctx, job, key, pool)

    return check


@st.composite
def contended(draw: Any) -> tuple[Any, Trace]:
    """A few nodes, more work than GPUs: whole and half GPUs, gangs, container jobs."""
    topo = uniform_topology(draw(st.integers(1, 3)), switches_per_socket=2,
                            gpus_per_switch=draw(st.integers(1, 2)))
    jobs = []
    for i in range(draw(st.integers(2, 16))):
        g = draw(st.integers(1, topo.num_gpus))
        t = float(draw(st.integers(0, 100)))
        d = float(draw(st.integers(5, 200)))
        ckpt = draw(st.sampled_from([None, 20.0]))
        if draw(st.integers(0, 3)) == 0:  # restarts in place: progress moves, no event
            jobs.append(JobSpec(
                f"c{i}", t, min(g, 2), d, checkpoint_interval=ckpt,
                completions=draw(st.integers(1, 3)), parallelism=draw(st.integers(1, 2)),
                restart_policy=RestartPolicy.ON_FAILURE, backoff_limit=3,
                fail_at=float(draw(st.integers(3, 60)))))
        else:
            share = draw(st.sampled_from([1.0, 0.5])) if g == 1 else 1.0
            jobs.append(JobSpec(f"p{i}", t, g, d, gpu_share=share, checkpoint_interval=ckpt))
    return topo, Trace("perf8-srtf", tuple(jobs))


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # monkeypatch.context()
@given(case=contended(), weight=st.sampled_from(["none", "gpus"]),
       stop=st.sampled_from(["suspend", "preempt"]))
def test_kept_columns_match_fresh_reads(case: Any, weight: str, stop: str,
                                                      monkeypatch: Any) -> None:
    topo, trace = case
    seen: list[int] = []
    pol = SrtfPolicy(weight=weight, stop=stop)
    with monkeypatch.context() as m:
        m.setattr(priority, "find_victims", _checked(pol, seen))
        Simulation(trace, topo, pol).run()


@pytest.mark.parametrize("weight", ["none", "gpus"])
def test_contended_generated_run_checks_every_search(weight: str, monkeypatch: Any) -> None:
    from traces import load_trace

    topo = uniform_topology(2)
    trace = load_trace("philly-like:300", topology=topo, load=1.5)
    seen: list[int] = []
    pol = SrtfPolicy(weight=weight)
    monkeypatch.setattr(priority, "find_victims", _checked(pol, seen))
    Simulation(trace, topo, pol).run()
    assert seen  # the run did search for victims
