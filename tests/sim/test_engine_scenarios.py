"""Hand-computed scenarios: every expected time below is worked out in the comment."""

from __future__ import annotations

import math

import pytest
from conftest import make_trace

from schedlab.policies.base import Policy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidDecision, InvalidParameter
from schedlab.sim.model import JobSpec, Preempt, Reject, Start, Suspend


class Script(Policy):
    """Applies fixed decisions at fixed times (for exact engine tests)."""

    name = "script"

    def __init__(self, plan):
        super().__init__()
        self.plan = sorted(plan.items())
        self.done = set()

    def attach(self, ctx):
        for t, _ in self.plan:
            ctx.wake_at(t)

    def schedule(self, ctx):
        for t, decisions in self.plan:
            if t <= ctx.now and t not in self.done:
                self.done.add(t)
                yield from decisions


def rows(result):
    return result.jobs.set_index("job_id")


def test_two_one_gpu_jobs_share_one_gpu_in_fifo_order(one_gpu):
    # a: 0..10, b waits for a and runs 10..15
    trace = make_trace(("a", 0.0, 1, 10.0), ("b", 0.0, 1, 5.0))
    r = Simulation(trace, one_gpu, "fifo").run()
    j = rows(r)
    assert list(j.start_time) == [0.0, 10.0]
    assert list(j.end_time) == [10.0, 15.0]
    assert list(j.queueing_delay) == [0.0, 10.0]
    assert list(j.jct) == [10.0, 15.0]
    assert r.summary["makespan"] == 15.0
    assert r.summary["utilization_mean"] == pytest.approx(1.0)
    log = [(e.time, e.job_id, e.kind) for e in r.events.itertuples()]
    assert log == [(0.0, "a", "submit"), (0.0, "b", "submit"), (0.0, "a", "start"),
                   (10.0, "a", "finish"), (10.0, "b", "start"), (15.0, "b", "finish")]


@pytest.mark.parametrize(
    ("gpus", "sensitivity", "end"),
    [
        ((0, 1), 1.0, 100.0),   # same switch: the best level for 2 GPUs, no slowdown
        ((0, 2), 1.0, 140.0),   # across a PCIe switch: socket factor 1.4 -> 100 * 1.4
        ((0, 4), 1.0, 170.0),   # across sockets: node factor 1.7
        ((0, 8), 1.0, 500.0),   # across nodes: 5x for a fully sensitive 2-GPU job
        ((0, 2), 0.5, 120.0),   # half as sensitive: 1 + 0.5 * (1.4 - 1) = 1.2
        ((0, 8), 0.0, 100.0),   # insensitive jobs do not care where they run
    ],
)
def test_locality_slowdown(dgx2, gpus, sensitivity, end):
    job = JobSpec("j", 0.0, 2, 100.0, locality_sensitivity=sensitivity)
    r = Simulation(make_trace(job), dgx2, Script({0.0: [Start("j", gpus)]})).run()
    assert rows(r).loc["j", "end_time"] == pytest.approx(end)


def test_locality_is_relative_to_the_best_level_for_the_size(dgx2):
    # 16 GPUs cannot be closer than the cluster level: no slowdown at all
    job = JobSpec("big", 0.0, 16, 100.0)
    r = Simulation(make_trace(job), dgx2, "fifo").run()
    j = rows(r).loc["big"]
    assert j.end_time == 100.0 and j.locality_level == "cluster"


def test_preemption_loses_work_since_last_checkpoint(one_gpu):
    # checkpoints every 30 s of run time -> at 30 and 60; preempted at 70 it loses 10 s.
    # restarted at once at 70, restore takes 5 s, 40 s of work remain: 75 + 40 = 115.
    job = JobSpec("j", 0.0, 1, 100.0, checkpoint_interval=30.0)
    plan = {0.0: [Start("j", (0,))], 70.0: [Preempt("j"), Start("j", (0,))]}
    r = Simulation(make_trace(job), one_gpu, Script(plan),
                   params={"restore_overhead": 5.0}).run()
    j = rows(r).loc["j"]
    assert j.end_time == pytest.approx(115.0)
    assert j.lost_work == pytest.approx(10.0)
    assert j.preemptions == 1
    assert j.run_time == pytest.approx(115.0)
    assert j.queueing_delay == 0.0
    kinds = list(r.events.kind)
    assert kinds == ["submit", "start", "preempt", "resume", "finish"]
    assert r.summary["lost_gpu_hours"] == pytest.approx(10.0 / 3600)


