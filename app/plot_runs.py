"""Result folders loaded for plotting: runs, their identities and labels, sweep tables.

`load_results` reads run folders, folders of run folders and sweep folders into
`RunData` (a label, the summary and lazily read tables) and the sweep summary table;
`schedlab.app.plots` draws them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.sim.errors import SimError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["IDENTITY_KEYS", "RunData", "labels_of", "load_results", "short"]

IDENTITY_KEYS = ("policy", "trace", "topology", "seed", "load_scale", "max_jobs",
                 "trace_window", "until")

@dataclass(frozen=True)
class RunData:
    """One run for plotting: a label, its summary, and its tables (from a folder or memory)."""

    label: str
    summary: Mapping[str, Any]
    folder: Path | None = None
    identity: Mapping[str, Any] = field(default_factory=dict)
    _tables: dict[str, pd.DataFrame] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_result(cls, label: str, result: Any) -> RunData:
        """Wrap an in-memory SimResult (as in a notebook)."""
        tables = {"jobs": result.jobs, "events": result.events, "timeline": result.timeline}
        if getattr(result, "tenants", None) is not None:
            tables["tenants"] = result.tenants
        return cls(label, result.summary, None, _identity(result.summary, result.config),
                   tables)

    def table(self, name: str) -> pd.DataFrame:
        """`jobs`, `events`, `timeline` or `tenants`, read from the folder once.

        A folder written before tenants.parquet existed gets its tenants table rebuilt
        from its jobs table (`schedlab.sim.tenants.tenants_frame`).
        """
        if name not in self._tables:
            path = None if self.folder is None else self.folder / f"{name}.parquet"
            if name == "tenants" and (path is None or not path.is_file()):
                from schedlab.sim.tenants import tenants_frame

                self._tables[name] = tenants_frame(self.table("jobs"))
                return self._tables[name]
            if path is None:
                raise SimError(f"run {self.label!r} has no {name} table")
            import pandas as pd

            self._tables[name] = pd.read_parquet(path)
        return self._tables[name]


def _read_json(path: Path) -> dict[str, Any]:
    import json

    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _identity(summary: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """What distinguishes a run: policy, inputs, seed, shaping and the given parameters."""
    point = config.get("sweep_point") or {}
    ident: dict[str, Any] = {}
    for k in IDENTITY_KEYS:
        v = point.get(k, config.get(k, summary.get(k)))
        if k == "max_jobs" and not point:
            v = None  # a plain run's config counts the jobs; only a sweep point sets it
        if k in ("trace", "topology") and isinstance(v, str) and os.sep in v:
            v = Path(v).name
        ident[k] = v
    if isinstance(point.get("replica"), dict):  # a shaken replica (sweep `replicas:`)
        ident["replica"] = point["replica"].get("index")
    params = point.get("params", config.get("params")) or {}
    ident.update({f"params.{k}": v for k, v in sorted(params.items())})
    return ident


def labels_of(idents: Sequence[Mapping[str, Any]], *, skip: tuple[str, ...] = ()
              ) -> list[str]:
    """'policy', plus 'key=value' for each key that differs between the runs."""
    keys = sorted({k for i in idents for k in i} - {"policy", *skip})
    varying = [k for k in keys if len({repr(i.get(k)) for i in idents}) > 1]
    out = []
    for i in idents:
        extra = ", ".join(f"{k.removeprefix('params.')}={short(i.get(k))}" for k in varying)
        out.append(f"{i.get('policy')} ({extra})" if extra else str(i.get("policy")))
    return out


def short(v: Any) -> str:
    """A value as a label: floats without trailing zeros."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def load_results(paths: Sequence[str | os.PathLike[str]]
                 ) -> tuple[list[RunData], pd.DataFrame | None]:
    """Runs from run folders, folders of run folders, or sweep folders (with their table)."""
    import pandas as pd

    folders: list[Path] = []
    sweeps: list[pd.DataFrame] = []
    for raw in paths:
        path = Path(raw)
        if (path / "summary.parquet").is_file():
            table = pd.read_parquet(path / "summary.parquet")
            ok = table[table["status"] == "ok"].copy()
            ok["path"] = [str(path / f) for f in ok["folder"]]
            sweeps.append(ok)
            folders.extend(path / f for f in ok["folder"])
        elif (path / "summary.json").is_file():
            folders.append(path)
        else:
            # hidden folders are writes in progress or leftovers (schedlab.sim.writing), not runs
            found = sorted(p.parent for p in path.rglob("summary.json")
                           if not any(part.startswith(".")
                                      for part in p.relative_to(path).parts))
            if not found:
                raise SimError(f"no results in {str(raw)!r}: expected a run folder "
                               "(summary.json), a sweep folder (summary.parquet) or a folder "
                               "of run folders")
            folders.extend(found)
    summaries = [_read_json(f / "summary.json") for f in folders]
    idents = [_identity(s, _read_json(f / "config.json")) for f, s in
              zip(folders, summaries, strict=True)]
    labels = labels_of(idents)
    runs = [RunData(lbl, s, f, i) for lbl, s, f, i in
            zip(labels, summaries, folders, idents, strict=True)]
    sweep = pd.concat(sweeps, ignore_index=True) if sweeps else None
    return runs, sweep
