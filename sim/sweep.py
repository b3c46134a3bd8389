"""Parameter sweeps (SPEC sec. 1, 7): a sweep file expanded into runs, run on any executor.

A sweep file names a base run and the axes to vary (`grid:` cartesian, `zip:` paired,
`seeds:` repeats). Each run is a frozen `RunPoint` whose folder is named by a hash of its
full config, so rerunning a sweep skips the folders that hold a `summary.json` (written
last by `SimResult.write`). The runner takes any `concurrent.futures.Executor`: a process
pool, or Dask's `Client.get_executor()`; nothing in it knows about Dask.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sim.errors import InvalidParameter, SimError, did_you_mean
from sim.results import atomic_text, atomic_write

TOP_KEYS = ("base", "grid", "zip", "seeds")
"""Keys allowed at the top of a sweep file."""

POINT_KEYS = ("policy", "trace", "topology", "seed", "load_scale", "max_jobs", "trace_window",
              "until")
"""Keys of a run besides `params`; each may be an axis of `grid:` or `zip:`."""

BASE_DEFAULTS: dict[str, Any] = {
    "policy": "fifo", "trace": "default", "topology": "default", "seed": 0,
    "load_scale": None, "max_jobs": None, "trace_window": None, "until": None,
}

RESERVED_COLUMNS = ("run_id", "folder", "status", "error")
"""Leading columns of summary.parquet, before the run's parameters and metrics."""

_PATH_SUFFIXES = (".csv", ".gz", ".parquet", ".pq", ".yaml", ".yml", ".json", ".txt", ".swf")


