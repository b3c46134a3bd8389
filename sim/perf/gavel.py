"""Gavel's `simulation_throughputs.json` as a performance model: the whole table.

Layout: `{gpu type: {"('<job_type>', <scale_factor>)": {"null": steps/s alone,
"('<other>', <sf>)": [steps/s of this job, of the other] packed, ...}}}`. A model is a
job type (`ResNet-18 (batch size 16)`); its throughput on k GPUs is the entry of scale
factor k (steps/s of the whole job). Types are matched case-insensitively (`V100` =
`v100`). A placement spanning nodes reads `<type>_unconsolidated` when the table has it
(Gavel's measurements of spread workers; Gavel's own simulator only uses consolidated
entries, which is what a placement on one node gets). Sizes the table lacks for a type
are 0 (the job cannot run so), as in Gavel.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection
from pathlib import Path

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.base import STEPS, Shape, TableModel

Key = tuple[str, int]


class GavelTable(TableModel):
    """Consolidated, unconsolidated and packed-pair throughputs from Gavel's file."""

    name = "gavel"

    def __init__(self, path: str | Path, reference: str = "v100") -> None:
        p = Path(path)
        try:
            with open(p, encoding="utf-8-sig") as f:
                data = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidParameter(
                f"perf_model {p}: cannot be read as Gavel throughputs: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidParameter(f"perf_model {p}: expected an object of GPU types")
        self._alone: dict[str, dict[Key, float]] = {}
        self._pairs: dict[str, dict[Key, dict[Key, float]]] = {}
        for gtype, table in data.items():
            if not isinstance(table, dict):
                raise InvalidParameter(f"perf_model {p}: type {gtype!r} is not an object")
            alone, pairs = self._alone.setdefault(gtype.lower(), {}), {}
            for key, entry in table.items():
                k = _key(p, gtype, key)
                try:
                    alone[k] = float(entry["null"])
                    pairs[k] = {_key(p, gtype, o): float(v[0])
                                for o, v in entry.items() if o != "null"}
                except (TypeError, KeyError, ValueError, IndexError):
                    raise InvalidParameter(
                        f"perf_model {p}: {gtype} entry {key!r} is not {{\"null\": steps/s, "
                        "\"('<job_type>', <scale_factor>)\": [steps/s, steps/s], ...}") from None
            self._pairs[gtype.lower()] = pairs
        ref = reference.lower()
        if ref not in self._alone:
            raise InvalidParameter(f"perf_model {p}: no reference GPU type {reference!r}; "
                                   f"types: {', '.join(sorted(self._alone))}")
        self._ref = ref.upper()
        self._models = frozenset(jt for t in self._alone.values() for jt, _ in t)

    def models(self) -> Collection[str]:
        """Every job type of the table."""
        return self._models

    def units(self, model: str) -> str:
        """Gavel counts steps."""
        return STEPS

    def reference_type(self, model: str) -> str:
        """V100, Gavel's reference type."""
        return self._ref

    def _table(self, shape: Shape) -> str:
        t = shape.gpu_type.lower()
        if not shape.consolidated and f"{t}_unconsolidated" in self._alone:
            return f"{t}_unconsolidated"
        return t

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """Steps/s of the job on `shape` (0 when the table has no entry)."""
        table = self._alone.get(self._table(shape))
        return 0.0 if table is None else table.get((model, shape.num_gpus), 0.0)

    def pair(self, model: str, partner: str, shape: Shape,
             batch_size: int | None) -> float | None:
        """Steps/s packed with a job of `partner` of the same size (None: not measured)."""
        pairs = self._pairs.get(self._table(shape), {}).get((model, shape.num_gpus))
        if pairs is None:
            return None
        return pairs.get((partner, shape.num_gpus))


def _key(p: Path, gtype: str, text: str) -> Key:
    try:
        job_type, sf = ast.literal_eval(text)
        return str(job_type), int(sf)
    except (ValueError, SyntaxError, TypeError):
        raise InvalidParameter(f"perf_model {p}: {gtype} key {text!r} is not "
                               "\"('<job_type>', <scale_factor>)\"") from None
