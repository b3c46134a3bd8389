"""Results of a run: DataFrames, the summary metrics of docs/contract.md#sec-5 and atomic writing.

The engine hands over flat records; pandas is used only here, once, at the end.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from schedlab.sim.degenerate import result_warnings
from schedlab.sim.faces import ResultRun, SimInputs
from schedlab.sim.jobstate import PENDING, RETRYING, RUNNING, WAITING, plain_spec
from schedlab.sim.metrics import sla_violated, summarize
from schedlab.sim.model import JobSpec, JobStatus
from schedlab.sim.recorder import (
    EVENT_COLUMNS,
    NODE_COLUMNS,
    TIMELINE_COLUMNS,
    Coded,
    Column,
    Recorder,
    timeline_rows,
)
from schedlab.sim.roles import side_gpu_seconds
from schedlab.sim.tenants import TENANT_COLUMNS, policy_tenants, tenants_frame
from schedlab.sim.writing import atomic_text as atomic_text  # re-exported: the former home
from schedlab.sim.writing import atomic_write as atomic_write
from schedlab.sim.writing import json_text, text_writer, write_folder

JOB_COLUMNS = (
    "job_id", "user", "vc", "num_gpus", "submit_time", "start_time", "end_time",
    "queueing_delay", "jct", "duration", "run_time", "status", "preemptions", "migrations",
    "restarts", "lost_work", "locality_level", "slowdown", "response_time", "censored",
)
"""The columns of jobs.parquet that docs/contract.md#sec-5 names, in its order."""

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
        (`schedlab.sim.writing.write_folder`): a reader, or a rerun after a crash, sees the old
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
        # strict JSON: a metric without a value (NaN) is null, never a bare NaN
        config = json_text(self.config, default=_json) + "\n"
        summary = json_text(self.summary, default=_json) + "\n"
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