@dataclass(frozen=True)
class RunPoint:
    """One run of a sweep: everything that determines its result, and nothing else."""

    policy: str
    trace: str
    topology: str
    seed: int
    params: tuple[tuple[str, Any], ...] = ()
    load_scale: float | None = None
    max_jobs: int | None = None
    trace_window: str | None = None
    until: float | None = None

    def config(self) -> dict[str, Any]:
        """The run's full config as plain JSON data (the input of its hash)."""
        return {
            "policy": self.policy, "trace": self.trace, "topology": self.topology,
            "seed": self.seed, "params": dict(self.params), "load_scale": self.load_scale,
            "max_jobs": self.max_jobs, "trace_window": self.trace_window, "until": self.until,
        }

    @property
    def run_id(self) -> str:
        """First 12 hex digits of the SHA-256 of the canonical JSON of `config()`."""
        text = json.dumps(self.config(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def folder(self) -> str:
        """The run's folder name inside the sweep folder: policy, then the hash."""
        return f"{self.policy}-{self.run_id}"

    def columns(self) -> dict[str, Any]:
        """The run's parameters as summary columns (`params.KEY` for each parameter)."""
        cols = {k: getattr(self, k) for k in POINT_KEYS}
        cols.update({f"params.{k}": _scalar(v) for k, v in self.params})
        return cols


@dataclass(frozen=True)
class Sweep:
    """An expanded sweep: its runs in file order (duplicates merged) and what varies."""

    points: tuple[RunPoint, ...]
    axes: tuple[str, ...]
    source: str = "<sweep>"
    duplicates: int = 0
    param_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunOutcome:
    """What happened to one run: 'ok', 'failed' or 'skipped' (finished before)."""

    run_id: str
    folder: str
    status: str
    error: str = ""
    wall_seconds: float = 0.0


@dataclass(frozen=True)
class SweepReport:
    """The end of a sweep: counts, the failed folders with their errors, the summary file."""

    total: int
    ran: int
    skipped: int
    failed: tuple[tuple[str, str], ...]
    summary_path: Path


# --------------------------------------------------------------------------- parsing


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    """Read and expand a sweep YAML file; relative paths in it are relative to the file."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InvalidParameter(f"sweep file {str(path)!r} not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise InvalidParameter(f"sweep file {str(path)!r} is not valid YAML: {e}") from None
    return parse_sweep(data, base_dir=p.resolve().parent, source=str(path))


def parse_sweep(data: Any, base_dir: str | os.PathLike[str] | None = None,
                source: str = "<sweep>") -> Sweep:
    """Expand a sweep mapping (the YAML of SPEC sec. 7) into validated, distinct runs."""
    where = f"sweep {source}"
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InvalidParameter(f"{where}: expected a mapping with keys {', '.join(TOP_KEYS)}, "
                               f"got {type(data).__name__}")
    for key in data:
        if key not in TOP_KEYS:
            raise InvalidParameter(f"{where}: unknown key {key!r}{did_you_mean(str(key), TOP_KEYS)}"
                                   f"; allowed: {', '.join(TOP_KEYS)}")
    root = Path(base_dir) if base_dir is not None else Path.cwd()
    base = _parse_base(data.get("base"), where)
    grid = _parse_axes(data.get("grid"), f"{where}: grid", paired=False)
    zipped = _parse_axes(data.get("zip"), f"{where}: zip", paired=True)
    for key in grid:
        if key in zipped:
            raise InvalidParameter(f"{where}: axis {key!r} is in both grid and zip; "
                                   "vary it in one of them")
    seeds = _parse_seeds(data.get("seeds"), where)
    if seeds is not None and "seed" in {**grid, **zipped}:
        raise InvalidParameter(f"{where}: 'seeds' and a 'seed' axis both vary the seed; "
                               "keep one of them")
    combos = _combinations(grid, zipped, seeds)
    axes = tuple(dict.fromkeys([*grid, *zipped, *(["seed"] if seeds is not None else [])]))
    overrides = [dict(c) for c in combos]
    named = [o.get("policy", base["policy"]) for o in overrides]
    for name in named:
        if not isinstance(name, str):
            raise InvalidParameter(f"{where}: policy {name!r} is not a name")
    policies = sorted(set(named))
    known = _known_params(policies, where)
    points: list[RunPoint] = []
    seen: set[str] = set()
    duplicates = 0
    checked: set[tuple[str, str]] = set()
    for combo in overrides:
        point = _make_point(base, combo, known, root, where, checked)
        if point.run_id in seen:
            duplicates += 1
            continue
        seen.add(point.run_id)
        points.append(point)
    cols = tuple(sorted({f"params.{k}" for p in points for k, _ in p.params}))
    return Sweep(tuple(points), axes, source, duplicates, cols)


def _norm_key(key: Any, where: str, allowed_extra: tuple[str, ...]) -> str:
    """A point key with '-' read as '_' (`load-scale` = `load_scale`), or an error."""
    if not isinstance(key, str):
        raise InvalidParameter(f"{where}: key {key!r} is not a string")
    if key.startswith("params."):
        if not key[len("params."):]:
            raise InvalidParameter(f"{where}: empty parameter name in {key!r}")
        return key
    k = key.replace("-", "_")
    allowed = (*POINT_KEYS, *allowed_extra)
    if k not in allowed:
        hint = " (a policy or engine parameter is written params.KEY)" if k != "params" else ""
        raise InvalidParameter(
            f"{where}: unknown key {key!r}{did_you_mean(k, allowed)}; allowed: "
            f"{', '.join(allowed)}{'' if allowed_extra else ', params.KEY'}{hint}"
        )
    return k


def _parse_base(raw: Any, where: str) -> dict[str, Any]:
    base = dict(BASE_DEFAULTS, params={})
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        raise InvalidParameter(f"{where}: base must be a mapping of "
                               f"{', '.join([*POINT_KEYS, 'params'])}, got {raw!r}")
    for key, value in raw.items():
        if isinstance(key, str) and key.startswith("params."):
            base["params"][key[len("params."):]] = value
            continue
        k = _norm_key(key, f"{where}: base", ("params",))
        if k == "params":
            if value is None:
                continue
            if not isinstance(value, Mapping) or not all(isinstance(x, str) for x in value):
                raise InvalidParameter(f"{where}: base.params must map parameter names to "
                                       f"values, got {value!r}")
            base["params"].update(value)
        else:
            base[k] = value
    return base


def _parse_axes(raw: Any, where: str, *, paired: bool) -> dict[str, list[Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidParameter(f"{where} must be a mapping of axis -> list of values, "
                               f"got {raw!r}")
    axes: dict[str, list[Any]] = {}
    for key, values in raw.items():
        k = _norm_key(key, where, ())
        if k in axes:
            raise InvalidParameter(f"{where}: axis {key!r} given twice")
        if not isinstance(values, list):
            raise InvalidParameter(f"{where}.{key}: expected a list of values, got {values!r}")
        if not values:
            raise InvalidParameter(f"{where}.{key}: the list of values is empty")
        axes[k] = values
    if paired and axes:
        lengths = {k: len(v) for k, v in axes.items()}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise InvalidParameter(f"{where}: lists must have equal lengths to be paired, "
                                   f"got {shown}")
    return axes


def _parse_seeds(raw: Any, where: str) -> list[int] | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise InvalidParameter(f"{where}: seeds: {raw!r}: expected a count >= 1 or a "
                                   "list of integers >= 0")
        return list(range(raw))
    if not isinstance(raw, list) or not raw:
        raise InvalidParameter(f"{where}: seeds: {raw!r}: expected a count >= 1 or a "
                               "non-empty list of integers >= 0")
    for s in raw:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise InvalidParameter(f"{where}: seeds: {s!r} is not an integer >= 0")
    if len(set(raw)) != len(raw):
        raise InvalidParameter(f"{where}: seeds: {raw!r} has duplicates")
    return list(raw)


def _combinations(grid: dict[str, list[Any]], zipped: dict[str, list[Any]],
                  seeds: list[int] | None) -> list[list[tuple[str, Any]]]:
    """Grid (file order, last key fastest) x zip rows x seeds, as (key, value) lists."""
    grid_rows = [list(zip(grid, vals, strict=True))
                 for vals in itertools.product(*grid.values())] if grid else [[]]
    n = len(next(iter(zipped.values()))) if zipped else 0
    zip_rows = [[(k, zipped[k][i]) for k in zipped] for i in range(n)] if zipped else [[]]
    seed_rows = [[("seed", s)] for s in seeds] if seeds is not None else [[]]
    return [g + z + s for g in grid_rows for z in zip_rows for s in seed_rows]


def _known_params(policies: list[str], where: str) -> dict[str, set[str]]:
    """Engine keys plus each policy's own keys, by policy; unknown policies fail here."""
    from policies import policy_class
    from sim.engine_params import ENGINE_PARAMS

    out: dict[str, set[str]] = {}
    for name in policies:
        try:
            out[name] = set(ENGINE_PARAMS) | set(policy_class(name).params)
        except SimError as e:
            raise InvalidParameter(f"{where}: {e}") from None
    return out


def _make_point(base: dict[str, Any], combo: dict[str, Any], known: dict[str, set[str]],
                root: Path, where: str, checked: set[tuple[str, str]]) -> RunPoint:
    values = {k: v for k, v in base.items() if k != "params"}
    params = dict(base["params"])
    for k, v in combo.items():
        if k.startswith("params."):
            params[k[len("params."):]] = v
        else:
            values[k] = v
    shown = ", ".join(f"{k}={v!r}" for k, v in combo.items()) or "base"
    at = f"{where} (run {shown})"
    policy = values["policy"]
    any_known = set().union(*known.values())
    mine = {}
    for k in sorted(params):
        if k in known[policy]:
            mine[k] = _resolve_path(params[k], root)
        elif k not in any_known:
            raise InvalidParameter(
                f"{at}: unknown parameter {k!r}{did_you_mean(k, any_known)} for policies "
                f"{', '.join(sorted(known))}; known: {', '.join(sorted(any_known))}"
            )
        # else: another policy's parameter, left out of this run (as `schedlab run` does)
    _check_params(policy, mine, at)
    trace = _text(values["trace"], "trace", at)
    topology = _text(values["topology"], "topology", at)
    trace = _resolve_path(trace, root)
    topology = _resolve_path(topology, root)
    _check_inputs(trace, topology, at, checked)
    return RunPoint(
        policy=policy, trace=trace, topology=topology,
        seed=_int(values["seed"], "seed", at, allow_none=False),
        params=tuple(mine.items()),
        load_scale=_positive(values["load_scale"], "load_scale", at),
        max_jobs=_int(values["max_jobs"], "max_jobs", at),
        trace_window=_window(values["trace_window"], at),
        until=_nonneg(values["until"], "until", at),
    )


def _text(v: Any, key: str, at: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InvalidParameter(f"{at}: {key} {v!r}: expected a bundled name or a file path")
    return v.strip()


def _int(v: Any, key: str, at: str, *, allow_none: bool = True) -> int | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidParameter(f"{at}: {key} {v!r}: expected an integer >= 0")
    return int(v)


def _positive(v: Any, key: str, at: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise InvalidParameter(f"{at}: {key} {v!r}: expected a number > 0 (1 = the trace's "
                               "own load, 2 = arrivals twice as fast)")
    return float(v)


def _nonneg(v: Any, key: str, at: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise InvalidParameter(f"{at}: {key} {v!r}: expected seconds >= 0")
    return float(v)


def _window(v: Any, at: str) -> str | None:
    """`START:END` from a string, or `START..END` from a [start, end] list (dates may hold ':')."""
    if v is None:
        return None
    if isinstance(v, list) and len(v) == 2:
        parts = ["" if x is None else (f"{x:g}" if isinstance(x, int | float)
                                       and not isinstance(x, bool) else str(x)) for x in v]
        text = f"{parts[0]}..{parts[1]}"
    elif isinstance(v, str) and (":" in v or ".." in v):
        text = v.strip()
    else:
        raise InvalidParameter(f"{at}: trace_window {v!r}: expected 'START:END' or "
                               "[start, end] (seconds from the first submission, or dates)")
    from traces.shaping import parse_window

    try:
        parse_window(text, 0.0)  # syntax only: epoch 0 lets any date through
    except SimError as e:
        raise InvalidParameter(f"{at}: {e}") from None
    return text


def _scalar(v: Any) -> Any:
    """A parameter value as a summary cell: lists and mappings become text."""
    if isinstance(v, list | tuple | dict):
        return json.dumps(v, sort_keys=True)
    return v


def _resolve_path(v: Any, root: Path) -> Any:
    """A relative path to an existing file, resolved against the sweep file's folder."""
    if not isinstance(v, str):
        return v
    text = v.strip()
    looks = os.sep in text or text.lower().endswith(_PATH_SUFFIXES)
    if looks and not Path(text).is_absolute() and (root / text).exists():
        return str((root / text).resolve())
    if looks and Path(text).exists():
        return str(Path(text).resolve())
    return v


def _check_params(policy: str, given: dict[str, Any], at: str) -> None:
    """Parse every value with its declared parser so a typo fails before any run."""
    from policies import policy_class
    from sim.engine_params import ENGINE_PARAMS
    from sim.params import resolve

    try:
        resolve({k: v for k, v in given.items() if k in ENGINE_PARAMS}, ENGINE_PARAMS,
                "the engine")
        pol = policy_class(policy).params
        resolve({k: v for k, v in given.items() if k not in ENGINE_PARAMS}, pol,
                f"policy {policy!r}")
    except SimError as e:
        raise InvalidParameter(f"{at}: {e}") from None


def _check_inputs(trace: str, topology: str, at: str, checked: set[tuple[str, str]]) -> None:
    """Fail early on an unknown trace or topology name, or a missing file (each once)."""
    from topologies import load_topology
    from traces import bundled_traces, load_trace

    if ("trace", trace) not in checked:
        if not (Path(trace).is_file() or trace in bundled_traces()):
            try:
                load_trace(trace)
            except SimError as e:
                raise InvalidParameter(f"{at}: {e}") from None
        checked.add(("trace", trace))
    if ("topology", topology) not in checked:
        try:
            load_topology(topology)
        except SimError as e:
            raise InvalidParameter(f"{at}: {e}") from None
        checked.add(("topology", topology))


# --------------------------------------------------------------------------- one run


def is_finished(folder: Path) -> bool:
    """A run folder is finished when its summary.json exists (SimResult.write writes it last)."""
    return (folder / "summary.json").is_file()


@functools.lru_cache(maxsize=4)
def _cached_trace(source: str, stamp: float) -> Any:
    """Traces are immutable: a worker that runs many points loads each one once."""
    from traces import load_trace

    return load_trace(source)


def _load_trace(source: str) -> Any:
    p = Path(source)
    return _cached_trace(source, p.stat().st_mtime if p.is_file() else 0.0)


def shaped_trace(point: RunPoint) -> Any:
    """The point's trace after `trace_window`, `load_scale` and `max_jobs` (traces.shaping)."""
    from traces.shaping import shape

    trace = _load_trace(point.trace)
    if point.trace_window is None and point.load_scale is None and point.max_jobs is None:
        return trace
    return shape(trace, window=point.trace_window, load_scale=point.load_scale,
                 max_jobs=point.max_jobs)


def run_point(point: RunPoint, out: str) -> RunOutcome:
    """Run one point into OUT/<folder>; a failure is recorded in error.json, never raised."""
    from sim.engine import Simulation

    folder = Path(out) / point.folder
    folder.mkdir(parents=True, exist_ok=True)
    if is_finished(folder):  # a retried task whose first attempt got this far
        return RunOutcome(point.run_id, point.folder, "skipped")
    (folder / "error.json").unlink(missing_ok=True)
    atomic_text(folder / "point.json", json.dumps(point.config(), indent=2, default=str))
    wall0 = time.perf_counter()
    try:
        sim = Simulation(shaped_trace(point), point.topology, point.policy, seed=point.seed,
                         params=dict(point.params))
        result = sim.run(until=point.until)
        result.config["sweep_point"] = point.config()
        result.write(folder)
    except Exception as e:  # noqa: BLE001 - any failure of a run is data, not a crash
        message = f"{type(e).__name__}: {e}"
        write_error(folder, point, message, traceback.format_exc())
        return RunOutcome(point.run_id, point.folder, "failed", message,
                          time.perf_counter() - wall0)
    return RunOutcome(point.run_id, point.folder, "ok", "", time.perf_counter() - wall0)


def write_error(folder: Path, point: RunPoint, message: str, tb: str) -> None:
    """Record a failed run: error, traceback and the point, in error.json."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_text(folder / "error.json", json.dumps(
        {"error": message, "traceback": tb, "point": point.config()}, indent=2, default=str))


# --------------------------------------------------------------------------- the sweep


def run_sweep(sweep: Sweep, out: str | os.PathLike[str], executor: Executor, *,
              on_outcome: Callable[[RunOutcome], None] | None = None) -> SweepReport:
    """Run every unfinished point on `executor`, then write OUT/summary.parquet.

    Finished folders are skipped; a run that raises, or that the executor loses, is
    recorded as failed and the others go on. On KeyboardInterrupt the pending runs are
    cancelled, the summary of what finished is written, and the interrupt propagates.
    The summary's `status` is `ok`, `failed` (with `error`) or `not run`.
    """
    root = Path(out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    atomic_text(root / "sweep.json", json.dumps(
        {"source": sweep.source, "axes": list(sweep.axes),
         "runs": [{"folder": p.folder, **p.config()} for p in sweep.points]},
        indent=2, default=str))
    todo = [p for p in sweep.points if not is_finished(root / p.folder)]
    skipped = len(sweep.points) - len(todo)
    futures: dict[Future, RunPoint] = {}
    outcomes: list[RunOutcome] = []
    try:
        for p in todo:
            futures[executor.submit(run_point, p, str(root))] = p
        for fut in as_completed(futures):
            outcome = _outcome(fut, futures[fut], root)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
    except KeyboardInterrupt:
        for fut in futures:
            fut.cancel()
        write_summary(sweep, root)
        raise
    summary = write_summary(sweep, root)
    failed = tuple((o.folder, o.error) for o in outcomes if o.status == "failed")
    ran = sum(1 for o in outcomes if o.status in ("ok", "failed"))
    return SweepReport(len(sweep.points), ran, skipped + (len(outcomes) - ran), failed,
                       summary)


def _outcome(fut: Future, point: RunPoint, root: Path) -> RunOutcome:
    """The run's outcome; an exception from the executor itself becomes a failed run."""
    try:
        return fut.result()
    except Exception as e:  # noqa: BLE001 - a lost worker or a broken pool fails one run
        message = f"{type(e).__name__}: {e} (raised by the executor, not the run)"
        write_error(root / point.folder, point, message, traceback.format_exc())
        return RunOutcome(point.run_id, point.folder, "failed", message)


def summary_frame(sweep: Sweep, root: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per run in sweep order: status, error, parameters and summary metrics."""
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
                    row[k] = v
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


# --------------------------------------------------------------------------- executors


class InlineExecutor(Executor):
    """Runs each task at submit time in this process (`-j 1`: no pool, easy to debug)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Run `fn` now; return a finished future."""
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - delivered through the future
            fut.set_exception(e)
        return fut


SCHEDULERS = ("processes", "dask-local", "tcp://HOST:PORT")
"""What `--scheduler` accepts (any Dask address scheme works like tcp://)."""


@contextlib.contextmanager
def open_executor(scheduler: str | None = None, jobs: int | None = None
                  ) -> Iterator[Executor]:
    """A process pool (default), a Dask LocalCluster, or an existing Dask cluster's executor.

    Dask is reached only through `Client.get_executor()`, so the runner stays generic.
    """
    n = jobs or os.cpu_count() or 1
    if scheduler in (None, "", "processes"):
        if n == 1:
            yield InlineExecutor()
            return
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            yield pool
        return
    if scheduler != "dask-local" and "://" not in scheduler:
        raise InvalidParameter(f"--scheduler {scheduler!r}: expected one of "
                               f"{', '.join(SCHEDULERS)}")
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise InvalidParameter(f"--scheduler {scheduler!r} needs Dask: "
                               "pip install 'schedlab[dask]'") from None
    if scheduler == "dask-local":
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            yield client.get_executor(pure=False)
        return
    try:
        client = Client(scheduler, timeout="10s")
    except OSError as e:
        raise InvalidParameter(f"--scheduler {scheduler!r}: cannot reach the Dask "
                               f"scheduler ({e})") from None
    with client:
        yield client.get_executor(pure=False)


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
