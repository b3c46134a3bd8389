"""Standard Workload Format reader."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest
from conftest import shared_or_sample

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import DATA_DIR
from schedlab.traces.base import Trace
from schedlab.traces.readers import detect_format, read_trace, trace_epoch
from schedlab.traces.readers.swf import read_swf, swf_header

SAMPLE = DATA_DIR / "samples" / "nasa_ipsc_sample.swf.gz"
LINE = "    {job} {submit} -1 {run} {procs} -1 -1 {req} -1 -1 -1 {user} 1 -1 {queue} -1 -1 -1\n"


def test_sample_exact_rows() -> None:
    assert detect_format(SAMPLE) == "swf"
    t = read_swf(SAMPLE)
    assert len(t) == 18
    got = [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.user, j.vc) for j in t.jobs]
    assert got[:6] == [
        ("1", 0.0, 128, 1451.0, "1", "default"),
        ("2", 1460.0, 128, 3726.0, "1", "default"),
        ("3", 5198.0, 128, 1067.0, "1", "default"),
        ("4", 6269.0, 128, 10927.0, "2", "default"),
        ("5", 17201.0, 128, 2927.0, "1", "default"),
        ("57", 25574.0, 1, 10.0, "4", "default"),
    ]
    assert dict(t.jobs[8].extra) == {"status": "", "group": "2", "executable": "5",
                                      "time_limit": ""}
    # job 658 ran 0 s: excluded, counted
    assert t.bad_rows == 1 and "line 51: excluded: run time unknown (-1) or 0 s" in \
        t.bad_row_messages[0]
    assert swf_header(SAMPLE)["UnixStartTime"] == "749458803"
    if "epoch" in {f.name for f in dataclasses.fields(Trace)}:
        assert trace_epoch(t) == 749458803.0


def test_procs_per_gpu() -> None:
    t = read_trace(SAMPLE, options={"procs_per_gpu": 8})
    assert [j.num_gpus for j in t.jobs][:10] == [16, 16, 16, 16, 16, 1, 4, 1, 1, 1]
    with pytest.raises(InvalidTrace, match="procs_per_gpu 0: expected an integer >= 1"):
        read_swf(SAMPLE, procs_per_gpu=0)
    with pytest.raises(InvalidTrace, match="option 'procs' is not one of the swf format's "
                                           "options; allowed: procs_per_gpu"):
        read_trace(SAMPLE, options={"procs": 2})


def test_requested_processors_queue_and_plain_file(tmp_path: Path) -> None:
    p = tmp_path / "log.swf"
    p.write_text("; UnixStartTime: 1000\n"
                 + LINE.format(job=1, submit=10, run=5, procs=-1, req=4, user=3, queue=2)
                 + LINE.format(job=2, submit=20, run=-1, procs=2, req=-1, user=-1, queue=-1))
    t = read_swf(p)
    assert [(j.job_id, j.submit_time, j.num_gpus, j.user, j.vc) for j in t.jobs] == [
        ("1", 0.0, 4, "3", "2")]
    assert t.bad_rows == 1


@pytest.mark.parametrize(("line", "fragment"), [
    ("1 0 -1 10 4\n", "line 2, field (line): value '1 0 -1 10 4' has 5 fields; expected 18"),
    (LINE.format(job=1, submit="x", run=5, procs=1, req=1, user=1, queue=1),
     "line 2, field submit: value 'x' is not a number >= 0"),
    (LINE.format(job=1, submit=0, run=5, procs=-1, req=-1, user=1, queue=1),
     "line 2, field alloc_procs: value '-1' and req_procs are both unknown"),
    (LINE.format(job=1, submit=0, run=5, procs=2.5, req=-1, user=1, queue=1),
     "line 2, field alloc_procs: value '2.5' is not an integer"),
    (LINE.format(job=1, submit=0, run=5, procs=2, req=-1, user="u", queue=1),
     "line 2, field user: value 'u' is not an integer"),
])
def test_errors(tmp_path: Path, line: str, fragment: str) -> None:
    p = tmp_path / "log.swf.gz"
    with gzip.open(p, "wt") as f:
        f.write("; Version: 2.2\n" + line)
    with pytest.raises(InvalidTrace) as e:
        read_swf(p)
    assert f"log.swf.gz, {fragment}" in str(e.value)


def test_real_log() -> None:
    path, full = shared_or_sample("traces/swf-nasa-ipsc/NASA-iPSC-1993-3.1-cln.swf.gz",
                                  "nasa_ipsc_sample.swf.gz")
    t = read_swf(path)
    if full:
        assert len(t) + t.bad_rows == 18239 and t.bad_rows == 173
    else:  # the header, the first 18 jobs and job 658 (0 s) of the same log
        assert len(t) == 18 and t.bad_rows == 1
    assert swf_header(path)["UnixStartTime"] == "749458803"
