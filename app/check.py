"""Metric regression (docs/contract.md#sec-1): compare run summaries with a baseline JSON file.

A baseline holds, per run (keyed by its folder name relative to RESULTS), the config that
produced it and each summary metric's value, with optional per-metric `rtol`/`atol`
overriding the file's `defaults`. A metric passes when |now - value| <= atol + rtol*|value|
(NaN equals NaN). Format:

    {"schedlab_baseline": 1, "defaults": {"rtol": 1e-6, "atol": 1e-9},
     "runs": {"fifo": {"config": {...},
                       "metrics": {"jct_mean": {"value": 104808.9},
                                   "utilization_mean": {"value": 0.66, "atol": 0.01}}}}}

Replica tolerance: a baseline written from a sweep with `replicas:` also holds, per
configuration (the replicas of one sweep point, named by its label), each metric's mean
and the half-width of its 95% interval over the replicas (`"replicas": {label:
{"config": {...}, "runs": n, "metrics": {m: {"mean": x, "ci95": h, "n": k}}}}`).
`compare_replicas` then checks the mean over the new replicas of that configuration:
it passes when |now - mean| <= widen x sqrt(h_baseline^2 + h_now^2) (the two intervals'
combined half-width, widen 2.5 by default: `REPLICA_WIDEN`; never below the file's
rtol/atol), so a rerun with other replica seeds passes and a change larger than the
input's own sensitivity does not.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.sim.errors import SimError
from schedlab.sim.writing import FolderNotWritable, atomic_text, ensure_writable_dir

FORMAT_VERSION = 1
DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9

EXCLUDED_METRICS = frozenset({"wall_seconds", "events_processed", "seed"})
"""Numeric summary keys that are not results of the schedule (machine time, cost, inputs)."""

CONFIG_KEYS = ("policy", "trace", "topology", "trace_sha", "seed", "params", "max_jobs",
               "until", "sweep_point")
"""The config kept in a baseline entry."""

COMPARED_CONFIG = ("policy", "trace_sha", "seed", "params", "max_jobs", "until")
"""Config keys that must match for numbers to be comparable (paths may differ by machine)."""


@dataclass(frozen=True)
class RunRecord:
    """One finished run: its key (folder relative to RESULTS), summary and config."""

    key: str
    summary: Mapping[str, Any]
    config: Mapping[str, Any]


@dataclass(frozen=True)
class Row:
    """One line of a check report."""

    run: str
    metric: str
    baseline: Any
    now: Any
    verdict: str  # ok | DRIFT | new | missing metric | missing run | no baseline | config differs
    tolerance: float | None = None  # the allowed |now - baseline| (replica tolerance only)

    @property
    def failed(self) -> bool:
        """True unless the row is within tolerance or merely a new metric."""
        return self.verdict not in ("ok", "new")

    @property
    def change(self) -> str:
        """The difference now - baseline, relative when the baseline is not 0."""
        if not (_num(self.baseline) and _num(self.now)):
            return ""
        b, n = float(self.baseline), float(self.now)
        if math.isnan(b) or math.isnan(n):
            return ""
        if n == b:
            return "0"
        if b == 0:
            return f"{n - b:+.6g}"
        return f"{(n - b) / abs(b) * 100:+.4g}%"


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def metrics_of(summary: Mapping[str, Any]) -> dict[str, float]:
    """The numeric metrics of a summary.

    Left out: EXCLUDED_METRICS and every value that is not an int or float (booleans,
    text, lists such as `warnings`, mappings, null).
    """
    return {k: v for k, v in summary.items() if _num(v) and k not in EXCLUDED_METRICS}


def collect_runs(path: str | os.PathLike[str]) -> dict[str, RunRecord]:
    """Finished runs under `path`: a run folder itself, or every folder with a summary.json.

    Hidden folders (a name starting with '.') are not searched: they hold the temporary
    and set-aside copies of result folders being written (`schedlab.sim.writing`).
    """
    root = Path(path)
    if (root / "summary.json").is_file():
        found = [root / "summary.json"]
        keys = [root.resolve().name]
    else:
        found = sorted(p for p in root.rglob("summary.json")
                       if not any(part.startswith(".")
                                  for part in p.parent.relative_to(root).parts))
        keys = [p.parent.relative_to(root).as_posix() for p in found]
    if not found:
        raise SimError(f"no finished run under {str(path)!r}: expected a run folder with "
                       "summary.json, or a folder of them (a `schedlab run --out` or sweep "
                       "folder)")
    out = {}
    for key, summary_path in zip(keys, found, strict=True):
        summary = _read_json(summary_path)
        config_path = summary_path.parent / "config.json"
        config = _read_json(config_path) if config_path.is_file() else {}
        out[key] = RunRecord(key, summary, config)
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SimError(f"cannot read {str(path)!r}: {e}") from None


def read_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a baseline file."""
    p = Path(path)
    if not p.is_file():
        raise SimError(f"baseline file {str(path)!r} not found (write one with --update)")
    data = _read_json(p)
    if not isinstance(data, dict) or data.get("schedlab_baseline") != FORMAT_VERSION:
        raise SimError(f"baseline file {str(path)!r}: expected an object with "
                       f"\"schedlab_baseline\": {FORMAT_VERSION}")
    runs = data.get("runs")
    if not isinstance(runs, dict):
        raise SimError(f"baseline file {str(path)!r}: \"runs\" must be an object of run -> "
                       "{config, metrics}")
    groups = data.get("replicas", {})
    if not isinstance(groups, dict) or not all(
            isinstance(g, dict) and isinstance(g.get("metrics"), dict)
            and all(isinstance(m, dict) and "mean" in m for m in g["metrics"].values())
            for g in groups.values()):
        raise SimError(f"baseline file {str(path)!r}: \"replicas\" must be an object of "
                       "label -> {config, runs, metrics: {name: {\"mean\": x, \"ci95\": h, "
                       "\"n\": k}}}")
    for key, entry in runs.items():
        metrics = entry.get("metrics") if isinstance(entry, dict) else None
        if not isinstance(metrics, dict) or not all(
                isinstance(m, dict) and "value" in m for m in metrics.values()):
            raise SimError(f"baseline file {str(path)!r}: run {key!r} needs \"metrics\": "
                           "{name: {\"value\": x, optional \"rtol\", \"atol\"}}")
    return data


