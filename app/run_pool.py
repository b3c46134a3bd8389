"""`schedlab run`'s policies on a process pool: one task per policy, progress, same numbers.

Each worker gets the loaded trace and topology once (the pool's initializer), runs the
policies it is handed and writes their result folders itself, so only summaries come
back. A run is deterministic given its seed, so the pool changes no number but
`wall_seconds`. With one worker nothing is forked: the policies run in this process.
The pool starts the policies that took longest the last time (the `wall_seconds` in the
folder being replaced) first, so the last one to end is a short one.
Progress (jobs final / total, simulated time) reaches the terminal through a queue.
"""

from __future__ import annotations

import math
import os
import queue
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.app.common import pool_context
from schedlab.sim.errors import SimError

__all__ = ["PolicyTask", "ProgressBoard", "default_jobs", "previous_wall", "run_tasks",
           "warm_up"]

Report = Callable[[str, float, int, int], None]
"""Progress of one policy: label, simulated time, jobs final, jobs total."""


@dataclass(frozen=True)
class PolicyTask:
    """One policy of a `schedlab run`: what to run and where its folder goes."""

    policy: str
    label: str
    params: dict[str, str]
    folder: str
    config_extra: dict[str, Any] = field(default_factory=dict)
    cost_hint: float = math.inf
    """Expected wall seconds (a previous run's); the pool starts the costliest first."""


@dataclass(frozen=True)
class RunInputs:
    """What every task of a `schedlab run` shares: the inputs and the run options."""

    trace: Any
    topology: Any
    seed: int
    until: float | None
    max_jobs: int | None


PRELOAD = ("schedlab.sim.engine", "schedlab.sim.results", "schedlab.policies", "pandas",
           "pyarrow.parquet")
"""Modules the fork server imports once, so each worker starts with them loaded."""


def preload_modules(tasks: Sequence[PolicyTask]) -> list[str]:
    """PRELOAD and the modules of the tasks' built-in policies (gavel's loads SciPy).

    Only modules of the `schedlab.policies` package: a plugin's module is imported by the worker
    that runs it, so a plugin that fails to import fails its run, not the fork server.
    """
    from schedlab.sim.registry import POLICIES

    found = [POLICIES.module_of(t.policy) for t in tasks]
    own = sorted({m for m in found if m is not None and m.startswith("policies.")})
    return [*PRELOAD, *own]


