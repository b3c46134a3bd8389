"""Gavel (OSDI'20) trace reader, with `simulation_throughputs.json` for per-type speeds.

Two tab-separated layouts, no header (shared/traces/gavel/README.md):

- current (10 fields): `job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time`;
- 2019 msr (7 fields): `job_type, command, num_steps_arg, needs_data_dir, total_steps,
  arrival_time, scale_factor`.

Mapping: `job_id` = `gavel-{i}` (i: 0-based job line), `submit_time` = arrival_time,
`num_gpus` = scale_factor, `duration` = total_steps / the job's isolated throughput
(steps/s, the `"null"` entry of `(job_type, scale_factor)`) on the reference type
(`v100`), `gpu_speeds` = throughput on each type / reference throughput, for the
consolidated types (`v100`, `p100`, `k80`, named `V100`, `P100`, `K80`; the
`*_unconsolidated` entries are locality data, not types), `model` = job_type and
`num_steps` = total_steps, so a run given the same file as its performance model
(`perf_model=gavel=simulation_throughputs.json`) reads every entry of it (unconsolidated
and packed pairs too; `duration` still wins and is the same work). `job_type`,
`priority_weight` and `SLO` (-1 = none) are pass-through. A job whose (job_type,
scale_factor) has no throughput is excluded, as Gavel itself drops it.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    RowErrors,
    finish,
    head_text,
    iter_csv,
    label_of,
    number_field,
    resolve,
    stem_of,
)

__all__ = ["CURRENT_FIELDS", "MSR_FIELDS", "load_throughputs", "read_gavel"]

CURRENT_FIELDS = ("job_type", "command", "working_directory", "num_steps_arg",
                  "needs_data_dir", "total_steps", "scale_factor", "priority_weight", "SLO",
                  "arrival_time")
"""Fields of the current Gavel trace layout."""

MSR_FIELDS = ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps",
              "arrival_time", "scale_factor")
"""Fields of the 2019 msr layout."""

THROUGHPUTS_FILE = "simulation_throughputs.json"
"""Default throughputs file, looked up next to the trace."""


def load_throughputs(
    path: str | os.PathLike[str], reference: str = "v100"
) -> dict[tuple[str, int], tuple[float, tuple[tuple[str, float], ...]]]:
    """(job_type, scale_factor) -> (steps/s on the reference type, relative speeds).

    Args:
        path: `simulation_throughputs.json`.
        reference: The type whose speed is 1 (default `v100`).

    Returns:
        For every key with an isolated throughput on the reference type.

    Raises:
        InvalidTrace: Unreadable file or an unexpected layout, naming the key.
    """
    p = Path(path)
    try:
        with open(p, encoding="utf-8-sig") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidTrace(f"{p.name}: cannot be read as Gavel throughputs: {exc}") from None
    if not isinstance(data, dict) or reference not in data:
        known = ", ".join(sorted(data)) if isinstance(data, dict) else "(not an object)"
        raise InvalidTrace(f"{p.name}: no reference GPU type {reference!r}; types: {known}")
    types = [t for t in data if "_" not in t and isinstance(data[t], dict)]
    iso: dict[str, dict[tuple[str, int], float]] = {}
    for t in types:
        table: dict[tuple[str, int], float] = {}
        for key, entry in data[t].items():
            try:
                job_type, sf = ast.literal_eval(key)
                value = float(entry["null"])
            except (ValueError, SyntaxError, TypeError, KeyError):
                raise InvalidTrace(f"{p.name}: {t} entry {key!r} is not \"('<job_type>', "
                                   "<scale_factor>)\": {\"null\": <steps/s>, ...}") from None
            if value > 0:
                table[(str(job_type), int(sf))] = value
        iso[t] = table
    out = {}
    for key, ref in iso[reference].items():
        speeds = tuple(sorted((t.upper(), iso[t][key] / ref) for t in types if key in iso[t]))
        out[key] = (ref, speeds)
    return out


def layout(path: str | os.PathLike[str]) -> tuple[str, ...] | None:
    """The field layout of a Gavel trace from its first line, or None when it is none."""
    first = head_text(Path(path), 8192).split("\n", 1)[0]
    n = len(first.split("\t"))
    return {10: CURRENT_FIELDS, 7: MSR_FIELDS}.get(n) if "\t" in first else None


def read_gavel(
    path: str | os.PathLike[str],
    *,
    skip_bad_rows: bool = False,
    name: str | None = None,
    throughputs: str | os.PathLike[str] | None = None,
    reference: str = "v100",
) -> Trace:
    """Read a Gavel trace (see the module doc for the mapping).

    Args:
        path: The `.trace` file.
        skip_bad_rows: Count bad lines instead of failing on the first.
        name: Trace name (default: the file name without suffixes).
        throughputs: `simulation_throughputs.json` (default: next to the trace).
        reference: GPU type of speed 1 (durations are on it).

    Returns:
        The trace with pass-through columns `job_type`, `priority_weight`, `SLO`.

    Raises:
        InvalidTrace: No throughputs file, an unknown layout, or a bad line naming file,
            line, field and value.
    """
    import pandas as pd

    p = resolve(path)
    fields = layout(p)
    if fields is None:
        raise InvalidTrace(f"{p.name}: line 1 is not a Gavel trace line (10 tab-separated "
                           "fields, or 7 in the 2019 msr layout)")
    tp_path = Path(throughputs) if throughputs is not None else p.with_name(THROUGHPUTS_FILE)
    if not tp_path.is_file():
        raise InvalidTrace(f"{p.name}: Gavel throughputs {str(tp_path)!r} not found; give "
                           f"throughputs=PATH ({THROUGHPUTS_FILE})")
    table = load_throughputs(tp_path, reference)
    issues = RowErrors(label_of(p), skip_bad_rows)
    parts, line_parts = [], []
    for chunk in iter_csv(p, issues, names=fields, sep="\t"):
        df, lines = chunk.frame, chunk.lines
        steps, bad = number_field(df, lines, issues, "total_steps",
                                  rule="is not a number > 0", lo=0.0, lo_open=True)
        sf, b = number_field(df, lines, issues, "scale_factor", rule="is not an integer >= 1",
                             lo=1.0, integer=True)
        bad |= b
        arrival, b = number_field(df, lines, issues, "arrival_time",
                                  rule="is not a number >= 0", lo=0.0)
        bad |= b
        prio = np.ones(len(df))
        slo = np.full(len(df), -1.0)
        if "priority_weight" in fields:
            prio, b = number_field(df, lines, issues, "priority_weight",
                                   rule="is not a number > 0", lo=0.0, lo_open=True)
            bad |= b
            slo, b = number_field(df, lines, issues, "SLO", rule="is not a number",
                                  required=True)
            bad |= b
        jt = df["job_type"].str.strip().tolist()
        ref = np.full(len(df), np.nan)
        speeds: list[str] = [""] * len(df)
        missing = np.zeros(len(df), dtype=bool)
        for i in np.flatnonzero(~bad).tolist():
            got = table.get((jt[i], int(sf[i])))
            if got is None:
                missing[i] = True
                issues.exclude(int(lines[i]), f"({jt[i]!r}, {int(sf[i])}) has no throughput "
                                              f"in {tp_path.name}")
                continue
            ref[i] = got[0]
            speeds[i] = ";".join(f"{t}={s!r}" for t, s in got[1])
        keep = ~(bad | missing)
        out = pd.DataFrame({
            "job_id": [f"gavel-{i}" for i in (chunk.lines[keep] - 1).tolist()],
            "submit_time": arrival[keep],
            "num_gpus": sf[keep].astype(np.int64),
            "duration": steps[keep] / ref[keep],
            "gpu_speeds": np.array(speeds, dtype=object)[keep],
            "model": np.array(jt, dtype=object)[keep],
            "num_steps": steps[keep],
            "job_type": np.array(jt, dtype=object)[keep],
            "priority_weight": prio[keep],
            "SLO": [None if v < 0 else v for v in slo[keep].tolist()],
        })
        parts.append(out)
        line_parts.append(lines[keep])
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p))
