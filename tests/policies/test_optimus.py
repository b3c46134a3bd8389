"""optimus: greedy marginal gain every interval, as Pollux's simulator runs it (by hand)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import TWO_MODEL_TABLE as TABLE
from conftest import make_trace

from schedlab.policies.allocation import node_fill
from schedlab.policies.optimus import OptimusPolicy, marginal_gain
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def test_marginal_gain_is_remaining_time_saved() -> None:
    assert marginal_gain(1000, 10, 19) == pytest.approx(1000 * (1 / 10 - 1 / 19))
    assert marginal_gain(1000, 0, 19) == 0.0


def test_node_fill_takes_the_node_with_most_free_first() -> None:
    free = [2, 4, 4]
    assert node_fill([(7, 5), (8, 2)], free) == {7: [1, 1, 1, 1, 2], 8: [2, 2]}
    assert free == [2, 0, 1]


def test_rounds_by_hand(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text(TABLE)
    jobs = make_trace(
        JobSpec("A", 0.0, 1, math.nan, model="a", num_steps=1000, min_gpus=1, max_gpus=4),
        JobSpec("B", 0.0, 1, math.nan, model="b", num_steps=1000, min_gpus=1, max_gpus=4))
    res = Simulation(jobs, uniform_topology(1, gpus_per_switch=4, name="four"),
                     OptimusPolicy(), params={"perf_model": str(p),
                                              "restore_overhead": 0}).run()
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    # t=60 (the first round): 1 GPU each, then A's gain 1000(1/10-1/19) = 47.4 beats B's
    # 1000(1/10-1/12) = 16.7; then B's 16.7 beats A's 1000(1/19-1/27) = 15.6: 2 and 2
    assert ends["A"] == pytest.approx(60 + 1000 / 19)
    # t=120: B alone, 1000 - 60 x 12 = 280 steps left, takes all 4 GPUs (13.5 steps/s)
    assert ends["B"] == pytest.approx(120 + 280 / 13.5)