def previous_wall(folder: Path) -> float:
    """`wall_seconds` of the result already in `folder` (inf when there is none)."""
    import json

    try:
        return float(json.loads((folder / "summary.json").read_text(encoding="utf-8"))
                     ["wall_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return math.inf


def default_jobs() -> int:
    """The cores this process may use (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


class _Throttle:
    """Calls `report` at most every `every` wall seconds, and always for the last job."""

    def __init__(self, label: str, report: Report, every: float = 0.2) -> None:
        self.label, self.report, self.every = label, report, every
        self.last = 0.0

    def __call__(self, now: float, done: int, total: int) -> None:
        t = time.monotonic()
        if t - self.last >= self.every or done == total:
            self.last = t
            self.report(self.label, now, done, total)


def run_task(inputs: RunInputs, task: PolicyTask, report: Report | None) -> dict[str, Any]:
    """Run one policy, write its folder, return its summary.

    Raises:
        SimError: The run failed, or its folder cannot be written (names the folder).
    """
    from schedlab.sim.engine import Simulation

    sim = Simulation(inputs.trace, inputs.topology, task.policy, seed=inputs.seed,
                     params=task.params, max_jobs=inputs.max_jobs)
    progress = _Throttle(task.label, report) if report is not None else None
    result = sim.run(until=inputs.until, progress=progress)
    result.config.update(task.config_extra)
    try:
        result.write(Path(task.folder))
    except OSError as e:  # e.g. the disk filled up during the run
        raise SimError(f"cannot write results to {task.folder!r}: "
                       f"{e.strerror or e}") from None
    return dict(result.summary)


# --------------------------------------------------------------------------- workers

_WORKER: dict[str, Any] = {}


def _init_worker(inputs: RunInputs, messages: Any) -> None:
    """Keep the shared inputs and the progress queue (None: no progress) in the worker."""
    _WORKER["inputs"] = inputs
    _WORKER["messages"] = messages


def _put(label: str, now: float, done: int, total: int) -> None:
    _WORKER["messages"].put((label, now, done, total))


def _worker_task(task: PolicyTask) -> dict[str, Any]:
    """A pool task: one policy on the worker's inputs."""
    messages = _WORKER["messages"]
    if messages is not None:
        messages.put((task.label, 0.0, 0, -1))  # started
    return run_task(_WORKER["inputs"], task, _put if messages is not None else None)


# --------------------------------------------------------------------------- progress


class ProgressBoard:
    """One line per policy on stderr: a bar while it runs, a closing line when it ends.

    The bar counts jobs that reached a final status (completed, rejected, failed, killed)
    of the jobs the run replays, with the simulated time beside it, so it reaches 100%
    only when the last job ends (not at the last submission).
    """

    def __init__(self, labels: Sequence[str]) -> None:
        self.width = max((len(x) for x in labels), default=0)
        self.bars: dict[str, Any] = {}
        self.ended: set[str] = set()

    def update(self, label: str, now: float, done: int, total: int) -> None:
        """A progress report from a run (`total` -1: the run started)."""
        from tqdm import tqdm

        if total < 0 or label in self.ended:  # a late report of a run that ended
            return
        bar = self.bars.get(label)
        if bar is None:
            bar = self.bars[label] = tqdm(
                total=total, desc=label.ljust(self.width), unit="job", leave=False,
                file=sys.stderr, dynamic_ncols=True,
                bar_format="{desc}  {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} jobs "
                           "final{postfix}")
        bar.n = done
        bar.set_postfix_str(f"simulated t={now / 3600:.1f} h", refresh=False)
        bar.refresh()

    def finish(self, label: str, summary: dict[str, Any] | None, error: str = "") -> None:
        """Replace the policy's bar with one closing line."""
        from tqdm import tqdm

        self.ended.add(label)
        bar = self.bars.pop(label, None)
        if bar is not None:
            bar.close()
        if error:
            tqdm.write(f"{label.ljust(self.width)}  failed: {error}", file=sys.stderr)
            return
        s = summary or {}
        final = sum(int(s.get(k, 0) or 0) for k in
                    ("jobs_completed", "jobs_rejected", "jobs_failed", "jobs_killed"))
        tqdm.write(f"{label.ljust(self.width)}  done: {final}/{s.get('jobs_submitted', '?')} "
                   f"jobs final in {float(s.get('wall_seconds', 0.0)):.1f} s", file=sys.stderr)

    def close(self) -> None:
        """Close any bar left (after an error or an interrupt)."""
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


# --------------------------------------------------------------------------- running


def warm_up(policies: Sequence[str], jobs: int) -> None:
    """Start the fork server now, so it imports the modules while the inputs load.

    Does nothing when the pool would have one worker or there is no fork server.
    """
    if min(jobs, len(policies)) <= 1:
        return
    ctx = pool_context()
    if ctx.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    ctx.set_forkserver_preload(preload_modules(
        [PolicyTask(p, p, {}, "") for p in policies]))
    forkserver.ensure_running()


def run_tasks(inputs: RunInputs, tasks: Sequence[PolicyTask], jobs: int,
              board: ProgressBoard | None = None) -> list[dict[str, Any]]:
    """Run every task on `jobs` workers (1: in this process); summaries in task order.

    The first failure cancels the tasks not started yet and is raised once the running
    ones end (their folders are written whole or not at all).
    """
    jobs = max(1, min(jobs, len(tasks)))
    if jobs == 1:
        out = []
        for task in tasks:
            if board is not None:
                board.update(task.label, 0.0, 0, -1)
            summary = run_task(inputs, task, board.update if board is not None else None)
            if board is not None:
                board.finish(task.label, summary)
            out.append(summary)
        return out
    ctx = pool_context()
    if ctx.get_start_method() == "forkserver":  # no effect once warm_up started it
        ctx.set_forkserver_preload(preload_modules(tasks))
    messages = ctx.Queue() if board is not None else None
    results: dict[int, dict[str, Any]] = {}
    # longest first (by a previous run's wall time; unknown first), so no long run is
    # left alone at the end; ties keep the given order
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i].cost_hint)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                             initargs=(inputs, messages)) as pool:
        futures: dict[Future, int] = {pool.submit(_worker_task, tasks[i]): i for i in order}
        pending = set(futures)
        error: BaseException | None = None
        try:
            while pending:
                done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
                _drain(messages, board)
                for fut in sorted(done, key=futures.__getitem__):
                    i = futures[fut]
                    exc = fut.exception()
                    if exc is not None:
                        if board is not None:
                            board.finish(tasks[i].label, None, str(exc))
                        if error is None:
                            error = exc
                            for other in pending:
                                other.cancel()
                        continue
                    results[i] = fut.result()
                    if board is not None:
                        board.finish(tasks[i].label, results[i])
                pending = {f for f in pending if not f.cancelled()}
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
        finally:
            if board is not None:
                board.close()
    if error is not None:
        raise error
    return [results[i] for i in range(len(tasks))]


def _drain(messages: Any, board: ProgressBoard | None) -> None:
    """Show every progress report waiting in the queue."""
    if messages is None or board is None:
        return
    while True:
        try:
            label, now, done, total = messages.get_nowait()
        except queue.Empty:
            return
        board.update(label, now, done, total)
