"""Philly readers: the Pollux CSV and the original cluster_job_log JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import schedlab.traces.readers.philly as philly
from schedlab.sim.errors import InvalidTrace
from schedlab.traces import DATA_DIR, load_trace
from schedlab.traces.readers import detect_format, read_trace
from schedlab.traces.readers.philly import iter_json_records, read_philly_csv, read_philly_json

SAMPLES = DATA_DIR / "samples"
POLLUX = SAMPLES / "philly_pollux_sample.csv"
JOBLOG = SAMPLES / "philly_cluster_job_log_sample.json"


def rows(trace):
    return [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.user, j.vc) for j in trace.jobs]


def test_pollux_sample_exact_rows() -> None:
    t = read_philly_csv(POLLUX)
    assert detect_format(POLLUX) == "philly"
    # sorted by submit; ids = 0-based data row; seconds from 2017-09-29 07:58:32
    assert rows(t)[:4] == [
        ("philly-2", 0.0, 1, 860662.0, "", "6c71a0"),
        ("philly-11", 852342.0, 1, 7944.0, "", "6214e9"),
        ("philly-8", 856940.0, 1, 2859.0, "", "6214e9"),
        ("philly-9", 857561.0, 1, 2987.0, "", "6214e9"),
    ]
    assert rows(t)[-1] == ("philly-0", 860603.0, 1, 66.0, "", "11cb48")
    assert len(t) == 12 and t.bad_rows == 0 and t.extra_columns == ()
    assert t.name == "philly_pollux_sample"


def test_pollux_ids_match_the_default_trace(shared_dir: Path) -> None:
    source = shared_dir / "traces/philly/philly_jobs_pollux.csv"
    full = {j.job_id: j for j in read_philly_csv(source).jobs}
    assert len(full) == 82247
    default = load_trace("default")
    for j in default.jobs[:200]:
        f = full[j.job_id]
        assert (f.num_gpus, f.duration, f.vc) == (j.num_gpus, j.duration, j.vc)
    gaps = {round(full[j.job_id].submit_time - j.submit_time, 6) for j in default.jobs}
    assert len(gaps) == 1  # the same clock, shifted


@pytest.mark.parametrize(("line", "fragment"), [
    ("2017-13-09 07:01:55,66.0,1,66.0,11cb48",
     "line 3, field timestamp: value '2017-13-09 07:01:55' is not a time"),
    ("2017-10-09 07:01:55,abc,1,66.0,11cb48",
     "line 3, field duration: value 'abc' is not a number > 0"),
    ("2017-10-09 07:01:55,0,1,0,11cb48",
     "line 3, field duration: value '0' is not a number > 0"),
    ("2017-10-09 07:01:55,5,1.5,66.0,11cb48",
     "line 3, field num_gpus: value '1.5' is not an integer >= 0"),
    ("2017-10-09 07:01:55,5,,66.0,11cb48",
     "line 3, field num_gpus: value '' is missing"),
    ("2017-10-09 07:01:55,5,1,66.0,11cb48,extra",
     "line 3, field (line): value '' has 6 fields but the header has 5"),
])
def test_pollux_errors_name_file_line_field_value(tmp_path: Path, line: str, fragment: str) -> None:
    p = tmp_path / "ph.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                 "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" + line + "\n")
    with pytest.raises(InvalidTrace) as e:
        read_philly_csv(p)
    assert f"ph.csv, {fragment}" in str(e.value)
    t = read_philly_csv(p, skip_bad_rows=True)
    assert len(t) == 1 and t.bad_rows == 1 and "line 3" in t.bad_row_messages[0]


def test_pollux_missing_columns(tmp_path: Path) -> None:
    p = tmp_path / "ph.csv"
    p.write_text("timestamp,duration,cluster\n2017-10-09 07:01:55,66.0,a\n")
    with pytest.raises(InvalidTrace, match="missing column num_gpus of the Philly"):
        read_philly_csv(p)


def test_pollux_chunked_streaming_keeps_line_numbers(tmp_path: Path, monkeypatch) -> None:
    import schedlab.traces.readers._common as common

    monkeypatch.setattr(common, "CHUNK_ROWS", 3)
    body = "".join(f"2017-10-09 07:{i:02d}:00,{i + 1}.0,1,1.0,vc\n" for i in range(10))
    p = tmp_path / "ph.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write("timestamp,duration,num_gpus,gpu_time,cluster\n" + body + "\n"
                + "2017-10-09 08:00:00,x,1,1.0,vc\n")
    with pytest.raises(InvalidTrace, match=r"ph.csv.gz, line 13, field duration: value 'x'"):
        read_philly_csv(p)
    t = read_philly_csv(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == [f"philly-{i}" for i in range(10)]
    assert [j.submit_time for j in t.jobs] == [60.0 * i for i in range(10)]


# --------------------------------------------------------------------------- JSON


def test_joblog_sample_exact_rows() -> None:
    t = read_philly_json(JOBLOG)
    assert detect_format(JOBLOG) == "philly-json"
    assert rows(t) == [
        # 74 s + 2 d 5 h 39 m 42 s of attempts; 8 GPUs on one machine
        ("application_1506638472019_14199", 0.0, 8, 193256.0, "ce2f4c", "ee9e8c"),
        ("application_sample_0002", 1800.0, 2, 3600.0, "a1b2c3", "6214e9"),
        ("application_sample_0004", 10041.0, 8, 600.0, "d4e5f6", "b436b2"),  # 2 x 4 GPUs
    ]
    assert [dict(j.extra) for j in t.jobs] == [
        {"status": "Pass", "attempts": 2}, {"status": "Killed", "attempts": 1},
        {"status": "Failed", "attempts": 1},
    ]
    assert t.bad_rows == 2  # excluded, not errors
    assert "line 39: excluded: job 'application_sample_0003' never ran" in t.bad_row_messages[0]
    assert "line 64: excluded: job 'application_sample_0005' was still running" in \
        t.bad_row_messages[1]


def test_joblog_decodes_across_buffer_boundaries_and_json_lines(tmp_path: Path,
                                                                 monkeypatch) -> None:
    monkeypatch.setattr(philly, "JSON_CHUNK", 7)
    a = read_philly_json(JOBLOG)
    records = json.loads(JOBLOG.read_text())
    p = tmp_path / "log.jsonl.gz"
    with gzip.open(p, "wt") as f:
        f.write("\n".join(json.dumps(r) for r in records) + "\n")
    b = read_trace(p)  # detected as philly-json
    assert b.jobs == a.jobs
    assert [(n, line) for n, line, _ in iter_json_records(p)] == [(i, i) for i in range(1, 6)]


def _job(**over):
    rec = {"status": "Pass", "vc": "v", "jobid": "j1", "user": "u",
           "submitted_time": "2017-10-07 01:00:00",
           "attempts": [{"start_time": "2017-10-07 01:00:10", "end_time": "2017-10-07 01:01:10",
                         "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}
    rec.update(over)
    return rec


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "the file is empty"),
    ("[{\"jobid\": 1", "line 1: not valid JSON"),
    ("[" + json.dumps(_job()), "line 1: the JSON array is not closed"),
    ("[" + json.dumps(_job()) + " 3]", "expected ',' or ']' between jobs"),
    ("[" + json.dumps(_job()) + ",]", "expected a job after ','"),
    ("[\n\n" + json.dumps(_job(jobid="")) + "]", "line 3, field jobid: value ''"),
    ("[" + json.dumps(_job(submitted_time="yesterday")) + "]",
     "line 1, field submitted_time: value 'yesterday' is not a time"),
    ("[" + json.dumps(_job(submitted_time=None)) + "]", "submitted_time is required"),
    ("[" + json.dumps(_job(attempts={"a": 1})) + "]", "field attempts: value"),
    ("[" + json.dumps(_job(attempts=[{"start_time": "2017-10-07 02:00:00",
                                      "end_time": "2017-10-07 01:00:00"}])) + "]",
     "field attempts[0].end_time: value '2017-10-07 01:00:00' is before its start_time"),
    ("[" + json.dumps(_job(attempts=[{"start_time": "2017-10-07 01:00:00",
                                      "end_time": "2017-10-07 02:00:00",
                                      "detail": [{"gpus": 3}]}])) + "]",
     "field attempts[0].detail"),
    ("[1]", "field job 1: value '1' is not a JSON object"),
])
def test_joblog_errors(tmp_path: Path, text: str, fragment: str) -> None:
    p = tmp_path / "log.json"
    p.write_text(text)
    with pytest.raises(InvalidTrace) as e:
        read_philly_json(p)
    assert fragment in str(e.value) and "log.json" in str(e.value)


def test_joblog_excluded_only_is_an_error_naming_the_reason(tmp_path: Path) -> None:
    p = tmp_path / "log.json"
    p.write_text(json.dumps([_job(attempts=[])]))
    with pytest.raises(InvalidTrace, match="no replayable job rows; 0 bad, 1 excluded; first: "
                                           r"log.json, line 1: excluded: job 'j1' never ran"):
        read_philly_json(p)
