"""Input edges answered with the exact reason: file, row/line, column/field, value, rule.

Missing columns found by detection, BOM files, directories, broken gzip, extra fields and
unnamed columns, absurd numbers, and the mode of written files.
"""

from __future__ import annotations

import gzip
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import DATA_DIR, load_trace, read_canonical, write_canonical
from schedlab.traces.inspect import convert
from schedlab.traces.readers import detect_format, read_trace
from schedlab.traces.schema import CHECKED_PASS_THROUGH, MAX_COUNT, MAX_SECONDS, NUM_COLS

SAMPLES = DATA_DIR / "samples"
HEADER = "job_id,submit_time,num_gpus,duration"
POLLUX = "timestamp,duration,num_gpus,gpu_time,cluster"
SKIP = "; skip_bad_rows=True / --skip-bad-rows skips bad rows"


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def error_of(fn: Callable[..., object], *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InvalidTrace) as e:
        fn(*args, **kwargs)
    return str(e.value)


# --------------------------------------------------------------------- 1. missing columns


@pytest.mark.parametrize(("header", "missing"), [
    ("job_id,submit_time,num_gpus", "missing required column duration"),
    ("job_id,num_gpus,duration,user", "missing required column submit_time"),
    ("job_id,foo", "missing required columns submit_time, num_gpus, duration"),
    ("submit_time,gpus,runtime", "missing required columns job_id, num_gpus, duration"),
])
def test_detection_names_missing_canonical_columns(tmp_path: Path, header: str,
                                                   missing: str) -> None:
    p = write(tmp_path, f"{header}\n" + ",".join("1" for _ in header.split(",")) + "\n")
    detected = error_of(load_trace, p)
    assert detected == error_of(load_trace, p, trace_format="canonical")
    assert detected == error_of(detect_format, p)
    cols = ", ".join(repr(c) for c in header.split(","))
    assert detected == (f"t.csv: {missing}; found columns: {cols}; "
                        "required: job_id, submit_time, num_gpus, duration")


def test_detection_names_missing_columns_of_the_closest_format(tmp_path: Path) -> None:
    p = write(tmp_path, "timestamp,num_gpus,cluster\n2017-10-09 07:01:55,1,vc\n",
              name="ph.csv")
    msg = error_of(load_trace, p)
    assert msg == error_of(load_trace, p, trace_format="philly")
    assert msg == ("ph.csv: missing column duration of the Philly (Pollux CSV) format; "
                   "found: 'timestamp', 'num_gpus', 'cluster'; required: timestamp, "
                   "duration, num_gpus")


def test_unrelated_header_still_cannot_tell(tmp_path: Path) -> None:
    p = write(tmp_path, "time,submit_job_all,start_job_all\n0,1,2\n")
    assert "cannot tell the trace format" in error_of(load_trace, p)


# --------------------------------------------------------------------- 2. BOM

BOM = "\ufeff"
TEXT_SAMPLES = {
    "philly_pollux_sample.csv": "philly",
    "philly_cluster_job_log_sample.json": "philly-json",
    "helios_cluster_log_sample.csv": "helios",
    "pai_task_table_sample.csv": "pai",
    "openb_pod_list_sample.csv": "openb",
    "gavel_physical_sample.trace": "gavel",
    "tiresias_sample.csv": "tiresias",
}


def test_bom_canonical_csv_and_csv_gz(tmp_path: Path) -> None:
    text = f"{BOM}{HEADER},user\nj1,0,1,10,alice\nj2,5,2,20,bob\n"
    plain = write(tmp_path, text)
    packed = tmp_path / "t.csv.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    for p in (plain, packed):
        assert detect_format(p) == "canonical"
        t = load_trace(p)
        assert [(j.job_id, j.num_gpus, j.user) for j in t.jobs] == [("j1", 1, "alice"),
                                                                    ("j2", 2, "bob")]
        assert t.extra_columns == ()


@pytest.mark.parametrize(("name", "fmt"), sorted(TEXT_SAMPLES.items()))
def test_bom_other_formats_detected_and_read_alike(tmp_path: Path, name: str, fmt: str) -> None:
    src = SAMPLES / name
    p = tmp_path / name
    p.write_text(BOM + src.read_text(encoding="utf-8"), encoding="utf-8")
    for companion in ("simulation_throughputs.json", "pai_job_table_sample.csv"):
        shutil.copy(SAMPLES / companion, tmp_path)
    assert detect_format(p) == fmt
    with_bom, plain = load_trace(p), read_trace(src)
    assert with_bom.jobs == plain.jobs
    assert [dict(j.extra) for j in with_bom.jobs] == [dict(j.extra) for j in plain.jobs]
    assert with_bom.bad_rows == plain.bad_rows