def _jobs_frame(run: ResultRun, end: float) -> pd.DataFrame:
    """One row per submitted job (docs/contract.md#sec-5 columns, then ours and pass-through).

    A job the run ended before (`unfinished`, `censored`) is accounted up to `end`: a
    waiting one (queued or suspended, or between retries) has its current wait added to
    its queueing delay, a running one its current hold to its run time and GPU time.
    Time held for dependencies is not queueing (docs/contract.md#sec-2 `depends_on`).

    Built column by column (attribute getters, numpy arithmetic), never a row object per
    job: at a million jobs the rows cost more memory than the frame. Each column has the
    dtype pandas would give the rows' Python values (`_column`): times of a hand-made
    trace given as ints only are int64, as are the differences of such columns.
    """
    topo = run.topo
    own = {*JOB_COLUMNS, *JOB_EXTRA_COLUMNS}
    extra_names = [c for c in run.sim.trace.extra_columns if c not in own]
    columns = [*JOB_COLUMNS, *JOB_EXTRA_COLUMNS, *extra_names]
    # one row a trace job (a container job's task runs have none) that was submitted
    jobs = [j for j in run.jobs[:run.num_trace] if j.status is not WAITING]
    n = len(jobs)
    if n == 0:
        return pd.DataFrame([], columns=columns)
    specs = list(map(attrgetter("spec"), jobs))

    def state(name: str) -> list[Any]:
        return list(map(attrgetter(name), jobs))

    def spec(name: str) -> list[Any]:
        return list(map(attrgetter(name), specs))

    statuses = state("status")
    queue, run_time, gpu_seconds = (state(a) for a in ("queue_time", "run_time",
                                                       "gpu_seconds"))
    counts = [state(a) for a in ("preemptions", "migrations", "restarts", "lost_work")]
    # every spec leaving its rare fields at their defaults (`schedlab.sim.jobstate.plain_spec`, the
    # common case): no deadline, no wait limit, whole GPUs, so those columns are constants
    # rather than a Python property read a job
    plain = all(map(plain_spec, specs))
    duration_l, num_gpus_l = spec("duration"), spec("num_gpus")
    if plain:  # `JobSpec.gpu_time`, duration x GPUs x share 1.0
        gpu_time = [d * g * 1.0 for d, g in zip(duration_l, num_gpus_l, strict=True)]
    else:
        gpu_time = spec("gpu_time")
    containers = run.containers  # None: no job is a container job
    boxed = [] if containers is None else \
        [i for i, sp in enumerate(specs) if sp.completions is not None]
    for i in [i for i, st in enumerate(statuses) if st in _OPEN]:
        j = jobs[i]
        if j.spec.completions is not None:
            continue  # a container job: its task runs' totals, below
        if j.status == RUNNING:
            held = end - j.held_since
            run_time[i] = j.run_time + held
            gpu_seconds[i] = j.gpu_seconds + held * len(j.gpus) * j.milli / 1000
            if j.side:  # running non-gang tasks of a job of roles (schedlab.sim.roles)
                gpu_seconds[i] += side_gpu_seconds(j, end)
        else:
            queue[i] = j.queue_time + (end - j.queued_since)
    for i in boxed:  # totals over each container job's task runs
        j = jobs[i]
        assert containers is not None
        queue[i], run_time[i], gpu_seconds[i] = containers.totals(j, end)
        for col, v in zip(counts, containers.counts(j), strict=True):
            col[i] = v
        gpu_time[i] = specs[i].gpu_time * specs[i].completions
    # each list becomes its column as soon as it is final and is dropped then: at a
    # million jobs a list of them is 8 MB, and a dozen alive at once set the run's peak
    # (the frame's column order is `columns`, whatever order `data` is filled in)
    data: dict[str, Any] = {"queueing_delay": _column(queue), "run_time": _column(run_time),
                            "gpu_seconds": _column(gpu_seconds), "gpu_time": _column(gpu_time)}
    del queue, run_time, gpu_seconds, gpu_time
    for name in ("preemptions", "migrations", "restarts", "lost_work"):
        data[name] = _column(counts.pop(0))
    censored = np.fromiter(map(_CENSORED.__getitem__, statuses), dtype=bool, count=n)
    ended = np.fromiter(map(_ENDED.__getitem__, statuses), dtype=bool, count=n)
    shown = list(map(_SHOWN.__getitem__, statuses))
    del statuses
    nan = math.nan
    end_l = state("end_time")
    for i in np.flatnonzero(censored).tolist():
        end_l[i] = nan
    submit_l, first_l = spec("submit_time"), state("first_start")
    submit, first_start = _column(submit_l), _column(first_l)
    end_time, duration = _column(end_l), _column(duration_l)
    del duration_l
    sla = np.zeros(n, dtype=bool)
    if plain:
        deadline = np.full(n, nan)
    else:
        deadline = np.array([nan if d is None else float(d) for d in spec("deadline")],
                            dtype=np.float64)
        wait_hours = spec("max_wait_hours")
        for i in np.flatnonzero(~np.isnan(deadline) | (np.array(wait_hours) > 0)).tolist():
            sla[i] = sla_violated(shown[i], submit_l[i], first_l[i], end_l[i],
                                  float(deadline[i]), wait_hours[i], end)
        del wait_hours
    del end_l, first_l, submit_l
    data["status"] = _column(shown)
    del shown
    jct = _minus(end_time, submit, ended)
    with np.errstate(invalid="ignore", divide="ignore"):
        slowdown = np.where(ended, np.asarray(jct, dtype=np.float64)
                            / np.asarray(duration, dtype=np.float64), nan)
    level_names = {lv.value: lv.label for lv in topo.levels}
    data.update({
        "job_id": _column(spec("job_id")), "user": _column(spec("user")),
        "vc": _column(spec("vc")), "num_gpus": _column(num_gpus_l),
        "submit_time": submit, "start_time": first_start, "end_time": end_time,
        "jct": jct, "duration": duration,
        "locality_level": _column([level_names.get(v, "")
                                   for v in state("locality_level")]),
        "slowdown": slowdown, "response_time": _minus(first_start, submit, None),
        "censored": censored, "deadline": deadline, "sla_violated": sla,
        "reason": _column(state("reason")),
    })
    if extra_names:
        given = [dict(s.extra) for s in specs]
        for c in extra_names:
            data[c] = _column([g.get(c) for g in given])
    # copy=False: each column is its own array, not stacked into blocks (a second copy)
    return pd.DataFrame(data, columns=columns, copy=False)