def _defaults(baseline: Mapping[str, Any]) -> tuple[float, float]:
    d = baseline.get("defaults") or {}
    return float(d.get("rtol", DEFAULT_RTOL)), float(d.get("atol", DEFAULT_ATOL))


def within(now: float, value: float | None, rtol: float, atol: float) -> bool:
    """|now - value| <= atol + rtol * |value|, NaN (or null) equal to NaN."""
    v = math.nan if value is None else float(value)
    n = float(now)
    if math.isnan(v) or math.isnan(n):
        return math.isnan(v) and math.isnan(n)
    return abs(n - v) <= atol + rtol * abs(v)


def compare_run(key: str, entry: Mapping[str, Any], record: RunRecord | None,
                baseline: Mapping[str, Any]) -> list[Row]:
    """Rows for one baseline entry against a run (None: the run is missing)."""
    if record is None:
        return [Row(key, "*", None, None, "missing run")]
    rows: list[Row] = []
    want = entry.get("config") or {}
    # a sweep run's point names its files relative to the sweep file: compared instead of
    # the params, which hold the paths the files had on the machine that ran it
    portable = "sweep_point" in want and "sweep_point" in record.config
    for k in (*COMPARED_CONFIG, "sweep_point"):
        if portable and k == "params":
            continue
        if k in want and k in record.config and want[k] != record.config[k]:
            rows.append(Row(key, f"config.{k}", want[k], record.config[k], "config differs"))
    rtol0, atol0 = _defaults(baseline)
    now = metrics_of(record.summary)
    for metric, spec in entry["metrics"].items():
        if metric not in now and spec["value"] is None and metric in record.summary \
                and record.summary[metric] is None:  # no value then, none now (JSON null)
            rows.append(Row(key, metric, None, None, "ok"))
            continue
        if metric not in now:
            rows.append(Row(key, metric, spec["value"], None, "missing metric"))
            continue
        ok = within(now[metric], spec["value"], float(spec.get("rtol", rtol0)),
                    float(spec.get("atol", atol0)))
        rows.append(Row(key, metric, spec["value"], now[metric], "ok" if ok else "DRIFT"))
    for metric in now:
        if metric not in entry["metrics"]:
            rows.append(Row(key, metric, None, now[metric], "new"))
    return rows


