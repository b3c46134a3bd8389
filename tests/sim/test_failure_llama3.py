"""The llama3 preset in the engine: a job's interruptions match the report's rate.

The report's 419 unexpected interruptions in 54 days on 16,384 GPUs, scaled to a
1,024-GPU job (per GPU and per node rates: 419/16 over 54 days of holding its GPUs),
over three seeds; the full-scale run is benchmarks/bench_failures.py (RESULTS_failures.md).
"""

from __future__ import annotations

import math

from schedlab.sim.engine import Simulation
from schedlab.sim.failure_models import LLAMA3_TABLE
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace

DAY = 86400.0


def test_a_1024_gpu_job_sees_the_reports_interruption_rate():
    topo = uniform_topology(136, gpus_per_switch=8, nodes_per_rack=16, name="h100")
    job = JobSpec("pretrain", 0.0, 1024, 60 * DAY)
    got = expected = 0.0
    causes: set[str] = set()
    params = {"failure_model": "llama3", "spare_nodes": 8, "checkpoint_cost": 60,
              "checkpoint_interval": "auto", "events": False, "timeline": "off"}
    runs = [Simulation(Trace("t", (job,)), topo, "fifo", seed=seed, params=params
                       ).run(until=54 * DAY) for seed in (0, 1, 2, 0)]
    again = runs.pop()  # seeded: the same run twice
    assert again.jobs.equals(runs[0].jobs)
    assert again.summary["interruptions_by_component"] == \
        runs[0].summary["interruptions_by_component"]
    for res in runs:
        j = res.jobs.iloc[0]
        assert j.status == "unfinished"
        got += j.interruptions
        expected += 419 / 16 * j.run_time / (54 * DAY)
        causes |= set(res.summary["interruptions_by_component"])
    assert abs(got - expected) < 3 * math.sqrt(expected)
    assert causes <= {name for name, _, _ in LLAMA3_TABLE}
