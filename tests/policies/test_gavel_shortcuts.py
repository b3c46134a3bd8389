"""Gavel's fast paths (LP classes and columns, optimum check, owed time) match the old code."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from conftest import make_trace
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize._linprog_util import _check_result

import schedlab.policies.gavel as gavel
from schedlab.policies import gavel_lp
from schedlab.policies.gavel import (
    GavelAgnosticPolicy,
    GavelPolicy,
    unique_rows,
)
from schedlab.sim.context import SchedContext
from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import RUNNING
from schedlab.sim.model import Decision, JobSpec, Level
from schedlab.topologies.native import node_cell
from schedlab.topologies.tree import CellSpec, Topology
from schedlab.traces.base import Trace


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), k=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_unique_rows_is_np_unique(n, k, seed):
    keys = np.random.default_rng(seed).choice([0.0, 0.25, 0.5, 1.0, 8.0], (n, k))
    uniq, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    got = unique_rows(keys)
    assert np.array_equal(got[0], uniq)
    assert np.array_equal(got[1], inverse.reshape(-1))
    assert np.array_equal(got[2], counts)


@settings(max_examples=200, deadline=None)
@given(m=st.integers(1, 8), seed=st.integers(0, 2**16),
       nan=st.sampled_from(["", "x", "s", "f"]))
def test_feasible_is_linprogs_check(m, seed, nan):
    rng = np.random.default_rng(seed)
    lb = rng.choice([0.0, 0.5], m)
    ub = np.where(rng.random(m) < 0.3, np.inf, lb + rng.choice([0.0, 1.0], m))
    x = lb + (ub - lb if np.isfinite(ub).all() else 1.0) * rng.random(m)
    x += rng.choice([0.0, 1e-5, -1e-5, 1e-3, -1e-3], m)  # around linprog's tol (3.2e-4)
    slack = rng.choice([0.0, 1.0, -1e-5, -1e-3], m)
    fun = 1.0
    if nan == "x":
        x[0] = np.nan
    elif nan == "s":
        slack[0] = np.nan
    elif nan == "f":
        fun = np.nan
    want, _ = _check_result(x, fun, 0, slack, np.zeros(0), np.column_stack([lb, ub]), 1e-9,
                            "", None)
    assert gavel_lp.feasible(x, fun, slack, lb, ub) == (want == 0)


def _het(k80: int, v100: int) -> Topology:
    """k80 K80 nodes of 2 GPUs and v100 V100 nodes of 4 GPUs."""
    nodes = [node_cell(f"k{i}", {"gpu_type": "K80"}, 1, 1, 2) for i in range(k80)]
    nodes += [node_cell(f"v{i}", {"gpu_type": "V100"}, 1, 1, 4) for i in range(v100)]
    return Topology("het", CellSpec(Level.CLUSTER, "het", nodes))


def _jobs(n: int, seed: int) -> Trace:
    """Jobs of 1-4 GPUs arriving faster than they finish, V100 2.5x a K80."""
    rng = np.random.default_rng(seed)
    return make_trace(*(JobSpec(f"j{i}", float(i * 40), int(rng.choice([1, 1, 2, 4])),
                                float(rng.integers(200, 3000)),
                                gpu_speeds=(("K80", 1.0), ("V100", 2.5)))
                        for i in range(n)))


def _frames(cls: type[GavelPolicy], seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's events and jobs frames."""
    r = Simulation(_jobs(60, seed), _het(3, 2), cls(round=120.0, reset_interval=300.0)).run()
    assert (r.events.kind == "suspend").any()  # rounds that rank and stop jobs
    return r.events, r.jobs


@pytest.mark.parametrize("cls", [GavelPolicy, GavelAgnosticPolicy])
@pytest.mark.parametrize("seed", [0, 1])
def test_time_owed_is_added_the_same_whenever_it_is_settled(cls, seed, monkeypatch):
    base = _frames(cls, seed)
    monkeypatch.setattr(gavel, "OWED_MAX", 1)  # every round adds its time at once
    for got, want in zip(_frames(cls, seed), base, strict=True):
        pd.testing.assert_frame_equal(got, want, check_exact=True)


class _Checked(GavelPolicy):
    """Gavel checking, at every round, its noted GPU type against each running job's."""

    checked = 0

    def _pass(self, ctx: SchedContext) -> Iterator[Decision]:
        for job in ctx.running().values():
            assert job.status == RUNNING
            if job.gpus:
                assert self._on_type[job.idx] == self.gpu_type_ix[job.gpus[0]]
                _Checked.checked += 1
        yield from super()._pass(ctx)


def test_noted_gpu_type_is_the_running_jobs_type():
    Simulation(_jobs(60, 2), _het(3, 2), _Checked(round=120.0, reset_interval=300.0)).run()
    assert _Checked.checked > 0


class _EveryRound(GavelPolicy):
    """Gavel choosing every round afresh: a quiet round is never remembered."""

    def _round(self, *args: object) -> Iterator[Decision]:  # type: ignore[override]
        made = yield from super()._round(*args)  # type: ignore[arg-type]
        self._quiet = None
        return made


class _EveryRoundAgnostic(_EveryRound, GavelAgnosticPolicy):
    """The agnostic variant choosing every round afresh."""


class _Counted(GavelPolicy):
    """Gavel counting the rounds it chose (the others were skipped as quiet)."""

    chosen = 0

    def _round(self, *args: object) -> Iterator[Decision]:  # type: ignore[override]
        type(self).chosen += 1
        return (yield from super()._round(*args))  # type: ignore[arg-type]


class _CountedAgnostic(_Counted, GavelAgnosticPolicy):
    """The agnostic variant counting the rounds it chose."""


def _sparse_jobs(seed: int) -> Trace:
    """Long jobs arriving in bursts with quiet spells: rounds with nobody waiting."""
    rng = np.random.default_rng(seed)
    t, jobs = 0.0, []
    for i in range(40):
        t += float(rng.choice([30.0, 60.0, 2500.0]))
        jobs.append(JobSpec(f"j{i}", t, int(rng.choice([1, 1, 2, 4])),
                            float(rng.integers(600, 6000)),
                            gpu_speeds=(("K80", 1.0), ("V100", 2.5)),
                            checkpoint_interval=300.0))
    return make_trace(*jobs)


@pytest.mark.parametrize(("fast", "slow"), [(_Counted, _EveryRound),
                                            (_CountedAgnostic, _EveryRoundAgnostic)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_quiet_round_is_skipped_only_where_it_would_change_nothing(fast, slow, seed):
    params = {"round": 120.0, "reset_interval": 300.0}
    topo = _het(3, 2)
    fast.chosen = 0
    got = Simulation(_sparse_jobs(seed), topo, fast(**params), seed=seed).run()
    want = Simulation(_sparse_jobs(seed), topo, slow(**params), seed=seed).run()
    for a, b in ((got.events, want.events), (got.jobs, want.jobs),
                 (got.timeline, want.timeline)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert got.summary == {**want.summary, "wall_seconds": got.summary["wall_seconds"]}
    rounds = got.summary.get("policy_rounds")
    assert rounds is not None and 0 < fast.chosen < rounds  # some rounds were skipped
    assert (got.events.kind.isin(["suspend", "preempt"])).any()  # and some moved jobs
