"""The standard figures of docs/contract.md#sec-6, drawn from result folders as PNG.

Figures are built on `matplotlib.figure.Figure` with the Agg canvas, never pyplot, so
plotting has no global state and works the same in a worker, a test or a notebook. Each
`*_figure` function takes loaded runs (or a summary table) and returns a Figure; the
notebooks call them directly, `render_all` writes them all for `schedlab plot`. Loading
result folders is `schedlab.app.plot_runs` (`RunData` and `load_results` are re-exported).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from schedlab.app.plot_runs import IDENTITY_KEYS, RunData, labels_of, load_results, short
from schedlab.app.sweep_summary import mean_ci
from schedlab.sim.errors import SimError
from schedlab.sim.writing import FolderNotWritable, atomic_write, ensure_writable_dir

HOUR = 3600.0

COMPARED = (
    ("jct_mean", "mean JCT", "hours", 1 / HOUR),
    ("queueing_delay_mean", "mean queueing delay", "hours", 1 / HOUR),
    ("makespan", "makespan", "hours", 1 / HOUR),
    ("utilization_mean", "mean GPU utilization", "fraction of GPUs busy", 1.0),
    ("fragmentation_mean", "mean fragmentation", "fraction of free GPUs", 1.0),
    ("fairness_jain", "fairness (Jain's index over users)", "1 = perfectly fair", 1.0),
)
"""Metrics of the policy comparison chart: key, title, unit, scale from summary units."""

METRIC_UNITS = {k: (title, unit, scale) for k, title, unit, scale in COMPARED}
"""How a summary metric is labelled and scaled in figures (seconds become hours)."""

AXIS_LABELS = {
    "load_scale": "load scale (x the trace's arrival rate)",
    "max_jobs": "jobs replayed",
    "until": "simulated horizon (s)",
    "seed": "seed",
}

MAX_PANELS = 6
"""Most panels of runs in one CDF or timeline figure (beyond: those figures are skipped)."""

_HOLD = ("start", "resume", "migrate", "resize")
_RELEASE = ("preempt", "suspend", "finish", "fail", "kill")


# --------------------------------------------------------------------------- figures


def _figure(width: float = 8.0, height: float = 5.0) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _chunks(runs: Sequence[RunData], per_panel: int | None) -> list[Sequence[RunData]]:
    """Runs split into panels of at most `per_panel` (None: one panel), in order."""
    if not per_panel or len(runs) <= per_panel:
        return [runs]
    k = math.ceil(len(runs) / per_panel)
    size = math.ceil(len(runs) / k)  # even panels: 20 runs at 12 a panel are 10 + 10
    return [runs[i:i + size] for i in range(0, len(runs), size)]


def _line_colors(n: int) -> list[tuple[float, ...]]:
    """Distinct colours for n lines of one panel (tab10, then tab20)."""
    from matplotlib import colormaps

    if n <= 10:
        cmap = colormaps["tab10"]
        return [cmap(i) for i in range(n)]
    return [_tab20()[i % 20] for i in range(n)]


def _draw_cdf(ax: object, runs: Sequence[RunData], column: str) -> None:
    """One CDF line per run on `ax`."""
    floor = 1.0 / HOUR
    for run, color in zip(runs, _line_colors(len(runs)), strict=True):
        jobs = run.table("jobs")
        if "status" not in jobs:
            chosen = jobs
        elif column == "queueing_delay":
            chosen = jobs[jobs["status"] != "rejected"]
        else:
            chosen = jobs[jobs["status"] == "completed"]
        v = np.sort(chosen[column].dropna().to_numpy(dtype=float)) / HOUR
        if v.size == 0:
            continue
        y = np.arange(1, v.size + 1) / v.size
        cut = int(chosen["censored"].sum()) if column == "queueing_delay" \
            and "censored" in chosen else 0
        note = f", {cut} censored at the run's end" if cut else ""
        ax.step(np.maximum(v, floor), y, where="post",  # type: ignore[attr-defined]
                color=color, label=f"{run.label} (n={v.size}{note})")


def cdf_figure(runs: Sequence[RunData], column: str = "jct",
               per_panel: int | None = None) -> Figure:
    """CDF of a per-job time (`jct` or `queueing_delay`) per run, log time axis in hours.

    JCT is over completed jobs; queueing delay over every job not rejected, as in the
    summary: a job still waiting when the run ended counts its wait up to the end
    (`censored`; the legend says how many). More runs than `per_panel` are drawn in
    panels side by side (same axes), so every run stays readable.
    """
    what = {"jct": "job completion time (JCT)", "queueing_delay": "queueing delay"}[column]
    chunks = _chunks(runs, per_panel)
    cols = min(2, len(chunks))
    rows = math.ceil(len(chunks) / cols)
    fig = _figure(8.0 if cols == 1 else 14.0, 5.0 if rows == 1 else 5.5 * rows)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=False,
                                      squeeze=False)).ravel()
    note = "; 0 drawn at 1 s" if column == "queueing_delay" else ""
    for i, ax in enumerate(axes):
        if i >= len(chunks):
            ax.set_visible(False)
            continue
        _draw_cdf(ax, chunks[i], column)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.01)
        ax.set_xlabel(f"{what} (hours, log scale{note})")
        ax.set_ylabel("fraction of jobs not rejected" if column == "queueing_delay"
                      else "fraction of completed jobs")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize="x-small" if len(chunks) > 1 else "small")
        if len(chunks) > 1:
            ax.set_title(f"runs {sum(len(c) for c in chunks[:i]) + 1}-"
                         f"{sum(len(c) for c in chunks[:i + 1])} of {len(runs)}",
                         fontsize="medium")
    title = f"CDF of {what} per policy"
    if len(chunks) > 1:
        fig.suptitle(title)
    else:
        axes[0].set_title(title)
    return fig


def tenant_kind(runs: Sequence[RunData]) -> str:
    """"vc" when some run has more than one virtual cluster, else "user"."""
    for run in runs:
        t = run.table("tenants")
        if int((t["kind"] == "vc").sum()) > 1:
            return "vc"
    return "user"



def _top_tenants(runs: Sequence[RunData], top: int
                 ) -> tuple[str, list[pd.DataFrame], list[Any], int]:
    """Tenant kind, each run's tenant table, the `top` tenants and the number of tenants.

    Tables are indexed by tenant; the top are by GPU-hours demanded. Tenants are VCs when
    a run has several, else users (`tenant_kind`); a tenant's demand is the most any run
    demanded, largest first (stable on ties).
    """
    kind = tenant_kind(runs)
    tables = []
    for run in runs:
        t = run.table("tenants")
        tables.append(t[t["kind"] == kind].set_index("tenant"))
    demand = pd.concat([t["gpu_hours_demanded"] for t in tables]).groupby(level=0).max() \
        if tables else pd.Series(dtype=float)
    names = list(demand.sort_values(ascending=False, kind="stable").index[:top])
    return kind, tables, names, len(demand)

def tenants_figure(runs: Sequence[RunData], top: int = 10) -> Figure:
    """Per tenant and run: GPU-hours received vs demanded, and queueing delay.

    Tenants are virtual clusters when a run has more than one, else users; the `top`
    tenants by GPU-hours demanded (most demanded over the runs) are drawn, largest first.
    Left: bars of GPU-hours received, a black tick at the GPU-hours demanded. Right: bars
    of the mean queueing delay, a black dot at its p95 (censored waits counted to the
    end of the run, as in the summary).
    """
    kind, tables, names, total = _top_tenants(runs, top)
    n, k = len(names), max(1, len(runs))
    fig = _figure(13, max(4.0, 1.5 + 0.22 * n * k + 0.15 * n))
    ax_g, ax_q = fig.subplots(1, 2)
    colors = _tab20()[0::2]
    width = 0.8 / k
    base = np.arange(n)
    for i, (run, t) in enumerate(zip(runs, tables, strict=True)):
        t = t.reindex(names)
        y = base - 0.4 + width * (i + 0.5)
        color = colors[i % len(colors)]
        ax_g.barh(y, t["gpu_hours_received"].fillna(0.0), height=width, color=color,
                  label=run.label)
        ax_g.scatter(t["gpu_hours_demanded"], y, marker="|", s=200, color="black",
                     zorder=3, label="demanded" if i == 0 else None)
        ax_q.barh(y, t["queueing_delay_mean"].fillna(0.0) / HOUR, height=width, color=color,
                  label=run.label)
        ax_q.scatter(t["queueing_delay_p95"] / HOUR, y, marker="o", s=12, color="black",
                     zorder=3, label="p95" if i == 0 else None)
    who = f"{'virtual cluster' if kind == 'vc' else 'user'} (most GPU-hours demanded first)"
    for ax in (ax_g, ax_q):
        ax.set_yticks(base, [str(x) or "(no name)" for x in names], fontsize="small")
        ax.invert_yaxis()
        ax.set_ylabel(who)
    ax_g.set_xlabel("GPU-hours (bars: received; black ticks: demanded)")
    ax_q.set_xlabel("queueing delay (hours; bars: mean, dots: p95)")
    ax_g.set_title("GPU-hours received vs demanded", fontsize="medium")
    ax_q.set_title("Queueing delay", fontsize="medium")
    for ax in (ax_g, ax_q):
        ax.grid(True, axis="x", alpha=0.3)
        if n:
            ax.legend(loc="lower right", fontsize="small")
    shown = f"top {n} of {total}" if total > n else f"all {total}"
    fig.suptitle(f"Per-{kind} GPU time and queueing delay per policy ({shown} {kind}s)")
    return fig


TIMELINE_BINS = 200
"""Time windows of the utilization/fragmentation figure: each point is a window's
time-weighted mean, so a value that flips between 0 and 1 shows as its average."""


def windowed_mean(t: np.ndarray, v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean of the step function (value v[i] from t[i] on) in each window.

    Windows are [edges[k], edges[k+1]); before t[0] the function counts as 0, after the
    last time it keeps its last value.
    """
    if len(t) == 0:
        return np.zeros(len(edges) - 1)
    v = np.nan_to_num(np.asarray(v, dtype=float))
    t = np.asarray(t, dtype=float)
    cum = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])  # integral up to t[i]
    i = np.searchsorted(t, edges, side="right") - 1
    before = i < 0
    i = np.clip(i, 0, len(t) - 1)
    area = np.where(before, 0.0, cum[i] + v[i] * (edges - t[i]))
    width = np.diff(edges)
    return np.divide(np.diff(area), width, out=np.zeros(len(width)), where=width > 0)


