"""gavel-mmf packing=true: Gavel's packed max-min LP (`max_min_fairness_packed`) and its
rounds, packed pairs running at the performance model's pair throughputs."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_trace
from scipy.optimize import linprog

from schedlab.policies.gavel_packing import PairRates, packed_allocation
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def test_a_pair_whose_rates_sum_above_one_is_packed() -> None:
    # one GPU, both jobs 10 steps/s alone; packed A 9, B 3 (0.9 + 0.3 = 1.2 of alone).
    # With the pair's fraction p and the rest split x_A + x_B = 1 - p, the least of
    # x_A + 0.9 p and x_B + 0.3 p is at most (1 + 0.2 p) / 2, reached while
    # x_A = (1 + 0.2 p) / 2 - 0.9 p >= 0, i.e. p <= 0.625: z = 0.5625, x_A = 0,
    # x_B = 0.375 (alone: z = 0.5)
    x, z = packed_allocation(np.array([[10.0], [10.0]]), np.array([1.0, 1.0]),
                             np.array([1.0]), [PairRates(0, 1, (9.0,), (3.0,))])
    assert z == pytest.approx(0.5625, abs=1e-6)
    assert x[:, 0] == pytest.approx([0.0, 0.375, 0.625], abs=1e-6)


def test_a_pair_that_does_not_help_is_not_used() -> None:
    # packed 4 and 4 of 10 each: 0.8 of alone in total, worse than taking turns
    x, z = packed_allocation(np.array([[10.0], [10.0]]), np.array([1.0, 1.0]),
                             np.array([1.0]), [PairRates(0, 1, (4.0,), (4.0,))])
    assert z == pytest.approx(0.5, abs=1e-6)
    assert x[:, 0] == pytest.approx([0.5, 0.5, 0.0], abs=1e-6)


def _gavel_value(single: np.ndarray, scale: np.ndarray, cap: np.ndarray,
                 pairs: list[PairRates]) -> float:
    """The optimum of Gavel's `MaxMinFairnessPolicyWithPacking.get_allocation`, written
    as its code states it: x (combinations x types) >= 0, sum_t sf_c x[c, t] <= N_t,
    sum over the combinations of job j <= 1, x = 0 where the scale factor is 0,
    maximise min_j sum tput_j(c, t) sf_c x[c, t] / proportional_j (priority weights 1);
    proportional_j = sum_t tput[j, t] N_t / sum N (`ProportionalPolicy`)."""
    n, k = single.shape
    combos = [(j,) for j in range(n)] + [(p.a, p.b) for p in pairs]
    tp = np.zeros((n, len(combos), k))
    for j in range(n):
        tp[j, j] = single[j]
    for q, p in enumerate(pairs):
        tp[p.a, n + q], tp[p.b, n + q] = p.rate_a, p.rate_b
    sf = np.array([scale[c[0]] if len({scale[i] for i in c}) == 1 else 0.0 for c in combos])
    prop = single @ (cap / cap.sum())
    nv = len(combos) * k
    a_ub, b_ub = [], []
    for j in range(n):  # z <= effective throughput of j
        row = np.zeros(nv + 1)
        row[:nv] = -(tp[j] * sf[:, None]).ravel() / prop[j]
        row[nv] = 1.0
        a_ub.append(row)
        b_ub.append(0.0)
        row = np.zeros(nv + 1)  # time fractions of j
        for c, members in enumerate(combos):
            if j in members:
                row[c * k:(c + 1) * k] = 1.0
        a_ub.append(row)
        b_ub.append(1.0)
    for t in range(k):
        row = np.zeros(nv + 1)
        row[t:nv:k] = sf
        a_ub.append(row)
        b_ub.append(cap[t])
    bounds = [(0, 0 if sf[i] == 0 else None) for i in range(len(combos)) for _ in range(k)]
    cost = np.zeros(nv + 1)
    cost[nv] = -1.0
    res = linprog(cost, A_ub=np.array(a_ub), b_ub=b_ub, bounds=bounds + [(None, None)],
                  method="highs")
    assert res.status == 0
    return float(-res.fun)


def test_the_optimum_is_gavels_on_a_mixed_case() -> None:
    # 4 jobs, 2 types (3 and 1 GPUs), every pair measured on both types
    rng = np.random.default_rng(7)
    single = rng.uniform(1.0, 10.0, size=(4, 2))
    scale, cap = np.array([1.0, 1.0, 1.0, 1.0]), np.array([3.0, 1.0])
    pairs = [PairRates(a, b, tuple(single[a] * rng.uniform(0.3, 0.9, 2)),
                       tuple(single[b] * rng.uniform(0.3, 0.9, 2)))
             for a, b in itertools.combinations(range(4), 2)]
    x, z = packed_allocation(single, scale, cap, pairs)
    assert z == pytest.approx(_gavel_value(single, scale, cap, pairs), rel=1e-6)
    assert (x.sum(axis=0) <= cap + 1e-6).all()  # every combination's GPUs, once
    for j in range(4):
        rows = [j] + [4 + q for q, p in enumerate(pairs) if j in (p.a, p.b)]
        assert x[rows].sum() <= 1 + 1e-6


@pytest.fixture
def table(tmp_path: Path) -> Path:
    # A and B: 10 steps/s alone on a V100; packed 7 and 7 (1.4 of alone in total)
    a, b = "('A', 1)", "('B', 1)"
    p = tmp_path / "simulation_throughputs.json"
    c = "('C', 1)"
    p.write_text(json.dumps({"v100": {a: {"null": 10.0, b: [7.0, 7.0], c: [7.0, 7.0]},
                                      b: {"null": 10.0, a: [7.0, 7.0], c: [7.0, 7.0]},
                                      c: {"null": 10.0, a: [7.0, 7.0], b: [7.0, 7.0]}}}))
    return p


def _run(table: Path, **policy: object) -> Any:
    trace = make_trace(JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=700),
                       JobSpec("b", 0.0, 1, math.nan, model="B", num_steps=1400))
    return Simulation(trace, uniform_topology(1, name="one"), "gavel-mmf",
                      params={"perf_model": f"gavel={table}", "restore_overhead": 0.0,
                              **policy}).run()


def test_packed_jobs_finish_at_the_tables_pair_throughputs(table: Path) -> None:
    # the LP packs them all the time (0.7 each, against 0.5 alone): from t=0 a runs at
    # 7 steps/s and ends at 700 / 7 = 100 s; b has then done 700 of its 1400 steps and
    # the rest alone at 10/s: ends at 170 s
    res = _run(table, packing=True)
    ev = res.events[(res.events.kind == "start")].set_index("job_id")
    assert ev.detail["b"] == "pack N=2"
    assert ev.cells["a"] == ev.cells["b"]
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    assert ends["a"] == pytest.approx(100.0, rel=1e-9)
    assert ends["b"] == pytest.approx(170.0, rel=1e-9)


def test_default_does_not_pack(table: Path) -> None:
    res = _run(table)  # packing=false: one job on the GPU per round
    starts = res.events[res.events.kind == "start"]
    assert not starts.detail.fillna("").str.startswith("pack").any()
    assert res.jobs.end_time.max() > 170.0


def test_a_job_arriving_after_the_allocation_runs_on_spare_gpus(table: Path) -> None:
    # a (700 steps) alone from t=0 ends at 70 s; b arrives at 10 s, after the allocation:
    # priority 0, it takes the GPU nobody wants at the next round (360 s), 1400 steps at
    # 10/s alone: ends at 500 s
    trace = make_trace(JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=700),
                       JobSpec("b", 10.0, 1, math.nan, model="B", num_steps=1400))
    res = Simulation(trace, uniform_topology(1, name="one"), "gavel-mmf",
                     params={"perf_model": f"gavel={table}", "restore_overhead": 0.0,
                             "packing": True}).run()
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    assert ends == pytest.approx({"a": 70.0, "b": 500.0}, rel=1e-9)


def test_the_agnostic_variant_rejects_packing(table: Path) -> None:
    from schedlab.sim.errors import InvalidParameter

    trace = make_trace(JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=700))
    with pytest.raises(InvalidParameter, match="packing=true"):
        Simulation(trace, uniform_topology(1, name="one"), "gavel-mmf-agnostic",
                   params={"perf_model": f"gavel={table}", "packing": True}).run()


def test_three_jobs_take_turns_in_pairs(table: Path) -> None:
    # three jobs on one GPU, every pair at 0.7 + 0.7: the LP gives each pair a third of
    # the time (z = 2/3 x 0.7 = 0.467 against 1/3 alone); rounds rotate the pairs
    x, z = packed_allocation(np.full((3, 1), 10.0), np.ones(3), np.array([1.0]),
                             [PairRates(a, b, (7.0,), (7.0,))
                              for a, b in itertools.combinations(range(3), 2)])
    assert z == pytest.approx(0.7 * 2 / 3, abs=1e-6)
    assert x[3:, 0] == pytest.approx([1 / 3] * 3, abs=1e-6)
    trace = make_trace(*(JobSpec(m.lower(), 0.0, 1, math.nan, model=m, num_steps=7000)
                         for m in "ABC"))
    res = Simulation(trace, uniform_topology(1, name="one"), "gavel-mmf",
                     params={"perf_model": f"gavel={table}", "restore_overhead": 0.0,
                             "packing": True}).run()
    packs = res.events[res.events.detail.fillna("").str.startswith("pack")]
    assert len(packs) == 4
    # 7000 steps each. Fresh pairs first (ties: the pair's jobs in order): (a, b) from 0,
    # (a, c) from 360 (a keeps its GPU, c packs on), (b, c) from 720 (c keeps it): each
    # job 5040 steps by 1080. All pairs got 360 s: (a, b) again, 1960 steps at 7/s: a and
    # b end at 1360; c waits for the round at 1440, its 1960 alone at 10/s: ends at 1636
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    assert ends == pytest.approx({"a": 1360.0, "b": 1360.0, "c": 1636.0}, rel=1e-9)


def test_a_pair_whose_memory_does_not_fit_is_not_packed(table: Path) -> None:
    # 16 GB GPUs, each job 10 GB: the pair is not an LP combination, they take turns
    trace = make_trace(JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=700,
                               gpu_mem_gb=10.0),
                       JobSpec("b", 0.0, 1, math.nan, model="B", num_steps=700,
                               gpu_mem_gb=10.0))
    res = Simulation(trace, uniform_topology(1, gpu_mem_gb=16.0, name="one"), "gavel-mmf",
                     params={"perf_model": f"gavel={table}", "restore_overhead": 0.0,
                             "packing": True}).run()
    assert not res.events.detail.fillna("").str.startswith("pack").any()
    assert (res.jobs.status == "completed").all()
