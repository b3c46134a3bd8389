"""ETTR and lost GPU-hours by cause in `schedlab report` (issue 48): shown for runs with
failure metrics, absent (no empty section) for runs without."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from schedlab.app.plot_runs import RunData
from schedlab.app.plots import ettr_by_size, ettr_figure, size_bucket
from schedlab.app.report import build_report, failure_section
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace

RATES = """\
name: hot
components:
  - {name: gpu, unit: gpu, per_day: 0.2, detect_s: 60, repair_s: 1800}
software:
  - {name: software_bug, per_job_hour: 0.05}
"""
JOBS = tuple(JobSpec(f"j{i}", 300.0 * i, (1, 2, 4, 8)[i % 4], 6000.0 + 900.0 * (i % 3))
             for i in range(12))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """A run with the failure layer (interrupted jobs) and one without, as folders."""
    folder = tmp_path_factory.mktemp("ettr")
    (folder / "rates.yaml").write_text(RATES, encoding="utf-8")
    topo = uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            name="t")
    params = {"failure_model": str(folder / "rates.yaml"), "checkpoint_cost": 30,
              "checkpoint_interval": 900, "events": "off"}
    Simulation(Trace("t", JOBS), topo, "fifo", seed=1, params=params).run().write(
        folder / "failing")
    Simulation(Trace("t", JOBS), topo, "fifo", seed=1,
               params={"events": "off"}).run().write(folder / "plain")
    return folder / "failing", folder / "plain"


@pytest.fixture
def fast_figures(monkeypatch):
    """The report's other figures as blank ones: these tests are about its ETTR parts."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from schedlab.app import plots

    def blank(*_a, **_k):
        fig = Figure(figsize=(1, 1))
        FigureCanvasAgg(fig)
        return fig

    for name in ("comparison_figure", "cdf_figure", "timeline_figure", "queue_figure",
                 "tenants_figure", "tenants_heatmap_figure"):
        monkeypatch.setattr(plots, name, blank)


def _run(path: Path) -> RunData:
    import json

    return RunData(path.name, json.loads((path / "summary.json").read_text()), path)


def test_size_buckets_are_those_of_mttf_by_size():
    assert [size_bucket(n) for n in (1, 2, 8, 9, 64, 65, 4096, 5000)] == [
        "1", "2-8", "2-8", "9-64", "9-64", "65-512", "513-4096", "4097+"]


def test_ettr_by_size_agrees_with_the_jobs_table(runs):
    run = _run(runs[0])
    assert run.summary["interruptions_total"] > 0
    table = ettr_by_size(run)
    jobs = run.table("jobs")
    assert list(table["bucket"]) == ["1", "2-8"]
    assert int(table["jobs"].sum()) == int(jobs["ettr"].notna().sum())
    small = jobs[jobs["num_gpus"] == 1]
    assert table["ettr_mean"].iloc[0] == pytest.approx(small["ettr"].mean())
    assert 0 < table["ettr_gpu_weighted"].min() <= table["ettr_gpu_weighted"].max() <= 1
    assert ettr_figure([run]).axes[0].get_xscale() == "log"


def test_the_report_shows_ettr_and_lost_gpu_hours_only_for_failure_runs(runs, fast_figures):
    failing, plain = runs
    assert failure_section([_run(plain)]) == ""
    text = build_report([failing, plain])
    for anchor in ('id="failures"', 'id="failures-table"', 'id="ettr-by-size-table"',
                   'id="interruptions-table"', 'id="fig-ettr"'):
        assert anchor in text
    section = text[text.index('id="failures-table"'):text.index('id="ettr-by-size"')]
    assert section.count("<tr data-run=") == 1  # the plain run has no row
    summary = _run(failing).summary
    cells = re.findall(r'data-value="([^"]+)"', section)
    for key in ("ettr_mean", "lost_recompute_gpu_hours", "lost_checkpoint_gpu_hours",
                "lost_wait_gpu_hours"):
        assert repr(float(summary[key])) in cells, key


def test_a_report_without_failure_metrics_has_nothing_new(runs, fast_figures):
    text = build_report([runs[1]])
    assert 'id="failures"' not in text and "fig-ettr" not in text and "ETTR" not in text
