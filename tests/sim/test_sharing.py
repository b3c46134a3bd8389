"""Co-location in the engine: analytic time-slicing checked against a literal simulation,
and packing with its interference model."""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.policies.base import Policy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidDecision
from schedlab.sim.model import JobSpec, Start
from schedlab.topologies.build import uniform_topology


class Share(Policy):
    """Starts the first job alone on GPU set `gpus`, every other one shared on it."""

    name = "share"

    def __init__(self, mode, gpus=(0,), time_slice=60.0, switch_cost=0.5, penalty=0.1):
        super().__init__()
        self.mode, self.gpus = mode, gpus
        self.model = dict(time_slice=time_slice, switch_cost=switch_cost, pack_penalty=penalty)

    def attach(self, ctx):
        ctx.configure_sharing(**self.model)

    def schedule(self, ctx):
        for job in list(ctx.pending()):
            alone = not any(ctx.cluster.gpu_holders[g] for g in self.gpus)
            yield Start(job.job_id, self.gpus, "" if alone else self.mode)


def literal_timeslice(jobs, T, c):
    """Round-robin slices of T s; each slice a job switches in costs c s of no progress.

    jobs: list of (job_id, submit, work). Returns job_id -> completion time. A job alone
    keeps running without switching.
    """
    t = 0.0
    left = {j: w for j, _, w in jobs}
    arrivals = sorted((s, j) for j, s, _ in jobs)
    active: list[str] = []
    done = {}
    last = None
    while left:
        while arrivals and arrivals[0][0] <= t:
            active.append(arrivals.pop(0)[1])
        if not active:
            t = arrivals[0][0]
            continue
        j = active.pop(0)
        switch = c if (last is not None and last != j) or (last is None and len(active)) else 0
        if not active and last == j:
            switch = 0.0
        run = min(T, switch + left[j])
        t += run
        left[j] -= max(0.0, run - switch)
        last = j
        if left[j] <= 1e-9:
            done[j] = t
            del left[j]
        else:
            active.append(j)
    return done


@pytest.mark.parametrize("works", [(300.0, 200.0), (500.0, 500.0, 500.0, 500.0),
                                   (1000.0, 120.0, 400.0)])
def test_analytic_timeslicing_matches_a_literal_slice_simulation(one_gpu, works):
    T, c = 60.0, 0.5
    jobs = [JobSpec(f"j{i}", 0.0, 1, w) for i, w in enumerate(works)]
    r = Simulation(make_trace(*jobs), one_gpu, Share("timeshare", time_slice=T, switch_cost=c),
                   params={"restore_overhead": 0.0}).run()
    got = r.jobs.set_index("job_id").end_time.to_dict()
    want = literal_timeslice([(j.job_id, 0.0, j.duration) for j in jobs], T, c)
    for jid, t in want.items():
        # the fluid model spreads each round evenly: it may differ by up to one round
        assert got[jid] == pytest.approx(t, abs=T * len(works)), jid
    # a few events per job, not one per slice
    assert r.summary["events_processed"] <= 3 * len(works)


def test_two_jobs_timesliced_exact_fluid_times(one_gpu):
    # both run at (1/2)(1 - 0.5/60); b (200 s of work) ends at 200 / that = 403.36;
    # a then has 100 s left alone at full speed: 503.36
    rate = 0.5 * (1 - 0.5 / 60)
    trace = make_trace(("a", 0.0, 1, 300.0), ("b", 0.0, 1, 200.0))
    r = Simulation(trace, one_gpu, Share("timeshare"), params={"restore_overhead": 0.0}).run()
    j = r.jobs.set_index("job_id")
    assert j.loc["b", "end_time"] == pytest.approx(200 / rate)
    assert j.loc["a", "end_time"] == pytest.approx(200 / rate + 100)
    # GPU time is split: the GPU is busy 503 s, each job held it half the time while shared
    assert j.gpu_seconds.sum() == pytest.approx(200 / rate + 100)
    assert r.timeline.gpus_busy.max() == 1.0
    assert list(r.events.detail[r.events.kind == "start"]) == ["", "timeshare N=2"]


def test_packing_follows_the_interference_model(one_gpu):
    # utilizations 0.3 + 0.5 < 1: both at full speed less the 10% penalty -> 0.9
    trace = make_trace(JobSpec("a", 0.0, 1, 90.0, gpu_util=0.3),
                       JobSpec("b", 0.0, 1, 45.0, gpu_util=0.5))
    r = Simulation(trace, one_gpu, Share("pack"), params={"restore_overhead": 0.0}).run()
    j = r.jobs.set_index("job_id")
    assert j.loc["b", "end_time"] == pytest.approx(50.0)   # 45 / 0.9
    assert j.loc["a", "end_time"] == pytest.approx(95.0)   # 45 done by 50, 45 alone
    # heavier jobs: u = 0.8 + 0.7 = 1.5 -> each at (1 / 1.5) * 0.9 = 0.6
    trace = make_trace(JobSpec("a", 0.0, 1, 60.0, gpu_util=0.8),
                       JobSpec("b", 0.0, 1, 60.0, gpu_util=0.7))
    r = Simulation(trace, one_gpu, Share("pack"), params={"restore_overhead": 0.0}).run()
    assert list(r.jobs.end_time) == pytest.approx([100.0, 100.0])


def test_packing_refused_when_gpu_memory_does_not_fit():
    topo = uniform_topology(1, gpu_mem_gb=16.0)
    trace = make_trace(JobSpec("a", 0.0, 1, 90.0, gpu_mem_gb=10.0),
                       JobSpec("b", 0.0, 1, 45.0, gpu_mem_gb=8.0))
    with pytest.raises(InvalidDecision, match="GPU memory 18 GB .* 16 GB"):
        Simulation(trace, topo, Share("pack")).run()


def test_sharing_gpus_of_nobody_is_refused(one_gpu):
    class Bad(Policy):
        name = "bad"

        def schedule(self, ctx):
            for job in list(ctx.pending()):
                yield Start(job.job_id, (0,), "timeshare")

    with pytest.raises(InvalidDecision, match="must be held"):
        Simulation(make_trace(("a", 0.0, 1, 1.0)), one_gpu, Bad()).run()


def test_a_member_leaving_early_speeds_the_others_up(one_gpu):
    # three time-shared jobs; when the shortest ends, the two left share at 1/2
    T, c = 60.0, 0.0
    trace = make_trace(("a", 0.0, 1, 300.0), ("b", 0.0, 1, 300.0), ("c", 0.0, 1, 30.0))
    r = Simulation(trace, one_gpu, Share("timeshare", time_slice=T, switch_cost=c),
                   params={"restore_overhead": 0.0}).run()
    j = r.jobs.set_index("job_id")
    # c: 30 / (1/3) = 90; a and b have 30 done, 270 left at 1/2 each: 90 + 540 = 630
    assert j.loc["c", "end_time"] == pytest.approx(90.0)
    assert j.loc["a", "end_time"] == pytest.approx(630.0)
    assert j.loc["b", "end_time"] == pytest.approx(630.0)
