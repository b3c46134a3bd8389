"""Futile restarts end (issue 20): node failures and policy stops share one counter.

A job restarted (by a node failure or a policy's preempt/suspend) more times in a row than
the limit of the restart's cause (`node_failure_retries`, `stop_retries`) without
checkpointed progress between them fails with the reason. Every time is worked out by
hand in the comments.
"""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.policies.base import Policy
from schedlab.sim.engine import Simulation
from schedlab.sim.engine_params import ENGINE_PARAMS
from schedlab.sim.model import JobSpec, Preempt, Start, Suspend, Unschedulable
from schedlab.topologies.build import uniform_topology


def rows(result):
    return result.jobs.set_index("job_id")


@pytest.fixture
def two_gpus():
    return uniform_topology(1, sockets=1, switches_per_socket=1, gpus_per_switch=2,
                            name="two")


class Churn(Policy):
    """Starts job a; every 10 s stops it and starts it again at once (a lossy move)."""

    name = "churn"
    period = 10.0

    def __init__(self, stop: type = Preempt) -> None:
        super().__init__()
        self.stop = stop

    def schedule(self, ctx):
        a = ctx.job("a")
        if a.status == "pending":
            got = ctx.place(a.spec)
            if not isinstance(got, Unschedulable):  # none while its node is down
                yield Start("a", got)
        elif a.status == "running" and ctx.now > 0:
            yield self.stop("a")
            yield Start("a", (0,))


def test_defaults_are_documented():
    assert ENGINE_PARAMS["node_failure_retries"].default == 10
    assert ENGINE_PARAMS["stop_retries"].default == 100


@pytest.mark.parametrize("lossy", [{"stop": "preempt"}, {"checkpoint_on_suspend": False}])
def test_gavel_short_rounds_with_lossy_stops_end(two_gpus, lossy):
    # two 2-GPU jobs of 1000 s, no checkpoints, 60 s rounds: gavel swaps them each round
    # and each stop loses all the work (livelocked before: nothing ever completed).
    # a: runs 0-60, 120-180, 240-300, 360-420; stops at 60, 180, 300 (3 = stop_retries)
    # and the 4th at 420: failed at the end of that pass. b: stopped at 120, 240, 360 (3),
    # resumes at 420 alone and completes at 1420.
    trace = make_trace(JobSpec("a", 0.0, 2, 1000.0), JobSpec("b", 0.0, 2, 1000.0))
    r = Simulation(trace, two_gpus, "gavel-mmf",
                   params={"round": 60.0, "stop_retries": 3, **lossy}).run()
    j = rows(r)
    assert list(j.status) == ["failed", "completed"]
    assert list(j.end_time) == [420.0, 1420.0]
    assert j.loc["a", "reason"] == ("stops by policy 'gavel-mmf': 4 restarts in a row "
                                    "without checkpointed progress (stop_retries=3)")
    assert list(j.preemptions) == [4, 3]
    assert list(j.queueing_delay) == [180.0, 240.0]  # a: 60-120, 180-240, 300-360
    ev = r.events[r.events.job_id == "a"]
    assert list(ev.kind)[-2:] == [("preempt" if "stop" in lossy else "suspend"), "fail"]
    assert list(ev.time)[-2:] == [420.0, 420.0]
    s = r.summary
    assert (s["jobs_failed"], s["jobs_completed"], s["preemptions"]) == (1, 1, 7)


def test_gavel_with_the_default_limit_ends_too(two_gpus):
    # the same swap with stop_retries at its default (100): a fails at its 101st stop,
    # at 60 + 120 x 100 = 12,060 s; b (100 stops) then runs alone for 1000 s
    trace = make_trace(JobSpec("a", 0.0, 2, 1000.0), JobSpec("b", 0.0, 2, 1000.0))
    r = Simulation(trace, two_gpus, "gavel-mmf",
                   params={"round": 60.0, "stop": "preempt"}).run()
    j = rows(r)
    assert list(j.status) == ["failed", "completed"]
    assert list(j.end_time) == [12060.0, 13060.0]
    assert "(stop_retries=100)" in j.loc["a", "reason"]


@pytest.mark.parametrize("name", ["tiresias-las", "tiresias-gittins"])
def test_tiresias_promotions_with_lossy_stops_end(name):
    # the fuzz campaign's livelock: with promotions and `preempt`, three 4-GPU jobs of
    # 100 s without checkpoints on 4 GPUs preempt each other before any finishes (2,000
    # preemptions by t = 20,000 s, nothing completed); now two of them run out of stops
    # and the last one completes
    topo = uniform_topology(1, gpus_per_switch=4)
    trace = make_trace(*(JobSpec(f"j{i}", float(i), 4, 100.0) for i in range(3)))
    r = Simulation(trace, topo, name, params={
        "thresholds": "40,4000", "promote_knob": 2.0, "stop": "preempt",
        "restore_overhead": 0.0, "stop_retries": 5}).run()
    j = rows(r)
    assert list(j.status) == ["failed", "failed", "completed"]
    assert (j.status[:2] == "failed").all() and j.reason[:2].str.contains(
        f"stops by policy '{name}': 6 restarts in a row").all()
    assert r.summary["preemptions"] < 30