def timeline_figure(runs: Sequence[RunData], per_panel: int | None = None) -> Figure:
    """Utilization and fragmented free GPUs over simulated time: one small panel per run.

    Each curve is a time-weighted mean over windows of 1/TIMELINE_BINS of the time span
    (`windowed_mean`), so a few free GPUs flipping between fragmented and not show as
    their average; fragmentation is weighted by the free GPUs (free GPUs outside fully
    free nodes, as a share of all GPUs), which stays small when few GPUs are free. Panels
    share the time axis and one 0..1 scale, so twenty policies read side by side.
    `per_panel` is kept for callers; every run has its own panel.
    """
    del per_panel
    tables = [run.table("timeline") for run in runs]
    ends = [float(tl["time"].max()) for tl in tables if len(tl)]
    starts = [float(tl["time"].min()) for tl in tables if len(tl)]
    t0, t1 = (min(starts), max(ends)) if ends else (0.0, 1.0)
    edges = np.linspace(t0, t1 if t1 > t0 else t0 + 1.0, TIMELINE_BINS + 1)
    mid = (edges[:-1] + edges[1:]) / 2 / HOUR
    n = max(1, len(runs))
    cols = 1 if n == 1 else 2 if n <= 6 else 3 if n <= 12 else 4
    rows = math.ceil(n / cols)
    fig = _figure(9 if cols == 1 else 3.4 * cols, 1.2 + 1.7 * rows)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=False,
                                      squeeze=False)).ravel()
    for ax, run, tl in zip(axes, runs, tables, strict=False):
        t = tl["time"].to_numpy(dtype=float)
        util = windowed_mean(t, tl["utilization"].to_numpy(dtype=float), edges)
        total = tl["gpus_total"].to_numpy(dtype=float)
        free = np.clip(total - tl["gpus_busy"].to_numpy(dtype=float), 0.0, None)
        share = np.divide(free * tl["fragmentation"].to_numpy(dtype=float), total,
                          out=np.zeros(len(t)), where=total > 0)
        frag = windowed_mean(t, share, edges)
        ax.plot(mid, util, lw=1.0, color="tab:blue", label="utilization")
        ax.fill_between(mid, 0, frag, color="tab:red", alpha=0.45, lw=0,
                        label="fragmented free GPUs")
        ax.set_title(run.label, fontsize="small")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(runs):]:
        ax.set_visible(False)
    for r in range(rows):
        axes[r * cols].set_ylabel("share of GPUs")
    for ax in axes[(rows - 1) * cols:]:
        ax.set_xlabel("simulated time (hours)")
    axes[0].legend(loc="upper right", fontsize="x-small")
    fig.suptitle("GPU utilization (busy / healthy GPUs) and fragmented free GPUs (free "
                 "GPUs outside fully free nodes / all GPUs),\ntime-weighted means over "
                 f"{TIMELINE_BINS} windows")
    return fig


