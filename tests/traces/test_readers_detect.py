"""Format detection, load_trace with formats and generator names, round trips, fuzzing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.sim.errors import InvalidParameter, InvalidTrace
from schedlab.topologies.build import uniform_topology
from schedlab.traces import DATA_DIR, bundled_traces, load_trace, read_canonical, trace_formats
from schedlab.traces.base import Trace
from schedlab.traces.inspect import convert
from schedlab.traces.readers import TRACE_FORMATS, detect_format, read_trace

SAMPLES = DATA_DIR / "samples"
SAMPLE_FORMATS = {
    "philly_pollux_sample.csv": "philly",
    "philly_cluster_job_log_sample.json": "philly-json",
    "helios_cluster_log_sample.csv": "helios",
    "pai_task_table_sample.csv": "pai",
    "openb_pod_list_sample.csv": "openb",
    "nasa_ipsc_sample.swf.gz": "swf",
    "gavel_physical_sample.trace": "gavel",
    "tiresias_sample.csv": "tiresias",
    "pollux_workload_sample.csv": "pollux",
    "sia_workload_sample.csv": "sia",
    "shockwave_sample.trace": "shockwave",
}


def test_formats_listed() -> None:
    assert trace_formats() == ["canonical", "philly", "philly-json", "helios", "pai", "openb",
                               "swf", "gavel", "tiresias", "pollux", "sia",
                               "shockwave"]
    assert set(SAMPLE_FORMATS.values()) | {"canonical"} == set(TRACE_FORMATS)


@pytest.mark.parametrize(("name", "fmt"), sorted(SAMPLE_FORMATS.items()))
def test_detection_and_load_trace(name: str, fmt: str) -> None:
    path = SAMPLES / name
    assert detect_format(path) == fmt
    a = load_trace(str(path))
    b = load_trace(path, trace_format=fmt)
    assert a.jobs == b.jobs and len(a) > 0


@pytest.mark.parametrize(("name", "fmt"), sorted(SAMPLE_FORMATS.items()))
@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_round_trip_convert_canonical_identical_jobs(tmp_path: Path, name: str, fmt: str,
                                                     suffix: str) -> None:
    src = SAMPLES / name
    out = tmp_path / f"out{suffix}"
    written = convert(src, out, trace_format=fmt)
    back = read_canonical(out)
    assert back.jobs == written.jobs
    assert [dict(j.extra) for j in back.jobs] == [dict(j.extra) for j in written.jobs] \
        or suffix == ".csv"  # CSV turns pass-through values into text
    assert load_trace(out).jobs == read_trace(src).jobs


def test_detection_failures(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InvalidTrace, match="cannot tell the trace format .* 'a,b,c'; name one "
                                           "with --trace-format"):
        load_trace(p)
    with pytest.raises(InvalidTrace, match="unknown trace format 'swff' .*did you mean 'swf'"):
        load_trace(p, trace_format="swff")
    with pytest.raises(InvalidTrace, match="x.csv: missing columns timestamp, duration, "
                                           "num_gpus of the Philly"):
        load_trace(p, trace_format="philly")


def test_generator_names_and_arguments() -> None:
    assert bundled_traces() == ["default", "helios-like", "llm-like", "philly-like", "synthetic"]
    t = load_trace("philly-like:30", seed=3)
    assert len(t) == 30 and t.name == "philly-like:30"
    assert t.jobs == load_trace("philly-like:30", seed=3).jobs
    assert t.jobs != load_trace("philly-like:30", seed=4).jobs
    topo = uniform_topology(4, gpus_per_switch=8)
    t = load_trace("helios-like:40", topology=topo, load=0.5)
    assert max(j.num_gpus for j in t.jobs) <= 32
    with pytest.raises(InvalidTrace, match="integer >= 1 .use philly-like or philly-like:N"):
        load_trace("philly-like:0")
    with pytest.raises(InvalidParameter, match="load needs a topology"):
        load_trace("philly-like:5", load=0.5)
    with pytest.raises(InvalidParameter, match="load=0.5 applies to the calibrated generators"):
        load_trace("default", load=0.5)
    with pytest.raises(InvalidTrace, match="trace format 'swf' applies to files only"):
        load_trace("philly-like", trace_format="swf")


# --------------------------------------------------------------------------- fuzzing

_FUZZ = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


def _only_invalid_trace(path: Path, fmt: str | None) -> None:
    try:
        t = read_trace(path, fmt, skip_bad_rows=False)
    except InvalidTrace:
        return
    assert isinstance(t, Trace) and len(t) > 0


@_FUZZ
@given(data=st.one_of(st.binary(max_size=300),
                     st.binary(max_size=100).map(lambda b: b"\x1f\x8b\x08\x00" + b),
                     st.integers(0, 860).map(
                         lambda n: (SAMPLES / "nasa_ipsc_sample.swf.gz").read_bytes()[:n])),
       fmt=st.sampled_from([None, *TRACE_FORMATS]),
       suffix=st.sampled_from([".csv", ".json", ".swf", ".swf.gz", ".trace", ".parquet"]))
def test_fuzz_garbage_bytes(tmp_path: Path, data: bytes, fmt: str | None, suffix: str) -> None:
    p = tmp_path / f"g{suffix}"
    p.write_bytes(data)
    _only_invalid_trace(p, fmt)


_CELL = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=12),
    st.sampled_from(["", "-1", "0", "1e308", "nan", "inf", "-0", "2017-02-30 00:00:00",
                     "None", "null", "[", "{}", "\"", ",", "\t", "|", "9" * 30]),
)


@_FUZZ
@given(name=st.sampled_from(sorted(SAMPLE_FORMATS)), line=st.integers(0, 60),
       field=st.integers(0, 20), value=_CELL, skip=st.booleans())
def test_fuzz_mutated_samples(tmp_path: Path, name: str, line: int, field: int, value: str,
                              skip: bool) -> None:
    import gzip

    src = SAMPLES / name
    gz = name.endswith(".gz")
    text = gzip.decompress(src.read_bytes()).decode() if gz else src.read_text()
    lines = text.split("\n")
    i = line % len(lines)
    sep = "\t" if name.endswith(".trace") else ("," if not gz else None)
    if name.endswith(".json"):
        lines[i] = lines[i][: field] + value + lines[i][field:]
    else:
        cells = (lines[i].split(sep) if sep else lines[i].split()) or [""]  # a blank line
        cells[field % len(cells)] = value
        lines[i] = (sep or " ").join(cells)
    out = tmp_path / name
    mutated = "\n".join(lines)
    if gz:
        out.write_bytes(gzip.compress(mutated.encode()))
    else:
        out.write_text(mutated)
    if name.startswith("gavel"):
        shutil.copy(SAMPLES / "simulation_throughputs.json", tmp_path)
    if name.startswith("pai_task"):
        shutil.copy(SAMPLES / "pai_job_table_sample.csv", tmp_path)
    try:
        t = read_trace(out, SAMPLE_FORMATS[name], skip_bad_rows=skip)
    except InvalidTrace:
        return
    assert len(t) > 0
