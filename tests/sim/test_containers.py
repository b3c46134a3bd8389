"""Container jobs (Kubernetes Job semantics, `schedlab.sim.containers`): exact, hand-computed runs.

Every scenario gives the time of each task run's events, the job's end, status and
totals; events of task runs carry the container job's id and `run=k` in the detail.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.policies.conformance import check_invariants
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec, RestartPolicy
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace
from schedlab.traces.synthetic import from_records


@pytest.fixture
def four():
    """One node of 4 GPUs."""
    return uniform_topology(1, gpus_per_switch=4, name="four")


@pytest.fixture
def two():
    """One node of 2 GPUs."""
    return uniform_topology(1, sockets=1, switches_per_socket=1, gpus_per_switch=2, name="two")


def container(**kw: Any) -> dict[str, Any]:
    """The container job `c`: 1 GPU and 100 s per task run, 5 completions, 2 at once."""
    return {"job_id": "c", "submit_time": 0, "num_gpus": 1, "duration": 100,
            "completions": 5, "parallelism": 2, **kw}


def simulate(records: list[dict[str, Any]], topo: Any, policy: str = "fifo",
             **params: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    r = Simulation(from_records(records), topo, policy, seed=0, params=params).run()
    return r.jobs.set_index("job_id"), r.events


def runs(events: pd.DataFrame, job: str = "c") -> dict[int, list[tuple[str, float]]]:
    """(kind, time) of each task run's events but submit, by run number."""
    out: dict[int, list[tuple[str, float]]] = {}
    ev = events[events.job_id == job]
    for t, kind, detail in zip(ev.time, ev.kind, ev.detail, strict=True):
        tag = [p for p in str(detail).split(";") if p.startswith("run=")]
        if tag and kind != "submit":
            out.setdefault(int(tag[0][4:]), []).append((kind, float(t)))
    return out


def row(jobs: pd.DataFrame, job: str = "c") -> tuple[Any, ...]:
    j = jobs.loc[job]
    return (j.status, float(j.start_time), float(j.end_time), float(j.jct),
            float(j.queueing_delay), float(j.run_time), float(j.gpu_seconds), int(j.restarts),
            float(j.lost_work))


def test_never_replaces_the_failed_run_with_a_new_one(four) -> None:
    # run 0 fails 30 s in; run 2 replaces it at once, from zero (its checkpoint at 20 is
    # lost with it: lost_work 30); each success makes room for the next run
    jobs, ev = simulate([container(fail_at=30, failed_runs=1, checkpoint_interval=20)], four)
    assert runs(ev) == {
        0: [("start", 0.0), ("fail", 30.0)],
        1: [("start", 0.0), ("finish", 100.0)],
        2: [("start", 30.0), ("finish", 130.0)],
        3: [("start", 100.0), ("finish", 200.0)],
        4: [("start", 130.0), ("finish", 230.0)],
        5: [("start", 200.0), ("finish", 300.0)],
    }
    assert row(jobs) == ("completed", 0.0, 300.0, 300.0, 0.0, 530.0, 530.0, 1, 30.0)
    assert float(jobs.gpu_time["c"]) == 500.0  # 5 completions x 100 s x 1 GPU
    assert len(jobs) == 1  # one row per trace job
    last = ev.iloc[-1]
    assert (last.job_id, last.kind, last.time, last.detail) == ("c", "finish", 300.0, "")


def test_on_failure_restarts_the_run_in_place(four) -> None:
    # run 0 fails 30 s in and restarts on its own GPU from its checkpoint at 20 (lost 10):
    # it finishes at 30 + 80 = 110; runs 2-4 follow the successes
    jobs, ev = simulate([container(fail_at=30, failed_runs=1, checkpoint_interval=20,
                                   restart_policy="OnFailure")], four)
    assert runs(ev) == {
        0: [("start", 0.0), ("fail", 30.0), ("resume", 30.0), ("finish", 110.0)],
        1: [("start", 0.0), ("finish", 100.0)],
        2: [("start", 100.0), ("finish", 200.0)],
        3: [("start", 110.0), ("finish", 210.0)],
        4: [("start", 200.0), ("finish", 300.0)],
    }
    assert row(jobs) == ("completed", 0.0, 300.0, 300.0, 0.0, 510.0, 510.0, 1, 10.0)
    r0 = ev[ev.detail.astype(str).str.endswith("run=0")]
    assert set(r0.cells[r0.kind.isin(["start", "fail", "resume"])]) == {"node0:1"}
    assert list(r0.detail[r0.kind == "resume"]) == ["in place;run=0"]


