"""`schedlab report`: one self-contained HTML file for a run, a folder of runs or a sweep.

Everything is inline: figures are PNG in `data:` URIs (drawn by `schedlab.app.plots`), the
table's sorting is a few lines of inline JavaScript, the style an inline sheet. Nothing
is fetched from the network, so the file can be mailed or attached to a review and
opened anywhere. Each table cell carries the summary's exact number in `data-value`
(the text shows it rounded), which the sorting uses and the tests compare with
summary.json.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from schedlab.app import plots
from schedlab.app.plot_runs import RunData, load_results
from schedlab.sim.errors import SimError
from schedlab.sim.writing import FolderNotWritable, atomic_text, ensure_writable_dir, json_text

__all__ = ["REPORT_COLUMNS", "ReportFigure", "build_report", "write_report"]

REPORT_COLUMNS: tuple[tuple[str, str, str, float], ...] = (
    ("jobs_submitted", "jobs", "{:.0f}", 1.0),
    ("jobs_completed", "done", "{:.0f}", 1.0),
    ("jobs_rejected", "rejected", "{:.0f}", 1.0),
    ("jobs_unfinished", "unfinished", "{:.0f}", 1.0),
    ("queueing_delay_mean", "queue mean (h)", "{:.2f}", 1 / 3600),
    ("queueing_delay_p95", "queue p95 (h)", "{:.2f}", 1 / 3600),
    ("jct_mean", "JCT mean (h)", "{:.2f}", 1 / 3600),
    ("jct_p95", "JCT p95 (h)", "{:.2f}", 1 / 3600),
    ("makespan", "makespan (h)", "{:.1f}", 1 / 3600),
    ("utilization_mean", "util", "{:.3f}", 1.0),
    ("fragmentation_mean", "frag", "{:.3f}", 1.0),
    ("fairness_jain", "Jain", "{:.3f}", 1.0),
    ("bounded_slowdown_mean", "slowdown", "{:.2f}", 1.0),
    ("sla_violations", "SLA miss", "{:.0f}", 1.0),
    ("preemptions", "preempt", "{:.0f}", 1.0),
    ("wall_seconds", "wall (s)", "{:.2f}", 1.0),
)
"""Summary key, column header, display format, display scale. `data-value` is unscaled."""

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5em auto;
max-width:1300px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:1.8em}
table{border-collapse:collapse;font-size:.85em}th,td{padding:.25em .55em;
border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}th:first-child,
td:first-child{text-align:left}th.asc:after{content:" \\25B2"}th.desc:after{content:" \\25BC"}
tr:hover td{background:#fafaf0}figure{margin:1em 0}figure img{max-width:100%;height:auto;
border:1px solid #eee}figcaption{font-size:.85em;color:#555}
details{margin:.3em 0}summary{cursor:pointer}pre{background:#f7f7f7;padding:.6em;
overflow:auto;font-size:.8em}.note{color:#555;font-size:.9em}
"""

_SCRIPT = """
(function () {
  function key(cell) {
    var v = cell.getAttribute("data-value");
    if (v === null) { return cell.textContent.trim().toLowerCase(); }
    var x = parseFloat(v);
    return isNaN(x) ? Infinity : x;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          var c = x < y ? -1 : (x > y ? 1 : 0);
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.body.setAttribute("data-report-ready", "1");
})();
"""


@dataclass(frozen=True)
class ReportFigure:
    """One figure of the report: an anchor id, a caption and the PNG bytes."""

    fig_id: str
    caption: str
    png: bytes


