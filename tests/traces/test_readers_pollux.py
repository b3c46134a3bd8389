"""Pollux workload CSV reader: mapping, detection, bad rows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.readers import detect_format, read_trace
from schedlab.traces.readers.pollux import read_pollux

HEADER = "name,time,application,num_replicas,batch_size\n"


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    p = tmp_path / "workload-1.csv"
    p.write_text(header + body)
    return p


def test_mapping(tmp_path):
    p = write(tmp_path, "cifar10-0,53,cifar10,6,2048\nncf-1,40,ncf,1,32768\n")
    assert detect_format(p) == "pollux"
    t = read_trace(p)
    assert t.name == "workload-1"
    assert [j.job_id for j in t.jobs] == ["ncf-1", "cifar10-0"]  # by submit time
    a, b = t.jobs[1], t.jobs[0]
    assert (a.submit_time, a.num_gpus) == (53.0, 6)  # times kept as written
    assert math.isnan(a.duration)  # the work is the model's own
    assert (a.model, a.batch_size, a.adaptive, a.num_steps, a.samples) == (
        "cifar10", 2048, True, None, None)
    assert (b.model, b.batch_size) == ("ncf", 32768)
    assert a.extra == () and t.extra_columns == ()


@pytest.mark.parametrize(("row", "message"), [
    ("a,-1,cifar10,2,128", "line 2, field time: value '-1' is not a number >= 0"),
    ("a,1,cifar10,0,128", "field num_replicas: value '0' is not an integer >= 1"),
    ("a,1,cifar10,2,12.5", "field batch_size: value '12.5' is not an integer >= 1"),
    ("a,1, ,2,128", "field application"),
])
def test_bad_rows(tmp_path, row, message):
    p = write(tmp_path, row + "\n")
    with pytest.raises(InvalidTrace, match=message):
        read_pollux(p)
    p = write(tmp_path, row + "\nb,2,bert,2,24\n")
    t = read_pollux(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["b"] and t.bad_rows == 1


def test_missing_column_names_the_format(tmp_path):
    p = write(tmp_path, "a,1,cifar10,2\n", header="name,time,application,num_replicas\n")
    with pytest.raises(InvalidTrace, match="missing column batch_size of the Pollux workload"):
        read_trace(p, trace_format="pollux")
    with pytest.raises(InvalidTrace, match="missing column batch_size of the Pollux workload"):
        detect_format(p)