def queue_figure(runs: Sequence[RunData], per_panel: int | None = None) -> Figure:
    """Pending jobs (queue length) over simulated time, one line per run (panels as above)."""
    chunks = _chunks(runs, per_panel)
    fig = _figure(8 if len(chunks) == 1 else 12, 5 if len(chunks) == 1 else 3.5 * len(chunks))
    axes = np.atleast_1d(fig.subplots(len(chunks), 1, sharex=True, sharey=True)).ravel()
    for ax, chunk in zip(axes, chunks, strict=True):
        for run, color in zip(chunk, _line_colors(len(chunk)), strict=True):
            tl = run.table("timeline")
            ax.step(tl["time"].to_numpy(dtype=float) / HOUR, tl["pending_jobs"],
                    where="post", lw=0.8, color=color, label=run.label)
        ax.set_ylabel("pending jobs")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize="small" if len(chunks) == 1 else "x-small",
                  ncol=1 if len(chunk) <= 6 else 2)
    axes[-1].set_xlabel("simulated time (hours)")
    axes[0].set_title("Queue length over time")
    return fig


def tenants_heatmap_figure(runs: Sequence[RunData], top: int = 12) -> Figure:
    """Per tenant (columns) and run (rows): share of demand received, and queueing delay.

    The compact form of `tenants_figure` for many runs: left, GPU-hours received /
    GPU-hours demanded (1 = got everything it asked for); right, mean queueing delay in
    hours. Tenants as in `tenants_figure` (VCs when a run has several, else users), the
    `top` by GPU-hours demanded.
    """
    kind, tables, names, total = _top_tenants(runs, top)
    ratio = np.full((len(runs), len(names)), np.nan)
    delay = np.full((len(runs), len(names)), np.nan)
    for i, t in enumerate(tables):
        t = t.reindex(names)
        dem = t["gpu_hours_demanded"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio[i] = np.where(dem > 0, t["gpu_hours_received"].to_numpy(dtype=float) / dem,
                                np.nan)
        delay[i] = t["queueing_delay_mean"].to_numpy(dtype=float) / HOUR
    fig = _figure(14, max(4.0, 1.8 + 0.32 * len(runs)))
    axes = fig.subplots(1, 2)
    short_names = [(str(x) or "(no name)")[:10] for x in names]
    for ax, data, title, cmap in (
            (axes[0], ratio, "GPU-hours received / demanded", "viridis"),
            (axes[1], delay, "mean queueing delay (hours)", "magma_r")):
        im = ax.imshow(data, aspect="auto", cmap=cmap, interpolation="nearest")
        ax.set_xticks(np.arange(len(names)), short_names, rotation=45, ha="right",
                      fontsize="x-small")
        ax.set_yticks(np.arange(len(runs)), [r.label for r in runs], fontsize="small")
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel(f"{kind} (most GPU-hours demanded first)")
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"Per-{kind} fairness per policy (top {len(names)} of {total} {kind}s)")
    return fig


