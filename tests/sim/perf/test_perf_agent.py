"""`perf_agent=fitted`: a job's view of its speed is Pollux's agent's, fitted to what it ran."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pollux_backend import write_profile
from test_pollux_profiles import pollux_traces  # noqa: F401 - a fixture

from schedlab.policies.base import Policy
from schedlab.policies.conformance import check_invariants
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec, Level, Start
from schedlab.sim.perf.agent import FittedAgent
from schedlab.sim.perf.base import Shape
from schedlab.sim.perf.pollux import PolluxModels
from schedlab.topologies.build import uniform_topology

# Pollux's own `Job` (petuum/adaptdl osdi21-artifact simulator/simulator.py) on the tiny
# profile of test_pollux_backend, fed the same measurements one by one: after each,
# `update_params` (the fit), `update_local_bsz` (the pick: atomic, accum) and
# `get_speedup_fn()` at (nodes, GPUs). numpy 1.23.5, scipy 1.10.1, autograd 1.5.
# (placement, atomic batch, epoch) -> perf params, pick, speedups at (1,1) (1,2) (2,2) (2,3)
POLLUX_JOB = [
    ((1,), 8, 0, [0.044, 0.01, 1.1e-08, 1.1e-08, 1e-08, 1e-08, 1.001], (8, 0),
     [1.0, 1.1111111111111112, 1.1111111022952782, 1.1538460439436833]),
    ((2,), 8, 0, [0.049, 0.007374498927723819, 0.07199308810924447, 1.1e-08,
                  0.06544826191749496, 1e-08, 1.1650196369053811], (8, 0),
     [1.0, 0.7594124625759381, 0.7330271760118494, 0.7612204842683967]),
    ((2,), 16, 1, [0.09988888820098661, 0.0010093984561152282, 0.06527800089552073, 1.1e-08,
                   0.05934363717774611, 1e-08, 1.0959653202543485], (16, 0),
     [1.0, 1.183266875805739, 1.146007811528684, 1.189289511759895]),
    ((1, 1), 8, 1, [0.10830350166064608, 0.0005545085576614406, 0.07065462660383277, 1e-08,
                    0.06124987594072609, 1e-08, 1.1521903419978703], (16, 0),
     [1.0, 1.178119435402781, 1.1223235370334104, 1.1478983408546348]),
    ((1, 2), 8, 2, [0.1197733909822349, 7.731380041447283e-05, 0.06350350400482033,
                    0.01989781886343408, 0.05453268779813972, 1e-08, 1.1485863199690791],
     (10, 0), [1.0, 1.4918373538788543, 1.4243078575353674, 1.3147041046839645]),
]
AT = [(1, 1), (1, 2), (2, 2), (2, 3)]


def shape_of(placement: tuple[int, ...]) -> Shape:
    per = tuple(sorted(placement, reverse=True))
    return Shape("v100", per, Level.NODE if len(per) == 1 else Level.CLUSTER)


def test_the_agent_follows_pollux_job_measurement_by_measurement(tmp_path: Path) -> None:
    backend = PolluxModels(write_profile(tmp_path) / "tiny")
    profile = backend.profile("tiny")
    agent = FittedAgent(backend, "tiny", adaptive=True, batch_size=None)
    assert not agent.fitted
    assert agent.pick(shape_of((2,))) == 16  # nothing fitted: max(8, 8 x 2 GPUs)
    for placement, atomic, epoch, perf, pick, speedups in POLLUX_JOB:
        shape = shape_of(placement)
        progress = profile.progress(epoch) * profile.init_batch_size
        assert agent.observe(shape, sum(placement) * atomic, progress)
        # the same fit (L-BFGS-B from the same start; Pollux differentiates by autograd)
        got = [agent.perf.alpha_c, agent.perf.beta_c, agent.perf.alpha_n, agent.perf.beta_n,
               agent.perf.alpha_r, agent.perf.beta_r, agent.perf.gamma]
        assert got == pytest.approx(perf, rel=2e-3, abs=1e-7)
        atomic_bsz, accum = pick
        assert agent.pick(shape) == sum(placement) * atomic_bsz * (accum + 1)
        base = agent.goodput(1, 1)
        assert [agent.goodput(n, r) / base for n, r in AT] == pytest.approx(speedups, rel=2e-3)
    # the last configuration again, same epoch: nothing new is measured or fitted
    assert not agent.observe(shape_of((1, 2)), 3 * 8, progress)
    assert len(agent.profile) == len(POLLUX_JOB)


# The same on Pollux's real profiles (simulator/traces; skipped without the mirror):
# (model, placement, atomic batch, epoch) measured, then Pollux's pick (atomic, accum)
# and speedups at (1,1) (1,2) (1,4) (2,8) (4,16).
POLLUX_REAL = [
    ('cifar10', (1,), 128, 0, (128, 0), [1.0, 1.334975, 1.654727, 1.955789, 2.196971]),
    ('cifar10', (2,), 64, 0, (64, 0), [1.0, 1.572167, 2.224077, 2.709444, 3.04544]),
    ('cifar10', (4,), 35, 2, (49, 0), [1.0, 1.539246, 1.885146, 1.724378, 1.257855]),
    ('cifar10', (4, 4), 60, 2, (118, 0), [1.0, 1.600023, 2.207016, 1.508575, 1.805659]),
    ('cifar10', (4, 4, 4, 4), 142, 5, (191, 0),
     [1.0, 1.851135, 3.156478, 3.65143, 4.744833]),
    ('imagenet', (1,), 200, 0, (200, 0), [1.0, 1.695425, 2.608461, 3.635342, 4.766455]),
    ('imagenet', (2,), 198, 0, (100, 0), [1.0, 1.852611, 3.356136, 5.777784, 9.595283]),
    ('imagenet', (4,), 55, 1, (128, 0), [1.0, 1.861166, 3.390627, 5.975036, 10.131211]),
    ('imagenet', (4, 4), 54, 1, (177, 0), [1.0, 1.869693, 3.41474, 4.376005, 6.799551]),
    ('bert', (1,), 12, 0, (12, 0), [1.0, 1.946305, 3.694245, 6.705116, 11.316811]),
    ('bert', (2,), 12, 0, (12, 0), [1.0, 1.953969, 3.824277, 7.325293, 13.538838]),
    ('bert', (2, 2), 12, 1, (12, 7), [1.0, 1.964662, 3.897712, 5.680671, 9.048234]),
]
AT_REAL = [(1, 1), (1, 2), (1, 4), (2, 8), (4, 16)]


def test_the_agent_follows_pollux_job_on_its_profiles(pollux_traces: Path) -> None:  # noqa: F811
    backend = PolluxModels(pollux_traces)
    agents: dict[str, FittedAgent] = {}
    for name, placement, atomic, epoch, pick, speedups in POLLUX_REAL:
        agent = agents.setdefault(name, FittedAgent(backend, name, True, None))
        profile = backend.profile(name)
        shape = shape_of(placement)
        # just past the epoch's start (its boundary belongs to it)
        progress = profile.progress(epoch) * profile.init_batch_size * (1 + 1e-12)
        agent.observe(shape, sum(placement) * atomic, progress)
        atomic_bsz, accum = pick
        assert agent.pick(shape) == sum(placement) * atomic_bsz * (accum + 1), (name, placement)
        base = agent.goodput(1, 1)
        got = [agent.goodput(n, r) / base for n, r in AT_REAL]
        assert got == pytest.approx(speedups, rel=5e-3), (name, placement)


class Watch(Policy):
    """Runs one job at a time on GPUs 0-1; records ctx.perf's 2-GPU over 1-GPU goodput."""

    name = "watch"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, float]] = []

    def schedule(self, ctx) -> Iterator[Start]:  # type: ignore[no-untyped-def]
        for job in list(ctx.running().values()) + list(ctx.pending()):
            self.seen.append((job.job_id, ctx.perf.goodput(job, 2, 1)
                              / ctx.perf.goodput(job, 1, 1)))
        if not list(ctx.running()):
            for job in list(ctx.pending())[:1]:
                yield Start(job.job_id, (0, 1))