def _minus(a: Any, b: Any, where: np.ndarray | None) -> Any:
    """The difference of two columns (rows of `where`, NaN elsewhere), typed as rows'.

    a - b: two int64 columns give int64 (every row's difference is an int), else float64; a
    column of other values (`_column` kept it a list) is computed row by row.
    """
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if where is None or where.all():
            return a - b
        return np.where(where, a - b, math.nan)
    nan = math.nan
    mask = [True] * len(a) if where is None else where.tolist()
    return _column([x - y if ok else nan for x, y, ok in zip(a, b, mask, strict=True)])


def _column(values: list[Any]) -> Any:
    """Values as the array pandas would infer from them (int64, float64, str), at once.

    Anything else is left to pandas as the list.
    """
    kinds = set(map(type, values))
    if kinds == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            return values
    if float in kinds and kinds <= {int, float}:
        return np.array(values, dtype=np.float64)
    if kinds == {str}:
        return _texts(values)
    return values


def _text_dtype() -> Any:
    """The dtype pandas gives a column of Python strings, when it keeps them in Arrow.

    None when it does not (pandas 2, or pandas 3 with `future.infer_string` off): the
    columns are then given to pandas as lists.
    """
    probe = pd.Series(["x"])
    dtype = probe.dtype
    if not isinstance(dtype, pd.StringDtype) or dtype.storage != "pyarrow":
        return None
    if pa.array(probe.array).type != pa.large_string():
        return None
    return dtype


_POOL = pa.system_memory_pool()
"""Where the frames' text columns live: the C allocator's heap, not Arrow's default pool
(mimalloc), which keeps the transient buffers of building them (at a million jobs about
90 MB more at the run's peak)."""


def _texts(values: list[str]) -> Any:
    """A column of Python strings as pandas types it (Arrow large strings), made at once."""
    dtype = _text_dtype()
    if dtype is None:
        return values
    return pd.array(pa.array(values, type=pa.large_string(), memory_pool=_POOL), dtype=dtype)


def _decoded(col: Coded) -> Any:
    """A coded text column as the column of its values (`_texts`)."""
    dtype = _text_dtype()
    if dtype is None:
        return list(map(col.texts.__getitem__, col.codes.tolist()))
    table = pa.array(col.texts, type=pa.large_string(), memory_pool=_POOL)
    codes = pa.array(col.codes, memory_pool=_POOL)
    return pd.array(pc.take(table, codes, memory_pool=_POOL), dtype=dtype)


def _recorded_column(col: Column) -> Any:
    """A column of the recorder (`schedlab.sim.recorder.Column`) as pandas would type its values."""
    if isinstance(col, Coded):
        return _decoded(col)
    if isinstance(col, list):
        return _column(col)
    return col


def _events_frame(cols: dict[str, Column]) -> pd.DataFrame:
    """events.parquet from the recorder's columns (no rows: empty columns, as ever)."""
    if not len(cols["time"]):
        return pd.DataFrame({name: [] for name in EVENT_COLUMNS}, columns=list(EVENT_COLUMNS))
    data = {}
    for name in EVENT_COLUMNS:  # each column converted, then the recorder's freed
        data[name] = _recorded_column(cols.pop(name))
    return pd.DataFrame(data, columns=list(EVENT_COLUMNS), copy=False)


