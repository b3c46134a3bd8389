"""The jobs table is built column by column (scale); row by row it must read the same.

Covers what the columns must special-case: container jobs (totals over their task runs,
no rows for the runs), jobs of roles with a running non-gang task (its GPU time), and
jobs open when the run is cut short.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sim.engine import Simulation
from sim.results import _jobs_frame, _jobs_frame_rows
from topologies.build import uniform_topology
from traces.synthetic import from_records

TF = [{"role": "ps", "count": 1, "gpus": 0, "cpus": 4},
      {"role": "worker", "count": 2, "gpus": 2, "cpus": 4},
      {"role": "evaluator", "count": 1, "gpus": 1, "gang": False}]


def records() -> list[dict]:
    return [
        {"job_id": "tf", "submit_time": 0.5, "num_gpus": 4, "duration": 100.25,
         "tasks": json.dumps(TF)},
        {"job_id": "c", "submit_time": 1.5, "num_gpus": 1, "duration": 30.5,
         "completions": 5, "parallelism": 2, "restart_policy": "Never", "fail_at": 10.25,
         "failed_runs": 1},
        {"job_id": "plain", "submit_time": 2.5, "num_gpus": 2, "duration": 50.75},
        {"job_id": "big", "submit_time": 3.5, "num_gpus": 16, "duration": 20.0},
    ]


@pytest.mark.parametrize("until", [None, 25.0, 60.0])
def test_columns_and_rows_read_the_same(until: float | None) -> None:
    topo = uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            num_cpus=32, name="dgx")
    sim = Simulation(from_records(records()), topo, "fifo", seed=0)
    run = sim.start(until=until)
    run.env.run()
    end = run.env.now
    cols = _jobs_frame(run, end)
    rows = _jobs_frame_rows(run, end)
    assert list(cols.job_id) == ["tf", "c", "plain", "big"]
    pd.testing.assert_frame_equal(cols, rows)
    c = cols.set_index("job_id").loc["c"]
    assert c.gpu_time == pytest.approx(5 * 30.5)
    assert c.gpu_seconds > 0
