"""pollux: power mean of speedups, restart penalty, exploration cap (hand-computed rounds)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import TWO_MODEL_TABLE as TABLE
from conftest import make_trace

from schedlab.policies.pollux import PolluxPolicy, power_mean, restart_factor
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def test_restart_factor_and_power_mean() -> None:
    assert restart_factor(120, 0, 30) == pytest.approx(120 / 150)
    assert restart_factor(50, 2, 30) == 0.0
    assert power_mean([1.0, 3.0], -1) == pytest.approx(2 / (1 / 1.001 + 1 / 3.001))


def test_rounds_by_hand(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text(TABLE)
    jobs = make_trace(
        JobSpec("A", 0.0, 1, math.nan, model="a", num_steps=1000, min_gpus=1, max_gpus=4),
        JobSpec("B", 0.0, 1, math.nan, model="b", num_steps=1000, min_gpus=1, max_gpus=4))
    res = Simulation(jobs, uniform_topology(1, gpus_per_switch=4, name="four"),
                     PolluxPolicy(), params={"perf_model": str(p),
                                             "restore_overhead": 0}).run()
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    # t=60: neither has run (linear prior, fair share 2) and exploration caps both at 1
    # GPU. t=120: the cap is 2; scaled speedups (x 1 node / 4 GPUs, + 1e-3), p = -1:
    # A on 1: 10/19 -> term 1/0.1326 = 7.54; on 2: 19/19 x 0.8 (restart penalty
    # 120/150) -> 1/0.201 = 4.98, a gain. B on 2: 12/12 x 0.8 = 0.8 < 10/12 on 1: B
    # stays, a GPU idles. A: 600 steps done, 400 left at 19/s
    assert ends["A"] == pytest.approx(120 + 400 / 19)
    assert ends["B"] == pytest.approx(60 + 1000 / 10)