def gantt_intervals(events: pd.DataFrame) -> pd.DataFrame:
    """Holding intervals from an event log: job, node, GPUs, start, end (s).

    A start, resume, migrate or resize opens an interval on the event's cells
    (`node:count;...`); preempt, suspend, finish, fail or kill closes it. Intervals still
    open at the last event end there.
    """
    open_: dict[str, tuple[float, list[tuple[str, int]]]] = {}
    rows: list[tuple[str, str, int, float, float]] = []
    end = float(events["time"].max()) if len(events) else 0.0

    def close(job: str, t: float) -> None:
        if job in open_:
            t0, cells = open_.pop(job)
            rows.extend((job, node, k, t0, t) for node, k in cells)

    for t, job, kind, cells in events[["time", "job_id", "kind", "cells"]].itertuples(
            index=False):
        if kind in _HOLD:
            close(job, float(t))
            parsed = []
            for part in str(cells or "").split(";"):
                node, _, k = part.partition(":")
                if node:
                    parsed.append((node, int(k or 1)))
            if parsed:
                open_[job] = (float(t), parsed)
        elif kind in _RELEASE:
            close(job, float(t))
    for job in list(open_):
        close(job, end)
    return pd.DataFrame(rows, columns=["job_id", "node", "gpus", "start", "end"])