def run(tmp_path: Path, agent: str, adaptive: bool, policy: object = "fifo") -> object:
    root = tmp_path / agent
    job = JobSpec("a", 0.0, 2, math.nan, model="tiny", adaptive=adaptive,
                  batch_size=None if adaptive else 16)
    return Simulation(make_trace(job), uniform_topology(1, gpus_per_switch=2, name="two"),
                      policy, params={"perf_model": f"pollux={write_profile(root)}",
                                      "perf_agent": agent}).run()


def test_a_fixed_batch_job_runs_as_under_the_oracle(tmp_path: Path) -> None:
    # the fit changes what the job and scheduler believe, never how fast it truly runs
    oracle = run(tmp_path, "oracle", adaptive=False)
    fitted = run(tmp_path, "fitted", adaptive=False)
    assert fitted.jobs.end_time.iloc[0] == pytest.approx(oracle.jobs.end_time.iloc[0],
                                                         rel=1e-12)


def test_an_adaptive_job_runs_the_batches_its_fit_picks(tmp_path: Path) -> None:
    res = run(tmp_path, "fitted", adaptive=True)
    rates = res.events[res.events.kind == "rate"].detail.tolist()
    batches = [int(d.split("batch=")[1]) for d in rates]
    # its first pick has no fit (8 x 2 GPUs); later ones are the fit's optimum on 2 GPUs
    backend = PolluxModels(tmp_path / "fitted" / "tiny")
    agent = FittedAgent(backend, "tiny", adaptive=True, batch_size=None)
    shape = shape_of((2,))
    assert agent.pick(shape) == 16
    assert batches[0] == agent.step(shape, 0.0, None)[0]
    assert all(8 * 2 <= b <= 32 for b in batches)
    # work is conserved: the job ends, and its end differs from the oracle's batch choice
    oracle = run(tmp_path, "oracle", adaptive=True)
    assert res.jobs.end_time.iloc[0] > 0
    assert res.jobs.end_time.iloc[0] != pytest.approx(oracle.jobs.end_time.iloc[0],
                                                      rel=1e-9)