def _timeline_frame(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """timeline.parquet rows from columns (float64, int64 for the counts)."""
    return pd.DataFrame(cols, columns=list(TIMELINE_COLUMNS), copy=False)


def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Rows of `a` then those of `b` (either may be empty)."""
    if not len(b):
        return a
    if not len(a):
        return b
    return pd.concat([a, b], ignore_index=True)


def _recorded_timeline(rec: Recorder) -> pd.DataFrame:
    """The run's full timeline (every change) frame (see `_recorded_events`)."""
    if not _copy_on_write():
        return _timeline_frame(rec.timeline_columns())
    cols, replaces = rec.take_timeline()
    timeline = _timeline_frame(cols)
    taken = rec.taken_timeline  # the frame of the columns it handed over before, if any
    if taken is not None:
        timeline = _concat(taken.iloc[:-1] if replaces else taken, timeline)
    rec.taken_timeline = timeline
    return timeline.copy(deep=False)


def _recorded_events(rec: Recorder) -> pd.DataFrame:
    """The run's events frame.

    The recorder hands its columns over and forgets them; the frames are built on the
    same arrays, so the rows are never held twice. They are kept on the recorder
    (`taken_events`, `taken_timeline`), for the run's lifetime, for a later call (a result
    asked for again, or after more steps), and each call gives shallow copies: pandas
    copies on write (pandas 3), so changing a frame of one result never changes
    another's. Without copy-on-write (pandas 2 unless enabled), each call builds frames
    from copies and the recorder keeps its rows.
    """
    if not _copy_on_write():
        return _events_frame(rec.event_columns())
    events = _events_frame(rec.take_events())
    if rec.taken_events is not None:
        events = _concat(rec.taken_events, events)
    rec.taken_events = events
    return events.copy(deep=False)


def _copy_on_write() -> bool:
    """True when pandas copies a shared frame's data on write (always from pandas 3)."""
    if int(pd.__version__.split(".")[0]) >= 3:
        return True
    return pd.get_option("mode.copy_on_write") is True


_FINAL_SHOWN = ("completed", "failed", "killed", "rejected")
_SHOWN = {st: str(st) if str(st) in _FINAL_SHOWN else "unfinished" for st in JobStatus}
_CENSORED = {st: str(st) not in _FINAL_SHOWN for st in JobStatus}
_ENDED = {st: str(st) in ("completed", "failed", "killed") for st in JobStatus}
_OPEN = frozenset({PENDING, RETRYING, RUNNING})


def _parquet_writer(df: pd.DataFrame) -> Callable[[str], None]:
    """A writer of `df` as Parquet to a given path (for write_folder and atomic_write)."""

    def write(path: str) -> None:
        df.to_parquet(path, index=False)
        # Arrow's pool keeps the encoder's buffers for reuse: handed back after each
        # file, a result's files cost the largest one's buffers at once, not their sum
        pa.default_memory_pool().release_unused()

    return write


def _is_result_folder(folder: Path) -> bool:
    """A folder an earlier run (or a failed sweep point) wrote, safe to replace whole."""
    return any((folder / n).exists() for n in RESULT_MARKERS)


RESULT_MARKERS = ("summary.json", "config.json", "jobs.parquet", "error.json", "point.json")
"""Files that mark a folder as a schedlab result folder."""


def tenant_notes(policy: Any, jobs: Any) -> list[str]:
    """A note when a policy sharing by user took jobs without one under their vc.

    Not a warning: the run is as meant (`schedlab.policies.tenant_key`); the CLI says it
    once for every policy it applies to.
    """
    if getattr(policy, "tenant_field", None) != "user" or not callable(
            getattr(policy, "tenant_key", None)):
        return []
    n = sum(1 for j in jobs if not j.spec.user)
    if n == 0:
        return []
    if n == len(jobs):
        return ["the trace has no users: each job's vc is its tenant"]
    return [f"{n} of {len(jobs)} jobs have no user: each counts under its vc as its tenant"]


def null_metrics(summary: Mapping[str, Any]) -> list[str]:
    """The summary's metrics that have no value (NaN or infinite), in summary order."""
    return [k for k, v in summary.items() if isinstance(v, float | np.floating)
            and not math.isfinite(float(v))]


def _why_undefined(jobs: pd.DataFrame) -> str:
    """Why means or percentiles of a run are empty: nothing ran, or nothing completed."""
    if len(jobs) == 0:
        return "no job was submitted"
    started = jobs["start_time"].notna().sum() if "start_time" in jobs else 0
    if started == 0:
        return "no job ever started, so the run spans no time"
    if not (jobs["status"] == "completed").any():
        return "no job completed"
    return "averaged over no jobs or no time"


def _policy_metrics(policy: Any) -> dict[str, Any]:
    """A policy's own counters (suspend commands, demotions, ...) when it keeps any."""
    m = getattr(policy, "metrics", None)
    return {k: _json(v) if isinstance(v, np.generic) else v for k, v in m().items()} \
        if callable(m) else {}


def _trace_label(sim: SimInputs) -> str:
    """How to load the trace again: a bundled name, or an absolute file path."""
    from schedlab.traces import bundled_traces

    t = sim.trace
    if t.name.partition(":")[0] in bundled_traces():  # default, synthetic:N, philly-like:N
        return t.name
    if t.source and Path(t.source).is_file():
        return str(Path(t.source).resolve())
    return t.source or t.name


def _topology_label(sim: SimInputs) -> str:
    """How to load the topology again: a preset name, or an absolute file path."""
    src = sim.topology.source or sim.topology.name
    p = Path(src)
    return str(p.resolve()) if p.is_file() else src


def _trace_digest(jobs: tuple[JobSpec, ...]) -> str:
    """config.json's `trace_sha`: of a line 'job_id,submit_time,num_gpus,duration' a job.

    Hashed a slice of jobs at a time: the text of a million lines is never built whole.
    """
    h = hashlib.sha256()
    step = 20_000
    for k in range(0, len(jobs), step):
        text = "\n".join(f"{s.job_id},{s.submit_time!r},{s.num_gpus},{s.duration!r}"
                         for s in jobs[k:k + step])
        h.update((text if k == 0 else "\n" + text).encode())
    return h.hexdigest()[:16]


def build_result(sim: SimInputs, run: ResultRun, end: float, wall: float) -> SimResult:
    """Assemble DataFrames and the summary once the run has stopped at `end`."""
    from schedlab import __version__

    run.sample()
    jobs = _jobs_frame(run, end)
    failure_summary: dict[str, Any] = {}
    if getattr(run, "layer", None) is not None:  # the failure layer's columns (contract sec. 5)
        from schedlab.sim.failure_stats import failure_results

        failure_cols, failure_summary = failure_results(run, end)
        for k, v in failure_cols.items():
            jobs[k] = v
    # before the events are built: its transient memory then meets the recorder's
    # compact columns, not the events frame (the peak of a million-job run)
    # the kinds of tenants the policy declares (ClusterQueue, account, ...): none for most
    tenants = tenants_frame(jobs, policy_tenants(
        sim.policy, [j for j in run.jobs[:run.num_trace] if j.status is not WAITING]
        if getattr(sim.policy, "tenant_kinds", ()) else []))
    rec = run.recorder
    # the summary integrates every change, whatever timeline the run writes
    exact = _recorded_timeline(rec)
    timeline = exact if rec.timeline_mode == "full" else _timeline_frame(timeline_rows(
        {c: exact[c].to_numpy() for c in TIMELINE_COLUMNS}, rec.timeline_mode,
        rec.timeline_interval))
    params = {**sim.policy.settings, **sim.engine_params}
    summary = summarize(jobs, exact, end)
    # after the summary: its transient memory then meets the recorder's compact event
    # columns, not the events frame (the peak of a million-job run)
    events = _recorded_events(rec)
    # the GPUs each job ran on, kept by the recorder at every placement
    placed = rec.gpus_by_job()
    jobs.insert(len(JOB_COLUMNS) + len(JOB_EXTRA_COLUMNS), "gpus",
                [placed.get(j, "") for j in jobs["job_id"].tolist()])
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
    summary.update(failure_summary)
    # a policy's own counters, flattened (scalars only) so sweeps can tabulate them
    for k, v in _policy_metrics(sim.policy).items():
        if isinstance(v, bool | int | float | str):
            summary[f"policy_{k}"] = v
    # a container job's task runs are not jobs of their own
    summary["warnings"] = result_warnings(sim.policy, run.jobs[:run.num_trace])
    own = getattr(sim.policy, "warnings", None)  # a policy's word on its configuration
    if callable(own):
        summary["warnings"].extend(str(w) for w in own())
    summary["notes"] = tenant_notes(sim.policy, run.jobs[:run.num_trace])
    undefined = null_metrics(summary)
    if undefined:
        summary["warnings"].append(
            f"{', '.join(undefined)}: no value ({_why_undefined(jobs)}); null in "
            "summary.json")
    digest = _trace_digest(sim.jobs)
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
    return SimResult(jobs, events, timeline, summary, config, nodes, tenants)
