"""The `lucid` performance model: Lucid's co-location table (ASPLOS'23) read as Lucid's
simulator reads it (`simulation/updater.py`), and packed jobs running at its speeds."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_trace

from schedlab.policies.base import Policy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec, Start
from schedlab.sim.perf.base import Shape
from schedlab.sim.perf.lucid import LucidTable, parse_key
from schedlab.sim.perf.run import parse_perf_model
from schedlab.sim.registry import PERF_MODELS
from schedlab.topologies.build import uniform_topology

# Lucid's columns (gpu_num and the utilization columns are read by nobody, as in Lucid)
HEAD = ("model1,dataset1,gpu_num1,batchsize1,amp1,speed1,"
        "model2,dataset2,gpu_num2,batchsize2,amp2,speed2,gpu_util,gmem_util,gmem\n")
TABLE = HEAD + """\
MobileNetV3,ImageNet,1,32,0,0.8,ResNet18,CIFAR-10,1,32,0,0.6,64.8,29.5,5106
MobileNetV3,ImageNet,1,32,1,0.9,ResNet18,CIFAR-10,1,64,0,0.7,45.6,20.8,5046
ResNet18,CIFAR-10,1,32,0,0.75,ResNet18,CIFAR-10,1,32,0,0.65,50.0,25.0,4000
NeuMF,MovieLens,1,32,0,0.5,ResNet18,CIFAR-10,1,32,0,0.5,50.0,25.0,4000
"""
ONE = Shape("V100", (1,))


@pytest.fixture
def table(tmp_path: Path) -> Path:
    p = tmp_path / "colocate_info.csv"
    p.write_text(TABLE)
    return p


def test_registered_and_named_in_perf_model(table: Path) -> None:
    assert "lucid" in PERF_MODELS.names()
    assert parse_perf_model(f"lucid={table}") == (("lucid", str(table)),)


def test_keys_are_model_batch_and_amp(table: Path) -> None:
    t = LucidTable(table)
    known = t.models()
    assert "MobileNetV3@32" in known and "MobileNetV3@32+amp" in known
    assert "ResNet18@64" in known
    assert "ResNet18@128" not in known and "ResNet18" not in known  # no such job measured
    assert "BERT" in known and "ResNet50@256+amp" in known  # Lucid's outside models
    assert parse_key("ResNet18@64+amp") == ("ResNet18", 64, 1)
    assert parse_key("ResNet18@x") is None


def test_pair_row_then_reversed_row(table: Path) -> None:
    t = LucidTable(table)
    # the row (job, partner) gives speed1; else the row (partner, job) gives speed2
    assert t.pair("MobileNetV3@32", "ResNet18@32", ONE, None) == 0.8
    assert t.pair("ResNet18@32", "MobileNetV3@32", ONE, None) == 0.6
    assert t.pair("MobileNetV3@32+amp", "ResNet18@64", ONE, None) == 0.9
    assert t.pair("ResNet18@64", "MobileNetV3@32+amp", ONE, None) == 0.7
    # two jobs of one key: both read the row's speed1
    assert t.pair("ResNet18@32", "ResNet18@32", ONE, None) == 0.75
    # the GPU count and type are not part of the lookup (Lucid's gpu_num match is off)
    assert t.pair("MobileNetV3@32", "ResNet18@32", Shape("K80", (4, 4)), None) == 0.8


def test_unmeasured_pair_and_outside_models(table: Path) -> None:
    t = LucidTable(table)
    assert t.pair("MobileNetV3@32", "ResNet18@64", ONE, None) is None  # no row
    # outside models run at 1.0 with anyone, NeuMF even though the table has its row
    assert t.pair("NeuMF@32", "ResNet18@32", ONE, None) == 1.0
    assert t.pair("ResNet18@32", "BERT", ONE, None) == 1.0


def test_alone_rate_one_on_any_shape(table: Path) -> None:
    t = LucidTable(table)
    assert t.throughput("ResNet18@32", ONE, None) == 1.0
    assert t.throughput("ResNet18@32", Shape("A100", (8, 8)), None) == 1.0


@pytest.mark.parametrize(("text", "needle"), [
    (HEAD.replace("speed2,", ""), "missing column(s) speed2"),
    (HEAD + "A,D,1,32,0,0,B,E,1,32,0,0.5,,,\n", "line 2: speed1 '0'"),
    (HEAD + "A,D,1,0,0,0.5,B,E,1,32,0,0.5,,,\n", "line 2: batchsize1 '0'"),
    (HEAD + "A,D,1,32,2,0.5,B,E,1,32,0,0.5,,,\n", "line 2: amp1 2"),
    (HEAD + "A,D,1,32,0,0.5,B,E,1,32,0,0.5,,,\nA,D,1,32,0,0.4,B,E,1,32,0,0.4,,,\n",
     "line 3: a second row for the pair A@32, B@32"),
    (HEAD + "A,D,1,32,0,0.5,B,E,1,32,0,0.5,,,\nA,X,1,64,0,0.4,B,E,1,32,0,0.4,,,\n",
     "line 3: dataset1 'X'"),
])
def test_bad_rows_name_line_and_field(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InvalidParameter, match="perf_model") as err:
        LucidTable(p)
    assert needle in str(err.value)


class PackSecond(Policy):
    """Starts `a` on GPU 0, then `b` packed with it on the same GPU."""

    name = "pack-second"

    def schedule(self, ctx) -> Iterator[Start]:  # type: ignore[no-untyped-def]
        for job in list(ctx.pending()):
            yield Start(job.job_id, (0,), share="pack" if job.job_id == "b" else "")


def _ends(trace, table: Path, policy=None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    res = Simulation(trace, uniform_topology(1, name="one"), policy or PackSecond(),
                     params={"perf_model": f"lucid={table}", "restore_overhead": 0}).run()
    return res.jobs.set_index("job_id").end_time.to_dict()


def test_packed_pair_runs_at_the_tables_speeds(table: Path) -> None:
    # a (MobileNetV3@32, 100 s alone) and b (ResNet18@32, 50 s) packed at t=0: a at 0.8,
    # b at 0.6. b ends at 50 / 0.6 = 83.33 s, when a has done 66.67 s of work; a's
    # remaining 33.33 s run alone at rate 1: a ends at 116.67 s
    trace = make_trace(JobSpec("a", 0.0, 1, 100.0, model="MobileNetV3@32"),
                       JobSpec("b", 0.0, 1, 50.0, model="ResNet18@32"))
    ends = _ends(trace, table)
    assert ends["b"] == pytest.approx(50 / 0.6, rel=1e-12)
    assert ends["a"] == pytest.approx(50 / 0.6 + (100 - 0.8 * 50 / 0.6), rel=1e-12)


def test_work_in_units_is_seconds_alone(table: Path) -> None:
    # one unit of work is one second of the job alone: 40 units of a job alone take 40 s
    trace = make_trace(JobSpec("a", 0.0, 1, math.nan, model="ResNet18@64", num_steps=40))
    assert _ends(trace, table, "fifo")["a"] == pytest.approx(40.0)


def test_a_key_not_in_the_table_is_an_error_naming_the_job(table: Path) -> None:
    trace = make_trace(JobSpec("a", 0.0, 1, 100.0, model="ResNet18@128"))
    with pytest.raises(InvalidParameter, match="'a'.*ResNet18@128"):
        _ends(trace, table, "fifo")