def _png(fig: Any, dpi: int = 90) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _exact(v: Any) -> str:
    """A number as `data-value`: the shortest text that reads back to the same float."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return "nan"
    return repr(float(v)) if not (isinstance(v, float) and math.isnan(v)) else "nan"


def _cell(v: Any, fmt: str, scale: float) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float) or \
            (isinstance(v, float) and not math.isfinite(v)):
        text = "-" if v is None or isinstance(v, float) else html.escape(str(v))
        return f'<td data-value="nan">{text}</td>'
    exact = _exact(v)
    return (f'<td data-value="{exact}" title="{exact}">'
            f'{html.escape(fmt.format(v * scale))}</td>')


HOURS_FROM = 10 * 3600.0
"""A time column is shown in hours when its largest value is at least this (s), else in
seconds: short runs keep their precision (0.004 h would show as 0.00)."""


def display_columns(runs: Sequence[RunData]) -> list[tuple[str, str, str, float]]:
    """REPORT_COLUMNS with each time column's unit chosen for these runs' values."""
    out = []
    for key, head, fmt, scale in REPORT_COLUMNS:
        if head.endswith("(h)"):
            values = [abs(float(v)) for r in runs if isinstance(v := r.summary.get(key),
                                                                  int | float)
                      and not isinstance(v, bool) and math.isfinite(v)]
            if not values or max(values) < HOURS_FROM:
                head, fmt, scale = head[:-3] + "(s)", "{:.1f}", 1.0
        out.append((key, head, fmt, scale))
    return out


CONFIG_COMPARED = ("trace", "trace_sha", "topology", "seed", "max_jobs", "until",
                   "skip_bad_rows", "schedlab_version")
"""config.json keys that runs compared side by side should share (besides the policy)."""


def config_differences(runs: Sequence[RunData]) -> list[str]:
    """One line per config key (or engine parameter) whose value differs between runs.

    Runs put side by side are meant to differ in their policy only: a folder rerun with
    other inputs or engine parameters mixes configurations, which the report says.
    """
    from schedlab.sim.engine_params import ENGINE_PARAMS

    configs = [(r.label, _config_of(r)) for r in runs]
    lines = []
    keys = [*CONFIG_COMPARED, *(f"params.{k}" for k in ENGINE_PARAMS)]
    for key in keys:
        values: dict[str, Any] = {}
        for label, config in configs:
            if key.startswith("params."):
                v = (config.get("resolved_params") or {}).get(key.removeprefix("params."))
            else:
                v = config.get(key)
            values[label] = v
        shown = {json_text(v, indent=None, default=str) for v in values.values()}
        if len(shown) > 1:
            lines.append(f"{key}: " + ", ".join(
                f"{label}={json_text(v, indent=None, default=str)}"
                for label, v in values.items()))
    return lines


def summary_table(runs: Sequence[RunData]) -> str:
    """The comparison table: one row per run, the columns of REPORT_COLUMNS (sortable).

    Time columns are in hours or seconds (`display_columns`); each cell's `title` and
    `data-value` hold the exact number of summary.json.
    """
    columns = display_columns(runs)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in
                   ["run", *[h for _, h, _, _ in columns]])
    rows = []
    for run in runs:
        cells = [f"<td>{html.escape(run.label)}</td>"]
        cells += [_cell(run.summary.get(k), fmt, scale) for k, _, fmt, scale in columns]
        rows.append(f'<tr data-run="{html.escape(run.label, quote=True)}">{"".join(cells)}</tr>')
    return (f'<table class="sortable" id="comparison"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def has_replicas(sweep: pd.DataFrame) -> bool:
    """True when the sweep's runs are shaken replicas (a `replica` column with values)."""
    return "replica" in sweep and bool(sweep["replica"].notna().any())


