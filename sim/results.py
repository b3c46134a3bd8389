"""Results of a run: DataFrames, the summary metrics of SPEC sec. 5 and atomic writing.

The engine hands over flat records; pandas is used only here, once, at the end.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.degenerate import result_warnings
from sim.jobstate import FINAL, PENDING, RETRYING, RUNNING, WAITING
from sim.metrics import sla_violated, summarize
from sim.model import JobStatus
from sim.recorder import EVENT_COLUMNS, NODE_COLUMNS, TIMELINE_COLUMNS
from sim.roles import side_gpu_seconds
from sim.tenants import TENANT_COLUMNS, tenants_frame
from sim.writing import atomic_text as atomic_text  # re-exported: the former home
from sim.writing import atomic_write as atomic_write
from sim.writing import text_writer, write_folder

if TYPE_CHECKING:
    from sim.engine import Run, Simulation

JOB_COLUMNS = (
    "job_id", "user", "vc", "num_gpus", "submit_time", "start_time", "end_time",
    "queueing_delay", "jct", "duration", "run_time", "status", "preemptions", "migrations",
    "restarts", "lost_work", "locality_level", "slowdown", "response_time", "censored",
)
"""The columns of jobs.parquet that SPEC sec. 5 names, in its order."""

JOB_EXTRA_COLUMNS = ("deadline", "sla_violated", "reason", "gpu_seconds", "gpu_time")
"""Our own columns after them: the SLA, why a job did not complete, GPU time held and
demanded (the ideal GPU-seconds `JobSpec.gpu_time`); pass-through columns come last."""


@dataclass
class SimResult:
    """What a run produced: the three tables, the summary and the config to rerun it."""

    jobs: pd.DataFrame
    events: pd.DataFrame
    timeline: pd.DataFrame
    summary: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    nodes: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(NODE_COLUMNS)))
    tenants: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(TENANT_COLUMNS)))

    def write(self, out_dir: str | Path, extra: Mapping[str, str] | None = None) -> Path:
        """Write the result folder whole: jobs/events/timeline/nodes/tenants Parquet, JSON.

        Every file goes into a fresh hidden sibling folder that then replaces `out_dir`
        (`sim.writing.write_folder`): a reader, or a rerun after a crash, sees the old
        complete folder or the new complete one, never a mix. Files of the old folder
        that this result does not write are gone with it.

        Args:
            out_dir: The result folder; its parents are created when missing.
            extra: More text files to put in the folder (name -> content), e.g. a sweep
                point's `point.json`.

        Returns:
            The result folder.
        """
        # serialized first: a value JSON cannot take fails before anything is written
        config = json.dumps(self.config, indent=2, default=_json) + "\n"
        summary = json.dumps(self.summary, indent=2, default=_json) + "\n"
        files: dict[str, Callable[[str], object]] = {
            f"{name}.parquet": _parquet_writer(df)
            for name, df in (("jobs", self.jobs), ("events", self.events),
                             ("timeline", self.timeline), ("nodes", self.nodes),
                             ("tenants", self.tenants))
        }
        files["config.json"] = text_writer(config)
        for name, text in (extra or {}).items():
            files[name] = text_writer(text if text.endswith("\n") else text + "\n")
        # the summary last: its presence marks a finished run (sweeps skip those)
        files["summary.json"] = text_writer(summary)
        return write_folder(out_dir, files, replaces=_is_result_folder)


def _json(o: Any) -> Any:
    if isinstance(o, dict):
        return ",".join(f"{getattr(k, 'label', k)}={v:g}" if isinstance(v, float)
                        else f"{getattr(k, 'label', k)}={v}" for k, v in o.items())
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if hasattr(o, "label"):
        return o.label
    return str(o)


def _jobs_frame(run: Run, end: float) -> pd.DataFrame:
    """One row per submitted job (SPEC sec. 5 columns, then ours and pass-through).

    A job the run ended before (`unfinished`, `censored`) is accounted up to `end`: a
    waiting one (queued or suspended, or between retries) has its current wait added to
    its queueing delay, a running one its current hold to its run time and GPU time.
    Time held for dependencies is not queueing (SPEC sec. 2 `depends_on`).

    Built column by column (attribute getters, numpy arithmetic), never a row object per
    job: at a million jobs the rows cost more memory than the frame.
    """
    topo = run.topo
    own = {*JOB_COLUMNS, *JOB_EXTRA_COLUMNS}
    extra_names = [c for c in run.sim.trace.extra_columns if c not in own]
    columns = [*JOB_COLUMNS, *JOB_EXTRA_COLUMNS, *extra_names]
    # one row a trace job (a container job's task runs have none) that was submitted
    jobs = [j for j in run.jobs[:run.num_trace] if j.status != WAITING]
    n = len(jobs)
    if n == 0:
        return pd.DataFrame([], columns=columns)
    specs = list(map(attrgetter("spec"), jobs))

    def state(name: str) -> list[Any]:
        return list(map(attrgetter(name), jobs))

    def spec(name: str) -> list[Any]:
        return list(map(attrgetter(name), specs))

    times = [state(a) for a in ("queue_time", "run_time", "gpu_seconds", "first_start",
                                "end_time")]
    submit_l = spec("submit_time")
    duration_l = spec("duration")
    for values in (*times, submit_l, duration_l):
        kinds = set(map(type, values))
        if float not in kinds or not kinds <= {int, float}:
            # a column of integer times only (a hand-made trace): pandas would type it
            # int64, as the rows always were; build those
            return _jobs_frame_rows(run, end)
    queue, run_time, gpu_seconds, first_start, end_time = map(np.array, times)
    statuses = state("status")
    shown = [_SHOWN[st] for st in statuses]
    censored = np.fromiter(map(_CENSORED.__getitem__, statuses), dtype=bool, count=n)
    ended = np.fromiter(map(_ENDED.__getitem__, statuses), dtype=bool, count=n)
    counts = [state(a) for a in ("preemptions", "migrations", "restarts", "lost_work")]
    gpu_time = spec("gpu_time")
    for i in [i for i, st in enumerate(statuses) if st in _OPEN]:
        j = jobs[i]
        if j.spec.completions is not None:
            continue  # a container job: its task runs' totals, below
        if j.status == RUNNING:
            held = end - j.held_since
            run_time[i] = j.run_time + held
            gpu_seconds[i] = j.gpu_seconds + held * len(j.gpus) * j.milli / 1000
            if j.side:  # running non-gang tasks of a job of roles (sim.roles)
                gpu_seconds[i] += side_gpu_seconds(j, end)
        else:
            queue[i] = j.queue_time + (end - j.queued_since)
    containers = run.containers
    if containers is not None:  # totals over each container job's task runs
        for i in [i for i, sp in enumerate(specs) if sp.completions is not None]:
            j = jobs[i]
            queue[i], run_time[i], gpu_seconds[i] = containers.totals(j, end)
            for col, v in zip(counts, containers.counts(j), strict=True):
                col[i] = v
            gpu_time[i] = specs[i].gpu_time * specs[i].completions
    nan = math.nan
    submit = np.array(submit_l)
    duration = np.array(duration_l)
    end_time[censored] = nan
    with np.errstate(invalid="ignore", divide="ignore"):
        jct = np.where(ended, end_time - submit, nan)
        slowdown = np.where(ended, jct / duration, nan)
    deadline = np.array([nan if d is None else float(d) for d in spec("deadline")],
                        dtype=np.float64)
    wait_hours = spec("max_wait_hours")
    sla = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(~np.isnan(deadline) | (np.array(wait_hours) > 0)).tolist():
        sla[i] = sla_violated(shown[i], submit_l[i], float(first_start[i]),
                              float(end_time[i]), float(deadline[i]), wait_hours[i], end)
    level_names = {lv.value: lv.label for lv in topo.levels}
    data: dict[str, Any] = {
        "job_id": spec("job_id"), "user": spec("user"), "vc": spec("vc"),
        "num_gpus": _typed(spec("num_gpus")), "submit_time": submit,
        "start_time": first_start, "end_time": end_time, "queueing_delay": queue, "jct": jct,
        "duration": duration, "run_time": run_time, "status": shown,
        "preemptions": _typed(counts[0]), "migrations": _typed(counts[1]),
        "restarts": _typed(counts[2]), "lost_work": _typed(counts[3]),
        "locality_level": [level_names.get(v, "") for v in state("locality_level")],
        "slowdown": slowdown, "response_time": first_start - submit,
        "censored": censored, "deadline": deadline, "sla_violated": sla,
        "reason": state("reason"), "gpu_seconds": gpu_seconds,
        "gpu_time": _typed(gpu_time),
    }
    for c in extra_names:
        data[c] = [dict(s.extra).get(c) for s in specs]
    return pd.DataFrame(data, columns=columns)


def _typed(values: list[Any]) -> list[Any] | np.ndarray:
    """Numbers as the array pandas would infer from them (int64, float64), made at once."""
    kinds = set(map(type, values))
    if kinds == {int}:
        return np.array(values, dtype=np.int64)
    if float in kinds and kinds <= {int, float}:
        return np.array(values, dtype=np.float64)
    return values  # anything else: pandas infers, as from rows


_FINAL_SHOWN = ("completed", "failed", "killed", "rejected")
_SHOWN = {st: str(st) if str(st) in _FINAL_SHOWN else "unfinished" for st in JobStatus}
_CENSORED = {st: str(st) not in _FINAL_SHOWN for st in JobStatus}
_ENDED = {st: str(st) in ("completed", "failed", "killed") for st in JobStatus}
_OPEN = frozenset({PENDING, RETRYING, RUNNING})


def _jobs_frame_rows(run: Run, end: float) -> pd.DataFrame:
    """`_jobs_frame` row by row: the dtypes pandas infers from Python values (int times)."""
    topo = run.topo
    own = {*JOB_COLUMNS, *JOB_EXTRA_COLUMNS}
    extra_names = [c for c in run.sim.trace.extra_columns if c not in own]
    level_names = {lv.value: lv.label for lv in topo.levels}
    nan = math.nan
    rows = []
    containers = run.containers
    for j in run.jobs[:run.num_trace]:  # a container job's task runs have no rows
        if j.status == WAITING:
            continue  # never submitted before the end of the run
        s = j.spec
        censored = j.status not in FINAL or j.status == JobStatus.UNFINISHED
        status = str(j.status) if not censored else "unfinished"
        queue = j.queue_time
        run_time = j.run_time
        gpu_seconds = j.gpu_seconds
        counts = (j.preemptions, j.migrations, j.restarts, j.lost_work)
        if containers is not None and s.completions is not None:
            queue, run_time, gpu_seconds = containers.totals(j, end)
            counts = containers.counts(j)
        elif j.status in (PENDING, RETRYING):
            queue += end - j.queued_since
        elif j.status == RUNNING:
            held = end - j.held_since
            run_time += held
            gpu_seconds += held * len(j.gpus) * j.milli / 1000
            if j.side:  # running non-gang tasks of a job of roles (sim.roles)
                gpu_seconds += side_gpu_seconds(j, end)
        ended = status in ("completed", "failed", "killed")
        end_time = j.end_time if not censored else nan
        jct = end_time - s.submit_time if ended else nan
        deadline = nan if s.deadline is None else float(s.deadline)
        row: tuple[Any, ...] = (
            s.job_id, s.user, s.vc, s.num_gpus, s.submit_time, j.first_start,
            end_time, queue, jct, s.duration, run_time,
            status, *counts,
            level_names.get(j.locality_level, ""), jct / s.duration if ended else nan,
            j.first_start - s.submit_time, censored,
            deadline, sla_violated(status, s.submit_time, j.first_start, end_time, deadline,
                                   s.max_wait_hours, end),
            j.reason, gpu_seconds, s.gpu_time * (s.completions or 1),
        )
        if extra_names:
            ex = dict(s.extra)
            row += tuple(ex.get(c) for c in extra_names)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*JOB_COLUMNS, *JOB_EXTRA_COLUMNS, *extra_names])


def _parquet_writer(df: pd.DataFrame) -> Callable[[str], None]:
    """A writer of `df` as Parquet to a given path (for write_folder and atomic_write)."""

    def write(path: str) -> None:
        df.to_parquet(path, index=False)

    return write


def _is_result_folder(folder: Path) -> bool:
    """A folder an earlier run (or a failed sweep point) wrote, safe to replace whole."""
    return any((folder / n).exists() for n in RESULT_MARKERS)


RESULT_MARKERS = ("summary.json", "config.json", "jobs.parquet", "error.json", "point.json")
"""Files that mark a folder as a schedlab result folder."""


def _policy_metrics(policy: Any) -> dict[str, Any]:
    """A policy's own counters (suspend commands, demotions, ...) when it keeps any."""
    m = getattr(policy, "metrics", None)
    return {k: _json(v) if isinstance(v, np.generic) else v for k, v in m().items()} \
        if callable(m) else {}


