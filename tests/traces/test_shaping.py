"""Trace shaping: window, load scale, max jobs, VCs, GPU range, remap."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import make_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter, InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace
from schedlab.traces.shaping import REMAP_COLUMN, parse_window, remap_job, shape


def trace() -> Trace:
    return make_trace(
        JobSpec("a", 0.0, 1, 100.0, vc="x"),
        JobSpec("b", 3600.0, 2, 100.0, vc="y"),
        JobSpec("c", 7200.0, 4, 100.0, vc="x", depends_on=("a",)),
        JobSpec("d", 10800.0, 16, 50.0, vc="z", gpus_per_task=4),
        JobSpec("e", 14400.0, 32, 10.0, vc="y", min_gpus=8, max_gpus=64),
    )


def ids(t: Trace) -> list[str]:
    return [j.job_id for j in t.jobs]


def test_nothing_asked_returns_the_same_trace() -> None:
    t = trace()
    assert shape(t) is t


@pytest.mark.parametrize(("window", "expected", "first"), [
    ("3600:10800", ["b", "c"], 0.0),
    ("1h:3h", ["b", "c"], 0.0),
    ("60m:", ["b", "c", "d", "e"], 0.0),
    (":7200", ["a", "b"], 0.0),
    ("1800..7201", ["b", "c"], 1800.0),
    ((3600, None), ["b", "c", "d", "e"], 0.0),
])
def test_window(window, expected, first) -> None:
    t = shape(trace(), window=window)
    assert ids(t) == expected and t.jobs[0].submit_time == first
    # a dependency on a job cut away by the window is dropped (counted as done before)
    assert all(d in ids(t) for j in t.jobs for d in j.depends_on)


def test_window_dates_need_an_epoch() -> None:
    epoch = 1_500_000_000.0  # 2017-07-14 02:40:00 UTC
    t = shape(trace(), window="2017-07-14 03:40:00:2017-07-14 05:40:00", epoch=epoch)
    assert ids(t) == ["b", "c"]
    assert parse_window("2017-07-14:2017-07-15", epoch) == (-9600.0, 76800.0)
    with pytest.raises(InvalidParameter, match="is a date, but the trace has no calendar"):
        shape(trace(), window="2017-07-14:2017-07-15")


@pytest.mark.parametrize(("window", "fragment"), [
    ("10", "no ':' between START and END"),
    ("abc:5", "trace window start 'abc' is neither seconds nor a date"),
    ("5:1", "end (1 s) is not after start (5 s)"),
    ((1, 2, 3), "expected (start, end)"),
])
def test_window_errors(window, fragment: str) -> None:
    with pytest.raises(InvalidParameter) as e:
        shape(trace(), window=window)
    assert fragment in str(e.value)


def test_load_scale_divides_inter_arrivals() -> None:
    t = shape(trace(), load_scale=2)
    assert [j.submit_time for j in t.jobs] == [0.0, 1800.0, 3600.0, 5400.0, 7200.0]
    assert [j.duration for j in t.jobs] == [j.duration for j in trace().jobs]
    for bad in (0, -1, float("nan"), True):
        with pytest.raises(InvalidParameter, match="load_scale .*expected a number > 0"):
            shape(trace(), load_scale=bad)


def test_filters_and_max_jobs() -> None:
    assert ids(shape(trace(), vcs="x, y")) == ["a", "b", "c", "e"]
    assert ids(shape(trace(), vcs=["z"])) == ["d"]
    assert ids(shape(trace(), min_gpus=2, max_gpus=16)) == ["b", "c", "d"]
    assert ids(shape(trace(), max_jobs=2)) == ["a", "b"]
    assert ids(shape(trace(), vcs="x,y", max_jobs=3, window="1:")) == ["b", "c", "e"]
    with pytest.raises(InvalidParameter, match="max_gpus 1 is less than min_gpus 2"):
        shape(trace(), min_gpus=2, max_gpus=1)
    with pytest.raises(InvalidParameter, match="vcs ' , ': expected VC names"):
        shape(trace(), vcs=" , ")
    with pytest.raises(InvalidTrace, match="no job left after shaping .vcs=nope.; 5 before"):
        shape(trace(), vcs="nope")
    with pytest.raises(InvalidParameter, match="max_jobs -1: expected an integer >= 0"):
        shape(trace(), max_jobs=-1)


def test_remap_keeps_gpu_time_and_marks_the_jobs() -> None:
    t = shape(trace(), remap_gpus_to=8)
    d, e = t.jobs[3], t.jobs[4]
    assert (d.num_gpus, d.gpus_per_task, d.duration) == (8, 4, 100.0)
    assert (e.num_gpus, e.duration, e.min_gpus, e.max_gpus) == (8, 40.0, 8, 8)
    assert t.extra_columns == (REMAP_COLUMN,)
    assert [dict(j.extra)[REMAP_COLUMN] for j in t.jobs] == [None, None, None, 16, 32]
    assert remap_job(JobSpec("x", 0, 12, 10.0, gpus_per_task=12), 8).gpus_per_task == 0
    assert shape(trace(), remap_gpus_to=64).jobs == trace().jobs  # all fit: unchanged


def test_remap_to_a_topology_then_the_engine_runs_every_job() -> None:
    topo = uniform_topology(2, gpus_per_switch=4)  # 8 GPUs
    plain = Simulation(trace(), topo, "fifo").run()
    rejected = plain.jobs.loc[plain.jobs.status == "rejected", "job_id"]
    assert list(rejected) == ["d"]  # e is elastic down to 8 GPUs
    shaped = Simulation(shape(trace(), remap_gpus_to=topo), topo, "fifo").run()
    assert set(shaped.jobs.status) == {"completed"}
    remapped = shaped.jobs.sort_values("job_id")[REMAP_COLUMN].fillna(0).astype(int)
    assert list(remapped) == [0, 0, 0, 16, 32]
    assert shaped.jobs.num_gpus.max() == 8


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.integers(0, 64), st.floats(1, 1e5)),
                min_size=1, max_size=20),
       st.floats(0.1, 10), st.integers(1, 64))
def test_shape_properties(rows, scale, cap) -> None:
    jobs = sorted((JobSpec(f"j{i}", s, g, d) for i, (s, g, d) in enumerate(rows)),
                  key=lambda j: j.submit_time)
    t = Trace("t", tuple(jobs))
    out = shape(t, load_scale=scale, remap_gpus_to=cap)
    assert len(out) == len(t)
    assert all(j.num_gpus <= cap for j in out.jobs)
    assert sum(j.gpu_time for j in out.jobs) == pytest.approx(sum(j.gpu_time for j in jobs))
    times = [j.submit_time for j in out.jobs]
    assert times == sorted(times)
    assert all(dataclasses.replace(a, submit_time=b.submit_time) == b or a.num_gpus > cap
               for a, b in zip(jobs, out.jobs, strict=True))


@pytest.mark.skipif("epoch" not in {f.name for f in dataclasses.fields(Trace)},
                    reason="Trace has no epoch field yet (traces/base.py)")
def test_date_window_with_the_readers_epoch() -> None:
    from schedlab.traces import DATA_DIR, load_trace
    from schedlab.traces.readers import trace_epoch

    t = load_trace(DATA_DIR / "samples" / "philly_pollux_sample.csv")
    assert trace_epoch(t) == 1506671912.0  # 2017-09-29 07:58:32, the first submission
    s = shape(t, window="2017-10-09 06:13:00:2017-10-09 06:14:00")
    assert [(j.job_id, j.submit_time) for j in s.jobs] == [("philly-1", 3.0), ("philly-3", 36.0)]
    assert trace_epoch(s) == 1507529580.0  # 2017-10-09 06:13:00
    assert trace_epoch(shape(t, load_scale=2)) is None