def test_preemption_without_checkpoint_loses_everything(one_gpu):
    # no checkpoint_interval: the 70 s done are lost; rerun from 80 (+0 overhead as
    # no work survives) for the full 100 s -> 180.
    job = JobSpec("j", 0.0, 1, 100.0)
    plan = {0.0: [Start("j", (0,))], 70.0: [Preempt("j")], 80.0: [Start("j", (0,))]}
    r = Simulation(make_trace(job), one_gpu, Script(plan),
                   params={"restore_overhead": 5.0}).run()
    j = rows(r).loc["j"]
    assert j.end_time == pytest.approx(180.0)
    assert j.lost_work == pytest.approx(70.0)
    assert j.queueing_delay == pytest.approx(10.0)
    assert j.run_time == pytest.approx(170.0)


def test_suspend_checkpoints_first_by_default(one_gpu):
    # suspended at 40 with its state saved, resumed at 50 with 5 s restore: 55 + 60 = 115
    job = JobSpec("j", 0.0, 1, 100.0)
    plan = {0.0: [Start("j", (0,))], 40.0: [Suspend("j")], 50.0: [Start("j", (0,))]}
    r = Simulation(make_trace(job), one_gpu, Script(plan),
                   params={"restore_overhead": 5.0}).run()
    j = rows(r).loc["j"]
    assert (j.end_time, j.lost_work, j.queueing_delay) == (115.0, 0.0, 10.0)


def test_checkpoint_clock_restarts_after_restore(one_gpu):
    # ckpt every 30 s. Preempt at 40 (ckpt at 30, lose 10). Restart at 40, restore 10:
    # progress from 50 with work 30; next checkpoint 30 s later at 80 (work 60).
    # Preempt at 90: lose 10 -> work 60. Restart at 90, restore 10: 100 + 40 = 140.
    job = JobSpec("j", 0.0, 1, 100.0, checkpoint_interval=30.0)
    plan = {0.0: [Start("j", (0,))], 40.0: [Preempt("j"), Start("j", (0,))],
            90.0: [Preempt("j"), Start("j", (0,))]}
    r = Simulation(make_trace(job), one_gpu, Script(plan),
                   params={"restore_overhead": 10.0}).run()
    j = rows(r).loc["j"]
    assert j.end_time == pytest.approx(140.0)
    assert j.lost_work == pytest.approx(20.0)


def test_invalid_decisions_are_refused_loudly(dgx2):
    trace = make_trace(("a", 0.0, 2, 10.0), ("b", 0.0, 2, 10.0))
    cases = [
        ([Start("a", (0, 1)), Start("b", (1, 2))], "GPU 1"),       # GPU taken
        ([Start("a", (0,))], "all or nothing"),                      # partial gang
        ([Start("zz", (0, 1))], "unknown job 'zz'"),
        ([Preempt("a")], "must be running"),
        ([Start("a", (0, 99))], "GPU 99 does not exist"),
    ]
    for decisions, message in cases:
        with pytest.raises(InvalidDecision, match=message):
            Simulation(trace, dgx2, Script({0.0: decisions})).run()


def test_rejected_by_policy_records_reason(one_gpu):
    r = Simulation(make_trace(("a", 0.0, 1, 10.0)), one_gpu,
                   Script({0.0: [Reject("a", "not today")]})).run()
    j = rows(r).loc["a"]
    assert j.status == "rejected" and j.reason == "not today"


def test_job_larger_than_cluster_is_rejected_with_reason(dgx2):
    r = Simulation(make_trace(("huge", 0.0, 32, 10.0), ("ok", 1.0, 1, 10.0)), dgx2,
                   "fifo").run()
    j = rows(r)
    assert j.loc["huge", "status"] == "rejected"
    assert "32 GPUs" in j.loc["huge", "reason"]
    assert j.loc["ok", "status"] == "completed"


def test_unknown_gpu_type_is_rejected(dgx2):
    r = Simulation(make_trace(JobSpec("a", 0.0, 1, 10.0, gpu_type="H100")), dgx2, "fifo").run()
    assert "H100" in rows(r).loc["a", "reason"]


def test_until_leaves_jobs_unfinished(one_gpu):
    trace = make_trace(("a", 0.0, 1, 10.0), ("b", 0.0, 1, 10.0), ("c", 50.0, 1, 1.0))
    r = Simulation(trace, one_gpu, "fifo").run(until=15.0)
    j = rows(r)
    assert list(j.index) == ["a", "b"]  # c was not submitted by t=15
    assert list(j.status) == ["completed", "unfinished"]
    assert j.loc["b", "run_time"] == 5.0 and j.loc["b", "queueing_delay"] == 10.0
    assert r.summary["jobs_unfinished"] == 1


def test_fractional_jobs_share_a_gpu(one_gpu):
    trace = make_trace(JobSpec("a", 0.0, 1, 10.0, gpu_share=0.5),
                       JobSpec("b", 0.0, 1, 10.0, gpu_share=0.5),
                       JobSpec("c", 0.0, 1, 10.0, gpu_share=0.5))
    r = Simulation(trace, one_gpu, "fifo").run()
    j = rows(r)
    assert list(j.start_time) == [0.0, 0.0, 10.0]
    assert r.timeline.gpus_busy.max() == 1.0


