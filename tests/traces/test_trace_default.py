"""The bundled default trace and load_trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import DATA_DIR, bundled_traces, load_trace, write_canonical
from schedlab.traces.make_default import DEFAULT_SOURCE, make_default, trace_stats


def test_default_trace_loads() -> None:
    t = load_trace("default")
    assert t.name == "default" and len(t) == 3000 and t.bad_rows == 0
    assert t.jobs[0].submit_time == 0.0
    times = [j.submit_time for j in t.jobs]
    assert times == sorted(times)
    assert all(j.job_id.startswith("philly-") for j in t.jobs)
    assert len({j.job_id for j in t.jobs}) == 3000
    assert all(j.user == "" and j.vc != "default" for j in t.jobs)
    stats = trace_stats(t)
    assert stats["max_num_gpus"] == 32
    assert stats["span_hours"] == pytest.approx(114.33, abs=0.01)


def test_default_readme_present() -> None:
    text = (DATA_DIR / "README.md").read_text()
    assert "CC BY 4.0" in text and "de25dcc90c350b8ade3a710e437a651a8d2efae6" in text


@pytest.mark.skipif(not DEFAULT_SOURCE.is_file(), reason="Philly source CSV not available")
def test_default_trace_is_reproducible(tmp_path: Path) -> None:
    out = tmp_path / "default.csv"
    make_default(DEFAULT_SOURCE, out)
    assert out.read_bytes() == (DATA_DIR / "default.csv").read_bytes()


def test_bundled_names() -> None:
    assert bundled_traces() == ["default", "helios-like", "llm-like", "philly-like", "synthetic"]


def test_unknown_name_did_you_mean() -> None:
    with pytest.raises(InvalidTrace) as e:
        load_trace("defualt")
    msg = str(e.value)
    assert "unknown trace 'defualt'" in msg and "did you mean 'default'" in msg
    assert "known: default, helios-like, llm-like, philly-like, synthetic" in msg


def test_missing_file() -> None:
    with pytest.raises(InvalidTrace, match="trace file 'nowhere/x.csv' not found"):
        load_trace("nowhere/x.csv")
    with pytest.raises(InvalidTrace, match="not found"):
        load_trace(Path("missing.parquet"))


def test_unsupported_format() -> None:
    with pytest.raises(InvalidTrace, match="trace format 'swf' applies to files only"):
        load_trace("default", trace_format="swf")
    assert len(load_trace("default", trace_format="canonical")) == 3000


def test_load_path_and_trace_passthrough(tmp_path: Path) -> None:
    t = load_trace("synthetic:10")
    p = write_canonical(t, tmp_path / "s.parquet")
    assert load_trace(p).jobs == t.jobs
    assert load_trace(str(p)).jobs == t.jobs
    assert load_trace(t) is t