def sweep_table(sweep: pd.DataFrame) -> str:
    """Metric mean and std over seeds per sweep point (the varied axes but the seed).

    With replicas the spread is the half-width of the 95% Student-t interval of the mean
    over the point's seeds and replicas (`data-ci95` holds it exactly), and the last
    column counts replicas.
    """
    axes = [c for c in plots.varied_axes(sweep) if c != "seed"] or ["policy"]
    metrics = [k for k, *_ in plots.COMPARED if k in sweep]
    replicas = has_replicas(sweep)
    spread_of = plots.ci95 if replicas else "std"
    stats = sweep.groupby(axes, dropna=False, sort=True)[metrics].agg(
        ["mean", spread_of, "count"])
    stats.columns = pd.MultiIndex.from_tuples(
        [(m, "std" if s not in ("mean", "count") else s) for m, s in stats.columns])
    head = "".join(f"<th>{html.escape(a.removeprefix('params.'))}</th>" for a in axes)
    head += "".join(f"<th>{html.escape(m)}</th>" for m in metrics)
    head += "<th>replicas</th>" if replicas else "<th>seeds</th>"
    rows = []
    for key, row in stats.iterrows():
        key = key if isinstance(key, tuple) else (key,)
        cells = [f"<td>{html.escape(plots.short(v))}</td>" for v in key]
        for m in metrics:
            mean, std = float(row[(m, "mean")]), float(row[(m, "std")])
            spread = f" ± {std:.3g}" if math.isfinite(std) else ""
            ci = f' data-ci95="{_exact(std)}"' if replicas else ""
            cells.append(f'<td data-value="{_exact(mean)}"{ci}>{mean:.4g}{spread}</td>')
        cells.append(f'<td data-value="{int(row[(metrics[0], "count")]) if metrics else 0}">'
                     f'{int(row[(metrics[0], "count")]) if metrics else 0}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    # the first column of a sweep table is an axis: keep it left-aligned like a label
    return (f'<table class="sortable" id="sweep"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


FAILURE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("ettr_mean", "ETTR mean", "{:.3f}"),
    ("ettr_gpu_weighted", "ETTR GPU-weighted", "{:.3f}"),
    ("interruptions_total", "interruptions", "{:.0f}"),
    ("productive_gpu_hours", "productive GPU-h", "{:.1f}"),
    ("lost_recompute_gpu_hours", "lost: recompute GPU-h", "{:.1f}"),
    ("lost_checkpoint_gpu_hours", "lost: checkpoint GPU-h", "{:.1f}"),
    ("lost_restart_gpu_hours", "lost: restart GPU-h", "{:.1f}"),
    ("lost_wait_gpu_hours", "lost: wait GPU-h", "{:.1f}"),
    ("spare_swaps", "spare swaps", "{:.0f}"),
)
"""The failure layer's summary keys in the report (docs/failures.md), header, format."""


def failure_section(runs: Sequence[RunData]) -> str:
    """ETTR and lost GPU-hours by cause of the runs with failure metrics ("" when none).

    A table per run, ETTR by job-size bucket, and interruptions by component.
    """
    failing = [r for r in runs if plots.has_failures(r)]
    if not failing:
        return ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in
                   ["run", *[h for _, h, _ in FAILURE_COLUMNS]])
    rows = []
    for run in failing:
        cells = [f"<td>{html.escape(run.label)}</td>"]
        cells += [_cell(run.summary.get(k), fmt, 1.0) for k, _, fmt in FAILURE_COLUMNS]
        rows.append(f'<tr data-run="{html.escape(run.label, quote=True)}">{"".join(cells)}</tr>')
    parts = ['<h2 id="failures">Failures: effective training time and lost GPU-hours</h2>',
             '<p class="note">ETTR: productive time / wall time from a job\'s first start '
             "to its end (mean over jobs; GPU-weighted: productive / wall GPU-hours). Lost "
             "GPU-hours by cause: recomputing work lost since the last checkpoint, writing "
             "checkpoints, restarting, waiting for capacity after an interruption "
             '(<a href="#fig-ettr">figure</a>; docs/failures.md).</p>',
             f'<table class="sortable" id="failures-table"><thead><tr>{head}</tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table>']
    sizes = {run.label: plots.ettr_by_size(run) for run in failing}
    buckets = list(dict.fromkeys(b for t in sizes.values() for b in t["bucket"]))
    if buckets:
        from schedlab.sim.failure_stats import SIZE_BUCKETS

        order = {plots.size_bucket(lo): i for i, (lo, _) in enumerate(SIZE_BUCKETS)}
        buckets.sort(key=lambda b: order.get(b, len(order)))
        head = "".join(f"<th>{html.escape(h)}</th>" for h in
                       ["run", *[f"{b} GPUs" for b in buckets]])
        rows = []
        for run in failing:
            table = sizes[run.label].set_index("bucket")
            cells = [f"<td>{html.escape(run.label)}</td>"]
            for b in buckets:
                if b in table.index:
                    v, n = float(table.loc[b, "ettr_mean"]), int(table.loc[b, "jobs"])
                    cells.append(f'<td data-value="{_exact(v)}" title="{_exact(v)}">'
                                 f"{v:.3f} ({n})</td>")
                else:
                    cells.append('<td data-value="nan">-</td>')
            rows.append(f'<tr data-run="{html.escape(run.label, quote=True)}">'
                        f'{"".join(cells)}</tr>')
        parts += ['<h3 id="ettr-by-size">ETTR by job size (mean over jobs; jobs in '
                  "brackets)</h3>",
                  f'<table class="sortable" id="ettr-by-size-table"><thead><tr>{head}</tr>'
                  f'</thead><tbody>{"".join(rows)}</tbody></table>']
    causes = sorted({c for r in failing
                     for c in (r.summary.get("interruptions_by_component") or {})})
    if causes:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in ["run", *causes])
        rows = []
        for run in failing:
            got = run.summary.get("interruptions_by_component") or {}
            cells = [f"<td>{html.escape(run.label)}</td>"]
            cells += [_cell(got.get(c, 0), "{:.0f}", 1.0) for c in causes]
            rows.append(f'<tr data-run="{html.escape(run.label, quote=True)}">'
                        f'{"".join(cells)}</tr>')
        parts += ['<h3 id="interruptions">Interruptions by component</h3>',
                  f'<table class="sortable" id="interruptions-table"><thead><tr>{head}</tr>'
                  f'</thead><tbody>{"".join(rows)}</tbody></table>']
    return "\n".join(parts)


