"""What a sweep folder holds: finished runs, summary.parquet, replicas.parquet, the --dry-run table.

With `replicas:`, replicas.parquet has one row per configuration (the runs that differ
only in their replica): each numeric summary metric's mean over the finished replicas
and the half-width of its 95% confidence interval (Student t, `mean_ci`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.sim.writing import atomic_write

if TYPE_CHECKING:
    import pandas as pd

    from schedlab.app.sweep_file import Sweep

RESERVED_COLUMNS = ("run_id", "folder", "status", "error")
"""Leading columns of summary.parquet, before the run's parameters and metrics."""


def is_finished(folder: Path) -> bool:
    """A run folder is finished when its summary.json exists (SimResult.write writes it last)."""
    return (folder / "summary.json").is_file()


def summary_frame(sweep: Sweep, root: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per run in sweep order: status, error, parameters and summary metrics."""
    import pandas as pd

    base = Path(root)
    rows = []
    for p in sweep.points:
        folder = base / p.folder
        row: dict[str, Any] = {"run_id": p.run_id, "folder": p.folder}
        if is_finished(folder):
            row.update(status="ok", error="")
        elif (folder / "error.json").is_file():
            err = json.loads((folder / "error.json").read_text(encoding="utf-8"))
            row.update(status="failed", error=str(err.get("error", "")))
        else:
            row.update(status="not run", error="")
        row.update(p.columns())
        for col in sweep.param_columns:
            row.setdefault(col, None)
        if row["status"] == "ok":
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            for k, v in summary.items():
                if k not in row and k != "params":
                    row[k] = _summary_cell(v)
        rows.append(row)
    frame = pd.DataFrame(rows)
    for col in frame.columns:  # a column of only missing values still gets a stable dtype
        if frame[col].isna().all():
            frame[col] = frame[col].astype("float64")
    return frame


def write_summary(sweep: Sweep, root: str | os.PathLike[str]) -> Path:
    """Write OUT/summary.parquet atomically (and replicas.parquet for replicas); its path."""
    path = Path(root) / "summary.parquet"
    frame = summary_frame(sweep, root)
    atomic_write(path, lambda p: frame.to_parquet(p, index=False))
    if sweep.replicas:
        table = replicas_frame(frame)
        atomic_write(Path(root) / "replicas.parquet",
                     lambda p: table.to_parquet(p, index=False))
    return path


CONFIDENCE = 0.95
"""Level of the replica confidence intervals."""

REPLICA_COLUMNS = ("replica", "replica_seed")
"""Summary columns that tell replicas of one configuration apart."""

NOT_METRICS = frozenset({"seed", "wall_seconds", "events_processed", "replica",
                         "replica_seed", "load_scale", "max_jobs", "until"})
"""Numeric summary columns that are inputs or machine cost, not results to aggregate."""


def mean_ci(values: Sequence[float], level: float = CONFIDENCE) -> tuple[float, float, int]:
    """(mean, half-width of the `level` Student-t interval, n) of the finite values.

    The half-width is t(1 - (1 - level) / 2, n - 1) x std / sqrt(n) (std with n - 1);
    NaN for fewer than two values.
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(xs) / n
    if n < 2:
        return mean, math.nan, n
    from scipy.special import stdtrit  # the t quantile, without scipy.stats' import time

    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return mean, float(stdtrit(n - 1, 1 - (1 - level) / 2)) * std / math.sqrt(n), n


def configuration_columns(frame: pd.DataFrame) -> list[str]:
    """Columns that name a configuration: the run keys and `params.*` but the replica."""
    from schedlab.app.sweep_file import POINT_KEYS

    return [c for c in frame.columns if (c in POINT_KEYS or c.startswith("params."))]


def replicas_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """Per configuration of a sweep with replicas: its statistics over the replicas.

    Columns: `replicas` (finished), and per numeric metric `METRIC_mean` and
    `METRIC_ci95` (half-width), in sweep order.
    """
    import pandas as pd

    ok = summary[summary["status"] == "ok"] if "status" in summary else summary
    keys = configuration_columns(summary)
    metrics = [c for c in ok.columns if c not in keys and c not in NOT_METRICS
               and c not in RESERVED_COLUMNS and pd.api.types.is_numeric_dtype(ok[c])
               and not pd.api.types.is_bool_dtype(ok[c])]
    rows = []
    for key, part in ok.groupby(keys, dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(keys, key, strict=True))
        row["replicas"] = len(part)
        for m in metrics:
            mean, half, _ = mean_ci(part[m].tolist())
            row[f"{m}_mean"], row[f"{m}_ci95"] = mean, half
        rows.append(row)
    return pd.DataFrame(rows, columns=[*keys, "replicas",
                                       *[f"{m}_{s}" for m in metrics for s in ("mean", "ci95")]])


def _summary_cell(v: Any) -> Any:
    """A summary value as one Parquet cell (one column per summary key).

    A list (the `warnings`) becomes one string joined with "; ", a mapping its JSON text;
    scalars stay as they are.
    """
    if isinstance(v, list | tuple):
        return "; ".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def describe_points(sweep: Sweep, root: str | os.PathLike[str]) -> str:
    """The runs of a sweep as a table (for --dry-run): folder, status, varied values."""
    base = Path(root)
    show = [a for a in sweep.axes if a != "policy"]
    header = ["#", "folder", "status", "policy", *show]
    rows = [header]
    for i, p in enumerate(sweep.points, 1):
        cols = p.columns()
        status = "finished" if is_finished(base / p.folder) else "to run"
        rows.append([str(i), p.folder, status, p.policy,
                     *[_cell(cols.get(a)) for a in show]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    done = sum(1 for r in rows[1:] if r[2] == "finished")
    merged = f"; {sweep.duplicates} duplicate point(s) merged" if sweep.duplicates else ""
    lines.append(f"{len(sweep.points)} runs: {len(sweep.points) - done} to run, "
                 f"{done} finished{merged}")
    return "\n".join(lines)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)