def test_on_failure_restart_waits_retry_delay_on_its_gpus(four) -> None:
    # restarted in place after retry_delay 5, holding its GPU: 30 + 5 + 100 = 135
    jobs, ev = simulate([container(fail_at=30, failed_runs=1, restart_policy="OnFailure",
                                   completions=1)], four, retry_delay=5.0)
    assert runs(ev) == {0: [("start", 0.0), ("fail", 30.0), ("resume", 30.0),
                            ("finish", 135.0)]}
    assert row(jobs) == ("completed", 0.0, 135.0, 135.0, 0.0, 135.0, 135.0, 1, 30.0)
    # the wait is the retry delay, not a restore (restore_overhead is not paid here)
    assert list(ev.detail[ev.kind == "resume"]) == ["in place;retry_delay=5;run=0"]


def test_active_deadline_from_first_start_kills_the_live_runs(four) -> None:
    # b holds all 4 GPUs until 50, so c (submitted at 10) first starts at 50; 150 s later
    # (at 200) runs 3 and 4 are killed and the job with them
    records = [{"job_id": "b", "submit_time": 0, "num_gpus": 4, "duration": 50},
               container(submit_time=10, fail_at=30, failed_runs=1, active_deadline=150)]
    jobs, ev = simulate(records, four)
    why = "DeadlineExceeded: active_deadline 150s since the first start"
    assert runs(ev) == {
        0: [("start", 50.0), ("fail", 80.0)],
        1: [("start", 50.0), ("finish", 150.0)],
        2: [("start", 80.0), ("finish", 180.0)],
        3: [("start", 150.0), ("kill", 200.0)],
        4: [("start", 180.0), ("kill", 200.0)],
    }
    assert row(jobs) == ("killed", 50.0, 200.0, 190.0, 40.0, 300.0, 300.0, 1, 30.0)
    assert jobs.reason["c"] == why
    assert float(jobs.response_time["c"]) == 40.0
    kills = ev[(ev.job_id == "c") & (ev.kind == "kill")]
    assert list(kills.detail) == [f"{why};run=3", f"{why};run=4", why]


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
def test_backoff_limit_exceeded_fails_the_job(four, policy: str) -> None:
    # runs 0 and 1 both fail at 30: the second failure is more than backoff_limit 1.
    # Never: run 0's replacement (run 2) was queued and is killed with the job;
    # OnFailure: run 0 restarted in place and is killed with the job
    jobs, ev = simulate([container(fail_at=30, failed_runs=3, backoff_limit=1,
                                   restart_policy=policy)], four)
    why = "BackoffLimitExceeded: 2 failed task runs, backoff_limit 1"
    if policy == "Never":
        assert runs(ev) == {0: [("start", 0.0), ("fail", 30.0)],
                            1: [("start", 0.0), ("fail", 30.0)], 2: [("kill", 30.0)]}
    else:
        assert runs(ev) == {0: [("start", 0.0), ("fail", 30.0), ("resume", 30.0),
                                ("kill", 30.0)],
                            1: [("start", 0.0), ("fail", 30.0)]}
    # both runs lose their 30 s (run 0 under OnFailure on its failure, none after)
    assert row(jobs) == ("failed", 0.0, 30.0, 30.0, 0.0, 60.0, 60.0, 2, 60.0)
    assert jobs.reason["c"] == why


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
def test_fail_at_without_failed_runs_fails_every_attempt(four, policy: str) -> None:
    # as for any job, every attempt fails 30 s in: the third failure passes backoff 2
    jobs, ev = simulate([container(completions=2, parallelism=1, fail_at=30,
                                   backoff_limit=2, restart_policy=policy)], four)
    if policy == "Never":
        assert runs(ev) == {0: [("start", 0.0), ("fail", 30.0)],
                            1: [("start", 30.0), ("fail", 60.0)],
                            2: [("start", 60.0), ("fail", 90.0)]}
    else:
        assert runs(ev) == {0: [("start", 0.0), ("fail", 30.0), ("resume", 30.0),
                                ("fail", 60.0), ("resume", 60.0), ("fail", 90.0)]}
    assert row(jobs) == ("failed", 0.0, 90.0, 90.0, 0.0, 90.0, 90.0, 3, 90.0)


