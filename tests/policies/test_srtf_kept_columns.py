"""srtf's running-job columns, kept across passes, answer as a fresh read.

At every pool build of a run (shared GPUs, checkpoints, failures and container jobs
whose task runs restart in place, which change a job's progress without an event), the
pool's entries are the running jobs that ask for GPUs; at every victim search, its keys
equal `running_key` job by job, its victims handed out as jobs (`lowest_jobs`) are those
of `lowest_first`, and with their spans (`lowest_spans`) hold what their GPUs say.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlab.policies.victims as victims
from schedlab.policies.sjf import SrtfPolicy
from schedlab.sim.agenda import WATCH_ALL
from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import JobSpec, RestartPolicy
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace


def _checked(pol: SrtfPolicy, seen: list[int]) -> Any:
    """A `choose_victims` that checks the pool against `running_key` first."""
    real = victims.find_victims

    def check(ctx: Any, job: JobState, key: Any, pool: victims.VictimPool) -> Any:
        if isinstance(pool, victims.ArrayPool):
            # the jobs running when the pass built it (starts since are not in it, the
            # victims stopped since are gone from it)
            kept = pool.below(())
            assert kept == sorted((pol.running_key(ctx, ctx.job_at(i)), i) for _, i in kept)
        got = list(pool.lowest_jobs(ctx, key))
        assert [j.idx for j in got] == list(pool.lowest_first(key))
        assert all(j is ctx.job_at(j.idx) for j in got)
        gnode = ctx.topology.gpu_node
        assert list(pool.lowest_spans(ctx, key)) == [
            (j, victims.gpu_spans(gnode, j.gpus)) for j in got]
        seen.append(1)
        return real(ctx, job, key, pool)

    return check


def _check_builds(pol: SrtfPolicy, m: Any, overflow: bool = False) -> None:
    """Every pool `pol` builds holds exactly the running jobs that ask for GPUs.

    `overflow`: the progress watch says, before each build, that any job may have moved
    (`WATCH_ALL`, as when it overflows unread), so the columns check every version.
    """
    real = pol._pool

    def pool(ctx: Any) -> Any:
        build = real(ctx)

        def checked() -> victims.VictimPool:
            if overflow:
                pol._cols.moved.add(WATCH_ALL)
            got = build()
            want = sorted(i for i, j in ctx.running().items() if j.spec.num_gpus > 0)
            assert sorted(i for _, i in got.below(())) == want
            return got
        return checked

    m.setattr(pol, "_pool", pool)


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
        m.setattr(pol, "choose_victims", _checked(pol, seen))
        _check_builds(pol, m)
        Simulation(trace, topo, pol).run()


@pytest.mark.parametrize("weight", ["none", "gpus"])
@pytest.mark.parametrize("overflow", [False, True])
def test_contended_generated_run_checks_every_search(weight: str, overflow: bool,
                                                     monkeypatch: Any) -> None:
    from schedlab.traces import load_trace

    topo = uniform_topology(2)
    trace = load_trace("philly-like:300", topology=topo, load=1.5)
    seen: list[int] = []
    pol = SrtfPolicy(weight=weight)
    monkeypatch.setattr(pol, "choose_victims", _checked(pol, seen))
    _check_builds(pol, monkeypatch, overflow)
    Simulation(trace, topo, pol).run()
    assert seen  # the run did search for victims


def test_many_running_jobs_grow_the_columns(monkeypatch: Any) -> None:
    """More running jobs than the columns' first room (64 slots): they grow, and stay exact."""
    topo = uniform_topology(16, sockets=2, switches_per_socket=2, gpus_per_switch=2)  # 128
    jobs = [JobSpec(f"j{i}", float(i % 7), 1 + (i % 3 == 0), float(50 + (i * 37) % 400))
            for i in range(400)]
    seen: list[int] = []
    pol = SrtfPolicy()
    monkeypatch.setattr(pol, "choose_victims", _checked(pol, seen))
    _check_builds(pol, monkeypatch)
    r = Simulation(Trace("many", tuple(jobs)), topo, pol).run()
    assert seen and r.summary["preemptions"] > 0
    assert len(pol._cols.ints) > 64  # the columns grew


def test_columns_rebuild_from_the_running_jobs_when_counts_differ() -> None:
    """`_Columns.sync` takes the engine's running jobs when its own count disagrees."""
    from types import SimpleNamespace

    from schedlab.policies.sjf import _Columns

    jobs = [JobState(i, JobSpec(f"j{i}", float(i), 1 + i % 2, 100.0 + i)) for i in range(5)]
    for i, j in enumerate(jobs):
        j.work, j.rate, j.seg_start, j.version = 3.0 * i, 1.0, 10.0 + i, i
        j.gpus = tuple(range(3 * i, 3 * i + j.spec.num_gpus))
    jobs[4] = JobState(4, JobSpec("cpu", 4.0, 0, 50.0))  # asks for no GPU
    ctx = SimpleNamespace(num_jobs=len(jobs), job_at=jobs.__getitem__, watch_progress=set,
                          topology=uniform_topology(2, sockets=2, switches_per_socket=2,
                                                    gpus_per_switch=2))
    cols = _Columns(ctx)  # type: ignore[arg-type]
    cols.join(jobs[0])
    cols.join(jobs[1])
    assert cols.sync({j.idx: j for j in jobs}) == 4  # 2, 3 joined; 4 counted apart
    assert cols.sync({0: jobs[0], 3: jobs[3]}) == 2  # 1, 2 left; 4 too
    assert sorted(j.idx for j in cols.members) == [0, 3] and not cols.others
    for p, j in enumerate(cols.members):
        assert list(cols.floats[p]) == [j.work, j.rate, j.seg_start, j.spec.duration,
                                        j.spec.submit_time, j.spec.num_gpus * 1.0]
        assert list(cols.ints[p]) == [j.idx, j.idx, j.version]
        assert cols.entries[p] == (j, victims.gpu_spans(ctx.topology.gpu_node, j.gpus))
    assert cols.vsum == sum(j.version for j in cols.members)
