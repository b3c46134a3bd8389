"""Sia's policy: configurations, the MILP on hand-computed cases, one small run."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from schedlab.policies.sia import Config, SiaPolicy, configs_for, solve
from schedlab.sim.engine import Simulation
from schedlab.topologies.native import native_from_dict
from schedlab.traces.readers import read_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim" / "perf"))
from test_sia_perf import write_profiles  # noqa: E402


def test_configs_follow_sia() -> None:
    # Sia's CONFIGS_4GPU: (1,1), (1,2), (1,4), (2,8), (3,12), ...
    got = [(c.nodes, c.gpus) for c in configs_for("aws", 4, 3)]
    assert got == [(1, 1), (1, 2), (1, 4), (2, 8), (3, 12)]
    got = [(c.nodes, c.gpus) for c in configs_for("rtx", 8, 9)]
    assert got == [(1, 1), (1, 2), (1, 4), (1, 8), (2, 16), (3, 24), (4, 32), (5, 40),
                   (6, 48), (7, 56), (8, 64)]
    assert Config("a", 1, 1).gpus == 1


def test_milp_picks_hand_optimum() -> None:
    # two jobs, two types of one GPU each; normalised goodputs job0 (1, 2), job1 (1, 1.2)
    values = np.array([[1.0, 2.0], [1.0, 1.2]])
    gpus, types = np.array([1, 1]), np.array([0, 1])
    # p = -0.5: costs round(v ** -0.5, 2) = (1, 0.71) and (1, 0.91); job0 on the fast
    # type and job1 on the slow one costs 1.71 against 1.91 the other way round
    got = solve(values, gpus, types, np.array([1, 1]), -0.5, 1.1)
    assert got.tolist() == [1, 0]
    # one GPU in all: 0.71 + 1.1 (job1 left out) beats 0.91 + 1.1
    got = solve(values, gpus, types, np.array([0, 1]), -0.5, 1.1)
    assert got.tolist() == [1, -1]
    # a kept allocation is kept
    got = solve(values, gpus, types, np.array([1, 1]), -0.5, 1.1, fixed={1: 1})
    assert got.tolist() == [0, 1]


def test_small_run(tmp_path: Path) -> None:
    root = write_profiles(tmp_path / "traces")
    wl = tmp_path / "workload.csv"
    wl.write_text("name,time,application,num_replicas,batch_size\n"
                  "m-0,0,m,1,16\nm-1,30,m,1,16\n")
    topo = native_from_dict({"name": "t", "nodes": [
        {"count": 1, "gpus_per_node": 2, "gpu_type": "a"},
        {"count": 1, "gpus_per_node": 1, "gpu_type": "b"}]}, "t.yaml")
    pol = SiaPolicy()
    res = Simulation(read_trace(wl), topo, pol,
                     params={"perf_model": f"sia={root}"}).run()
    jobs = res.jobs.set_index("job_id")
    assert (jobs.status == "completed").all()
    # m-0 starts at round 0 on the fastest GPU it knows: one GPU, valued 1 everywhere
    assert jobs.loc["m-0", "start_time"] == 0.0
    assert jobs.loc["m-1", "start_time"] == 60.0  # waits for the next round
    assert pol.metrics()["milp_solves"] >= 2