def test_a_node_failure_requeues_the_runs_without_counting_a_failure(
        four, tmp_path: Any) -> None:
    # the node fails at 50 and is back at 80: both runs are requeued (same run numbers,
    # no backoff used), wait 50..80 and run again from zero: 80..180
    f = tmp_path / "failures.csv"
    f.write_text("node,fail_time,repair_time\nnode0,50,80\n")
    jobs, ev = simulate([container(completions=2, backoff_limit=0)], four,
                        failures=str(f))
    assert runs(ev) == {
        0: [("start", 0.0), ("fail", 50.0), ("retry", 50.0), ("resume", 80.0),
            ("finish", 180.0)],
        1: [("start", 0.0), ("fail", 50.0), ("retry", 50.0), ("resume", 80.0),
            ("finish", 180.0)],
    }
    assert row(jobs) == ("completed", 0.0, 180.0, 180.0, 30.0, 300.0, 300.0, 2, 100.0)


def test_parallelism_above_the_remaining_completions(four) -> None:
    # completions 3, parallelism 5: only 3 runs at once; when run 0 fails at 30 its
    # replacement is the only one needed after runs 1 and 2 succeed at 100
    jobs, ev = simulate([container(completions=3, parallelism=5, fail_at=30,
                                   failed_runs=1)], four)
    assert runs(ev) == {
        0: [("start", 0.0), ("fail", 30.0)],
        1: [("start", 0.0), ("finish", 100.0)],
        2: [("start", 0.0), ("finish", 100.0)],
        3: [("start", 30.0), ("finish", 130.0)],
    }
    assert row(jobs) == ("completed", 0.0, 130.0, 130.0, 0.0, 330.0, 330.0, 1, 30.0)


def test_a_preempted_task_run_is_requeued_neither_success_nor_failure(two) -> None:
    # srtf suspends both runs (80 s left each) for s (10 s on both GPUs) at 20; they
    # resume at 30 with restore_overhead 30 and their 80 s left: 140; run 2 140..240.
    # The job waited 20..30 with no run holding GPUs
    records = [container(completions=3), {"job_id": "s", "submit_time": 20,
                                          "num_gpus": 2, "duration": 10}]
    jobs, ev = simulate(records, two, "srtf")
    assert runs(ev) == {
        0: [("start", 0.0), ("suspend", 20.0), ("resume", 30.0), ("finish", 140.0)],
        1: [("start", 0.0), ("suspend", 20.0), ("resume", 30.0), ("finish", 140.0)],
        2: [("start", 140.0), ("finish", 240.0)],
    }
    assert row(jobs) == ("completed", 0.0, 240.0, 240.0, 10.0, 360.0, 360.0, 0, 0.0)
    assert int(jobs.preemptions["c"]) == 2


def test_a_container_job_waits_for_its_dependency(four) -> None:
    # d depends on a (0..40): its runs start at 40, after x (3 GPUs, 1..11) went by
    records = [{"job_id": "a", "submit_time": 0, "num_gpus": 1, "duration": 40},
               container(job_id="d", submit_time=0, completions=2, depends_on="a"),
               {"job_id": "x", "submit_time": 1, "num_gpus": 3, "duration": 10}]
    jobs, ev = simulate(records, four)
    assert runs(ev, "d") == {0: [("start", 40.0), ("finish", 140.0)],
                             1: [("start", 40.0), ("finish", 140.0)]}
    # time held for a dependency is not queueing
    assert row(jobs, "d") == ("completed", 40.0, 140.0, 140.0, 0.0, 200.0, 200.0, 0, 0.0)
    assert float(jobs.start_time["x"]) == 1.0


