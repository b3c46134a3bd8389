"""`schedlab report`: one self-contained HTML file whose figures and numbers are the runs'."""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_trace
from research_helpers import PNG_SIGNATURE, summary_json, write_inputs

from schedlab.app.cli import main
from schedlab.app.report import REPORT_COLUMNS, build_report
from schedlab.app.sweep import InlineExecutor, load_sweep, run_sweep
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec

JOBS = [JobSpec(f"j{i}", 30.0 * i, (1, 2, 4, 8)[i % 4], 400.0 + 50 * i, user=f"u{i % 3}",
                vc=f"vc{i % 2}") for i in range(30)]
POLICIES = ("fifo", "sjf", "tiresias-las")
BASE_FIGURES = {"comparison", "jct-cdf", "queueing-cdf", "timeline", "queue", "tenants"}


class Page(HTMLParser):
    """What the tests read from a report: figures, table cells, configs, external links."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: dict[str, bytes] = {}
        self.svgs = 0
        self.rows: dict[str, list[str | None]] = {}
        self.headers: list[str] = []
        self.configs: dict[str, str] = {}
        self.external: list[str] = []
        self.scripts_with_src = 0
        self._figure: str | None = None
        self._table: str | None = None
        self._row: str | None = None
        self._in_th = False
        self._config: str | None = None
        self._in_pre = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("src", "href"):
            v = a.get(key) or ""
            if v.startswith(("http:", "https:", "//")):
                self.external.append(v)
        if tag == "script" and a.get("src"):
            self.scripts_with_src += 1
        if tag == "link":
            self.external.append(str(a))
        if tag == "figure":
            self._figure = (a.get("id") or "").removeprefix("fig-")
        elif tag == "img" and self._figure is not None:
            src = a.get("src") or ""
            assert src.startswith("data:image/png;base64,"), src[:40]
            self.figures[self._figure] = base64.b64decode(src.split(",", 1)[1])
        elif tag == "svg":
            self.svgs += 1
        elif tag == "table":
            self._table = a.get("id")
        elif tag == "tr" and self._table == "comparison" and a.get("data-run"):
            self._row = a["data-run"]
            self.rows[self._row] = []
        elif tag == "th" and self._table == "comparison":
            self._in_th = True
            self.headers.append("")
        elif tag == "td" and self._row is not None:
            self.rows[self._row].append(a.get("data-value"))
        elif tag == "details":
            self._config = a.get("data-run")
        elif tag == "pre" and self._config is not None:
            self._in_pre = True
            self.configs[self._config] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None
        elif tag == "table":
            self._table = None
        elif tag == "tr":
            self._row = None
        elif tag == "th":
            self._in_th = False
        elif tag == "pre":
            self._in_pre = False
        elif tag == "details":
            self._config = None

    def handle_data(self, data: str) -> None:
        if self._in_th:
            self.headers[-1] += data
        if self._in_pre and self._config is not None:
            self.configs[self._config] += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def assert_self_contained(page: Page, text: str) -> None:
    assert page.external == [] and page.scripts_with_src == 0
    assert "@import" not in text and "url(http" not in text


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """Three runs written as `schedlab run --out` writes them: OUT/<policy>/."""
    from schedlab.topologies.build import uniform_topology

    topo = uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            name="dgx2")
    out = tmp_path_factory.mktemp("runs")
    for policy in POLICIES:
        Simulation(make_trace(*JOBS), topo, policy, seed=0).run().write(out / policy)
    return out


@pytest.fixture(scope="module")
def report_file(results: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    res = CliRunner().invoke(main, ["report", str(results), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert str(out.resolve()) in res.output
    return out


def test_report_has_every_figure_as_an_inline_png(report_file: Path) -> None:
    text = report_file.read_text(encoding="utf-8")
    page = parse(text)
    assert set(page.figures) == BASE_FIGURES
    for fig_id, png in page.figures.items():
        assert png[:8] == PNG_SIGNATURE, fig_id
        assert int.from_bytes(png[16:20], "big") > 300, fig_id  # width
    assert_self_contained(page, text)


def test_table_numbers_equal_summary_json(report_file: Path, results: Path) -> None:
    page = parse(report_file.read_text(encoding="utf-8"))
    assert sorted(page.rows) == sorted(POLICIES)
    assert page.headers[0] == "run" and len(page.headers) == 1 + len(REPORT_COLUMNS)
    for policy, values in page.rows.items():
        summary = summary_json(results / policy)
        assert values[0] is None  # the label cell
        for (key, *_), got in zip(REPORT_COLUMNS, values[1:], strict=True):
            want = summary.get(key)
            assert got is not None, (policy, key)
            if isinstance(want, int | float) and not isinstance(want, bool) \
                    and math.isfinite(want):
                assert float(got) == want, (policy, key, got, want)
            else:
                assert got == "nan", (policy, key, got, want)


def test_every_run_config_is_in_a_collapsible_block(report_file: Path, results: Path) -> None:
    page = parse(report_file.read_text(encoding="utf-8"))
    assert sorted(page.configs) == sorted(POLICIES)
    for policy, text in page.configs.items():
        config = json.loads((results / policy / "config.json").read_text(encoding="utf-8"))
        assert json.loads(text) == json.loads(json.dumps(config, default=str))


def test_many_runs_get_panels_and_a_tenant_heatmap(results: Path, monkeypatch) -> None:
    from schedlab.app import plots

    notes: list[str] = []
    page = parse(build_report([results], max_lines=2, note=notes.append))
    assert set(page.figures) == BASE_FIGURES and notes == []
    # beyond MAX_PANELS panels the per-run figures are left out, with a note
    monkeypatch.setattr(plots, "MAX_PANELS", 1)
    page = parse(build_report([results], max_lines=2, note=notes.append))
    assert set(page.figures) == {"comparison"}
    assert len(notes) == 1 and "left out" in notes[0]


def test_a_sweep_report_has_the_metric_vs_parameter_plots(tmp_path: Path) -> None:
    sweep = load_sweep(write_inputs(tmp_path, jobs=20))
    run_sweep(sweep, tmp_path / "out", InlineExecutor())
    out = tmp_path / "sweep.html"
    res = CliRunner().invoke(main, ["report", str(tmp_path / "out"), "-o", str(out),
                                    "--metric", "makespan"])
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    page = parse(text)
    assert "sweep-makespan-vs-load_scale" in page.figures
    assert BASE_FIGURES <= set(page.figures)  # 12 runs: panels of 12
    assert len(page.rows) == 12 and len(page.configs) == 12
    assert 'id="sweep"' in text and "± " in text  # mean ± std over the two seeds
    assert_self_contained(page, text)


def test_report_of_nothing_is_a_clean_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert "error: no results in" in res.output


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser (the test skips without one).

    When CI installs it beside the suite, `SCHEDLAB_CHROMIUM_DONE` names the file the
    install writes when it ends: wait for that first (at most 10 minutes).
    """
    done = os.environ.get("SCHEDLAB_CHROMIUM_DONE")
    deadline = time.monotonic() + 600
    while done and not Path(done).exists() and time.monotonic() < deadline:
        time.sleep(1.0)
    path = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if path is None:
        pytest.skip("no chromium browser installed")
    return path