def compare_all(baseline: Mapping[str, Any], runs: Mapping[str, RunRecord]) -> list[Row]:
    """Rows for every baseline entry, then a 'no baseline' row for each run it lacks."""
    rows: list[Row] = []
    for key, entry in baseline["runs"].items():
        rows.extend(compare_run(key, entry, runs.get(key), baseline))
    for key in runs:
        if key not in baseline["runs"]:
            rows.append(Row(key, "*", None, None, "no baseline"))
    return rows


def make_baseline(runs: Mapping[str, RunRecord], previous: Mapping[str, Any] | None = None,
                  *, rtol: float | None = None, atol: float | None = None) -> dict[str, Any]:
    """A baseline of `runs`, keeping the previous file's defaults and per-metric tolerances."""
    prev = previous or {}
    rtol0, atol0 = _defaults(prev)
    out: dict[str, Any] = {
        "schedlab_baseline": FORMAT_VERSION,
        "description": prev.get("description", "Golden run summaries; compare with "
                                "`schedlab check RESULTS --baseline FILE`, rewrite with "
                                "--update."),
        "defaults": {"rtol": rtol0 if rtol is None else rtol,
                     "atol": atol0 if atol is None else atol},
        "runs": {},
    }
    old_runs = prev.get("runs") or {}
    for key in sorted(runs):
        rec = runs[key]
        old = (old_runs.get(key) or {}).get("metrics") or {}
        metrics = {}
        for m, v in metrics_of(rec.summary).items():
            spec: dict[str, Any] = {"value": None if math.isnan(float(v)) else v}
            spec.update({t: old[m][t] for t in ("rtol", "atol") if t in old.get(m, {})})
            metrics[m] = spec
        config = {k: rec.config[k] for k in CONFIG_KEYS if k in rec.config}
        out["runs"][key] = {"config": config, "metrics": metrics}
    replicas = make_replica_baseline(runs)
    if replicas:
        out["replicas"] = replicas
    return out


REPLICA_WIDEN = 2.5
"""Default factor on the combined replica half-width (`compare_replicas`).

|now - mean| / sqrt(h^2 + h_now^2) is a Welch t statistic scaled by 1 / t(0.975, n - 1):
with 5 replicas on each side and normal metrics, a factor 1 fails 2.4% of unchanged
metrics (too many when a check compares hundreds), 2 fails 0.05%, 2.5 0.01% (3
replicas: 0.04%). Metrics are not all normal: on the whole default trace (26 policies,
910 metrics, benchmarks/RESULTS_replicas.md) a rerun with other replica seeds reached
2.31 (optimus' fragmentation_fgd_mean) and a changed policy parameter 3.1 to 67. Our
choice."""


def _replica_info(record: RunRecord) -> tuple[dict[str, Any], Any] | None:
    """(the configuration without its replica, the replica) of a replica run; else None."""
    point = record.config.get("sweep_point")
    if not isinstance(point, Mapping) or not isinstance(point.get("replica"), Mapping):
        return None
    return {k: v for k, v in point.items() if k != "replica"}, point["replica"]