def test_policy_without_container_support_rejects_with_its_reason(four) -> None:
    from schedlab.policies.fifo import FifoPolicy

    class NoContainers(FifoPolicy):
        name = "no-containers"
        container_jobs = False

    r = Simulation(from_records([container()]), four, NoContainers(), seed=0).run()
    assert r.jobs.status.tolist() == ["rejected"]
    assert r.jobs.reason[0] == ("policy 'no-containers' does not support container jobs "
                                "(completions 5): its own per-job structures cannot take "
                                "task runs")


def test_unfinished_container_job_is_censored_with_its_runs_so_far(four) -> None:
    r = Simulation(from_records([container()]), four, "fifo", seed=0).run(until=150)
    j = r.jobs.set_index("job_id").loc["c"]
    # runs 0, 1 done at 100; runs 2, 3 running 100..150
    assert (j.status, j.censored, float(j.run_time), float(j.gpu_seconds)) == (
        "unfinished", True, 300.0, 300.0)


# --- invariants over random mixes of container jobs and gangs (hypothesis, bounded) ---

POLICIES = ["fifo", "fifo-backfill", "sjf", "srtf", "drf", "gandiva", "tiresias-las",
            "easy-backfill", "hived", "themis-ftf"]


@st.composite
def container_mix(draw: Any) -> tuple[Any, Trace, list[tuple[int, int, int]]]:
    topo = uniform_topology(draw(st.integers(1, 3)), switches_per_socket=2,
                            gpus_per_switch=draw(st.integers(1, 2)))
    jobs = []
    for i in range(draw(st.integers(1, 12))):
        g = draw(st.integers(0, min(4, topo.num_gpus)))
        t = float(draw(st.integers(0, 100)))
        d = float(draw(st.integers(5, 150)))
        ckpt = draw(st.sampled_from([None, 20.0]))
        if draw(st.booleans()):
            failing = draw(st.sampled_from([None, 1, 2, -1]))  # -1: every attempt
            jobs.append(JobSpec(
                f"c{i}", t, g, d, checkpoint_interval=ckpt,
                completions=draw(st.integers(1, 5)), parallelism=draw(st.integers(1, 4)),
                restart_policy=draw(st.sampled_from(list(RestartPolicy))),
                backoff_limit=draw(st.integers(0, 3)),
                active_deadline=draw(st.sampled_from([None, None, 120.0])),
                fail_at=None if failing is None else float(draw(st.integers(3, 60))),
                extra=(("failed_runs", failing),) if failing and failing > 0 else ()))
        else:
            jobs.append(JobSpec(f"p{i}", t, g, d, checkpoint_interval=ckpt,
                                fail_at=draw(st.sampled_from([None, None, 30.0])),
                                max_retries=draw(st.integers(0, 2))))
    failures = draw(st.lists(st.tuples(st.integers(0, len(topo.nodes) - 1),
                                       st.integers(0, 300), st.integers(1, 100)),
                             max_size=2))
    return topo, Trace("hyp-containers", tuple(jobs)), failures


def _run_tag(detail: Any) -> int | None:
    for part in str(detail).split(";"):
        if part.startswith("run="):
            return int(part[4:])
    return None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=container_mix(), policy=st.sampled_from(POLICIES))
