"""Gandiva packs by the performance model's measured pairs when both jobs name a model:
it packs when the pair's normalized throughput beats time-slicing and refuses when not."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology

# Lucid's co-location table: speed packed over speed alone, per job of the pair
TABLE = """\
model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2
X,D,1,32,0,0.8,Y,E,1,32,0,0.6
X,D,1,32,0,0.4,Z,F,1,64,1,0.5
W,G,1,32,0,0.9,Y,E,1,32,0,0.9
"""


@pytest.fixture
def table(tmp_path: Path) -> Path:
    p = tmp_path / "colocate_info.csv"
    p.write_text(TABLE)
    return p


def _run(trace, table: Path, gpus: int = 1, **extra: float):  # type: ignore[no-untyped-def]
    params = {"perf_model": f"lucid={table}", "restore_overhead": 0.0, **extra}
    return Simulation(trace, uniform_topology(1, gpus_per_switch=gpus, name="one"),
                      "gandiva", params=params).run()


def _start(res, job_id: str):  # type: ignore[no-untyped-def]
    ev = res.events[(res.events.job_id == job_id) & (res.events.kind == "start")]
    return ev.detail.iloc[0], ev.cells.iloc[0]


def test_packs_a_pair_whose_speeds_sum_above_one(table: Path) -> None:
    # both jobs at gpu_util 1: the utilization heuristic (2 x 1/2 x 0.9 = 0.9) would
    # time-slice, but the table's pair sums to 0.8 + 0.6 = 1.4 > 1: b packs onto a's GPU.
    # a: 10 s alone, then 90 s of work at 0.8 -> ends at 10 + 112.5 = 122.5; b by then
    # has done 112.5 x 0.6 = 67.5 s, its last 32.5 s alone: ends at 155
    trace = make_trace(JobSpec("a", 0.0, 1, 100.0, model="X@32"),
                       JobSpec("b", 10.0, 1, 100.0, model="Y@32"))
    res = _run(trace, table)
    assert _start(res, "b")[0] == "pack N=2"
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    assert ends["a"] == pytest.approx(122.5, rel=1e-12)
    assert ends["b"] == pytest.approx(155.0, rel=1e-12)


def test_refuses_a_pair_whose_speeds_sum_below_one(table: Path) -> None:
    # both jobs at gpu_util 0.2: the heuristic (2 x 1 x 0.9 = 1.8) would pack, but the
    # table's pair sums to 0.4 + 0.5 = 0.9 < 1: b time-slices with a instead. Without
    # switch cost each runs at 1/2: a ends at 10 + 90 / 0.5 = 190, b (90 s done) at 200
    trace = make_trace(JobSpec("a", 0.0, 1, 100.0, gpu_util=0.2, model="X@32"),
                       JobSpec("b", 10.0, 1, 100.0, gpu_util=0.2, model="Z@64+amp"))
    res = _run(trace, table, switch_cost=0.0)
    assert _start(res, "b")[0] == "timeshare N=2"
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    assert ends["a"] == pytest.approx(190.0, rel=1e-12)
    assert ends["b"] == pytest.approx(200.0, rel=1e-12)


def test_a_losing_measured_partner_is_skipped_for_the_next(table: Path) -> None:
    # two GPUs busy: a (X, util 0.1) on one, c (W, util 0.5) on the other. Gandiva tries
    # the least utilized first: b (Z) with a sums to 0.5 + 0.4 = 0.9 and loses (the
    # heuristic alone would have packed it there); Z has no row with W, so the heuristic
    # decides that pair (utils 0.1 + 0.5 < 1 -> 1.8): b packs onto c's GPU
    trace = make_trace(JobSpec("a", 0.0, 1, 100.0, gpu_util=0.1, model="X@32"),
                       JobSpec("c", 0.0, 1, 100.0, gpu_util=0.5, model="W@32"),
                       JobSpec("b", 10.0, 1, 100.0, gpu_util=0.1, model="Z@64+amp"))
    res = _run(trace, table, gpus=2)
    detail, cells = _start(res, "b")
    assert detail == "pack N=2"
    assert cells == _start(res, "c")[1]


def test_measured_winner_after_a_measured_loser(table: Path) -> None:
    # b (X) with a (Z, least utilized) sums to 0.9: skipped; with c (Y) 1.4: packed there
    trace = make_trace(JobSpec("a", 0.0, 1, 100.0, gpu_util=0.1, model="Z@64+amp"),
                       JobSpec("c", 0.0, 1, 100.0, gpu_util=0.9, model="Y@32"),
                       JobSpec("b", 10.0, 1, 100.0, gpu_util=0.9, model="X@32"))
    res = _run(trace, table, gpus=2)
    detail, cells = _start(res, "b")
    assert detail == "pack N=2"
    assert cells == _start(res, "c")[1]


def test_gavel_pairs_normalized_by_the_solo_throughput(tmp_path: Path) -> None:
    # Gavel's table in steps/s: A alone 4, B alone 2; packed A 3, B 1.5: each at 0.75 of
    # alone, sum 1.5 > 1 -> b packs onto a's GPU (at gpu_util 1 the heuristic would not).
    # a: 40 steps alone by t=10, its other 360 at 3/s -> ends at 130; b by then has done
    # 180 of its 200 steps, the last 20 alone at 2/s -> ends at 140
    a, b = "('A', 1)", "('B', 1)"
    p = tmp_path / "simulation_throughputs.json"
    p.write_text(json.dumps({"v100": {a: {"null": 4.0, b: [3.0, 1.5]},
                                      b: {"null": 2.0, a: [1.5, 3.0]}}}))
    trace = make_trace(JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=400),
                       JobSpec("b", 10.0, 1, math.nan, model="B", num_steps=200))
    res = Simulation(trace, uniform_topology(1, name="one"), "gandiva",
                     params={"perf_model": f"gavel={p}", "restore_overhead": 0.0}).run()
    assert _start(res, "b")[0] == "pack N=2"
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    assert ends["a"] == pytest.approx(130.0, rel=1e-12)
    assert ends["b"] == pytest.approx(140.0, rel=1e-12)
