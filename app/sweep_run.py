"""Running a sweep: one run per point into its own folder, on any executor.

Rerunning a sweep skips the folders that hold a `summary.json` (written last by
`SimResult.write`, which replaces a run's folder whole, `point.json` included). The
runner takes any `concurrent.futures.Executor`: a process pool, or Dask's
`Client.get_executor()`; nothing in it knows about Dask (`open_executor` builds either).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.app.common import pool_context
from schedlab.app.sweep_file import RunPoint, Sweep
from schedlab.app.sweep_summary import is_finished, write_summary
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.writing import FolderNotWritable, atomic_text, ensure_writable_dir, json_text


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


# --------------------------------------------------------------------------- one run


@functools.lru_cache(maxsize=4)
def _cached_trace(source: str, stamp: float) -> Any:
    """Traces are immutable: a worker that runs many points loads each one once."""
    from schedlab.app.inputs import load_named_trace

    return load_named_trace(source)


def _load_trace(source: str) -> Any:
    p = Path(source)
    return _cached_trace(source, p.stat().st_mtime if p.is_file() else 0.0)


def shaped_trace(point: RunPoint) -> Any:
    """The point's trace after `trace_window`, `load_scale` and `max_jobs` (`traces.shaping`).

    A replica's trace is then shaken (`traces.shake`) from its replica seed and index
    alone, so every policy of the sweep runs the same replica.
    """
    from schedlab.traces.shaping import shape

    trace = _load_trace(point.trace)
    if point.trace_window is not None or point.load_scale is not None \
            or point.max_jobs is not None:
        trace = shape(trace, window=point.trace_window, load_scale=point.load_scale,
                      max_jobs=point.max_jobs)
    if point.replica is None:
        return trace
    from schedlab.traces.shake import replica_rng, shake, shaking_from

    return shake(trace, shaking_from(dict(point.shaking)),
                 replica_rng(point.replica_seed or 0, point.replica))


def run_point(point: RunPoint, out: str) -> RunOutcome:
    """Run one point into OUT/<folder>; a failure is recorded in error.json, never raised."""
    from schedlab.app.inputs import load_named_topology
    from schedlab.sim.engine import Simulation

    folder = Path(out) / point.folder
    folder.mkdir(parents=True, exist_ok=True)
    if is_finished(folder):  # a retried task whose first attempt got this far
        return RunOutcome(point.run_id, point.folder, "skipped")
    (folder / "error.json").unlink(missing_ok=True)
    point_json = json_text(point.config(), default=str)
    atomic_text(folder / "point.json", point_json)  # marks a started run until it ends
    wall0 = time.perf_counter()
    try:
        exe = point.resolved()  # its files found from the sweep file's folder
        sim = Simulation(shaped_trace(exe), load_named_topology(exe.topology),
                         exe.policy, seed=exe.seed, params=dict(exe.params))
        result = sim.run(until=point.until)
        result.config["sweep_point"] = point.config()
        result.write(folder, extra={"point.json": point_json})
    except Exception as e:  # noqa: BLE001 - any failure of a run is data, not a crash
        message = f"{type(e).__name__}: {e}"
        write_error(folder, point, message, traceback.format_exc())
        return RunOutcome(point.run_id, point.folder, "failed", message,
                          time.perf_counter() - wall0)
    return RunOutcome(point.run_id, point.folder, "ok", "", time.perf_counter() - wall0)


def write_error(folder: Path, point: RunPoint, message: str, tb: str) -> None:
    """Record a failed run: error, traceback and the point, in error.json."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_text(folder / "error.json", json_text(
        {"error": message, "traceback": tb, "point": point.config()}, default=str))


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
    try:
        ensure_writable_dir(root)  # before any run: a bad --out fails at once
    except FolderNotWritable as e:
        raise InvalidParameter(f"sweep folder: {e}") from None
    atomic_text(root / "sweep.json", json_text(
        {"source": sweep.source, "axes": list(sweep.axes),
         "runs": [{"folder": p.folder, **p.config()} for p in sweep.points]},
        default=str))
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
        with ProcessPoolExecutor(max_workers=n, mp_context=pool_context()) as pool:
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
