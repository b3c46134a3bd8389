"""Trace columns of performance-model jobs: model, num_steps|samples, batch_size, adaptive."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import load_trace


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(text)
    return p


def test_model_rows_may_leave_duration_empty(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,model,num_steps,batch_size,"
                        "adaptive\n"
                        "a,0,1,,resnet,1000,128,true\n"
                        "b,5,2,30,,,,\n")
    a, b = load_trace(p).jobs
    assert (a.model, a.num_steps, a.batch_size, a.adaptive) == ("resnet", 1000.0, 128, True)
    assert math.isnan(a.duration)
    assert (b.model, b.duration, b.batch_size, b.adaptive) == ("", 30.0, None, False)


def test_no_duration_column_when_model_given(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,model,samples\na,0,1,bert,5e6\n")
    (a,) = load_trace(p).jobs
    assert a.samples == 5e6 and math.isnan(a.duration)


def test_row_without_model_still_needs_duration(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,model\na,0,1,,\n")
    with pytest.raises(InvalidTrace, match=r"row 1.*duration.*is missing"):
        load_trace(p)


def test_bad_batch_size_names_row_and_rule(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,model,batch_size\n"
                        "a,0,1,10,m,0\n")
    with pytest.raises(InvalidTrace, match=r"batch_size.*'0'.*integer"):
        load_trace(p)
