"""Shockwave's trace reader and `shockwave` performance model: exact by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.sim.perf.base import Shape
from schedlab.sim.perf.shockwave import ShockwaveModels, scheduled_batch
from schedlab.topologies.build import uniform_topology
from schedlab.traces.readers import detect_format, read_trace

TOPO = uniform_topology(1, gpus_per_switch=4, name="one-by-four")

# LM: 59675 samples an epoch -> 1492 steps at batch 40, 746 at batch 80
TABLE = {"v100": {"('LM (batch size 40)', 1)": {"null": 10.0},
                  "('LM (batch size 80)', 1)": {"null": 8.0},
                  "('LM (batch size 40)', 2)": {"null": 16.0}}}

LINE = ("{jt}\tpython3 main.py --batch_size 40\tlanguage_modeling\t--steps\t1\t{steps}\t{sf}"
        "\t{mode}\t1\t-1.000000\t{dur}\t{t}\n")


@pytest.fixture
def table(tmp_path: Path) -> Path:
    p = tmp_path / "tacc_throughputs.json"
    p.write_text(json.dumps(TABLE))
    return p


def write_trace(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    p = tmp_path / "jobs.trace"
    p.write_text("".join(LINE.format(**r) for r in rows))
    return p


def test_reader_maps_every_field(tmp_path: Path) -> None:
    p = write_trace(tmp_path, [
        {"jt": "LM (batch size 40)", "steps": 17904, "sf": 1, "mode": "accordion",
         "dur": 1790, "t": 0},
        {"jt": "LM (batch size 40)", "steps": 500, "sf": 2, "mode": "static", "dur": 31,
         "t": 55.5},
    ])
    assert detect_format(p) == "shockwave"
    jobs = read_trace(p).jobs
    a, b = jobs
    assert (a.job_id, a.submit_time, a.num_gpus, a.model, a.num_steps, a.batch_size) == \
        ("shockwave-0", 0.0, 1, "LM (batch size 40) accordion", 17904.0, 40)
    assert (b.job_id, b.submit_time, b.num_gpus, b.model) == \
        ("shockwave-1", 55.5, 2, "LM (batch size 40)")
    assert math.isnan(a.duration)
    assert dict(a.extra)["mode"] == "accordion"
    assert dict(a.extra)["trace_duration"] == 1790.0


def test_reader_names_a_bad_mode(tmp_path: Path) -> None:
    p = write_trace(tmp_path, [{"jt": "LM (batch size 40)", "steps": 10, "sf": 1,
                                "mode": "static", "dur": 1, "t": 0},
                               {"jt": "LM (batch size 40)", "steps": 10, "sf": 1,
                                "mode": "elastic", "dur": 1, "t": 0}])
    with pytest.raises(InvalidTrace, match=r"line 2.*mode.*'elastic'.*static, accordion, gns"):
        read_trace(p, "shockwave")


def test_schedules_follow_shockwave_simulator() -> None:
    # accordion LM: critical regime epochs < 10 at the initial batch, then the largest
    assert [scheduled_batch("LM", 40, "accordion", 1, e) for e in (0, 9, 10, 30)] == \
        [40, 40, 80, 80]
    # gns LM 40 on 1 GPU: pattern doubles at epoch 11, the simulator one epoch early
    assert [scheduled_batch("LM", 40, "gns", 1, e) for e in (9, 10)] == [40, 80]
    # ResNet-50 accordion: critical while epoch mod 30 < 10, so the batch comes back down
    assert [scheduled_batch("ResNet-50", 32, "accordion", 1, e) for e in (9, 10, 29, 30)] \
        == [32, 128, 128, 32]
    # a job already at the model's largest batch never changes; static never does
    assert scheduled_batch("LM", 80, "gns", 1, 50) == 80
    assert scheduled_batch("LM", 40, "static", 1, 50) == 40


def test_rate_is_in_initial_batch_steps(table: Path) -> None:
    m = ShockwaveModels(table)
    one = Shape("V100", (1,))
    model = "LM (batch size 40) accordion"
    assert m.goodput(model, one, 40, 0.0) == 10.0
    # epoch 10 runs batch 80: 8 steps/s of 746, counted as 1492-step epochs
    assert m.goodput(model, one, 40, 10 * 1492) == pytest.approx(8.0 * 1492 / 746)
    assert m.horizon(model, 40, 0.0) == 10 * 1492
    # no batch-80 entry on 2 GPUs: the job keeps its batch (as Shockwave refuses it)
    assert m.batch_at(model, 2, 20 * 1492) == 40


def test_job_whose_batch_changes_ends_at_hand_computed_time(table: Path) -> None:
    # 12 epochs: 10 at batch 40 (14,920 steps at 10/s = 1,492 s), then 2 at batch 80
    # (2 x 746 steps at 8/s = 186.5 s)
    job = JobSpec("j", 0.0, 1, math.nan, model="LM (batch size 40) accordion",
                  num_steps=12 * 1492, batch_size=40)
    res = Simulation(make_trace(job), TOPO, "fifo",
                     params={"perf_model": f"shockwave={table}",
                             "restore_overhead": 0}).run()
    assert res.jobs.set_index("job_id").end_time["j"] == pytest.approx(1492 + 186.5,
                                                                        rel=1e-12)