def test_fail_at_retries_then_fails(one_gpu):
    # each attempt fails 4 s in (no checkpoint: all lost); 1 retry after 2 s, then failed
    job = JobSpec("a", 0.0, 1, 10.0, fail_at=4.0, max_retries=1)
    r = Simulation(make_trace(job), one_gpu, "fifo", params={"retry_delay": 2.0}).run()
    j = rows(r).loc["a"]
    assert (j.status, j.restarts, j.end_time, j.lost_work) == ("failed", 1, 10.0, 8.0)
    assert list(r.events.kind) == ["submit", "start", "fail", "retry", "resume", "fail"]
    assert j.queueing_delay == 2.0


def test_max_lifetime_kills(one_gpu):
    job = JobSpec("a", 0.0, 1, 100.0, max_lifetime=30.0)
    r = Simulation(make_trace(job), one_gpu, "fifo").run()
    j = rows(r).loc["a"]
    assert (j.status, j.end_time, j.reason) == ("killed", 30.0, "max_lifetime")


def test_unknown_engine_or_policy_parameter_lists_known(one_gpu):
    with pytest.raises(InvalidParameter, match="known: .*placer"):
        Simulation(make_trace(("a", 0.0, 1, 1.0)), one_gpu, "fifo", params={"placr": "pack"})
    with pytest.raises(InvalidParameter, match="did you mean 'pack'"):
        Simulation(make_trace(("a", 0.0, 1, 1.0)), one_gpu, "fifo", params={"placer": "pak"})


def test_nan_free_summary_on_normal_run(dgx2):
    trace = make_trace(*[(f"j{i}", float(i), 1 + i % 3, 10.0 + i) for i in range(20)])
    s = Simulation(trace, dgx2, "fifo").run().summary
    for k in ("utilization_mean", "fragmentation_mean", "jct_mean", "fairness_jain"):
        assert not math.isnan(s[k]), k


def test_stale_completions_do_not_pile_up_in_the_heap(dgx2):
    # a job migrated back and forth 3,000 times leaves 3,000 stale completions behind;
    # the heap is compacted, so it stays small
    from schedlab.sim.model import Migrate

    class PingPong(Policy):
        name = "pingpong"

        def __init__(self):
            super().__init__()
            self.n = 0

        def attach(self, ctx):
            ctx.wake_at(0.0)

        def schedule(self, ctx):
            j = ctx.job("j")
            if j.status == "pending":
                yield Start("j", (0,))
                ctx.wake_at(ctx.now + 1.0)
            elif j.status == "running" and self.n < 3000:
                self.n += 1
                yield Migrate("j", ((self.n % 2),))
                ctx.wake_at(ctx.now + 1.0)

    sim = Simulation(make_trace(("j", 0.0, 1, 1e6)), dgx2, PingPong(),
                     params={"restore_overhead": 0.0})
    from schedlab.sim.engine import Run as _Run

    run = _Run(sim, None, None)
    sim.policy.attach(run.ctx)
    run.env.process(run.process())
    run.env.run(until=2000.5)
    assert len(run.agenda) < 1100
    assert run.jobs[0].migrations == 2000


def test_place_if_freed_is_a_pure_what_if(dgx2):
    from schedlab.sim.model import Unschedulable

    seen = {}

    class WhatIf(Policy):
        name = "whatif"

        def schedule(self, ctx):
            a, b = ctx.job("a"), ctx.job("b")
            if a.status == "pending":
                yield Start("a", tuple(range(16)))
            elif b.status == "pending" and "b" not in seen:
                seen["b"] = (ctx.place(b), ctx.place_if_freed(b, [a]),
                             ctx.cluster.free_whole)

    trace = make_trace(("a", 0.0, 16, 100.0), ("b", 1.0, 4, 10.0))
    Simulation(trace, dgx2, WhatIf()).run(until=5.0)
    now, freed, free_after = seen["b"]
    assert isinstance(now, Unschedulable) and len(freed) == 4 and free_after == 0


def test_the_clock_lands_exactly_on_each_instant(dgx2):
    # 4.909 + (14.699 - 4.909) is 14.698999999999998 in floats: SimPy's clock used to stop
    # there, so b started 1.8e-15 s before it was submitted
    assert 4.909 + (14.699 - 4.909) != 14.699
    trace = make_trace(("a", 4.909, 1, 100.0), ("b", 14.699, 1, 5.0))
    j = rows(Simulation(trace, dgx2, "fifo").run())
    assert j.loc["b", "start_time"] == 14.699
    assert j.loc["b", "queueing_delay"] == 0.0
    assert j.loc["b", "end_time"] == 14.699 + 5.0
