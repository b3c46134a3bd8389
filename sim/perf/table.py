"""A throughput table of one's own, as CSV: the simplest performance model to add.

Columns (docs/contract.md#sec-2, "Performance models"): `model, gpu_type, num_gpus,
throughput` required; `nodes` (the placement spans this many nodes; empty or absent:
any), `batch_size` (global; empty: any), `partner` (packed with a job of this model),
`units` (`steps` or `samples`, per model; default steps). A lookup takes the row of the
model, type and GPU count with the most specific match: exact nodes before any, exact
batch size before any. No row: the job cannot run on that shape (throughput 0).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection
from pathlib import Path

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.base import STEPS, UNITS, Shape, TableModel

_REQUIRED = ("model", "gpu_type", "num_gpus", "throughput")
_KNOWN = (*_REQUIRED, "nodes", "batch_size", "partner", "units")
Row = tuple[str, str, int, int | None, int | None, str]  # model,type,gpus,nodes,bsz,partner


class CsvTable(TableModel):
    """Measured throughputs from a CSV file."""

    name = "table"

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        try:
            with open(p, newline="", encoding="utf-8-sig") as f:
                rows = list(csv.DictReader(f))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise InvalidParameter(f"perf_model {p}: cannot be read: {exc}") from None
        cols = list(rows[0]) if rows else []
        missing = [c for c in _REQUIRED if c not in cols]
        if missing:
            raise InvalidParameter(f"perf_model {p}: missing column(s) {', '.join(missing)}; "
                                   f"columns are {', '.join(_KNOWN)}")
        self._rows: dict[Row, float] = {}
        self._units: dict[str, str] = {}
        self._first_type: dict[str, str] = {}
        for i, r in enumerate(rows, start=2):
            model = (r.get("model") or "").strip()
            gtype = (r.get("gpu_type") or "").strip()
            if not model or not gtype:
                raise InvalidParameter(f"perf_model {p} line {i}: model and gpu_type are "
                                       "required")
            gpus = _int(p, i, "num_gpus", r.get("num_gpus"), required=True)
            assert gpus is not None
            nodes = _int(p, i, "nodes", r.get("nodes"))
            bsz = _int(p, i, "batch_size", r.get("batch_size"))
            thr = _float(p, i, r.get("throughput"))
            unit = (r.get("units") or STEPS).strip() or STEPS
            if unit not in UNITS:
                raise InvalidParameter(f"perf_model {p} line {i}: units {unit!r}: expected "
                                       "steps or samples")
            if self._units.setdefault(model, unit) != unit:
                raise InvalidParameter(f"perf_model {p} line {i}: model {model!r} has rows "
                                       f"in both {self._units[model]} and {unit}")
            self._first_type.setdefault(model, gtype)
            key = (model, gtype.lower(), gpus, nodes, bsz, (r.get("partner") or "").strip())
            if key in self._rows:
                raise InvalidParameter(f"perf_model {p} line {i}: a second row for {model} "
                                       f"on {gpus} {gtype}")
            self._rows[key] = thr

    def models(self) -> Collection[str]:
        """Every model of the file."""
        return self._units.keys()

    def units(self, model: str) -> str:
        """The model's `units` column."""
        return self._units.get(model, STEPS)

    def reference_type(self, model: str) -> str:
        """The GPU type of the model's first row."""
        return self._first_type.get(model, "")

    def _find(self, model: str, shape: Shape, bsz: int | None, partner: str) -> float | None:
        t, k, n = shape.gpu_type.lower(), shape.num_gpus, shape.num_nodes
        rows = self._rows
        for nodes in (n, None):
            for b in ((bsz, None) if bsz is not None else (None,)):
                got = rows.get((model, t, k, nodes, b, partner))
                if got is not None:
                    return got
        return None

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """The row's throughput (0: no row)."""
        got = self._find(model, shape, batch_size, "")
        return 0.0 if got is None else got

    def pair(self, model: str, partner: str, shape: Shape,
             batch_size: int | None) -> float | None:
        """The row with this `partner` (None: none)."""
        return self._find(model, shape, batch_size, partner)


def _int(p: Path, line: int, col: str, text: str | None, *, required: bool = False
         ) -> int | None:
    t = (text or "").strip()
    if not t:
        if required:
            raise InvalidParameter(f"perf_model {p} line {line}: {col} is required")
        return None
    try:
        v = float(t)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 1 and v == int(v)):
        raise InvalidParameter(f"perf_model {p} line {line}: {col} {t!r}: expected an "
                               "integer >= 1")
    return int(v)


def _float(p: Path, line: int, text: str | None) -> float:
    t = (text or "").strip()
    try:
        v = float(t)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 0):
        raise InvalidParameter(f"perf_model {p} line {line}: throughput {t!r}: expected a "
                               "number >= 0")
    return v
