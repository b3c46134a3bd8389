"""Helios cluster_log.csv reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import DATA_DIR
from schedlab.traces.readers import detect_format
from schedlab.traces.readers.helios import read_helios

SAMPLE = DATA_DIR / "samples" / "helios_cluster_log_sample.csv"
HEADER = ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
          "duration,queue\n")


def test_sample_exact_rows() -> None:
    t = read_helios(SAMPLE)
    assert detect_format(SAMPLE) == "helios"
    assert [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.num_cpus, j.user, j.vc,
             dict(j.extra)) for j in t.jobs] == [
        ("5fa0a1", 0.0, 8, 7200.0, 48.0, "u0001", "vcA", {"status": "COMPLETED", "node_num": "1"}),
        ("5fa0a3", 350.0, 0, 600.0, 4.0, "u0001", "vcA", {"status": "COMPLETED", "node_num": "1"}),
        ("5fa0a4", 3600.0, 16, 300.0, 96.0, "u0003", "vcC", {"status": "FAILED", "node_num": "2"}),
    ]
    assert t.bad_rows == 1
    assert t.bad_row_messages == (
        "helios_cluster_log_sample.csv, line 3: excluded: job never ran (no start or a "
        "duration of 0 s)",)


def test_duration_from_start_and_end_when_no_duration_column(tmp_path: Path) -> None:
    p = tmp_path / "cluster_log.csv"
    p.write_text("job_id,user,vc,gpu_num,state,submit_time,start_time,end_time\n"
                 "a,u,v,2,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:01:00,2020-04-01 00:31:00\n"
                 "b,u,v,1,CANCELLED,2020-04-01 00:02:00,,\n")
    t = read_helios(p)
    assert [(j.job_id, j.submit_time, j.duration) for j in t.jobs] == [("a", 0.0, 1800.0)]
    assert t.bad_rows == 1


@pytest.mark.parametrize(("row", "fragment"), [
    ("x,u,v,2,8,1,COMPLETED,2020-04-31 00:00:00,,,10,0",
     "field submit_time: value '2020-04-31 00:00:00' is not a time"),
    ("x,u,v,two,8,1,COMPLETED,2020-04-01 00:00:00,,,10,0",
     "field gpu_num: value 'two' is not an integer >= 0"),
    ("x,u,v,2,8,1,COMPLETED,2020-04-01 00:00:00,,,-5,0",
     "field duration: value '-5' is not a number >= 0"),
    ("x,u,v,2,-8,1,COMPLETED,2020-04-01 00:00:00,,,10,0",
     "field cpu_num: value '-8' is not a number >= 0"),
])
def test_errors(tmp_path: Path, row: str, fragment: str) -> None:
    p = tmp_path / "cluster_log.csv"
    p.write_text(HEADER + "ok,u,v,1,1,1,COMPLETED,2020-04-01 00:00:00,,,10,0\n" + row + "\n")
    with pytest.raises(InvalidTrace) as e:
        read_helios(p)
    assert f"cluster_log.csv, line 3, {fragment}" in str(e.value)
    assert len(read_helios(p, skip_bad_rows=True)) == 1


def test_end_before_start_and_missing_columns(tmp_path: Path) -> None:
    p = tmp_path / "cluster_log.csv"
    p.write_text("job_id,gpu_num,submit_time,start_time,end_time\n"
                 "a,1,2020-04-01 00:00:00,2020-04-01 00:10:00,2020-04-01 00:05:00\n")
    with pytest.raises(InvalidTrace, match="line 2, field end_time: .* is before start_time"):
        read_helios(p)
    p.write_text("job_id,gpu_num,submit_time\na,1,2020-04-01 00:00:00\n")
    with pytest.raises(InvalidTrace, match="missing columns start_time, end_time of the Helios"):
        read_helios(p)
