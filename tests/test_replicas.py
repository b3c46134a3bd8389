"""Sweeps with shaken replicas (issue 49): expansion, replicas.parquet, error bars, and
`schedlab check --tolerance replicas`.

The issue's must-hold, on a small subset of the default trace: shaken replicas give
intervals of non-zero width for every policy, and the replica tolerance passes on a
rerun with other replica seeds and fails on a real change (a policy parameter changed).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from schedlab.app.check import (
    RunRecord,
    compare_replicas,
    format_report,
    make_baseline,
    read_baseline,
    write_baseline,
)
from schedlab.app.cli import main
from schedlab.app.inputs import load_named_topology
from schedlab.app.plot_runs import load_results
from schedlab.app.plots import comparison_figure, sweep_figure
from schedlab.app.report import sweep_table
from schedlab.app.sweep import InlineExecutor, parse_sweep, run_sweep, shaped_trace
from schedlab.app.sweep_summary import mean_ci
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter, SimError

POLICIES = ("fifo", "tiresias-las")


def test_mean_ci_is_the_student_t_interval():
    mean, half, n = mean_ci([1.0, 2.0, 3.0, math.nan])
    # t(0.975, 2) = 4.302653; std = 1
    assert (mean, n) == (2.0, 3) and half == pytest.approx(4.302653 / math.sqrt(3))
    assert math.isnan(mean_ci([5.0])[1])


def test_replicas_expand_every_point_and_leave_plain_points_as_they_were():
    grid = {"base": {"max_jobs": 10}, "grid": {"policy": ["fifo", "sjf"]}}
    plain = parse_sweep(grid)
    shaken = parse_sweep({**grid, "replicas": {"count": 3, "seed": 7, "jitter": 0.2}})
    assert all("replica" not in p.config() for p in plain.points)
    assert "replica" in shaken.axes and shaken.replicas == 3 and plain.replicas == 0
    assert [(p.policy, p.replica) for p in shaken.points] == [
        (pol, i) for pol in ("fifo", "sjf") for i in range(3)]
    assert [p.configuration() for p in shaken.points[::3]] == [p.config() for p in plain.points]
    rep = shaken.points[1].config()["replica"]
    assert rep == {"index": 1, "seed": 7, "jitter": 0.2, "resample": 0.1,
                   "duration_jitter": 0.0, "subset": 0.95}
    assert len({p.run_id for p in shaken.points}) == 6
    assert shaken.points[0].columns()["replica"] == 0


@pytest.mark.parametrize(("replicas", "message"), [
    (1, "count 1: expected an integer >= 2"),
    ({"count": 3, "seed": -1}, "seed -1: expected an integer >= 0"),
    ({"count": 3, "jiter": 1}, "unknown key 'jiter'"),
    ({"count": 3, "subset": 2}, "subset 2: expected a number in"),
])
def test_bad_replicas_are_one_clear_line(replicas, message):
    with pytest.raises(InvalidParameter, match=message):
        parse_sweep({"replicas": replicas})


# ------------------------------------------------------------- the must-hold


def _records(seed: int, policies=POLICIES, params: dict | None = None) -> dict[str, RunRecord]:
    """Runs of a replica sweep on 40 jobs of the default trace, in memory (no folders)."""
    sweep = parse_sweep({
        "base": {"trace": "default", "topology": "uniform:1", "max_jobs": 40,
                 "params": {"events": "off", "timeline": "off", **(params or {})}},
        "grid": {"policy": list(policies)}, "replicas": {"count": 3, "seed": seed}})
    topology = load_named_topology("uniform:1")
    out = {}
    for p in sweep.points:
        result = Simulation(shaped_trace(p), topology, p.policy, seed=p.seed,
                            params=dict(p.params)).run()
        out[p.folder] = RunRecord(p.folder, result.summary,
                                  {**result.config, "sweep_point": p.config()})
    return out


@pytest.fixture(scope="module")
def baseline() -> dict:
    return make_baseline(_records(0))


@pytest.fixture(scope="module")
def rerun() -> dict[str, RunRecord]:
    """The same sweep with another replica seed."""
    return _records(1)


def test_replicas_give_intervals_of_non_zero_width_for_every_policy(baseline):
    groups = baseline["replicas"]
    assert sorted(groups) == sorted(POLICIES)
    for label in POLICIES:
        for metric in ("jct_mean", "queueing_delay_mean", "utilization_mean",
                       "jobs_submitted"):
            assert groups[label]["metrics"][metric]["ci95"] > 0, (label, metric)
        assert groups[label]["runs"] == 3


def test_replica_tolerance_passes_on_other_replica_seeds(baseline, rerun):
    rows = compare_replicas(baseline, rerun)
    assert [r for r in rows if r.failed] == []
    assert any(r.tolerance for r in rows)
    assert "tolerance" in format_report(rows).splitlines()[0]


def test_replica_tolerance_fails_on_a_changed_policy_parameter(baseline, rerun):
    now = {k: r for k, r in rerun.items() if k.startswith("fifo")}
    now.update(_records(1, ("tiresias-las",), {"num_queues": 1}))
    bad = [r for r in compare_replicas(baseline, now) if r.failed]
    assert {r.run for r in bad} == {"tiresias-las"}
    assert any(r.verdict == "config differs" and r.metric == "config.params" for r in bad)
    drift = {r.metric for r in bad if r.verdict == "DRIFT"}
    assert {"preemptions", "queueing_delay_p99"} <= drift
    # a narrower tolerance sees the mean JCT move too
    narrow = compare_replicas(baseline, now, widen=1.0)
    assert any(r.metric == "jct_mean" and r.verdict == "DRIFT" for r in narrow)


def test_a_baseline_with_replicas_survives_writing_and_a_plain_one_is_refused(
        baseline, tmp_path):
    path = tmp_path / "b.json"
    write_baseline(path, baseline)
    assert read_baseline(path)["replicas"] == json.loads(json.dumps(baseline["replicas"]))
    plain = {**baseline}
    del plain["replicas"]
    with pytest.raises(SimError, match="no replica intervals"):
        compare_replicas(plain, {})


# ------------------------------------------------------------- a sweep folder


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    from schedlab.app.sweep import load_sweep
    from schedlab.traces import generate, write_canonical

    folder = tmp_path_factory.mktemp("replicas")
    write_canonical(generate(30, seed=3, arrival_rate_per_hour=60.0,
                             size_mix={1: 0.5, 2: 0.2, 4: 0.2, 8: 0.1}), folder / "trace.csv")
    path = folder / "sweep.yaml"
    path.write_text("base: {trace: trace.csv, topology: 'uniform:2', policy: fifo, "
                    "params: {events: 'off'}}\nreplicas: {count: 2, seed: 0, jitter: 1.0, "
                    "resample: 0.5}\n", encoding="utf-8")
    out = folder / "out"
    run_sweep(load_sweep(path), out, InlineExecutor())
    return out


def test_a_replica_sweep_writes_replicas_parquet_with_intervals(sweep_dir):
    summary = pd.read_parquet(sweep_dir / "summary.parquet")
    assert list(summary["replica"]) == [0, 1] and list(summary["replica_seed"]) == [0, 0]
    table = pd.read_parquet(sweep_dir / "replicas.parquet")
    assert len(table) == 1 and int(table["replicas"].iloc[0]) == 2
    mean, half, _ = mean_ci(summary["jct_mean"].tolist())
    assert table["jct_mean_mean"].iloc[0] == pytest.approx(mean)
    assert table["jct_mean_ci95"].iloc[0] == pytest.approx(half) and half > 0


def test_report_and_plots_draw_replica_intervals(sweep_dir):
    summary = pd.read_parquet(sweep_dir / "summary.parquet").assign(
        load_scale=lambda f: 1.0)
    html = sweep_table(summary)
    assert "<th>replicas</th>" in html and "data-ci95=" in html
    runs, _ = load_results([sweep_dir])
    title = comparison_figure(runs)._suptitle.get_text()  # type: ignore[union-attr]
    assert "mean over 2 replicas, error bars: 95% CI" in title
    both = pd.concat([summary, summary.assign(load_scale=2.0)])
    assert "95% CI" in sweep_figure(both, "load_scale").axes[0].get_title()


def test_check_command_with_replica_tolerance(sweep_dir, tmp_path):
    base = tmp_path / "b.json"
    runner = CliRunner()
    assert runner.invoke(main, ["check", str(sweep_dir), "--baseline", str(base),
                                "--update"]).exit_code == 0
    res = runner.invoke(main, ["check", str(sweep_dir), "--baseline", str(base),
                               "--tolerance", "replicas", "--widen", "1.5"])
    assert res.exit_code == 0, res.output
    assert "tolerance" in res.output