def test_bom_gavel_throughputs(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "gavel_physical_sample.trace", tmp_path)
    tp = tmp_path / "simulation_throughputs.json"
    tp.write_text(BOM + (SAMPLES / tp.name).read_text(encoding="utf-8"), encoding="utf-8")
    assert load_trace(tmp_path / "gavel_physical_sample.trace").jobs == read_trace(
        SAMPLES / "gavel_physical_sample.trace").jobs


# --------------------------------------------------------------------- 3. directories


def test_directory_is_named_a_directory_with_its_trace_files(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    d.mkdir()
    (d / "b.csv").write_text(f"{HEADER}\nj1,0,1,10\n")
    (d / "a.swf.gz").write_bytes(b"")
    (d / "notes.txt").write_text("x")
    (d / "sub.csv").mkdir()
    expected = (f"trace file {str(d)!r} is a directory, not a file; trace files in it: "
                "a.swf.gz, b.csv; give the path of one trace file")
    assert error_of(load_trace, str(d)) == expected
    assert error_of(load_trace, d) == expected
    assert error_of(read_trace, d) == expected
    assert error_of(detect_format, d) == expected
    assert error_of(read_canonical, d) == expected


def test_empty_directory_says_what_is_expected(tmp_path: Path) -> None:
    d = tmp_path / "data.csv"
    d.mkdir()
    msg = error_of(load_trace, d)
    assert msg.startswith(f"trace file {str(d)!r} is a directory, not a file; it holds no "
                          "trace file (.csv, .csv.gz, .parquet")
    assert msg.endswith("give the path of one trace file")
    assert "not found" in error_of(load_trace, tmp_path / "nope.csv")


def test_many_trace_files_listed_with_the_count(tmp_path: Path) -> None:
    for i in range(12):
        (tmp_path / f"t{i:02d}.csv").write_text("")
    msg = error_of(load_trace, tmp_path)
    assert "trace files in it: t00.csv, t01.csv, t02.csv" in msg
    assert "t07.csv, ... (12 in all); give the path" in msg


# --------------------------------------------------------------------- 4. broken gzip


@pytest.fixture
def big_csv_gz() -> bytes:
    body = HEADER + "\n" + "".join(f"j{i},{i},1,10\n" for i in range(100_000))
    return gzip.compress(body.encode())


def test_random_bytes_in_gz_file(tmp_path: Path) -> None:
    p = tmp_path / "r.csv.gz"
    p.write_bytes(bytes(range(7, 200)))
    msg = ("r.csv.gz: not a gzip file (it starts with bytes 07 08, not the gzip magic "
           "1f 8b); a .gz trace must be gzip-compressed")
    assert error_of(load_trace, p) == msg
    assert error_of(load_trace, p, trace_format="canonical") == msg
    assert error_of(load_trace, p, trace_format="philly") == msg
    swf = tmp_path / "r.swf.gz"
    swf.write_bytes(bytes(range(7, 200)))
    assert error_of(load_trace, swf).startswith("r.swf.gz: not a gzip file")
    empty = tmp_path / "e.gz"
    empty.write_bytes(b"")
    assert error_of(load_trace, empty) == ("e.gz: not a gzip file (the file is empty); a .gz "
                                           "trace must be gzip-compressed")


def test_gzip_magic_then_garbage(tmp_path: Path) -> None:
    p = tmp_path / "g.csv.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(60, 160)))
    msg = error_of(load_trace, p)
    assert msg.startswith("g.csv.gz: not a valid gzip file"), msg
    assert error_of(load_trace, p, trace_format="canonical").startswith(
        "g.csv.gz: not a valid gzip file")


def test_truncated_gzip_in_detection_and_in_reading(tmp_path: Path, big_csv_gz: bytes) -> None:
    short = tmp_path / "short.csv.gz"
    short.write_bytes(big_csv_gz[:300])  # cut within the head detection reads
    long = tmp_path / "long.csv.gz"
    long.write_bytes(big_csv_gz[: len(big_csv_gz) // 2])  # cut after it
    for p in (short, long):
        for fmt in (None, "canonical"):
            msg = error_of(load_trace, p, trace_format=fmt)
            assert msg.startswith(f"{p.name}: truncated gzip stream: the file ends before the "
                                  "end of its compressed data ("), msg


def test_truncated_gzip_swf(tmp_path: Path) -> None:
    data = (SAMPLES / "nasa_ipsc_sample.swf.gz").read_bytes()
    p = tmp_path / "cut.swf.gz"
    p.write_bytes(data[: len(data) - 12])
    assert error_of(load_trace, p).startswith("cut.swf.gz: truncated gzip stream")


def test_not_utf8_text(tmp_path: Path) -> None:
    p = tmp_path / "latin.csv"
    p.write_bytes(f"{HEADER},user\nj1,0,1,10,Jos".encode() + b"\xe9\n")
    msg = ("latin.csv: not UTF-8 text: bytes e9 cannot be decoded (invalid continuation "
           "byte); trace files are UTF-8 text")
    assert error_of(load_trace, p) == msg
    assert error_of(load_trace, p, trace_format="canonical").startswith(
        "latin.csv: not UTF-8 text")


# --------------------------------------------------------------------- 5. extra fields


def test_trailing_comma_on_data_rows(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,1,10,\nj2,0,1,10,\n")
    first = ("t.csv, row 1 (line 2): has 5 fields but the header has 4; its extra field is "
             "empty (a trailing comma?)")
    assert error_of(load_trace, p) == (f"{first} (and 1 more error{SKIP})")
    with pytest.raises(InvalidTrace, match="no valid job rows; all 2 rows are bad"):
        load_trace(p, skip_bad_rows=True)


def test_one_extra_value_on_every_row(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,1,10,5\nj2,0,1,10,6\nj3,0,1,10\nj4,0,1,10,7\n")
    assert error_of(load_trace, p) == ("t.csv, row 1 (line 2): has 5 fields but the header "
                                       f"has 4 (and 2 more errors{SKIP})")
    t = load_trace(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["j3"] and t.bad_rows == 3
    assert t.bad_row_messages == tuple(
        f"t.csv, row {r} (line {r + 1}): has 5 fields but the header has 4" for r in (1, 2, 4))


def test_extra_fields_in_a_reader_format(tmp_path: Path) -> None:
    p = write(tmp_path, f"{POLLUX}\n2017-10-09 07:01:55,66.0,1,66.0,vc,\n"
                        "2017-10-09 07:01:56,60.0,1,60.0,vc\n", name="ph.csv")
    assert error_of(load_trace, p) == (
        "ph.csv, line 2, field (line): value '' has 6 fields but the header has 5; its extra "
        f"field is empty (a trailing comma?){SKIP}")
    t = load_trace(p, skip_bad_rows=True)
    assert [j.duration for j in t.jobs] == [60.0] and t.bad_rows == 1


def test_extra_fields_in_a_header_less_format(tmp_path: Path) -> None:
    p = write(tmp_path, "j1,worker,4.0,Terminated,100.0,1100.0,600.0,29.3,100.0,V100,extra\n"
                        "j2,worker,1.0,Terminated,200.0,500.0,600.0,20.0,50.0,T4\n",
              name="pai_task_table.csv")
    assert error_of(load_trace, p) == ("pai_task_table.csv, line 1, field (line): value '' "
                                       f"has 11 fields; expected 10{SKIP}")


SHORT = ("missing fields are not read as empty ones: write every field, empty ones too")


def test_a_row_with_too_few_fields_is_a_bad_row(tmp_path: Path) -> None:
    # pandas pads a short line with empty cells: j2 would silently lose its user
    p = write(tmp_path, f"{HEADER},user\nj1,0,1,10,alice\nj2,0,1,10\nj3,0,1,10,bob\n")
    assert error_of(load_trace, p) == (
        f"t.csv, row 2 (line 3): has 4 fields but the header has 5; {SHORT}")
    t = load_trace(p, skip_bad_rows=True)
    assert [(j.job_id, j.user) for j in t.jobs] == [("j1", "alice"), ("j3", "bob")]
    assert t.bad_rows == 1


def test_too_few_fields_in_a_reader_format(tmp_path: Path) -> None:
    p = write(tmp_path, f"{POLLUX}\n2017-10-09 07:01:55,66.0,1,66.0,vc\n"
                        "2017-10-09 07:01:56,60.0,1,60.0\n", name="ph.csv")
    assert error_of(load_trace, p) == (
        f"ph.csv, line 3, field (line): value '' has 4 fields but the header has 5; {SHORT}"
        f"{SKIP}")
    t = load_trace(p, skip_bad_rows=True)
    assert [j.duration for j in t.jobs] == [66.0] and t.bad_rows == 1


def test_too_few_fields_in_a_header_less_format(tmp_path: Path) -> None:
    p = write(tmp_path, "j1,worker,4.0,Terminated,100.0,1100.0,600.0,29.3,100.0,V100\n"
                        "j2,worker,1.0,Terminated,200.0,500.0,600.0,20.0,50.0\n",
              name="pai_task_table.csv")
    assert error_of(load_trace, p) == ("pai_task_table.csv, line 2, field (line): value '' "
                                       f"has 9 fields; expected 10; {SHORT}{SKIP}")


def test_too_few_fields_in_gzip_and_quoted_files(tmp_path: Path) -> None:
    # a quoted field may hold the separator: such files are counted by the csv module
    text = f'{HEADER},user\nj1,0,1,10,"a, b"\nj2,0,1,10\n'
    for name, data in (("q.csv", text.encode()), ("q.csv.gz", gzip.compress(text.encode())),
                       ("p.csv.gz", gzip.compress(text.replace('"a, b"', "ab").encode()))):
        p = tmp_path / name
        p.write_bytes(data)
        assert error_of(load_trace, p) == (
            f"{name}, row 2 (line 3): has 4 fields but the header has 5; {SHORT}")


def test_a_line_of_only_separators_is_blank_not_short(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},user\nj1,0,1,10,alice\n,,\n \nj3,0,1,10,bob\n")
    assert [j.job_id for j in load_trace(p).jobs] == ["j1", "j3"]


def test_short_lines_across_scan_blocks(tmp_path: Path, monkeypatch) -> None:
    # the field count scans a block at a time: lines cut by a block edge count whole
    import schedlab.traces.csv_stream as cs

    monkeypatch.setattr(cs, "SCAN_BYTES", 7)
    rows = "".join(f"j{i},0,1,10,u{i}\n" for i in range(40))
    p = write(tmp_path, f"{HEADER},user\n{rows}j40,0,1,10\nj41,0,1,10,u\n")
    assert error_of(load_trace, p) == (
        f"t.csv, row 41 (line 42): has 4 fields but the header has 5; {SHORT}")


def test_header_with_trailing_comma_and_empty_column_is_ignored(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},\nj1,0,1,10,\nj2,0,1,10, \n")
    t = load_trace(p)
    assert [j.job_id for j in t.jobs] == ["j1", "j2"]
    assert t.extra_columns == () and all(j.extra == () for j in t.jobs)


def test_value_in_an_unnamed_column_is_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},,user\nj1,0,1,10,,a\nj2,0,1,10,x,b\n")
    assert error_of(load_trace, p) == (
        "t.csv, row 2 (line 3), column 5 (no name in the header): value 'x' is in a column "
        "whose header name is empty; name the column in the header or leave its cells empty")
    t = load_trace(p, skip_bad_rows=True)
    assert [(j.job_id, j.user) for j in t.jobs] == [("j1", "a")] and t.bad_rows == 1
    ph = write(tmp_path, f"{POLLUX},\n2017-10-09 07:01:55,66.0,1,66.0,vc,x\n", name="ph.csv")
    assert error_of(load_trace, ph) == (
        "ph.csv, line 2, field 6 (no name in the header): value 'x' is in a column whose "
        f"header name is empty; name the column in the header or leave its cells empty{SKIP}")


def test_column_named_twice(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},duration\nj1,0,1,10,20\n")
    assert error_of(load_trace, p) == ("t.csv, line 1: column 'duration' is named twice in "
                                       "the header (fields 4 and 5); column names must be "
                                       "unique")


def test_blank_lines_before_the_header(tmp_path: Path) -> None:
    p = write(tmp_path, f"\n  \n{HEADER}\nj1,0,1,10\nj2,0,x,10\n")
    assert error_of(load_trace, p).startswith("t.csv, row 2 (line 5), column num_gpus: value "
                                              "'x'")


# --------------------------------------------------------------------- 6. absurd numbers


@pytest.mark.parametrize(("column", "value", "rule"), [
    ("duration", "1e300", "is not a number of seconds > 0 and <= 1e12 (~31,700 years)"),
    ("duration", "inf", "is not a number of seconds > 0 and <= 1e12 (~31,700 years)"),
    ("submit_time", "1.5e12", "is not a number of seconds >= 0 and <= 1e12 (~31,700 years)"),
    ("num_gpus", "1e300", "is not an integer >= 0 and <= 1e6"),
    ("checkpoint_interval", "1e13", "is not a number of seconds > 0 and <= 1e12"),
    ("fail_at", "1e200", "is not a number of seconds > 0 and <= 1e12"),
    ("max_lifetime", "1e15", "is not a number of seconds > 0 and <= 1e12"),
    ("deadline", "1e300", "is not a number of seconds >= 0 and <= 1e12"),
    ("deadline", "-1", "is not a number of seconds >= 0 and <= 1e12"),
    ("active_deadline", "0", "is not a number of seconds > 0 and <= 1e12"),
    ("active_deadline", "1e13", "is not a number of seconds > 0 and <= 1e12"),
    ("completions", "0", "is not an integer >= 1 and <= 1e6"),
    ("parallelism", "2e6", "is not an integer >= 1 and <= 1e6"),
    ("backoff_limit", "1.5", "is not an integer >= 0 and <= 1e6"),
    ("disk_gb", "1e12", "is not a number of GB >= 0 and <= 1e9"),
    ("num_cpus", "1e300", "is not a number >= 0 and <= 1e6"),
    ("priority", "1e300", "is not an integer from -1e9 to 1e9 or a level name"),
])
def test_absurd_numbers_rejected_with_the_rule(tmp_path: Path, column: str, value: str,
                                               rule: str) -> None:
    cols = [*HEADER.split(","), *([column] if column not in HEADER else [])]
    row = {"job_id": "j2", "submit_time": "5", "num_gpus": "1", "duration": "10", column: value}
    p = write(tmp_path, ",".join(cols) + "\n" + ",".join(["j1", "0", "1", "10"]
                                                         + [""] * (len(cols) - 4))
              + "\n" + ",".join(row[c] for c in cols) + "\n")
    msg = error_of(load_trace, p)
    assert msg.startswith(f"t.csv, row 2 (line 3), column {column}: value {value!r} {rule}"), msg
    t = load_trace(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["j1"] and t.bad_rows == 1


def test_bounds_are_inclusive_and_pass_through_values_kept(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},deadline,completions,max_retries\n"
                        f"j1,{MAX_SECONDS:g},{MAX_COUNT:g},{MAX_SECONDS:g},{MAX_SECONDS:g},"
                        f"{MAX_COUNT:g},{MAX_COUNT:g}\nj2,0,1,10,,,\n")
    t = load_trace(p)
    j1 = next(j for j in t.jobs if j.job_id == "j1")
    assert (j1.submit_time, j1.num_gpus, j1.duration, j1.max_retries) == (
        MAX_SECONDS, int(MAX_COUNT), MAX_SECONDS, int(MAX_COUNT))
    assert j1.deadline == MAX_SECONDS  # a column the simulator reads (SLA)
    assert j1.completions == int(MAX_COUNT)  # a container-job column (issue 16)
    assert dict(j1.extra) == {} and t.extra_columns == ()


def test_every_time_and_count_column_is_bounded() -> None:
    spec = {**NUM_COLS, **CHECKED_PASS_THROUGH}
    for col in ("submit_time", "duration", "checkpoint_interval", "fail_at", "max_lifetime",
                "deadline", "active_deadline"):
        assert spec[col].hi == MAX_SECONDS and "<= 1e12 (~31,700 years)" in spec[col].rule
    for col in ("num_gpus", "num_cpus", "gpus_per_task", "max_retries", "min_gpus",
                "max_gpus", "completions", "parallelism", "backoff_limit"):
        assert spec[col].hi == MAX_COUNT and "<= 1e6" in spec[col].rule
    assert all(c.hi < float("inf") for c in spec.values())


def test_absurd_number_from_a_reader(tmp_path: Path) -> None:
    p = write(tmp_path, f"{POLLUX}\n2017-10-09 07:01:55,66.0,1,66.0,vc\n"
                        "2017-10-09 07:01:56,1e300,1,1e300,vc\n", name="ph.csv")
    assert error_of(load_trace, p).startswith(
        "ph.csv, row 2 (line 3), column duration: value '1e+300' is not a number of seconds "
        "> 0 and <= 1e12")


# --------------------------------------------------------------------- file modes


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("name", ["out.csv", "out.csv.gz", "out.parquet"])
def test_written_files_get_the_mode_the_umask_allows(tmp_path: Path, umask_027: None,
                                                     name: str) -> None:
    out = tmp_path / name
    convert(SAMPLES / "tiresias_sample.csv", out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == [name]
    os.umask(0o022)
    fresh = write_canonical(read_canonical(out), tmp_path / f"fresh-{name}")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_replacing_a_file_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    out.write_text("old")
    out.chmod(0o600)
    write_canonical(load_trace(SAMPLES / "tiresias_sample.csv"), out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert len(read_canonical(out)) == 8
