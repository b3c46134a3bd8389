"""The `lazy_preemption` column (contract.md#sec-2): a bool per job, empty = the run's default."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import load_trace, read_canonical, write_canonical


def _write(tmp_path: Path, rows: list[str]) -> Path:
    p = tmp_path / "t.csv"
    p.write_text("job_id,submit_time,num_gpus,duration,lazy_preemption\n"
                 + "\n".join(rows) + "\n", encoding="utf-8")
    return p


def test_values_read_as_bools_and_empty_as_the_runs_default(tmp_path: Path) -> None:
    p = _write(tmp_path, ["a,0,1,10,true", "b,0,1,10,FALSE", "c,0,1,10,yes", "d,0,1,10,0",
                          "e,0,1,10,"])
    got = {j.job_id: j.lazy_preemption for j in load_trace(p).jobs}
    assert got == {"a": True, "b": False, "c": True, "d": False, "e": None}


def test_a_bad_value_names_row_column_value_and_rule(tmp_path: Path) -> None:
    p = _write(tmp_path, ["a,0,1,10,true", "b,0,1,10,maybe"])
    with pytest.raises(InvalidTrace) as e:
        load_trace(p)
    assert str(e.value).startswith(
        "t.csv, row 2 (line 3), column lazy_preemption: value 'maybe' is not true or false "
        "(also yes/no, 1/0), or empty for the run's lazy_preemption parameter")
    t = load_trace(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["a"] and t.bad_rows == 1


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_written_and_read_back(tmp_path: Path, suffix: str) -> None:
    t = load_trace(_write(tmp_path, ["a,0,1,10,true", "b,0,1,10,false", "c,0,1,10,"]))
    back = read_canonical(write_canonical(t, tmp_path / f"out{suffix}"))
    assert [j.lazy_preemption for j in back.jobs] == [True, False, None]
    assert "lazy_preemption" not in back.extra_columns
