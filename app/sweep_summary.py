"""What a sweep folder holds: finished runs, summary.parquet and the --dry-run table."""

from __future__ import annotations

import json
import os
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
    """Write OUT/summary.parquet atomically; return its path."""
    path = Path(root) / "summary.parquet"
    frame = summary_frame(sweep, root)
    atomic_write(path, lambda p: frame.to_parquet(p, index=False))
    return path


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