def report_figures(runs: Sequence[RunData], sweep: pd.DataFrame | None, *,
                   max_lines: int = 12, metrics: Sequence[str] | None = None,
                   note: Callable[[str], None] | None = None) -> list[ReportFigure]:
    """Every figure of the report, drawn with `schedlab.app.plots` (panels for many runs)."""
    say = note or (lambda _m: None)
    out: list[ReportFigure] = []
    many = len(runs) > max_lines

    def add(fig_id: str, caption: str, fig: Any) -> None:
        out.append(ReportFigure(fig_id, caption, _png(fig)))

    replicas = plots.has_replicas(runs)
    add("comparison", "Main metrics per policy (error bars: 95% confidence interval over "
        "replicas)." if replicas else "Main metrics per policy (error bars: std over seeds).",
        plots.comparison_figure(runs))
    if len(runs) > plots.MAX_PANELS * max_lines:
        say(f"{len(runs)} runs: per-run CDFs, timelines and tenants left out (more than "
            f"{plots.MAX_PANELS} panels of {max_lines})")
    else:
        add("jct-cdf", "CDF of job completion time (completed jobs).",
            plots.cdf_figure(runs, "jct", max_lines))
        add("queueing-cdf", "CDF of queueing delay (every job not rejected; a job still "
            "waiting at the end counts its wait to the end).",
            plots.cdf_figure(runs, "queueing_delay", max_lines))
        add("timeline", "GPU utilization and fragmentation over simulated time.",
            plots.timeline_figure(runs, max_lines))
        add("queue", "Pending jobs over simulated time.", plots.queue_figure(runs, max_lines))
        add("tenants", "Per-tenant fairness (tenants.parquet): GPU-hours received vs "
            "demanded and queueing delay per tenant.",
            plots.tenants_heatmap_figure(runs) if many else plots.tenants_figure(runs))
    failing = [r for r in runs if plots.has_failures(r)]
    if failing:
        add("ettr", "Effective training time ratio against job size (per run: mean ETTR of "
            "each job-size bucket, and GPU-weighted, dashed).", plots.ettr_figure(failing))
    if sweep is not None:
        xs = [c for c in plots.varied_axes(sweep) if c not in ("seed", "policy")
              and pd.api.types.is_numeric_dtype(sweep[c])]
        shown = ["jct_mean", "queueing_delay_mean"]
        if "ettr_mean" in sweep.columns and sweep["ettr_mean"].notna().any():
            shown.append("ettr_mean")  # runs with failures: ETTR against, say, the interval
        for x in xs:
            for metric in metrics or shown:
                bars = ("mean over replicas; error bars: 95% confidence interval "
                        "(Student t)" if replicas else "mean over seeds; error bars: one "
                        "standard deviation over seeds")
                add(f"sweep-{metric}-vs-{plots._slug(x)}",
                    f"{metric} against {x.removeprefix('params.')} ({bars}).",
                    plots.sweep_figure(sweep, x, metric))
    return out