def _node_key(name: str) -> tuple:
    """Natural order of node names: node2 before node10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def gantt_figure(run: RunData) -> Figure:
    """GPUs on the y axis grouped by node (cell), one bar per job holding them over time.

    The event log records GPUs per node, not GPU indices, so each node's rows are GPU
    slots assigned greedily (lowest free slot), as many as the node ever used at once.
    """
    iv = gantt_intervals(run.table("events"))
    nodes = sorted(iv["node"].unique(), key=_node_key) if len(iv) else []
    jobs = list(dict.fromkeys(iv["job_id"]))
    color_of = {j: i % 20 for i, j in enumerate(jobs)}
    lanes: dict[str, list[float]] = {n: [] for n in nodes}  # free-from time per slot
    bars: dict[tuple[str, int], list[tuple[float, float, int]]] = {}
    for job, node, k, t0, t1 in iv.sort_values(["start", "end"], kind="stable").itertuples(
            index=False):
        slots = lanes[node]
        free = [i for i, f in enumerate(slots) if f <= t0][:k]
        while len(free) < k:
            slots.append(0.0)
            free.append(len(slots) - 1)
        for i in free:
            slots[i] = t1
            bars.setdefault((node, i), []).append((t0, t1 - t0, color_of[job]))
    height = min(14.0, 2.5 + 0.12 * sum(len(v) for v in lanes.values()))
    fig = _figure(10, height)
    ax = fig.add_subplot()
    cmap = _tab20()
    y, ticks, labels = 0, [], []
    for node in nodes:
        n_slots = len(lanes[node])
        for i in range(n_slots):
            segs = bars.get((node, i), [])
            if segs:
                ax.broken_barh([(a / HOUR, w / HOUR) for a, w, _ in segs], (y + i + 0.1, 0.8),
                               facecolors=[cmap[c] for _, _, c in segs], edgecolor="none")
        ticks.append(y + n_slots / 2)
        labels.append(f"{node} ({n_slots})")
        y += n_slots
        ax.axhline(y, color="grey", lw=0.5)
    ax.set_yticks(ticks, labels, fontsize="small")
    ax.set_ylim(0, max(y, 1))
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("GPUs by node (cell); slots used at once in brackets")
    ax.set_title(f"Gantt chart of GPU allocation: {run.label} ({len(jobs)} jobs, colour = job)")
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def _tab20() -> list[tuple[float, ...]]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return [cmap(i) for i in range(20)]


def comparison_table(runs: Sequence[RunData]) -> pd.DataFrame:
    """Per label (runs differing only by seed or replica pooled): statistics of each metric.

    Mean, std, count and the half-width of the 95% Student-t interval (`ci95`) of each metric.
    """
    idents = [r.identity for r in runs]
    labels = labels_of(idents, skip=("seed", "replica")) if idents else []
    rows = [{"label": lbl, **{k: r.summary.get(k, math.nan) for k, *_ in COMPARED}}
            for lbl, r in zip(labels, runs, strict=True)]
    frame = pd.DataFrame(rows, columns=["label", *[k for k, *_ in COMPARED]])
    frame[[k for k, *_ in COMPARED]] = frame[[k for k, *_ in COMPARED]].astype(float)
    return frame.groupby("label", sort=False).agg(["mean", "std", "count", ci95])


def ci95(values: pd.Series) -> float:
    """Half-width of the 95% Student-t interval of the mean (NaN below two values)."""
    return mean_ci(values.tolist())[1]


def has_replicas(runs: Sequence[RunData]) -> bool:
    """True when some run is a shaken replica of a sweep (`replicas:`)."""
    return any(r.identity.get("replica") is not None for r in runs)


def replica_note(halves: Sequence[float] | np.ndarray, replicas: int) -> str:
    """What a figure says of its replicas.

    Their count and 95% intervals, or that the shaking changed nothing (all intervals
    of zero width).
    """
    if replicas <= 1:
        return ""
    spread = np.nan_to_num(np.asarray(halves, dtype=float))
    if not np.any(spread > 0):
        return f"{replicas} replicas, identical results: the shaking changed nothing"
    return f"mean over {replicas} replicas, error bars: 95% CI (Student t)"


def seed_note(stds: Sequence[float] | np.ndarray, seeds: int) -> str:
    """What a figure may say of its seeds: a mean with error bars only when they vary.

    A deterministic policy on a fixed trace gives the same numbers for every seed; a
    "mean over N seeds" with a zero spread would claim a replication there is none of.
    """
    if seeds <= 1:
        return ""
    spread = np.nan_to_num(np.asarray(stds, dtype=float))
    if not np.any(spread > 0):
        return f"{seeds} seeds, identical results: these runs do not depend on the seed"
    return f"mean over {seeds} seeds, error bars: std"


def comparison_figure(runs: Sequence[RunData]) -> Figure:
    """Bar chart of the main summary metrics per policy (mean and error bars).

    Error bars are the std over seeds, or the 95% confidence interval over replicas when
    the runs are shaken replicas.
    """
    table = comparison_table(runs)
    n = len(table)
    fig = _figure(13, max(4.5, 1.2 + 0.35 * n * 2))
    axes = fig.subplots(2, 3).ravel()
    ypos = np.arange(n)
    seeds = int(table[(COMPARED[0][0], "count")].max()) if n else 0
    spread = "ci95" if has_replicas(runs) else "std"
    bars: np.ndarray | list[float] = np.concatenate(
        [table[(k, spread)].to_numpy() for k, *_ in COMPARED]) if n else []
    note = replica_note(bars, seeds) if spread == "ci95" else seed_note(bars, seeds)
    for ax, (key, title, unit, scale) in zip(axes, COMPARED, strict=True):
        mean = table[(key, "mean")].to_numpy() * scale
        std = np.nan_to_num(table[(key, spread)].to_numpy() * scale)
        ax.barh(ypos, mean, xerr=std if seeds > 1 else None, color=_tab20()[0::2][:n] or None,
                capsize=3)
        ax.set_yticks(ypos, list(table.index) if ax in (axes[0], axes[3]) else [""] * n,
                      fontsize="small")
        ax.invert_yaxis()
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel(unit)
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"Policy comparison{'; ' + note if note else ''}")
    return fig


def varied_axes(sweep: pd.DataFrame) -> list[str]:
    """Sweep columns (run parameters, `params.*`) that take more than one value."""
    cols = [c for c in sweep.columns if c in IDENTITY_KEYS or c.startswith("params.")]
    return [c for c in cols if sweep[c].astype(str).nunique(dropna=False) > 1]


def sweep_figure(sweep: pd.DataFrame, x: str, metric: str = "jct_mean") -> Figure:
    """A metric against a numeric sweep axis, one line per policy (and other varied axes).

    Points are the mean over seeds; error bars are one standard deviation over seeds.
    When the seeds change nothing the title says so instead (`seed_note`). A sweep with
    replicas (a `replica` column) pools seeds and replicas: error bars are the 95%
    Student-t interval of the mean (`replica_note`).
    """
    if metric not in sweep:
        raise SimError(f"metric {metric!r} not in the sweep summary; known: "
                       f"{', '.join(c for c in sweep.columns if sweep[c].dtype.kind == 'f')}")
    title, unit, scale = METRIC_UNITS.get(metric, (metric, "", 1.0))
    group_by = [c for c in varied_axes(sweep) if c not in (x, "seed")] or ["policy"]
    fig = _figure()
    ax = fig.add_subplot()
    data = sweep.assign(_y=sweep[metric].astype(float) * scale)
    replicas = "replica" in sweep and bool(sweep["replica"].notna().any())
    spread = ci95 if replicas else "std"
    seeds = 1
    stds: list[float] = []
    for key, part in data.groupby(group_by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        stats = part.groupby(x)["_y"].agg(["mean", spread, "count"]).sort_index()
        stats.columns = ["mean", "spread", "count"]
        seeds = max(seeds, int(stats["count"].max()))
        stds += stats["spread"].tolist()
        label = ", ".join(f"{c.removeprefix('params.')}={short(v)}" if c != "policy"
                          else str(v) for c, v in zip(group_by, key, strict=True))
        ax.errorbar(stats.index.to_numpy(dtype=float), stats["mean"],
                    yerr=np.nan_to_num(stats["spread"].to_numpy()), marker="o", capsize=3,
                    label=label)
    ax.set_xlabel(AXIS_LABELS.get(x, x.removeprefix("params.")))
    ax.set_ylabel(f"{title} ({unit})" if unit else title)
    note = replica_note(stds, seeds) if replicas else seed_note(stds, seeds)
    spread = f" ({note})" if note else ""
    ax.set_title(f"{title} vs {x.removeprefix('params.').replace('_', ' ')}{spread}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def has_failures(run: RunData) -> bool:
    """True when the run has the failure layer's metrics (`ettr_mean` in its summary)."""
    return "ettr_mean" in run.summary


