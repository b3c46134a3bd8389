"""Canonical trace reader/writer: round trips, defaults, every validation rule."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.traces import from_records, read_canonical, write_canonical
from schedlab.traces.base import Trace

HEADER = "job_id,submit_time,num_gpus,duration"


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def full_trace() -> Trace:
    jobs = (
        JobSpec("a", 0.0, 4, 100.5, user="alice", vc="vc1", priority=-3, gpu_type="V100",
                num_cpus=8.0, mem_gb=64.5, gpus_per_task=2, checkpoint_interval=600.0,
                max_retries=2, fail_at=50.0, max_lifetime=1e5, min_gpus=2, max_gpus=8,
                locality_sensitivity=0.25, gpu_speeds=(("P100", 0.6), ("V100", 1.0)),
                gpu_util=0.7, gpu_mem_gb=16.0, max_wait_hours=4.0,
                extra=(("team", "x"), ("note", "first"))),
        JobSpec("b", 10.123456789, 1, 3.0, depends_on=("a",), gpu_share=0.5,
                extra=(("team", "y"), ("note", "second"))),
        JobSpec("c", 10.123456789, 0, 1e-3, depends_on=("a", "b"),
                extra=(("team", "z"), ("note", ""))),
    )
    return Trace(name="full", jobs=jobs, extra_columns=("team", "note"))


# --------------------------------------------------------------------- round trips


@pytest.mark.parametrize("fname", ["rt.csv", "rt.csv.gz", "rt.parquet"])
def test_round_trip(tmp_path: Path, fname: str) -> None:
    trace = full_trace()
    path = write_canonical(trace, tmp_path / fname)
    back = read_canonical(path)
    assert back.jobs == trace.jobs
    assert back.extra_columns == ("team", "note")
    assert [dict(j.extra) for j in back.jobs] == [dict(j.extra) for j in trace.jobs]
    assert back.name == "rt"
    assert back.bad_rows == 0
    assert isinstance(back.jobs[0].priority, int)
    # nothing but the final file is left in the folder (atomic write via a temp file)
    assert [p.name for p in tmp_path.iterdir()] == [fname]


def test_round_trip_generated_csv_gz_is_gzip(tmp_path: Path) -> None:
    path = write_canonical(full_trace(), tmp_path / "x.csv.gz")
    with gzip.open(path, "rt") as f:
        assert f.readline().startswith("job_id,submit_time,num_gpus,duration")


def test_write_replaces_existing_file(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("garbage")
    write_canonical(full_trace(), p)
    assert len(read_canonical(p)) == 3


def test_write_unsupported_suffix(tmp_path: Path) -> None:
    with pytest.raises(InvalidTrace, match="unsupported"):
        write_canonical(full_trace(), tmp_path / "t.json")


def test_parquet_with_typed_columns(tmp_path: Path) -> None:
    df = pd.DataFrame({"job_id": [1, 2], "submit_time": [0, 5], "num_gpus": [2.0, None],
                       "duration": [1.5, 2.0], "extra_num": [7, 8]})
    p = tmp_path / "typed.parquet"
    df.to_parquet(p)
    with pytest.raises(InvalidTrace) as e:
        read_canonical(p)
    msg = str(e.value)
    assert "typed.parquet, row 2, column num_gpus" in msg and "missing" in msg
    df["num_gpus"] = [2.0, 1.0]
    df.to_parquet(p)
    t = read_canonical(p)
    assert [j.job_id for j in t.jobs] == ["1", "2"]
    assert t.jobs[0].num_gpus == 2 and dict(t.jobs[1].extra) == {"extra_num": 8}


# --------------------------------------------------------------------- defaults, pass-through


def test_defaults_applied(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},user,vc,priority,gpus_per_task,min_gpus,gpu_speeds\n"
                        "j1,0,2.0,10,,,,,,\nj2,5,1,20,bob,v,7,1,1,NaN\n")
    a, b = read_canonical(p).jobs
    assert a == JobSpec("j1", 0.0, 2, 10.0)
    assert a.vc == "default" and a.user == "" and a.priority == 0 and a.gpus_per_task == 0
    assert a.task_gpus == 2 and a.min_gpus is None and a.gpu_speeds == ()
    assert a.checkpoint_interval is None and a.locality_sensitivity == 1.0
    assert (b.user, b.vc, b.priority, b.gpus_per_task, b.min_gpus) == ("bob", "v", 7, 1, 1)
    assert isinstance(a.num_gpus, int) and isinstance(b.priority, int)


def test_all_optional_values_parsed(tmp_path: Path) -> None:
    cols = ("user,vc,priority,gpu_type,num_cpus,mem_gb,gpus_per_task,checkpoint_interval,"
            "max_retries,fail_at,max_lifetime,min_gpus,max_gpus,depends_on,"
            "locality_sensitivity,gpu_speeds,gpu_share,gpu_util,gpu_mem_gb,max_wait_hours")
    p = write(tmp_path, f"{HEADER},{cols}\n"
                        "p,0,1,100,,,,,,,,,,,,,,,,,,,,\n"
                        "j,1,4,50,u,q,2,V100,8,32,2,60,3,40,900,2,8, p ,0.5,"
                        "V100=1;K80=0.15,1,0.8,16,24\n")
    j = read_canonical(p).jobs[1]
    assert j == JobSpec("j", 1.0, 4, 50.0, user="u", vc="q", priority=2, gpu_type="V100",
                        num_cpus=8.0, mem_gb=32.0, gpus_per_task=2, checkpoint_interval=60.0,
                        max_retries=3, fail_at=40.0, max_lifetime=900.0, min_gpus=2,
                        max_gpus=8, depends_on=("p",), locality_sensitivity=0.5,
                        gpu_speeds=(("K80", 0.15), ("V100", 1.0)), gpu_share=1.0,
                        gpu_util=0.8, gpu_mem_gb=16.0, max_wait_hours=24.0)


def test_pass_through_columns_kept(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},framework,lr\nj1,0,1,10,torch,0.1\nj2,1,1,10,,\n")
    t = read_canonical(p)
    assert t.extra_columns == ("framework", "lr")
    assert t.jobs[0].extra == (("framework", "torch"), ("lr", "0.1"))
    assert t.jobs[1].extra == (("framework", ""), ("lr", ""))


def test_sorted_by_submit_time_then_row_order(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nc,5,1,1\na,1,1,1\nb,5,1,1\nd,1,1,1\n")
    assert [j.job_id for j in read_canonical(p).jobs] == ["a", "d", "c", "b"]


def test_blank_lines_ignored_and_line_numbers_exact(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\n\nj1,0,1,10\n\nj2,0,x,10\n\n")
    with pytest.raises(InvalidTrace) as e:
        read_canonical(p)
    assert "t.csv, row 2 (line 5), column num_gpus: value 'x'" in str(e.value)


def test_gzip_csv_read(tmp_path: Path) -> None:
    p = tmp_path / "g.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write(f"{HEADER}\nj1,0,1,10\n")
    t = read_canonical(p)
    assert len(t) == 1 and t.name == "g"


def test_name_argument(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,1,10\n")
    assert read_canonical(p, name="mine").name == "mine"


# --------------------------------------------------------------------- validation rules

BAD_CELLS = [
    # (column, bad value, rule fragment, other columns {name: value}, num_gpus)
    ("submit_time", "-1", "a number of seconds >= 0 and <= 1e12", {}, "1"),
    ("submit_time", "abc", "a number of seconds >= 0 and <= 1e12", {}, "1"),
    ("submit_time", "inf", "a number of seconds >= 0 and <= 1e12", {}, "1"),
    ("submit_time", "1e13", "a number of seconds >= 0 and <= 1e12 (~31,700 years)", {}, "1"),
    ("submit_time", "", "missing", {}, "1"),
    ("num_gpus", "2.5", "is not an integer >= 0", {}, None),
    ("num_gpus", "-1", "is not an integer >= 0", {}, None),
    ("num_gpus", "two", "is not an integer >= 0", {}, None),
    ("num_gpus", "2000000", "is not an integer >= 0 and <= 1e6", {}, None),
    ("duration", "0", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("duration", "-5", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("duration", "1e400", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("duration", "1e300", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("duration", "NaN", "missing", {}, "1"),
    ("priority", "1.5", "is not an integer", {}, "1"),
    ("priority", "urgent", "is not an integer from -1e9 to 1e9 or a level name", {}, "1"),
    ("num_cpus", "-1", "a number >= 0 and <= 1e6", {}, "1"),
    ("num_cpus", "1e7", "a number >= 0 and <= 1e6", {}, "1"),
    ("mem_gb", "-0.5", "a number of GB >= 0 and <= 1e9", {}, "1"),
    ("mem_gb", "1e10", "a number of GB >= 0 and <= 1e9", {}, "1"),
    ("gpus_per_task", "0", "integer >= 1", {}, "4"),
    ("gpus_per_task", "3", "does not divide num_gpus (4)", {}, "4"),
    ("gpus_per_task", "1.5", "integer >= 1", {}, "4"),
    ("checkpoint_interval", "0", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("checkpoint_interval", "2e12", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("max_retries", "-1", "integer >= 0", {}, "1"),
    ("max_retries", "0.5", "integer >= 0", {}, "1"),
    ("max_retries", "1e9", "an integer >= 0 and <= 1e6", {}, "1"),
    ("fail_at", "0", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("fail_at", "1e300", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("max_lifetime", "-3", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("max_lifetime", "1e13", "a number of seconds > 0 and <= 1e12", {}, "1"),
    ("min_gpus", "5", "greater than num_gpus (4)", {}, "4"),
    ("min_gpus", "1.5", "integer >= 0", {}, "4"),
    ("max_gpus", "2", "less than num_gpus (4)", {}, "4"),
    ("max_gpus", "-8", "integer >= 0", {}, "4"),
    ("depends_on", "nosuch", "unknown job 'nosuch'", {}, "1"),
    ("depends_on", "j2", "depend on itself", {}, "1"),
    ("locality_sensitivity", "1.5", "number in [0, 1]", {}, "1"),
    ("locality_sensitivity", "-0.1", "number in [0, 1]", {}, "1"),
    ("gpu_speeds", "V100=0", "speed of V100 is not a finite number > 0", {}, "1"),
    ("gpu_speeds", "V100", "TYPE=SPEED", {}, "1"),
    ("gpu_speeds", "V100=fast", "is not a number", {}, "1"),
    ("gpu_speeds", "V100=1;V100=2", "given twice", {}, "1"),
    ("gpu_speeds", "=1", "TYPE=SPEED", {}, "1"),
    ("gpu_share", "0", "number in (0, 1]", {}, "1"),
    ("gpu_share", "1.5", "number in (0, 1]", {}, "1"),
    ("gpu_share", "0.5", "num_gpus is 2", {}, "2"),
    ("gpu_util", "2", "number in [0, 1]", {}, "1"),
    ("gpu_mem_gb", "-1", "a number of GB >= 0 and <= 1e9", {}, "1"),
    ("max_wait_hours", "-4", "a number of hours >= 0 and <= 1e8", {}, "1"),
    ("max_wait_hours", "1e9", "a number of hours >= 0 and <= 1e8", {}, "1"),
]


@pytest.mark.parametrize(("column", "value", "rule", "others", "gpus"), BAD_CELLS)
def test_bad_cell_message(tmp_path: Path, column: str, value: str, rule: str,
                          others: dict[str, str], gpus: str | None) -> None:
    row = {"job_id": "j2", "submit_time": "5", "num_gpus": gpus or "1", "duration": "10"}
    row.update(others)
    row[column] = value
    cols = list(row)
    good = {"job_id": "j1", "submit_time": "0", "num_gpus": "1", "duration": "10"}
    lines = [",".join(cols), ",".join(good.get(c, "") for c in cols),
             ",".join(f'"{row[c]}"' if "," in row[c] else row[c] for c in cols)]
    p = write(tmp_path, "\n".join(lines) + "\n", name="trace.csv")
    with pytest.raises(InvalidTrace) as e:
        read_canonical(p)
    msg = str(e.value)
    assert msg.startswith(f"trace.csv, row 2 (line 3), column {column}: value {value!r}"), msg
    assert rule in msg
    # the same row is skipped and counted under skip_bad_rows
    t = read_canonical(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["j1"]
    assert t.bad_rows == 1 and t.bad_row_messages == (msg,)


def test_bad_cell_from_records_names_row_without_line() -> None:
    with pytest.raises(InvalidTrace) as e:
        from_records([{"job_id": "a", "submit_time": 0, "num_gpus": 1, "duration": 1},
                      {"job_id": "b", "submit_time": 0, "num_gpus": 2.5, "duration": 1}],
                     name="mem")
    assert str(e.value).startswith("mem, row 2, column num_gpus: value '2.5' is not an integer")


def test_num_gpus_float_text_accepted(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,2.0,10\nj2,0,1e1,10\n")
    assert [j.num_gpus for j in read_canonical(p).jobs] == [2, 10]


def test_empty_job_id(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,1,10\n  ,1,1,10\n", name="trace.csv")
    with pytest.raises(InvalidTrace, match=r"trace\.csv, row 2 \(line 3\), column job_id: "
                                           r"value '  ' is empty"):
        read_canonical(p)


def test_duplicate_job_id_names_both_rows(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,1,10\nj2,0,1,10\nj1,3,1,10\n", name="trace.csv")
    with pytest.raises(InvalidTrace) as e:
        read_canonical(p)
    msg = str(e.value)
    assert "trace.csv, row 3 (line 4), column job_id: value 'j1'" in msg
    assert "duplicate of row 1 (line 2)" in msg
    t = read_canonical(p, skip_bad_rows=True)
    assert [(j.job_id, j.submit_time) for j in t.jobs] == [("j1", 0.0), ("j2", 0.0)]
    assert t.bad_rows == 1


def test_dependency_cycle_names_the_jobs(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},depends_on\nok,0,1,1,\na,0,1,1,c\nb,0,1,1,a\nc,0,1,1,b\n"
                        "d,0,1,1,a;ok\n", name="trace.csv")
    with pytest.raises(InvalidTrace) as e:
        read_canonical(p)
    msg = str(e.value)
    assert msg.startswith("trace.csv, row 2 (line 3), column depends_on: value 'c'")
    assert "cycle" in msg and "a -> c -> b -> a" in msg
    t = read_canonical(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["ok"]
    assert t.bad_rows == 4
    assert any("'a', which was skipped" in m and "row 5" in m for m in t.bad_row_messages)


def test_dependency_unknown_names_the_jobs(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},depends_on\na,0,1,1,x;y\n", name="trace.csv")
    with pytest.raises(InvalidTrace) as e:
        read_canonical(p)
    assert "row 1 (line 2), column depends_on: value 'x;y' names unknown jobs 'x', 'y'" in str(
        e.value)


def test_dependency_on_skipped_row_is_bad_too(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},depends_on\na,0,-1,1,\nb,1,1,1,a\nc,2,1,1,b\nd,3,1,1,\n")
    t = read_canonical(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["d"]
    assert t.bad_rows == 3
    assert "row 2 (line 3), column depends_on: value 'a' names job 'a', which was skipped" in (
        t.bad_row_messages[1])


def test_dependency_on_later_duplicate_refers_to_kept_row(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},depends_on\na,0,1,1,\nb,1,1,1,a\na,2,1,1,\n")
    t = read_canonical(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["a", "b"] and t.bad_rows == 1


def test_valid_dag(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER},depends_on\nc,0,1,1,a;b;a\nb,0,1,1,a\na,0,1,1,\n")
    jobs = {j.job_id: j for j in read_canonical(p).jobs}
    assert jobs["c"].depends_on == ("a", "b") and jobs["a"].depends_on == ()


def test_missing_required_columns(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,num_gpus,foo\nj1,1,x\n", name="trace.csv")
    with pytest.raises(InvalidTrace) as e:
        read_canonical(p)
    msg = str(e.value)
    assert "trace.csv" in msg and "submit_time, duration" in msg
    assert "found columns: 'job_id', 'num_gpus', 'foo'" in msg


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "empty"),
    (f"{HEADER}\n", "no job rows"),
    (f"{HEADER}\n\n\n", "no job rows"),
])
def test_empty_file_or_no_rows(tmp_path: Path, text: str, fragment: str) -> None:
    p = write(tmp_path, text, name="trace.csv")
    with pytest.raises(InvalidTrace, match=fragment) as e:
        read_canonical(p)
    assert "trace.csv" in str(e.value)


def test_missing_file_and_bad_suffix(tmp_path: Path) -> None:
    with pytest.raises(InvalidTrace, match="not found"):
        read_canonical(tmp_path / "nope.csv")
    p = write(tmp_path, "x", name="t.txt")
    with pytest.raises(InvalidTrace, match="unsupported"):
        read_canonical(p)


def test_not_a_parquet_file(tmp_path: Path) -> None:
    p = write(tmp_path, "not parquet", name="t.parquet")
    with pytest.raises(InvalidTrace, match="t.parquet: cannot be read as Parquet"):
        read_canonical(p)


def test_ragged_line(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,1,10\nj2,0,1,10,extra\nj3,0,1,10\n", name="trace.csv")
    with pytest.raises(InvalidTrace, match=r"trace\.csv, row 2 \(line 3\): has 5 fields"):
        read_canonical(p)
    t = read_canonical(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["j1", "j3"] and t.bad_rows == 1


def test_skip_bad_rows_counts_and_caps_messages(tmp_path: Path) -> None:
    rows = [f"j{i},{i},{'x' if i % 2 else 1},10" for i in range(60)]
    p = write(tmp_path, HEADER + "\n" + "\n".join(rows) + "\n", name="trace.csv")
    with pytest.raises(InvalidTrace, match="and 29 more errors") as e:
        read_canonical(p)
    assert str(e.value).startswith("trace.csv, row 2 (line 3), column num_gpus: value 'x'")
    t = read_canonical(p, skip_bad_rows=True)
    assert len(t) == 30 and t.bad_rows == 30
    assert len(t.bad_row_messages) == 20
    assert t.bad_row_messages[0].startswith("trace.csv, row 2 (line 3)")
    assert t.bad_row_messages[19].startswith("trace.csv, row 40 (line 41)")


def test_all_rows_bad_is_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, f"{HEADER}\nj1,0,-1,10\n", name="trace.csv")
    with pytest.raises(InvalidTrace, match="no valid job rows"):
        read_canonical(p, skip_bad_rows=True)


# --------------------------------------------------------------------- garbage never crashes

CELL = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
            max_size=8),
    st.integers(-10, 10).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "NaN", "nan", "-1", "0", "1", "2.5", "a;b", "V100=1", "=", ";", "j0"]),
)
COLUMNS = ["job_id", "submit_time", "num_gpus", "duration", "priority", "gpus_per_task",
           "min_gpus", "max_gpus", "depends_on", "gpu_speeds", "gpu_share", "vc", "other"]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.lists(CELL, min_size=len(COLUMNS), max_size=len(COLUMNS)),
                      min_size=1, max_size=5),
       skip=st.booleans())
def test_garbage_only_raises_invalid_trace(tmp_path: Path, cells: list[list[str]],
                                           skip: bool) -> None:
    df = pd.DataFrame(cells, columns=COLUMNS)
    p = tmp_path / "g.csv"
    df.to_csv(p, index=False)
    try:
        t = read_canonical(p, skip_bad_rows=skip)
    except InvalidTrace as e:
        assert "g.csv" in str(e)
        return
    for j in t.jobs:
        assert j.num_gpus >= 0 and j.duration > 0 and math.isfinite(j.submit_time)


def test_priority_level_names_are_accepted(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("job_id,submit_time,num_gpus,duration,priority\n"
                 "a,0,1,10,NORMAL\nb,0,1,10,above_normal\nc,0,1,10,AUTO\nd,0,1,10,7\n")
    t = read_canonical(f)
    assert [j.priority for j in t.jobs] == [10, 20, -1, 7]