def test_the_scheduler_reads_the_fit_linear_before_any_measurement(tmp_path: Path) -> None:
    jobs = [JobSpec(j, t, 2, math.nan, model="tiny", adaptive=True)
            for j, t in (("a", 0.0), ("b", 100.0))]
    watch = Watch()
    Simulation(make_trace(*jobs), uniform_topology(1, gpus_per_switch=2, name="two"), watch,
               params={"perf_model": f"pollux={write_profile(tmp_path)}",
                       "perf_agent": "fitted"}).run()
    # at b's arrival: a has run on 2 GPUs of one node (its fit has their sync time),
    # b has run nowhere (linear, Pollux's prior)
    at_b = [s for j, s in watch.seen if j == "b"]
    at_a = [s for j, s in watch.seen if j == "a"]
    assert at_b[0] == pytest.approx(2.0)
    assert at_a and at_a[-1] < 1.5


def test_perf_agent_values(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameter, match="perf_agent"):
        run(tmp_path, "psychic", adaptive=True)


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.tuples(st.integers(1, 4), st.floats(0.0, 200.0),
                                st.booleans()), min_size=1, max_size=6),
       policy=st.sampled_from(["pollux", "fifo", "optimus"]))
def test_fitted_runs_keep_the_invariants(tmp_path: Path, sizes, policy) -> None:  # type: ignore[no-untyped-def]
    # elastic adaptive jobs (or fixed ones: batch 16 on 1-2 GPUs) on 2 nodes x 2 GPUs:
    # every job ends, no GPU twice, work conserved, the same run twice the same tables
    jobs = [JobSpec(f"j{i}", t, n if a else min(n, 2), math.nan, model="tiny", adaptive=a,
                    batch_size=None if a else 16, min_gpus=1 if a else None,
                    max_gpus=4 if a else None)
            for i, (n, t, a) in enumerate(sizes)]
    trace = make_trace(*jobs)
    topo = uniform_topology(2, gpus_per_switch=2, name="two-by-two")
    root = tmp_path / "p"
    if not root.exists():
        write_profile(root)
    params = {"perf_model": f"pollux={root}", "perf_agent": "fitted"}
    first = Simulation(trace, topo, policy, params=params).run()
    check_invariants(first, topo, trace)
    assert (first.jobs.status == "completed").all()
    again = Simulation(trace, topo, policy, params=params).run()
    assert first.jobs.equals(again.jobs) and first.events.equals(again.events)