def size_bucket(num_gpus: int) -> str:
    """The job-size bucket of `mttf_hours_by_size` a GPU count falls in ('2-8', '513-4096')."""
    from schedlab.sim.failure_stats import SIZE_BUCKETS

    for lo, hi in SIZE_BUCKETS:
        if lo <= num_gpus <= hi:
            return f"{lo}" if lo == hi else (f"{lo}+" if hi >= 1 << 62 else f"{lo}-{hi}")
    return "0"


def ettr_by_size(run: RunData) -> pd.DataFrame:
    """ETTR per job-size bucket (in size order) of a failure-layer run.

    Columns: jobs with an ETTR, its mean, and the GPU-weighted ETTR (productive / wall
    GPU-hours) of the bucket.
    """
    jobs = run.table("jobs")
    cols = ["bucket", "jobs", "ettr_mean", "ettr_gpu_weighted"]
    if "ettr" not in jobs or not len(jobs):
        return pd.DataFrame(columns=cols)
    lost = [c for c in jobs.columns if c.startswith("lost_") and c.endswith("_gpu_hours")]
    frame = jobs[jobs["ettr"].notna()].assign(
        bucket=lambda f: [size_bucket(int(n)) for n in f["num_gpus"]],
        _size=lambda f: f["num_gpus"].astype(int),
        _wall=lambda f: f["productive_gpu_hours"] + f[lost].sum(axis=1))
    rows = []
    for bucket, part in frame.groupby("bucket", sort=False):
        wall = float(part["_wall"].sum())
        rows.append((int(part["_size"].min()), bucket, len(part), float(part["ettr"].mean()),
                     float(part["productive_gpu_hours"].sum()) / wall if wall > 0
                     else math.nan))
    rows.sort()
    return pd.DataFrame([r[1:] for r in rows], columns=cols)


