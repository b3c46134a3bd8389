"""`schedlab check`: baseline file format, tolerances, verdicts, --update and exit codes."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from click.testing import CliRunner
from conftest import make_trace

from schedlab.app.check import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    collect_runs,
    compare_all,
    format_report,
    make_baseline,
    read_baseline,
    within,
)
from schedlab.app.cli_research import check as check_cmd
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import SimError

JOBS = [(f"j{i}", 30.0 * i, (1, 2, 4)[i % 3], 200.0 + 25 * i) for i in range(15)]


@pytest.fixture
def results(tmp_path, dgx2):
    out = tmp_path / "results"
    for policy in ("fifo", "fifo-backfill"):
        Simulation(make_trace(*JOBS), dgx2, policy, seed=0).run().write(out / policy)
    return out


def invoke(*args: str):
    return CliRunner().invoke(check_cmd, [str(a) for a in args])


def edit_summary(folder, **changes):
    path = folder / "summary.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_update_then_check_passes(results, tmp_path):
    base = tmp_path / "b" / "base.json"
    res = invoke(results, "--baseline", base, "--update")
    assert res.exit_code == 0 and res.stdout.startswith(f"wrote {base}: 2 run(s),")
    data = read_baseline(base)
    assert data["defaults"] == {"rtol": DEFAULT_RTOL, "atol": DEFAULT_ATOL}
    assert sorted(data["runs"]) == ["fifo", "fifo-backfill"]
    fifo = data["runs"]["fifo"]
    assert fifo["config"]["policy"] == "fifo" and fifo["config"]["seed"] == 0
    assert "wall_seconds" not in fifo["metrics"] and "events_processed" not in fifo["metrics"]
    assert fifo["metrics"]["jobs_completed"] == {"value": 15}
    assert '"jct_mean": {"value": ' in base.read_text(encoding="utf-8")  # one line a metric
    res = invoke(results, "--baseline", base)
    assert res.exit_code == 0, res.output
    header = res.stdout.splitlines()[0].split()
    assert header == ["run", "metric", "baseline", "now", "change", "verdict"]
    assert "within tolerance" in res.stdout.splitlines()[-1]


def test_drift_beyond_tolerance_fails_with_a_table(results, tmp_path):
    base = tmp_path / "base.json"
    assert invoke(results, "--baseline", base, "--update").exit_code == 0
    jct = json.loads((results / "fifo" / "summary.json").read_text())["jct_mean"]
    edit_summary(results / "fifo", jct_mean=jct * 1.01)
    res = invoke(results, "--baseline", base, "--only-failures")
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert len(lines) == 3
    assert lines[2].split()[:2] == ["fifo", "jct_mean"] and lines[2].split()[-2:] == [
        "+1%", "DRIFT"]
    assert "--update" in res.stderr


def test_per_metric_tolerance_overrides_the_defaults_and_survives_update(results, tmp_path):
    base = tmp_path / "base.json"
    assert invoke(results, "--baseline", base, "--update", "--rtol", "0").exit_code == 0
    data = json.loads(base.read_text())
    data["runs"]["fifo"]["metrics"]["jct_mean"]["rtol"] = 0.05
    base.write_text(json.dumps(data))
    jct = data["runs"]["fifo"]["metrics"]["jct_mean"]["value"]
    edit_summary(results / "fifo", jct_mean=jct * 1.04)
    assert invoke(results, "--baseline", base).exit_code == 0
    assert invoke(results, "--baseline", base, "--update").exit_code == 0
    again = read_baseline(base)
    assert again["runs"]["fifo"]["metrics"]["jct_mean"] == {"value": jct * 1.04, "rtol": 0.05}
    assert again["defaults"]["rtol"] == 0


def test_missing_run_new_run_and_config_change_fail(results, tmp_path):
    base = tmp_path / "base.json"
    assert invoke(results, "--baseline", base, "--update").exit_code == 0
    shutil.copytree(results / "fifo", results / "extra")
    shutil.rmtree(results / "fifo-backfill")
    cfg = results / "fifo" / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "seed": 3}))
    rows = compare_all(read_baseline(base), collect_runs(results))
    bad = {(r.run, r.metric, r.verdict) for r in rows if r.failed}
    assert bad == {("fifo-backfill", "*", "missing run"), ("extra", "*", "no baseline"),
                   ("fifo", "config.seed", "config differs")}
    assert invoke(results, "--baseline", base).exit_code == 1


def test_new_and_missing_metrics(results, tmp_path):
    runs = collect_runs(results / "fifo")
    assert list(runs) == ["fifo"]
    baseline = make_baseline(runs)
    del baseline["runs"]["fifo"]["metrics"]["makespan"]
    baseline["runs"]["fifo"]["metrics"]["gone"] = {"value": 1}
    rows = {r.metric: r for r in compare_all(baseline, runs)}
    assert rows["makespan"].verdict == "new" and not rows["makespan"].failed
    assert rows["gone"].verdict == "missing metric" and rows["gone"].failed
    assert "missing metric" in format_report(list(rows.values()))


def test_within_treats_nan_as_equal_to_nan_and_null():
    assert within(math.nan, None, 0, 0) and within(math.nan, math.nan, 0, 0)
    assert not within(1.0, None, 1, 1) and not within(math.nan, 1.0, 1, 1)
    assert within(1.0 + 1e-7, 1.0, 1e-6, 0) and not within(1.0 + 1e-5, 1.0, 1e-6, 0)
    assert within(0.5, 0.0, 0, 0.5) and not within(0.5, 0.0, 0, 0.4)


def test_bad_inputs_are_errors(results, tmp_path):
    res = invoke(results, "--baseline", tmp_path / "none.json")
    assert res.exit_code == 2 and "not found (write one with --update)" in res.stderr
    (tmp_path / "bad.json").write_text('{"runs": {}}')
    res = invoke(results, "--baseline", tmp_path / "bad.json")
    assert res.exit_code == 2 and '"schedlab_baseline": 1' in res.stderr
    (tmp_path / "bad2.json").write_text('{"schedlab_baseline": 1, "runs": {"a": {}}}')
    with pytest.raises(SimError, match="run 'a' needs \"metrics\""):
        read_baseline(tmp_path / "bad2.json")
    (tmp_path / "empty").mkdir()
    res = invoke(tmp_path / "empty", "--baseline", tmp_path / "x.json")
    assert res.exit_code == 2 and "no finished run under" in res.stderr


def test_hidden_folders_of_writes_in_progress_are_not_runs(results):
    shutil.copytree(results / "fifo", results / ".fifo.tmp-0123456789ab")
    shutil.copytree(results / "fifo", results / "sub" / ".x.old-0123456789ab" / "fifo")
    assert sorted(collect_runs(results)) == ["fifo", "fifo-backfill"]


def test_non_numeric_summary_values_such_as_warnings_are_ignored(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    summary = {"policy": "fifo", "jct_mean": 12.5, "jobs_completed": 3, "censored": True,
               "warnings": ["trace ends early", "placer fell back"], "note": "text",
               "nested": {"a": 1}, "nothing": None}
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    runs = collect_runs(folder)
    baseline = make_baseline(runs)
    assert sorted(baseline["runs"]["run"]["metrics"]) == ["jct_mean", "jobs_completed"]
    assert not [r for r in compare_all(baseline, runs) if r.failed]
    base = tmp_path / "base.json"
    assert invoke(folder, "--baseline", base, "--update").exit_code == 0
    assert invoke(folder, "--baseline", base).exit_code == 0


def test_an_unwritable_baseline_is_a_clean_error(results, tmp_path):
    (tmp_path / "somefile").write_text("x", encoding="utf-8")
    res = invoke(results, "--baseline", tmp_path / "somefile" / "base.json", "--update")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.startswith("error: baseline: cannot write to ")
    assert "is a file, not a folder" in res.stderr