def test_container_invariants(case: Any, policy: str, tmp_path_factory: Any) -> None:
    topo, trace, failures = case
    f = tmp_path_factory.mktemp("fail") / "failures.csv"
    f.write_text("node,fail_time,repair_time\n" + "".join(
        f"{n},{t},{t + dt}\n" for n, t, dt in failures))
    r = Simulation(trace, topo, policy, seed=0,
                   params={"failures": str(f), "failure_rate": 2.0}).run()
    # GPU time conserved, no over-commit, every task run holds its whole request
    check_invariants(r, topo, trace)
    assert sorted(r.jobs.job_id) == sorted(j.job_id for j in trace.jobs)
    jobs = r.jobs.set_index("job_id")
    for s in trace.jobs:
        if s.completions is None:
            continue
        ev = r.events[r.events.job_id == s.job_id]
        tags = [_run_tag(d) for d in ev.detail]
        own = ev[[t is None for t in tags]]
        status = jobs.status[s.job_id]
        if status == "rejected" and not len(ev[[t is not None for t in tags]]):
            continue
        # the job's last own event is its end; no task run has an event after it
        assert own.kind.iloc[0] == "submit"
        end = float(jobs.end_time[s.job_id])
        assert (ev.time <= end + 1e-9).all()
        holding: set[int] = set()
        most = 0
        done = attempts_failed = 0
        for kind, tag, detail in zip(ev.kind, tags, ev.detail, strict=True):
            if tag is None:
                continue
            if kind in ("start", "resume"):
                holding.add(tag)
            elif kind in ("preempt", "suspend", "fail", "finish", "kill", "reject"):
                holding.discard(tag)
            most = max(most, len(holding))
            done += kind == "finish"
            attempts_failed += kind == "fail" and str(detail).startswith("attempt failed")
        assert most <= min(s.parallelism, s.completions)
        if status == "completed":
            assert done == s.completions
            assert attempts_failed <= s.backoff_limit
        elif str(jobs.reason[s.job_id]).startswith("BackoffLimitExceeded"):
            assert attempts_failed == s.backoff_limit + 1
            assert done < s.completions
        assert float(jobs.gpu_seconds[s.job_id]) >= 0.0


def test_runs_rejected_in_one_pass_end_the_job_after_the_pass(four) -> None:
    # the policy rejects both pending runs in one pass: the job is rejected at once, after
    # the pass (the second Reject is still valid), naming the first rejected run
    from schedlab.policies.base import Policy
    from schedlab.sim.model import Reject

    class NoRuns(Policy):
        name = "no-runs"

        def schedule(self, ctx: Any) -> Any:
            for job in list(ctx.pending()):
                yield Reject(job.job_id, "no task runs here")

    r = Simulation(from_records([container()]), four, NoRuns(), seed=0).run()
    j = r.jobs.set_index("job_id").loc["c"]
    assert (j.status, float(j.end_time), j.reason) == (
        "rejected", 0.0, "task run 0: no task runs here")
    ev = r.events
    assert list(zip(ev.kind, ev.detail, strict=True)) == [
        ("submit", ""), ("submit", "run=0"), ("submit", "run=1"),
        ("reject", "no task runs here;run=0"), ("reject", "no task runs here;run=1"),
        ("reject", "task run 0: no task runs here")]


def test_a_node_failure_that_ends_a_container_job_skips_its_sibling_runs(tmp_path) -> None:
    # two runs of one container job on node0; the failure of node0 fails the first run
    # (node_failure_retries 0), which exceeds backoff_limit 0 and kills the job and with
    # it the second run, before the failure reaches that run (regression: the node-failure
    # loop interrupted the killed run again and crashed)
    from schedlab.sim.engine import Simulation as Sim
    from schedlab.topologies.build import uniform_topology as uni
    from schedlab.traces.synthetic import from_records as recs

    failures = tmp_path / "failures.csv"
    failures.write_text("node,fail_time,repair_time\nnode0,50,60\n")
    trace = recs([{"job_id": "c", "submit_time": 0.0, "num_gpus": 1, "duration": 100.0,
                   "completions": 2, "parallelism": 2, "backoff_limit": 0}])
    topo = uni(1, sockets=1, switches_per_socket=1, gpus_per_switch=2, name="two")
    r = Sim(trace, topo, "fifo", seed=0,
            params={"failures": str(failures), "node_failure_retries": 0}).run()
    j = r.jobs.set_index("job_id")
    assert j.status["c"] == "failed"
    assert j.reason["c"] == "BackoffLimitExceeded: 1 failed task runs, backoff_limit 0"
    assert j.end_time["c"] == 50.0
    assert j.gpu_seconds["c"] == pytest.approx(100.0)