def _trace_label(sim: Simulation) -> str:
    """How to load the trace again: a bundled name, or an absolute file path."""
    from traces import bundled_traces

    t = sim.trace
    if t.name.partition(":")[0] in bundled_traces():  # default, synthetic:N, philly-like:N
        return t.name
    if t.source and Path(t.source).is_file():
        return str(Path(t.source).resolve())
    return t.source or t.name


def _topology_label(sim: Simulation) -> str:
    """How to load the topology again: a preset name, or an absolute file path."""
    src = sim.topology.source or sim.topology.name
    p = Path(src)
    return str(p.resolve()) if p.is_file() else src


def build_result(sim: Simulation, run: Run, end: float, wall: float) -> SimResult:
    """Assemble DataFrames and the summary once the run has stopped at `end`."""
    from sim import __version__

    run.sample()
    jobs = _jobs_frame(run, end)
    rec = run.recorder
    events = pd.DataFrame(rec.event_columns(), columns=list(EVENT_COLUMNS))
    # the summary integrates every change, whatever timeline the run writes
    exact = pd.DataFrame(rec.timeline_columns(), columns=list(TIMELINE_COLUMNS))
    timeline = exact if rec.timeline_mode == "full" else pd.DataFrame(
        rec.timeline_columns(rec.timeline_mode), columns=list(TIMELINE_COLUMNS))
    params = {**sim.policy.settings, **sim.engine_params}
    summary = summarize(jobs, exact, end)
    summary.update(
        policy=sim.policy.name,
        trace=_trace_label(sim),
        topology=_topology_label(sim),
        seed=sim.seed,
        params={k: _json(v) if not isinstance(v, bool | int | float | str | type(None))
                else v for k, v in params.items()},
        schedlab_version=__version__,
        wall_seconds=wall,
        events_processed=run.events_processed,
        jobs_bad_rows=sim.trace.bad_rows,
        node_failures=run.health.failures,
        failure_lost_gpu_hours=run.health.lost_gpu_s / 3600.0,
    )
    # a policy's own counters, flattened (scalars only) so sweeps can tabulate them
    for k, v in _policy_metrics(sim.policy).items():
        if isinstance(v, bool | int | float | str):
            summary[f"policy_{k}"] = v
    summary["warnings"] = result_warnings(sim, run)
    digest = hashlib.sha256(
        "\n".join(f"{s.job_id},{s.submit_time!r},{s.num_gpus},{s.duration!r}"
                  for s in sim.jobs).encode()
    ).hexdigest()[:16]
    config = {
        "trace": _trace_label(sim),
        "trace_sha": digest,
        "skip_bad_rows": sim.trace.bad_rows > 0,
        "topology": _topology_label(sim),
        "policy": sim.policy.name,
        "params": {**{k: v for k, v in sim.params_given.items()}},
        "resolved_params": summary["params"],
        "seed": sim.seed,
        "until": None if run.until is None else run.until,
        "max_jobs": len(sim.jobs),
        "schedlab_version": __version__,
    }
    nodes = pd.DataFrame(run.recorder.nodes, columns=list(NODE_COLUMNS))
    return SimResult(jobs, events, timeline, summary, config, nodes, tenants_frame(jobs))