def replica_groups(runs: Mapping[str, RunRecord]) -> dict[str, list[RunRecord]]:
    """The replica runs grouped by configuration, each named by its label.

    A label is the policy, plus `key=value` for each setting that differs between
    configurations of that policy (so a changed parameter of one policy keeps its label
    and shows as a config difference, not as a run missing).
    """
    configs: dict[str, dict[str, Any]] = {}
    members: dict[str, list[RunRecord]] = {}
    for key in sorted(runs):
        info = _replica_info(runs[key])
        if info is None:
            continue
        text = json.dumps(info[0], sort_keys=True, default=str)
        configs.setdefault(text, info[0])
        members.setdefault(text, []).append(runs[key])
    labels = _labels([_flat(c) for c in configs.values()])
    out: dict[str, list[RunRecord]] = {}
    for label, text in zip(labels, configs, strict=True):
        out.setdefault(label, []).extend(members[text])
    return out


def _labels(idents: list[dict[str, Any]]) -> list[str]:
    """Per configuration: its policy, plus `key=value` for keys varying within that policy."""
    out = []
    for ident in idents:
        same = [i for i in idents if i.get("policy") == ident.get("policy")]
        keys = sorted({k for i in same for k in i} - {"policy"})
        varying = [k for k in keys if len({repr(i.get(k)) for i in same}) > 1]
        extra = ", ".join(f"{k.removeprefix('params.')}={ident.get(k)}" for k in varying)
        out.append(f"{ident.get('policy')} ({extra})" if extra else str(ident.get("policy")))
    return out