def ettr_figure(runs: Sequence[RunData]) -> Figure:
    """Effective training time ratio against job size.

    Per run, the mean ETTR of each job-size bucket (points) and its GPU-weighted ETTR
    (dashed), sizes on a log axis.
    """
    fig = _figure(8.0, 5.0)
    ax = fig.add_subplot()
    for run, color in zip(runs, _line_colors(len(runs)), strict=True):
        table = ettr_by_size(run)
        if not len(table):
            continue
        jobs = run.table("jobs")
        sizes = [float(jobs.loc[[size_bucket(int(n)) == b for n in jobs["num_gpus"]],
                                "num_gpus"].median()) for b in table["bucket"]]
        ax.plot(sizes, table["ettr_mean"], marker="o", color=color,
                label=f"{run.label} (mean per job)")
        ax.plot(sizes, table["ettr_gpu_weighted"], ls="--", color=color, alpha=0.7,
                label=f"{run.label} (GPU-weighted)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("job size (GPUs, median of each size bucket; log scale)")
    ax.set_ylabel("ETTR (productive time / wall time)")
    ax.set_title("Effective training time ratio against job size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


# --------------------------------------------------------------------------- writing


def save_png(fig: Figure, path: str | os.PathLike[str], dpi: int = 110) -> Path:
    """Write a figure as PNG atomically (`schedlab.sim.writing.atomic_write`: umask mode)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")[:80]


def render_all(paths: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str], *,
               metrics: list[str] | None = None, gantt_max_jobs: int = 300,
               max_lines: int = 12, note: Callable[[str], None] | None = None) -> list[Path]:
    """Write every figure that applies to the results at `paths`; return the PNG paths."""
    say = note or (lambda _m: None)
    runs, sweep = load_results(paths)
    out = Path(out_dir)
    try:
        ensure_writable_dir(out)  # before drawing anything
    except FolderNotWritable as e:
        raise SimError(f"figures: {e}") from None
    made: list[Path] = []
    many = len(runs) > max_lines
    if len(runs) > MAX_PANELS * max_lines:
        say(f"{len(runs)} runs: CDF, timeline and tenant figures skipped (more than "
            f"{MAX_PANELS} panels of --max-lines {max_lines}); pass fewer run folders")
    else:
        if many:
            say(f"{len(runs)} runs: CDFs and timelines drawn in panels of at most "
                f"--max-lines {max_lines}, tenants as a heatmap")
        made.append(save_png(cdf_figure(runs, "jct", max_lines), out / "jct_cdf.png"))
        made.append(save_png(cdf_figure(runs, "queueing_delay", max_lines),
                             out / "queueing_delay_cdf.png"))
        made.append(save_png(timeline_figure(runs, max_lines),
                             out / "utilization_fragmentation.png"))
        made.append(save_png(queue_figure(runs, max_lines), out / "queue_length.png"))
        made.append(save_png(tenants_heatmap_figure(runs) if many else tenants_figure(runs),
                             out / "tenants.png"))
    made.append(save_png(comparison_figure(runs), out / "policy_comparison.png"))
    failing = [r for r in runs if has_failures(r)]
    if failing:
        made.append(save_png(ettr_figure(failing), out / "ettr_vs_size.png"))
    small = [r for r in runs if r.summary.get("jobs_submitted", math.inf) <= gantt_max_jobs]
    if not many:
        for run in small:
            made.append(save_png(gantt_figure(run), out / f"gantt_{_slug(run.label)}.png"))
        if len(runs) > len(small):
            say(f"Gantt charts only for runs of at most {gantt_max_jobs} jobs "
                "(--gantt-max-jobs)")
    if sweep is not None:
        xs = [c for c in varied_axes(sweep) if c != "seed" and c != "policy"
              and pd.api.types.is_numeric_dtype(sweep[c])]
        if not xs:
            say("the sweep varies no numeric axis: no metric-vs-parameter plot")
        for x in xs:
            for metric in metrics or ["jct_mean", "queueing_delay_mean"]:
                fig = sweep_figure(sweep, x, metric)
                made.append(save_png(fig, out / f"sweep_{metric}_vs_{_slug(x)}.png"))
    return made