def _config_of(run: RunData) -> dict[str, Any]:
    if run.folder is None:
        return {}
    path = run.folder / "config.json"
    try:
        return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {}
    except (OSError, ValueError):
        return {"error": f"cannot read {path}"}


def build_report(paths: Sequence[str | os.PathLike[str]], *, title: str | None = None,
                 max_lines: int = 12, metrics: Sequence[str] | None = None,
                 note: Callable[[str], None] | None = None) -> str:
    """The report's HTML for the results at `paths` (run, runs or sweep folders).

    Raises:
        SimError: No results there (names the path and what was expected).
    """
    runs, sweep = load_results(paths)
    if not runs:
        raise SimError(f"no finished runs in {', '.join(str(p) for p in paths)}")
    figures = report_figures(runs, sweep, max_lines=max_lines, metrics=metrics, note=note)
    name = title or ", ".join(Path(p).resolve().name for p in paths)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>schedlab report: {html.escape(name)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>schedlab report: {html.escape(name)}</h1>",
        f'<p class="note">{len(runs)} run(s) from {html.escape(", ".join(map(str, paths)))}'
        f'{"; a sweep of " + str(len(sweep)) + " finished run(s)" if sweep is not None else ""}'
        ". Times in the table are in the unit each header names (hours for long runs, "
        "seconds otherwise); hover a number for its exact value; click a header to sort."
        "</p>",
        "<h2 id=\"table\">Comparison</h2>",
        summary_table(runs),
    ]
    differ = config_differences(runs) if sweep is None and len(runs) > 1 else []
    if differ:
        parts.append('<h3 id="config-differs">Configurations differ</h3><p class="note">'
                     "These runs differ in more than their policy, so their numbers are not "
                     "comparable side by side:</p><ul>" + "".join(
                         f"<li>{html.escape(line)}</li>" for line in differ) + "</ul>")
    warnings = [(r.label, w) for r in runs for w in (r.summary.get("warnings") or [])]
    if warnings:
        parts.append("<h3>Warnings</h3><ul>" + "".join(
            f"<li>{html.escape(lbl)}: {html.escape(str(w))}</li>" for lbl, w in warnings)
            + "</ul>")
    failures = failure_section(runs)
    if failures:
        parts.append(failures)
    if sweep is not None and len(sweep):
        spread = "95% CI over replicas" if has_replicas(sweep) else "std over seeds"
        parts += [f"<h2 id=\"sweep-table\">Sweep: metrics per point (mean ± {spread})"
                  "</h2>", sweep_table(sweep)]
    parts.append("<h2 id=\"figures\">Figures</h2>")
    for f in figures:
        data = base64.b64encode(f.png).decode("ascii")
        parts.append(f'<figure id="fig-{html.escape(f.fig_id, quote=True)}">'
                     f'<img alt="{html.escape(f.caption, quote=True)}" '
                     f'src="data:image/png;base64,{data}">'
                     f"<figcaption>{html.escape(f.caption)}</figcaption></figure>")
    parts.append("<h2 id=\"configs\">Configurations</h2>"
                 '<p class="note">Everything needed to rerun each run exactly '
                 "(its config.json).</p>")
    for run in runs:
        text = json_text(_config_of(run), sort_keys=True, default=str)
        parts.append(f'<details class="config" data-run="{html.escape(run.label, quote=True)}">'
                     f"<summary>{html.escape(run.label)}</summary>"
                     f"<pre>{html.escape(text)}</pre></details>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(parts)


def write_report(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str],
                 **kwargs: Any) -> Path:
    """Write `build_report(paths)` to `out` atomically; return its path.

    Raises:
        SimError: No results, or the file's folder cannot be written.
    """
    target = Path(out)
    try:
        ensure_writable_dir(target.parent if str(target.parent) else Path("."))
    except FolderNotWritable as e:
        raise SimError(f"report: {e}") from None
    text = build_report(paths, **kwargs)
    return atomic_text(target, text)