def test_a_stop_and_restart_in_the_same_pass_counts_and_fails_at_the_pass_end(one_gpu):
    # a (100 s, no checkpoints) starts at 0; at 10, 20, 30 the policy preempts it and
    # starts it again at once: the 3rd stop passes stop_retries=2 and the job fails at 30,
    # after the pass (its restart in the pass did not save it)
    r = Simulation(make_trace(JobSpec("a", 0.0, 1, 100.0)), one_gpu, Churn(),
                   params={"stop_retries": 2}).run()
    j = rows(r).loc["a"]
    assert (j.status, j.end_time, j.preemptions) == ("failed", 30.0, 3)
    assert j.reason == ("stops by policy 'churn': 3 restarts in a row without checkpointed "
                        "progress (stop_retries=2)")
    assert list(r.events.kind) == ["submit", "start", "preempt", "resume", "preempt",
                                   "resume", "preempt", "resume", "fail"]
    assert j.gpu_seconds == 30.0  # held 0-30, released when it failed


def test_checkpointed_progress_between_stops_resets_the_count(one_gpu):
    # the same churn with checkpointed suspends and no restore pause: every stop keeps
    # 10 s of work, so each stop starts a new row of one: stop_retries=1 never fails it,
    # done at 100 after 9 suspends (0 allows no stop at all, as node_failure_retries=0
    # allows no node-failure restart)
    r = Simulation(make_trace(JobSpec("a", 0.0, 1, 100.0)), one_gpu, Churn(Suspend),
                   params={"stop_retries": 1, "restore_overhead": 0.0}).run()
    j = rows(r).loc["a"]
    assert (j.status, j.end_time, j.preemptions, j.lost_work) == ("completed", 100.0, 9, 0.0)


def test_periodic_checkpoints_between_lossy_stops_reset_the_count(one_gpu):
    # preempts lose work since the last checkpoint (every 5 s of run time): each 10 s
    # attempt keeps 10 s, so the job completes at 100 with a limit of 1 (see above)
    job = JobSpec("a", 0.0, 1, 100.0, checkpoint_interval=5.0)
    r = Simulation(make_trace(job), one_gpu, Churn(),
                   params={"stop_retries": 1, "restore_overhead": 0.0}).run()
    j = rows(r).loc["a"]
    assert (j.status, j.end_time, j.preemptions, j.lost_work) == ("completed", 100.0, 9, 0.0)


def test_node_failures_without_progress_fail_the_job(tmp_path, one_gpu):
    # a (100 s, no checkpoints) starts at 0; node0 fails at 10 (up at 20) and at 30 (up
    # at 40): the 1st restart is allowed (node_failure_retries=1), the 2nd fails it at 30
    failures = tmp_path / "f.csv"
    failures.write_text("node,fail_time,repair_time\nnode0,10,20\nnode0,30,40\n")
    r = Simulation(make_trace(JobSpec("a", 0.0, 1, 100.0)), one_gpu, "fifo",
                   params={"failures": str(failures), "node_failure_retries": 1}).run()
    j = rows(r).loc["a"]
    assert (j.status, j.end_time, j.restarts, j.lost_work) == ("failed", 30.0, 1, 20.0)
    assert j.reason == ("node failures: 2 restarts in a row without checkpointed progress "
                        "(node_failure_retries=1)")


def test_node_failures_and_policy_stops_share_one_counter(tmp_path, one_gpu):
    # a (100 s, no checkpoints): stopped and restarted by the policy at 10 (1), its node
    # fails at 15 (2; up at 16, restarted then), stopped at 20 (3 > stop_retries=2): fails
    failures = tmp_path / "f.csv"
    failures.write_text("node,fail_time,repair_time\nnode0,15,16\n")
    r = Simulation(make_trace(JobSpec("a", 0.0, 1, 100.0)), one_gpu, Churn(),
                   params={"failures": str(failures), "stop_retries": 2,
                           "restore_overhead": 0.0}).run()
    j = rows(r).loc["a"]
    assert (j.status, j.end_time) == ("failed", 20.0)
    assert j.reason == ("node failures and stops by policy 'churn': 3 restarts in a row "
                        "(1 node failure, 2 stops) without checkpointed progress "
                        "(stop_retries=2)")


def test_lifetime_while_waiting_to_retry_counts_that_wait_as_queueing(one_gpu):
    # a fails at 10 (its own fault, 1 retry), waits retry_delay=50 (until 60) but its
    # max_lifetime of 30 s from its start ends it at 30: it waited 10..30 = 20 s
    job = JobSpec("a", 0.0, 1, 100.0, fail_at=10.0, max_retries=1, max_lifetime=30.0)
    r = Simulation(make_trace(job), one_gpu, "fifo", params={"retry_delay": 50.0}).run()
    j = rows(r).loc["a"]
    assert (j.status, j.end_time, j.reason) == ("killed", 30.0, "max_lifetime")
    assert j.queueing_delay == 20.0
    assert r.summary["queueing_delay_mean"] == 20.0
