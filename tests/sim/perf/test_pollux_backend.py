"""The `pollux` performance model in a run: a fixed and an adaptive job, by the formulas."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def step_time(n: int, r: int, b: float) -> float:
    return 0.1 + 0.01 * n + 0.02 * r + 0.001 * b


def write_profile(root: Path) -> Path:
    """A profile whose step times are linear (so Pollux's interpolation is exact)."""
    d = root / "tiny"
    d.mkdir(parents=True)
    rows = ["placement,local_bsz,step_time,sync_time"]
    for placement in ("1", "2", "11", "12"):
        n, r = len(placement), sum(map(int, placement))
        rows += [f"{placement},{b},{step_time(n, r, b)!r},0.05" for b in (8, 16)]
    (d / "placements.csv").write_text("\n".join(rows) + "\n")
    rows = ["num_nodes,num_replicas,local_bsz,step_time,sync_time"]
    rows += [f"{n},{r},{b},{step_time(n, r, b)!r},0.05" for n in (3, 4, 16)
             for r in (n, 2 * n, 4 * n) for b in (8, 16)]
    (d / "scalability.csv").write_text("\n".join(rows) + "\n")
    (d / "validation-8.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n"
        "100,100,0.5,4.0,1.0\n200,200,0.6,2.0,2.0\n300,300,0.7,1.0,3.0\n")
    (d / "validation-32.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n"
        "90,25,0.4,8.0,2.0\n210,50,0.6,4.0,6.0\n280,75,0.7,2.0,9.0\n")
    return root


SQR = {8: (4.0, 2.0, 1.0), 32: (8.0, 4.0, 2.0)}  # per epoch, per validated batch size
VAR = {8: (1.0, 2.0, 3.0), 32: (2.0, 6.0, 9.0)}
BOUNDS = (0.0, 90.0, 200.0, 280.0)  # progress at each epoch start: min over the files


def efficiency(batch: float, epoch: int) -> float:
    """Pollux: gain / scale, gain = (var + sqr) / (var / scale + sqr), stats linear in B."""
    w = (batch - 8) / 24
    sqr = (1 - w) * SQR[8][epoch] + w * SQR[32][epoch]
    var = (1 - w) * VAR[8][epoch] + w * VAR[32][epoch]
    scale = batch / 8
    return (var + sqr) / (var / scale + sqr) / scale


def test_fixed_batch_job_runs_at_profile_throughput(tmp_path: Path) -> None:
    # batch 8 on one GPU: atomic 8, no accumulation, 8 samples / 0.138 s, efficiency 1;
    # work 280 x 8 samples; 30 s of rescale first
    job = JobSpec("f", 0.0, 1, math.nan, model="tiny")
    res = Simulation(make_trace(job), uniform_topology(1, gpus_per_switch=2, name="two"),
                     "fifo", params={"perf_model": f"pollux={write_profile(tmp_path)}"}).run()
    assert res.jobs.end_time.iloc[0] == pytest.approx(30 + 280 * 8 * step_time(1, 1, 8) / 8)


def test_adaptive_job_picks_the_best_goodput_each_epoch(tmp_path: Path) -> None:
    # on 2 GPUs of one node the candidates are 50 batch sizes from max(8, 2 x 8) = 16 to
    # 32 (geometric); a local batch of at most 16 needs no accumulation; each epoch the
    # job runs the candidate of best goodput = 2a / step(1, 2, a) x efficiency(2a)
    t = 30.0
    for epoch in range(3):
        best = 0.0
        for b in np.geomspace(16, 32, 50).tolist():
            a = math.ceil(b / 2 - 1e-8)
            best = max(best, 2 * a / step_time(1, 2, a) * efficiency(2 * a, epoch))
        t += (BOUNDS[epoch + 1] - BOUNDS[epoch]) * 8 / best
    job = JobSpec("a", 0.0, 2, math.nan, model="tiny", adaptive=True)
    res = Simulation(make_trace(job), uniform_topology(1, gpus_per_switch=2, name="two"),
                     "fifo", params={"perf_model": f"pollux={write_profile(tmp_path)}"}).run()
    assert res.jobs.end_time.iloc[0] == pytest.approx(t, rel=1e-9)