def test_report_renders_in_headless_chromium_without_console_errors(
        report_file: Path, chromium: str) -> None:
    p = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-dev-shm-usage",
         "--enable-logging=stderr", "--v=0", "--dump-dom", report_file.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert 'data-report-ready="1"' in p.stdout  # the inline script ran to its end
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line
               or "Uncaught" in line]
    assert console == [], console
    assert p.stdout.count("data:image/png;base64,") == len(BASE_FIGURES)


def test_clicking_a_header_sorts_the_table_in_chromium(report_file: Path, tmp_path: Path,
                                                       chromium: str) -> None:
    """A copy of the report clicks 'JCT mean' twice; the row order follows data-value."""
    col = 1 + [k for k, *_ in REPORT_COLUMNS].index("jct_mean")
    probe = f"""<script>
    var th = document.querySelectorAll("#comparison thead th")[{col}];
    function order() {{
      return Array.prototype.map.call(document.querySelectorAll("#comparison tbody tr"),
        function (r) {{ return r.getAttribute("data-run"); }}).join(",");
    }}
    th.click(); document.body.setAttribute("data-asc", order());
    th.click(); document.body.setAttribute("data-desc", order());
    </script></body>"""
    copy = tmp_path / "probe.html"
    copy.write_text(report_file.read_text(encoding="utf-8").replace("</body>", probe),
                    encoding="utf-8")
    p = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-dev-shm-usage", "--dump-dom",
         copy.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    asc = re.search(r'data-asc="([^"]*)"', p.stdout)
    desc = re.search(r'data-desc="([^"]*)"', p.stdout)
    assert asc and desc, p.stdout[:500]
    page = parse(report_file.read_text(encoding="utf-8"))
    jct = {run: float(values[col] or "nan") for run, values in page.rows.items()}
    assert sorted(asc.group(1).split(",")) == sorted(POLICIES)
    assert [jct[r] for r in asc.group(1).split(",")] == sorted(jct.values())
    assert [jct[r] for r in desc.group(1).split(",")] == sorted(jct.values(), reverse=True)


def test_short_runs_show_seconds_and_every_cell_its_exact_value(report_file: Path,
                                                                results: Path) -> None:
    text = report_file.read_text(encoding="utf-8")
    page = parse(text)
    assert "JCT mean (s)" in page.headers and "JCT mean (h)" not in page.headers
    jct = summary_json(results / "fifo")["jct_mean"]
    assert f'title="{jct!r}">{jct:.1f}</td>' in text
    assert "Configurations differ" not in text  # same inputs, policies only differ


def test_runs_of_different_configurations_are_flagged(results: Path, tmp_path: Path) -> None:
    from schedlab.topologies.build import uniform_topology

    mixed = tmp_path / "mixed"
    shutil.copytree(results / "fifo", mixed / "fifo")
    topo = uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            name="dgx2")
    Simulation(make_trace(*JOBS), topo, "sjf", seed=4,
               params={"placer": "pack"}).run().write(mixed / "sjf")
    text = build_report([mixed])
    assert "Configurations differ" in text
    # labels name what differs; each line names the key and every run's value
    assert re.search(r"<li>seed: fifo[^=<]*(\([^)]*\))?=0, sjf[^<]*=4</li>", text)
    assert re.search(r"<li>params\.placer: fifo[^<]*=&quot;consolidated&quot;, sjf[^<]*"
                     r"=&quot;pack&quot;</li>", text)
