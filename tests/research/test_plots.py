"""Figures (docs/contract.md#sec-6): each renders a valid, non-empty PNG from a small run."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_trace
from research_helpers import assert_png, write_inputs

from schedlab.app.cli_research import plot as plot_cmd
from schedlab.app.plots import (
    RunData,
    cdf_figure,
    comparison_figure,
    gantt_figure,
    gantt_intervals,
    load_results,
    queue_figure,
    render_all,
    save_png,
    sweep_figure,
    tenant_kind,
    tenants_figure,
    timeline_figure,
)
from schedlab.app.sweep import InlineExecutor, load_sweep, run_sweep
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import SimError
from schedlab.sim.model import JobSpec

JOBS = [(f"j{i}", 20.0 * i, (1, 2, 4, 8)[i % 4], 300.0 + 40 * i) for i in range(24)]
USERS = [JobSpec(f"j{i}", 20.0 * i, (1, 2, 4, 8)[i % 4], 300.0 + 40 * i, user=f"u{i % 3}")
         for i in range(24)]


@pytest.fixture(scope="module")
def results(tmp_path_factory, request):
    """Two small runs written as `schedlab run --out` would: OUT/<policy>/."""
    from schedlab.topologies.build import uniform_topology

    topo = uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            name="dgx2")
    out = tmp_path_factory.mktemp("runs")
    for policy in ("fifo", "fifo-backfill"):
        Simulation(make_trace(*USERS), topo, policy, seed=0).run().write(out / policy)
    return out


@pytest.fixture(scope="module")
def runs(results):
    loaded, sweep = load_results([results])
    assert sweep is None
    return loaded


def test_labels_are_policies_when_only_the_policy_differs(runs):
    assert [r.label for r in runs] == ["fifo", "fifo-backfill"]


@pytest.mark.parametrize("name", ["jct_cdf", "queueing_delay_cdf", "timeline", "queue",
                                  "gantt", "comparison", "tenants"])
def test_each_figure_renders_a_png(runs, tmp_path, name):
    fig = {
        "jct_cdf": lambda: cdf_figure(runs, "jct"),
        "queueing_delay_cdf": lambda: cdf_figure(runs, "queueing_delay"),
        "timeline": lambda: timeline_figure(runs),
        "queue": lambda: queue_figure(runs),
        "gantt": lambda: gantt_figure(runs[0]),
        "comparison": lambda: comparison_figure(runs),
        "tenants": lambda: tenants_figure(runs),
    }[name]()
    assert fig.get_suptitle() or fig.axes[0].get_title()
    assert all(ax.get_xlabel() or ax.get_shared_x_axes().get_siblings(ax)[1:]
               for ax in fig.axes)  # every axis labelled, or sharing a labelled one
    assert all(ax.get_ylabel() or ax.get_yticklabels() for ax in fig.axes)
    assert_png(save_png(fig, tmp_path / f"{name}.png"))


def test_figures_from_an_in_memory_result(tmp_path, dgx2):
    result = Simulation(make_trace(*JOBS), dgx2, "fifo", seed=0).run()
    run = RunData.from_result("fifo", result)
    assert_png(save_png(cdf_figure([run]), tmp_path / "a.png"))
    assert_png(save_png(gantt_figure(run), tmp_path / "b.png"))


def test_gantt_intervals_follow_holds_and_releases():
    events = pd.DataFrame(
        [(0.0, "a", "submit", 2, "", ""), (0.0, "a", "start", 2, "node0:2", ""),
         (5.0, "b", "start", 3, "node0:1;node1:2", ""), (10.0, "a", "preempt", 2, "", ""),
         (12.0, "a", "resume", 2, "node1:2", ""), (20.0, "b", "finish", 3, "", ""),
         (30.0, "c", "start", 1, "node0:1", "")],
        columns=["time", "job_id", "kind", "num_gpus", "cells", "detail"])
    got = gantt_intervals(events).sort_values(["start", "node"]).values.tolist()
    assert got == [["a", "node0", 2, 0.0, 10.0], ["b", "node0", 1, 5.0, 20.0],
                   ["b", "node1", 2, 5.0, 20.0], ["a", "node1", 2, 12.0, 30.0],
                   ["c", "node0", 1, 30.0, 30.0]]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("sweep")
    spec = load_sweep(write_inputs(base / "in", jobs=30))
    run_sweep(spec, base / "out", InlineExecutor())
    return base / "out"


def test_sweep_line_plot_has_a_line_per_policy_with_seed_error_bars(sweep_dir, tmp_path):
    _, table = load_results([sweep_dir])
    fig = sweep_figure(table, "load_scale", "jct_mean")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fifo", "fifo-backfill"]
    assert "2 seeds" in ax.get_title() and ax.get_ylabel() == "mean JCT (hours)"
    assert ax.get_xlabel() == "load scale (x the trace's arrival rate)"
    assert_png(save_png(fig, tmp_path / "s.png"))
    with pytest.raises(SimError, match="metric 'nope' not in the sweep summary"):
        sweep_figure(table, "load_scale", "nope")


def test_render_all_for_a_sweep_and_for_run_folders(sweep_dir, results, tmp_path):
    notes: list[str] = []
    made = render_all([sweep_dir], tmp_path / "s", max_lines=4, note=notes.append)
    assert sorted(p.name for p in made) == [
        "jct_cdf.png", "policy_comparison.png", "queue_length.png", "queueing_delay_cdf.png",
        "sweep_jct_mean_vs_load_scale.png", "sweep_queueing_delay_mean_vs_load_scale.png",
        "tenants.png", "utilization_fragmentation.png"]
    assert "panels of at most --max-lines 4" in notes[0]
    made = render_all([sweep_dir], tmp_path / "s1", max_lines=1, note=notes.append)
    assert "jct_cdf.png" not in [p.name for p in made]  # 12 runs > 6 panels of 1
    made = render_all([results / "fifo", results / "fifo-backfill"], tmp_path / "r")
    assert sorted(p.name for p in made) == [
        "gantt_fifo-backfill.png", "gantt_fifo.png", "jct_cdf.png", "policy_comparison.png",
        "queue_length.png", "queueing_delay_cdf.png", "tenants.png",
        "utilization_fragmentation.png"]
    for p in made:
        assert_png(p)


def test_plot_command(results, tmp_path):
    res = CliRunner().invoke(plot_cmd, [str(results / "fifo"), "--gantt-max-jobs", "0"])
    assert res.exit_code == 0, res.output
    made = res.stdout.split()
    assert all(p.startswith(str(results / "fifo" / "figures")) for p in made)
    assert len(made) == 6 and "Gantt charts only for runs of at most 0 jobs" in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(plot_cmd, [str(empty)])
    assert res.exit_code == 2 and "no results in" in res.stderr


def test_plot_into_an_unwritable_folder_is_a_clean_error(results, tmp_path):
    (tmp_path / "somefile").write_text("x", encoding="utf-8")
    res = CliRunner().invoke(plot_cmd, [str(results / "fifo"), "--out",
                                        str(tmp_path / "somefile" / "figs")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.startswith("error: figures: cannot write to ")


def test_tenant_figure_draws_users_by_demand_with_received_and_queueing(runs, tmp_path):
    assert tenant_kind(runs) == "user"  # one vc: tenants are the users
    fig = tenants_figure(runs, top=2)
    ax_g, ax_q = fig.axes
    demand = runs[0].table("tenants").query("kind == 'user'").set_index("tenant")
    top2 = list(demand["gpu_hours_demanded"].sort_values(ascending=False).index[:2])
    assert [t.get_text() for t in ax_g.get_yticklabels()] == top2
    assert "top 2 of 3 users" in fig.get_suptitle()
    legend = [t.get_text() for t in ax_g.get_legend().get_texts()]
    assert sorted(legend) == ["demanded", "fifo", "fifo-backfill"]
    received = sorted(b.get_width() for b in ax_g.patches)
    assert received == pytest.approx(sorted(
        r.table("tenants").set_index(["kind", "tenant"]).loc[("user", u), "gpu_hours_received"]
        for r in runs for u in top2))
    assert ax_q.get_xlabel().startswith("queueing delay (hours")
    assert_png(save_png(fig, tmp_path / "tenants.png"))


def test_tenant_figure_uses_virtual_clusters_when_there_are_several(dgx2, tmp_path):
    jobs = [JobSpec(f"j{i}", 10.0 * i, 2, 200.0, user="u", vc=("a", "b")[i % 2])
            for i in range(6)]
    result = Simulation(make_trace(*jobs), dgx2, "fifo", seed=0).run()
    run = RunData.from_result("fifo", result)
    assert tenant_kind([run]) == "vc"
    fig = tenants_figure([run])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "b"]
    assert_png(save_png(fig, tmp_path / "vc.png"))


def test_a_folder_without_tenants_parquet_gets_it_rebuilt_from_its_jobs(results, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(results / "fifo", old)
    (old / "tenants.parquet").unlink()
    (run,), _ = load_results([old])
    want = pd.read_parquet(results / "fifo" / "tenants.parquet")
    pd.testing.assert_frame_equal(run.table("tenants"), want)
    assert_png(save_png(tenants_figure([run]), tmp_path / "t.png"))


def test_more_runs_than_max_lines_are_drawn_in_panels(sweep_dir, tmp_path):
    runs, _ = load_results([sweep_dir])
    assert len(runs) == 12
    for column in ("jct", "queueing_delay"):
        fig = cdf_figure(runs, column, per_panel=5)  # 12 runs: 3 panels of 4
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert len(shown) == 3
        assert [len(ax.get_legend().get_texts()) for ax in shown] == [4, 4, 4]
        assert_png(save_png(fig, tmp_path / f"{column}.png"))
    fig = timeline_figure(runs, per_panel=6)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 12  # one small panel per run (3 columns of 4 rows)
    assert [ax.get_title() for ax in shown] == [r.label for r in runs]
    assert len(queue_figure(runs, per_panel=6).axes) == 2
    assert len(cdf_figure(runs, "jct").axes) == 1  # no per_panel: one panel


def test_windowed_mean_is_the_time_weighted_mean_of_the_step_function():
    import numpy as np

    from schedlab.app.plots import windowed_mean

    # 1 on [0, 1), 0 on [1, 3), 1 from 3 on: windows [0, 2) and [2, 4) average 0.5 each
    got = windowed_mean(np.array([0.0, 1.0, 3.0]), np.array([1.0, 0.0, 1.0]),
                        np.array([0.0, 2.0, 4.0]))
    assert got.tolist() == [0.5, 0.5]
    # before the first time the function counts as 0
    assert windowed_mean(np.array([1.0]), np.array([1.0]), np.array([0.0, 2.0])).tolist() \
        == [0.5]
