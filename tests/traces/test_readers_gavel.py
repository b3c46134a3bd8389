"""Gavel trace reader with simulation_throughputs.json, and the Tiresias CSV reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import shared_or_sample

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import DATA_DIR
from schedlab.traces.readers import detect_format, read_trace
from schedlab.traces.readers.gavel import load_throughputs, read_gavel
from schedlab.traces.readers.tiresias import read_tiresias

SAMPLES = DATA_DIR / "samples"
TP = SAMPLES / "simulation_throughputs.json"


def iso(gpu: str, key: str) -> float:
    return json.loads(TP.read_text())[gpu][key]["null"]


def test_current_layout_exact_rows() -> None:
    p = SAMPLES / "gavel_physical_sample.trace"
    assert detect_format(p) == "gavel"
    t = read_gavel(p)
    assert len(t) == 8 and t.bad_rows == 0
    j = t.jobs[0]  # ResNet-18 (batch size 128), 925982 steps, 4 GPUs, arrives at 0
    key = "('ResNet-18 (batch size 128)', 4)"
    assert (j.job_id, j.submit_time, j.num_gpus) == ("gavel-0", 0.0, 4)
    assert j.duration == 925982 / iso("v100", key)
    assert j.gpu_speeds == (("K80", iso("k80", key) / iso("v100", key)),
                            ("P100", iso("p100", key) / iso("v100", key)), ("V100", 1.0))
    assert dict(j.extra) == {"job_type": "ResNet-18 (batch size 128)", "priority_weight": 1.0,
                             "SLO": None}
    assert [x.num_gpus for x in t.jobs] == [4, 2, 1, 1, 4, 1, 4, 4]


def test_msr_layout_and_missing_throughput_is_excluded() -> None:
    t = read_trace(SAMPLES / "gavel_msr_sample.trace")
    assert [(j.job_id, j.submit_time, j.num_gpus) for j in t.jobs] == [
        ("gavel-0", 0.0, 1), ("gavel-1", 266564.0, 1), ("gavel-2", 266566.0, 1),
        ("gavel-3", 289185.0, 1), ("gavel-4", 290070.0, 1), ("gavel-5", 291876.0, 1)]
    assert t.jobs[0].duration == 20851471 / iso("v100", "('Transformer (batch size 128)', 1)")
    assert t.bad_rows == 1
    assert "line 7: excluded: ('Recommendation (batch size 1024)', 4) has no throughput" in \
        t.bad_row_messages[0]


def test_reference_type_and_explicit_throughputs(tmp_path: Path) -> None:
    p = shutil.copy(SAMPLES / "gavel_physical_sample.trace", tmp_path / "x.trace")
    with pytest.raises(InvalidTrace, match="Gavel throughputs .* not found; give throughputs"):
        read_gavel(p)
    t = read_trace(p, options={"throughputs": TP, "reference": "k80"})
    assert dict(t.jobs[0].gpu_speeds)["K80"] == 1.0
    with pytest.raises(InvalidTrace, match="no reference GPU type 'a100'; types: k80, p100"):
        load_throughputs(TP, "a100")


@pytest.mark.parametrize(("fields", "fragment"), [
    (["m", "c", ".", "-s", "1", "-5", "1", "1", "-1", "0"], "field total_steps: value '-5'"),
    (["m", "c", ".", "-s", "1", "5", "0", "1", "-1", "0"], "field scale_factor: value '0'"),
    (["m", "c", ".", "-s", "1", "5", "1", "1", "-1", "t"], "field arrival_time: value 't'"),
])
def test_errors(tmp_path: Path, fields: list[str], fragment: str) -> None:
    p = tmp_path / "x.trace"
    p.write_text("\t".join(fields) + "\n")
    with pytest.raises(InvalidTrace) as e:
        read_gavel(p, throughputs=TP)
    assert f"x.trace, line 1, {fragment}" in str(e.value)


def test_bad_throughputs_file(tmp_path: Path) -> None:
    tp = tmp_path / "tp.json"
    tp.write_text(json.dumps({"v100": {"not a tuple": {"null": 1}}}))
    with pytest.raises(InvalidTrace, match="v100 entry 'not a tuple' is not"):
        load_throughputs(tp)


def test_tiresias_exact_rows() -> None:
    p = SAMPLES / "tiresias_sample.csv"
    assert detect_format(p) == "tiresias"
    t = read_tiresias(p)
    assert [(j.job_id, j.submit_time, j.num_gpus, j.duration) for j in t.jobs] == [
        ("0", 0.0, 1, 164.0), ("1", 30.0, 8, 147.0), ("2", 53.0, 2, 127.0),
        ("3", 79.0, 1, 121.0), ("4", 99.0, 4, 121.0), ("5", 132.0, 8, 138.0),
        ("6", 176.0, 1, 121.0), ("7", 204.0, 2, 124.0)]
    assert dict(t.jobs[0].extra) == {"model_name": "vgg19", "iterations": "606"}


def test_tiresias_errors(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                 "0,1,0,5,vgg,0,1\n")
    with pytest.raises(InvalidTrace, match=r"t.csv, line 2, field duration: value '0' is not "
                                           "a number > 0"):
        read_tiresias(p)
    p.write_text("job_id,num_gpu,submit_time\n0,1,0\n")
    with pytest.raises(InvalidTrace, match="missing column duration of the Tiresias format"):
        read_tiresias(p)


def test_real_gavel_and_tiresias() -> None:
    path, full = shared_or_sample("traces/gavel/msr_seed0_6214e9.trace",
                                  "gavel_msr_sample.trace")
    t = read_trace(path)
    sizes = [j.num_gpus for j in t.jobs]
    if full:
        assert len(t) == 1985 and t.bad_rows == 15  # as the folder's README says
        assert (sizes.count(1), sizes.count(2), sizes.count(4), sizes.count(8)) == (
            1928, 20, 27, 10)
    else:  # its first 6 lines and line 33, whose job type has no throughput
        assert len(t) == 6 and t.bad_rows == 1 and sizes == [1] * 6
    # the whole Tiresias trace ships with the samples (Apache-2.0): the README's numbers
    t = read_trace(SAMPLES / "tiresias_60_job.csv")
    sizes = [j.num_gpus for j in t.jobs]
    assert len(t) == 60
    assert (sizes.count(1), sizes.count(2), sizes.count(4), sizes.count(8)) == (30, 10, 10, 10)
    assert sum(j.num_gpus * j.duration for j in t.jobs) == 26624.0
    assert max(j.submit_time for j in t.jobs) == 1779.0
