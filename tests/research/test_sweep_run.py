"""Running sweeps on a local process pool: folders, summary, resume, failures, shaping."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from click.testing import CliRunner
from research_helpers import summary_json, write_inputs

import schedlab.app.cli_research as cli_research
from schedlab.app.sweep import (
    RESERVED_COLUMNS,
    InlineExecutor,
    RunPoint,
    load_sweep,
    open_executor,
    run_point,
    run_sweep,
)
from schedlab.traces import load_trace

RESULT_FILES = {"jobs.parquet", "events.parquet", "timeline.parquet", "summary.json",
                "config.json", "point.json"}


def invoke(*args: str):
    return CliRunner().invoke(cli_research.sweep, list(args), catch_exceptions=False)


def test_process_pool_sweep_writes_a_folder_per_run_and_one_row_each(tmp_path):
    path = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    res = invoke(str(path), "--out", str(out), "-j", "2")
    assert res.exit_code == 0, res.output
    assert "12 runs: 12 ran, 0 finished before, 0 failed" in res.stdout
    spec = load_sweep(path)
    table = pd.read_parquet(out / "summary.parquet")
    assert list(table["folder"]) == [p.folder for p in spec.points]
    assert list(table.columns[:4]) == list(RESERVED_COLUMNS)
    assert set(table["status"]) == {"ok"}
    for col in ("policy", "seed", "load_scale", "jct_mean", "utilization_mean", "makespan"):
        assert col in table
    for p in spec.points:
        folder = out / p.folder
        assert RESULT_FILES <= {f.name for f in folder.iterdir()}
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        assert config["sweep_point"] == json.loads(json.dumps(p.config()))
        assert summary_json(folder)["seed"] == p.seed
    # more load, same work: the makespan shrinks as arrivals speed up
    fifo = table[(table["policy"] == "fifo") & (table["seed"] == 0)].set_index("load_scale")
    assert fifo.loc[2.0, "makespan"] < fifo.loc[1.0, "makespan"] < fifo.loc[0.5, "makespan"]

    stamps = {p.folder: (out / p.folder / "summary.json").stat().st_mtime_ns
              for p in spec.points}
    res = invoke(str(path), "--out", str(out), "-j", "2")
    assert res.exit_code == 0
    assert "12 runs: 0 ran, 12 finished before, 0 failed" in res.stdout
    assert stamps == {p.folder: (out / p.folder / "summary.json").stat().st_mtime_ns
                      for p in spec.points}


def test_resume_after_an_interrupted_sweep_runs_each_point_exactly_once(tmp_path):
    spec = load_sweep(write_inputs(tmp_path / "in", jobs=60))
    out = tmp_path / "out"
    seen: list[str] = []

    def interrupt_after_three(outcome):
        seen.append(outcome.folder)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), open_executor(None, 2) as pool:
        run_sweep(spec, out, pool, on_outcome=interrupt_after_three)
    first = [p for p in spec.points if (out / p.folder / "summary.json").is_file()]
    assert 3 <= len(first) < len(spec.points)
    partial = pd.read_parquet(out / "summary.parquet")
    assert set(partial["status"]) == {"ok", "not run"}
    # written at the interrupt: runs the pool finished while shutting down come later
    assert 3 <= (partial["status"] == "ok").sum() <= len(first)
    # a run killed half-way: started (point.json) but no summary -> it must run again
    half = next(p for p in spec.points if p not in first)
    (out / half.folder).mkdir(exist_ok=True)
    (out / half.folder / "jobs.parquet").write_bytes(b"partial")
    started = {p.folder: (out / p.folder / "point.json").stat().st_mtime_ns for p in first}

    ran: list[str] = []
    with open_executor(None, 2) as pool:
        report = run_sweep(spec, out, pool, on_outcome=lambda o: ran.append(o.folder))
    assert sorted(ran) == sorted(p.folder for p in spec.points if p not in first)
    assert report.ran == len(spec.points) - len(first) and report.skipped == len(first)
    assert started == {p.folder: (out / p.folder / "point.json").stat().st_mtime_ns
                       for p in first}
    table = pd.read_parquet(out / "summary.parquet")
    assert sorted(table["folder"]) == sorted(p.folder for p in spec.points)
    assert table["folder"].is_unique and set(table["status"]) == {"ok"}


def test_ctrl_c_on_the_command_then_rerun_resumes(tmp_path):
    path = write_inputs(tmp_path / "in", jobs=400)
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "import sys; from schedlab.app.cli_research import sweep; "
           "sweep(sys.argv[1:])", str(path), "--out", str(out), "-j", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(out.glob("*/summary.json"))) < 2 and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:  # pragma: no cover - the machine outran the poll
        pytest.skip("the sweep finished before it could be interrupted")
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "run the same command again to resume" in err
    done = len(list(out.glob("*/summary.json")))
    assert 2 <= done < 12
    res = invoke(str(path), "--out", str(out), "-j", "1")
    assert res.exit_code == 0
    assert f"12 runs: {12 - done} ran, {done} finished before, 0 failed" in res.stdout
    table = pd.read_parquet(out / "summary.parquet")
    assert len(table) == 12 and table["folder"].is_unique and set(table["status"]) == {"ok"}


def test_a_failed_run_is_recorded_the_others_go_on_and_the_exit_names_it(tmp_path):
    base = tmp_path / "in"
    write_inputs(base)
    (base / "bad.csv").write_text("job_id,submit_time,num_gpus,duration\na,0,1,10\nb,5,1,-3\n",
                                  encoding="utf-8")
    path = base / "two.yaml"
    path.write_text("base: {topology: topo.yaml}\n"
                    "grid: {trace: [trace.csv, bad.csv], policy: [fifo, fifo-backfill]}\n",
                    encoding="utf-8")
    out = tmp_path / "out"
    res = invoke(str(path), "--out", str(out), "-j", "1")
    assert res.exit_code == 1
    spec = load_sweep(path)
    bad = [p for p in spec.points if p.trace.endswith("bad.csv")]
    assert "2 run(s) failed" in res.stderr
    for p in bad:
        assert p.folder in res.stderr
        err = json.loads((out / p.folder / "error.json").read_text(encoding="utf-8"))
        assert err["error"].startswith("InvalidTrace:") and "duration" in err["error"]
        assert "Traceback (most recent call last)" in err["traceback"]
        assert err["point"]["trace"] == p.trace
        assert not (out / p.folder / "summary.json").exists()
    table = pd.read_parquet(out / "summary.parquet").set_index("folder")
    assert list(table.loc[[p.folder for p in bad], "status"]) == ["failed", "failed"]
    assert table.loc[bad[0].folder, "error"].startswith("InvalidTrace:")
    assert (table["status"] == "ok").sum() == 2
    assert table.loc[bad[0].folder, "jct_mean"] != table.loc[bad[0].folder, "jct_mean"]  # NaN

    (base / "bad.csv").write_text("job_id,submit_time,num_gpus,duration\na,0,1,10\nb,5,1,3\n",
                                  encoding="utf-8")
    res = invoke(str(path), "--out", str(out), "-j", "1")
    assert res.exit_code == 0, res.output
    assert "4 runs: 2 ran, 2 finished before, 0 failed" in res.stdout
    assert not (out / bad[0].folder / "error.json").exists()


def test_an_executor_error_fails_only_that_run(tmp_path):
    class Flaky(InlineExecutor):
        def submit(self, fn, /, *args, **kwargs):
            if args[0].policy == "fifo-backfill":
                raise_in = RuntimeError("worker lost")
                from concurrent.futures import Future

                fut: Future = Future()
                fut.set_exception(raise_in)
                return fut
            return super().submit(fn, *args, **kwargs)

    spec = load_sweep(write_inputs(tmp_path / "in"))
    report = run_sweep(spec, tmp_path / "out", Flaky())
    assert len(report.failed) == 6 and report.ran == 12
    assert all("worker lost" in e and "raised by the executor" in e for _, e in report.failed)


def test_shaping_window_load_scale_and_max_jobs(tmp_path):
    write_inputs(tmp_path / "in", jobs=40)
    trace_path = str(tmp_path / "in" / "trace.csv")
    trace = load_trace(trace_path)
    submits = sorted(j.submit_time for j in trace.jobs)
    topo = str(tmp_path / "in" / "topo.yaml")
    cut = submits[20]
    cases = {
        "window": RunPoint("fifo", trace_path, topo, 0, trace_window=f"{cut}:"),
        "scale": RunPoint("fifo", trace_path, topo, 0, load_scale=4.0),
        "max": RunPoint("fifo", trace_path, topo, 0, max_jobs=7),
    }
    for p in cases.values():
        assert run_point(p, str(tmp_path / "out")).status == "ok"
    jobs = {k: pd.read_parquet(tmp_path / "out" / p.folder / "jobs.parquet")
            for k, p in cases.items()}
    assert len(jobs["window"]) == 20 and jobs["window"]["submit_time"].min() == 0.0
    assert jobs["scale"]["submit_time"].max() == pytest.approx(submits[-1] / 4)
    assert len(jobs["max"]) == 7


def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch):
    path = write_inputs(tmp_path / "in")
    res = invoke(str(path), "--out", str(tmp_path / "a"), "-j", "1")
    assert res.exit_code == 0 and "run/s" not in res.stderr and "sweep:" not in res.stderr
    monkeypatch.setattr(cli_research, "_is_terminal", lambda: True)
    res = invoke(str(path), "--out", str(tmp_path / "b"), "-j", "1")
    assert res.exit_code == 0 and "sweep:" in res.stderr and "/12 [" in res.stderr


def test_an_unknown_scheduler_is_an_error(tmp_path):
    path = write_inputs(tmp_path / "in")
    res = invoke(str(path), "--out", str(tmp_path / "o"), "--scheduler", "yarn")
    assert res.exit_code == 2
    assert "--scheduler 'yarn': expected one of processes, dask-local, tcp://HOST:PORT" in (
        res.stderr)


@pytest.mark.skipif(os.name != "posix", reason="forkserver start method")
def test_default_jobs_is_the_cpu_count(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    with open_executor(None, None) as pool:
        assert pool._max_workers == 3


def test_an_unwritable_sweep_folder_fails_before_any_run(tmp_path):
    path = write_inputs(tmp_path / "in")
    (tmp_path / "somefile").write_text("x", encoding="utf-8")
    out = tmp_path / "somefile" / "sweep"
    res = invoke(str(path), "--out", str(out), "-j", "1")
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"error: sweep folder: cannot write to {str(out)!r}: ")
    assert "is a file, not a folder" in res.stderr


def test_a_rerun_of_a_half_written_point_replaces_its_folder_whole(tmp_path):
    spec = load_sweep(write_inputs(tmp_path / "in", jobs=20))
    point = spec.points[0]
    folder = tmp_path / "out" / point.folder
    folder.mkdir(parents=True)
    (folder / "jobs.parquet").write_bytes(b"partial")  # a run killed before the swap
    (folder / "error.json").write_text("{}", encoding="utf-8")
    assert run_point(point, str(tmp_path / "out")).status == "ok"
    assert {f.name for f in folder.iterdir()} == RESULT_FILES | {"nodes.parquet",
                                                                 "tenants.parquet"}
    assert json.loads((folder / "point.json").read_text(encoding="utf-8")) == json.loads(
        json.dumps(point.config()))
    assert not [f for f in folder.parent.iterdir() if f.name.startswith(".")]


def test_summary_parquet_joins_the_warnings_of_each_run(tmp_path):
    from schedlab.app.sweep import parse_sweep, write_summary

    spec = parse_sweep({"base": {"trace": "synthetic:5"},
                        "grid": {"policy": ["fifo", "fifo-backfill", "sjf"]}})
    root = tmp_path / "out"
    warnings = [["trace ends early", "placer fell back"], [], None]
    for point, found in zip(spec.points, warnings, strict=True):
        folder = root / point.folder
        folder.mkdir(parents=True)
        summary = {"policy": point.policy, "jct_mean": 10.0, "params": {}}
        if found is not None:
            summary["warnings"] = found
        (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    table = pd.read_parquet(write_summary(spec, root))
    assert table["warnings"].iloc[0] == "trace ends early; placer fell back"
    assert table["warnings"].iloc[1] == ""
    assert pd.isna(table["warnings"].iloc[2])  # an older summary without the key
    assert list(table["jct_mean"]) == [10.0, 10.0, 10.0]