def _flat(config: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep point's configuration as label keys: `params.KEY` for each parameter."""
    out = {k: v for k, v in config.items() if k != "params"}
    out.update({f"params.{k}": v for k, v in sorted((config.get("params") or {}).items())})
    return {k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v
            for k, v in out.items()}


def _replica_metrics(records: list[RunRecord]) -> dict[str, dict[str, Any]]:
    """Per numeric metric of the group: mean, 95% half-width (None: one run) and count."""
    from schedlab.app.sweep_summary import mean_ci

    names = dict.fromkeys(m for r in records for m in metrics_of(r.summary))
    out = {}
    for m in names:
        values = [metrics_of(r.summary).get(m, math.nan) for r in records]
        mean, half, n = mean_ci(values)
        out[m] = {"mean": None if math.isnan(mean) else mean,
                  "ci95": None if math.isnan(half) else half, "n": n}
    return out


def make_replica_baseline(runs: Mapping[str, RunRecord]) -> dict[str, Any]:
    """The `replicas` section of a baseline ({} without replicas).

    Per configuration label: its config, the number of replicas and each metric's mean
    and 95% half-width.
    """
    out = {}
    for label, records in replica_groups(runs).items():
        info = _replica_info(records[0])
        out[label] = {"config": info[0] if info else {}, "runs": len(records),
                      "metrics": _replica_metrics(records)}
    return out


def compare_replicas(baseline: Mapping[str, Any], runs: Mapping[str, RunRecord], *,
                     widen: float = REPLICA_WIDEN) -> list[Row]:
    """Check with replica tolerance.

    Replica runs are compared by configuration (module doc), the other runs as
    `compare_all` does.

    Raises:
        SimError: The baseline has no replica intervals.
    """
    groups = baseline.get("replicas")
    if not isinstance(groups, Mapping) or not groups:
        raise SimError("the baseline has no replica intervals (\"replicas\"): write it "
                       "with `schedlab check SWEEP --baseline FILE --update` from a sweep "
                       "with `replicas:`")
    rtol0, atol0 = _defaults(baseline)
    plain = {k: r for k, r in runs.items() if _replica_info(r) is None}
    entries = {k: e for k, e in baseline["runs"].items()
               if _replica_info(RunRecord(k, {}, e.get("config") or {})) is None}
    rows = compare_all({**baseline, "runs": entries}, plain)
    now_groups = replica_groups(runs)
    for label, entry in groups.items():
        records = now_groups.get(label)
        if records is None:
            rows.append(Row(label, "*", None, None, "missing run"))
            continue
        info = _replica_info(records[0])
        want, have = entry.get("config") or {}, info[0] if info else {}
        for k in sorted(set(want) | set(have)):
            if want.get(k) != have.get(k):
                rows.append(Row(label, f"config.{k}", want.get(k), have.get(k),
                                "config differs"))
        now = _replica_metrics(records)
        for metric, spec in entry["metrics"].items():
            got = now.get(metric)
            if got is None:
                rows.append(Row(label, metric, spec.get("mean"), None, "missing metric"))
                continue
            base, mean = spec.get("mean"), got["mean"]
            if base is None or mean is None:
                ok = base is None and mean is None
                rows.append(Row(label, metric, base, mean, "ok" if ok else "DRIFT"))
                continue
            halves = [h for h in (spec.get("ci95"), got["ci95"]) if h is not None]
            tol = max(widen * math.sqrt(sum(h * h for h in halves)),
                      atol0 + rtol0 * abs(float(base)))
            ok = abs(float(mean) - float(base)) <= tol
            rows.append(Row(label, metric, base, mean, "ok" if ok else "DRIFT", tol))
        for metric in now:
            if metric not in entry["metrics"]:
                rows.append(Row(label, metric, None, now[metric]["mean"], "new"))
    for label in now_groups:
        if label not in groups:
            rows.append(Row(label, "*", None, None, "no baseline"))
    return rows


def write_baseline(path: str | os.PathLike[str], data: Mapping[str, Any]) -> None:
    """Write a baseline file atomically (sorted runs, stable indentation for review diffs)."""
    p = Path(path)
    try:
        ensure_writable_dir(p.parent)
    except FolderNotWritable as e:
        raise SimError(f"baseline: {e}") from None
    # one line per metric ({"value": x, "rtol": r}) keeps review diffs to the lines that moved
    compact: dict[str, str] = {}
    runs = {}
    for key, entry in data["runs"].items():
        metrics = {}
        for m, spec in entry["metrics"].items():
            mark = f"@@metric{len(compact)}@@"
            compact[mark] = json.dumps(spec, allow_nan=False)
            metrics[m] = mark
        runs[key] = {**entry, "metrics": metrics}
    groups = {}
    for label, entry in (data.get("replicas") or {}).items():
        metrics = {}
        for m, spec in entry["metrics"].items():
            mark = f"@@metric{len(compact)}@@"
            compact[mark] = json.dumps(spec, allow_nan=False)
            metrics[m] = mark
        groups[label] = {**entry, "metrics": metrics}
    shown = {**data, "runs": runs, **({"replicas": groups} if groups else {})}
    text = json.dumps(shown, indent=2, allow_nan=False)
    for mark, spec_text in compact.items():
        text = text.replace(f'"{mark}"', spec_text, 1)
    try:
        atomic_text(p, text)
    except OSError as e:
        raise SimError(f"cannot write the baseline {str(path)!r}: {e.strerror or e}") from None


def format_report(rows: list[Row]) -> str:
    """A plain-text table: run, metric, baseline, now, change, verdict.

    With replica tolerance (some row has a `tolerance`) a `tolerance` column (the
    allowed |now - baseline|) comes before the verdict.
    """
    tolerance = any(r.tolerance is not None for r in rows)
    table = [["run", "metric", "baseline", "now", "change",
              *(["tolerance"] if tolerance else []), "verdict"]]
    for r in rows:
        tol = [_fmt(r.tolerance)] if tolerance else []
        table.append([r.run, r.metric, _fmt(r.baseline), _fmt(r.now), r.change, *tol,
                      r.verdict])
    ncol = len(table[0])
    widths = [max(len(row[i]) for row in table) for i in range(ncol)]
    lines = ["  ".join(c.rjust(w) if 2 <= i <= ncol - 2 else c.ljust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)
