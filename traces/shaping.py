"""Shaping a trace before a run: time window, load scale, job cap, VC and size filters, remap.

`shape` applies, in this order: the VC filter, the GPU-count filter, the time window,
the load scale, the job cap, then the remap of jobs larger than the topology. Jobs
filtered out are gone from the trace by request; a job larger than the topology is
either remapped (`remap_gpus_to`) or left for the engine to reject with its reason,
never dropped here. A dependency on a job that shaping removed is dropped from
`depends_on` (that job counts as done before the shaped trace starts).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from schedlab.sim.errors import InvalidParameter, InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.sim.roles import is_plain_gang
from schedlab.traces.base import Trace, trace_epoch, with_epoch

if TYPE_CHECKING:
    from schedlab.topologies.tree import Topology

__all__ = ["REMAP_COLUMN", "parse_vcs", "parse_window", "remap_job", "shape"]

REMAP_COLUMN = "original_num_gpus"
"""Pass-through column added when jobs were remapped: their GPU count in the source."""

_SECONDS = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?\s*([smhd]?)\s*$", re.I)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}(:\d{2}(:\d{2}(\.\d+)?)?)?)?"
                   r"(Z|[+-]\d{2}:?\d{2})?$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_WINDOW_HELP = ("START:END with each side empty, seconds (e.g. 3600, 90m, 12h, 7d) or a "
                "date (2017-10-01, '2017-10-01 12:00:00'); START..END also works")


def _bound(text: str, epoch: float | None, what: str) -> float | None:
    """One side of a window: None (open), seconds, or a date turned into trace seconds."""
    import pandas as pd

    t = text.strip()
    if not t:
        return None
    m = _SECONDS.match(t)
    if m:
        try:
            value = float(t.rstrip("smhdSMHD ")) * _UNIT[m.group(2).lower()]
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return value
    try:
        if not _DATE.match(t):
            raise ValueError(t)
        stamp = pd.Timestamp(t)
        if stamp is pd.NaT:
            raise ValueError(t)
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC").tz_localize(None)
        unix = (stamp - pd.Timestamp(0)).total_seconds()
    except (ValueError, TypeError, OverflowError):
        raise InvalidParameter(f"trace window {what} {t!r} is neither seconds nor a date; "
                               f"expected {_WINDOW_HELP}") from None
    if epoch is None:
        raise InvalidParameter(f"trace window {what} {t!r} is a date, but the trace has no "
                               "calendar origin (its format gives relative times); give the "
                               "window in seconds")
    return unix - epoch


def parse_window(
    window: str | tuple[float | str | None, float | str | None], epoch: float | None = None,
) -> tuple[float | None, float | None]:
    """Turn a window into (start, end) in trace seconds (None = open).

    Args:
        window: "START:END" (see `_WINDOW_HELP`) or a (start, end) pair.
        epoch: Unix time of submit_time 0 (needed for dates).

    Returns:
        (start, end), either None when open.

    Raises:
        InvalidParameter: A side that is neither seconds nor a date, a date without an
            epoch, or END <= START.
    """
    if isinstance(window, tuple):
        if len(window) != 2:
            raise InvalidParameter(f"trace window {window!r}: expected (start, end)")
        sides = ["" if v is None else str(v) for v in window]
        lo, hi = _bound(sides[0], epoch, "start"), _bound(sides[1], epoch, "end")
    elif isinstance(window, str):
        lo, hi = _split(window, epoch)
    else:
        raise InvalidParameter(f"trace window {window!r}: expected {_WINDOW_HELP}")
    if lo is not None and hi is not None and hi <= lo:
        raise InvalidParameter(f"trace window {window!r}: end ({hi:g} s) is not after start "
                               f"({lo:g} s)")
    return lo, hi


def _split(text: str, epoch: float | None) -> tuple[float | None, float | None]:
    if ".." in text:
        left, _, right = text.partition("..")
        return _bound(left, epoch, "start"), _bound(right, epoch, "end")
    colons = [i for i, ch in enumerate(text) if ch == ":"]
    if not colons:
        raise InvalidParameter(f"trace window {text!r}: no ':' between START and END; "
                               f"expected {_WINDOW_HELP}")
    first_error: InvalidParameter | None = None
    for i in colons:  # dates hold colons too: take the first split where both sides parse
        try:
            return _bound(text[:i], epoch, "start"), _bound(text[i + 1:], epoch, "end")
        except InvalidParameter as exc:
            first_error = first_error or exc
    assert first_error is not None
    raise first_error


def parse_vcs(vcs: str | Iterable[str]) -> tuple[str, ...]:
    """'a,b' or ['a', 'b'] -> ('a', 'b') (stripped, empty names refused)."""
    items = vcs.split(",") if isinstance(vcs, str) else list(vcs)
    names = tuple(dict.fromkeys(str(v).strip() for v in items))
    if not names or any(not n for n in names):
        raise InvalidParameter(f"vcs {vcs!r}: expected VC names separated by ',' (a,b)")
    return names


def _cap_for(job: JobSpec, target: int | Topology) -> int:
    if isinstance(target, int):
        return target
    if job.gpu_type:
        return target.gpu_types.get(job.gpu_type, 0)
    return target.num_gpus


def remap_job(job: JobSpec, cap: int) -> JobSpec:
    """A job larger than `cap` GPUs shrunk to fit, keeping its GPU-time.

    The new size is the largest multiple of the job's GPUs per task that is <= cap (or
    cap itself, as one task, when a task alone is larger); duration grows by old/new so
    `duration x num_gpus` is unchanged; the elastic range is clipped to the new size.

    Args:
        job: The job.
        cap: GPUs available to it (>= 1).

    A job of task roles (issue 16) is remapped only when its roles are one gang of
    identical GPU tasks, and then becomes that plain gang (its `tasks` dropped); other
    role mixes are kept as they are.

    Returns:
        The job itself when it fits, else the remapped copy.
    """
    if job.num_gpus <= cap or cap < 1:
        return job
    if job.tasks:
        if not is_plain_gang(job.tasks, job.duration):
            return job
        job = dataclasses.replace(job, tasks=())
    per = job.task_gpus
    new = (cap // per) * per if per <= cap else cap
    gpt = job.gpus_per_task if per <= cap else 0
    lo = None if job.min_gpus is None else min(job.min_gpus, new)
    hi = None if job.max_gpus is None else max(new, min(job.max_gpus, cap))
    return dataclasses.replace(
        job, num_gpus=new, gpus_per_task=gpt, min_gpus=lo, max_gpus=hi,
        duration=job.duration * job.num_gpus / new,
        fail_at=None if job.fail_at is None else job.fail_at * job.num_gpus / new,
    )


def _int_param(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidParameter(f"{name} {value!r}: expected an integer >= {minimum}")
    return value


def shape(
    trace: Trace,
    *,
    window: str | tuple[float | str | None, float | str | None] | None = None,
    load_scale: float | None = None,
    max_jobs: int | None = None,
    vcs: str | Iterable[str] | None = None,
    min_gpus: int | None = None,
    max_gpus: int | None = None,
    remap_gpus_to: int | Topology | None = None,
    epoch: float | None = None,
) -> Trace:
    """Shape a trace for a run (see the module doc for the order of the steps).

    Args:
        trace: The trace.
        window: Keep jobs submitted in [START, END) and shift times so START is 0
            ("START:END" in seconds or dates, either side open; or a pair).
        load_scale: Multiply the offered load by X: submit times (so inter-arrival
            times) are divided by X (> 0).
        max_jobs: Keep the first N jobs by submit time (>= 0).
        vcs: Keep jobs of these virtual clusters ('a,b' or a list).
        min_gpus: Keep jobs with at least this many GPUs.
        max_gpus: Keep jobs with at most this many GPUs.
        remap_gpus_to: Shrink jobs larger than this many GPUs (an int) or than the GPUs of
            their type in this Topology, keeping GPU-time (`remap_job`); remapped jobs
            keep their source size in the pass-through column `original_num_gpus`.
            None: larger jobs stay, and the engine rejects them with the reason.
        epoch: Unix time of submit_time 0, for date windows (default: the trace's).

    Returns:
        The shaped trace (the same object when nothing is asked).

    Raises:
        InvalidParameter: A bad shaping value, naming it and what is allowed.
        InvalidTrace: No job is left, naming the filters.
    """
    jobs = list(trace.jobs)
    steps: list[str] = []
    origin = epoch if epoch is not None else trace_epoch(trace)
    if vcs is not None:
        keep_vcs = set(parse_vcs(vcs))
        jobs = [j for j in jobs if j.vc in keep_vcs]
        steps.append(f"vcs={','.join(sorted(keep_vcs))}")
    if min_gpus is not None or max_gpus is not None:
        lo = 0 if min_gpus is None else _int_param("min_gpus", min_gpus, 0)
        hi = math.inf if max_gpus is None else _int_param("max_gpus", max_gpus, 0)
        if hi < lo:
            raise InvalidParameter(f"max_gpus {max_gpus} is less than min_gpus {min_gpus}")
        jobs = [j for j in jobs if lo <= j.num_gpus <= hi]
        steps.append(f"gpus in [{lo}, {hi}]")
    shift = 0.0
    if window is not None:
        start, end = parse_window(window, origin)
        jobs = [j for j in jobs if (start is None or j.submit_time >= start)
                and (end is None or j.submit_time < end)]
        if start is not None:
            shift = start
            jobs = [_resubmit(j, max(0.0, j.submit_time - start)) for j in jobs]
        steps.append(f"window={window}")
    if load_scale is not None:
        if isinstance(load_scale, bool) or not isinstance(load_scale, (int, float)) \
                or not math.isfinite(load_scale) or load_scale <= 0:
            raise InvalidParameter(f"load_scale {load_scale!r}: expected a number > 0 "
                                   "(2 doubles the load by halving inter-arrival times)")
        if load_scale != 1:
            jobs = [_resubmit(j, j.submit_time / load_scale) for j in jobs]
            origin = None  # times no longer map to the calendar
        steps.append(f"load_scale={load_scale:g}")
    if max_jobs is not None:
        jobs = jobs[: _int_param("max_jobs", max_jobs, 0)]
        steps.append(f"max_jobs={max_jobs}")
    extra_columns = trace.extra_columns
    if remap_gpus_to is not None:
        if isinstance(remap_gpus_to, int):
            _int_param("remap_gpus_to", remap_gpus_to, 1)
        jobs, extra_columns = _remap(jobs, remap_gpus_to, extra_columns)
    if not jobs:
        raise InvalidTrace(f"trace {trace.name!r}: no job left after shaping "
                           f"({'; '.join(steps) or 'no filter'}); {len(trace.jobs)} before")
    if not steps and remap_gpus_to is None:
        return trace
    jobs = _drop_missing_deps(jobs)
    shaped = dataclasses.replace(trace, jobs=tuple(jobs), extra_columns=extra_columns)
    if origin is not None:
        origin += shift
    return with_epoch(shaped, origin)


def _remap(
    jobs: list[JobSpec], target: int | Topology, extra_columns: tuple[str, ...],
) -> tuple[list[JobSpec], tuple[str, ...]]:
    out = [remap_job(j, _cap_for(j, target)) for j in jobs]
    changed = [a is not b for a, b in zip(jobs, out, strict=True)]
    if not any(changed) or REMAP_COLUMN in extra_columns:
        return out, extra_columns
    tagged = [
        dataclasses.replace(new, extra=(*new.extra, (REMAP_COLUMN, old.num_gpus if c else None)))
        for old, new, c in zip(jobs, out, changed, strict=True)
    ]
    return tagged, (*extra_columns, REMAP_COLUMN)


def _drop_missing_deps(jobs: list[JobSpec]) -> list[JobSpec]:
    if not any(j.depends_on for j in jobs):
        return jobs
    ids = {j.job_id for j in jobs}
    return [j if all(d in ids for d in j.depends_on)
            else dataclasses.replace(j, depends_on=tuple(d for d in j.depends_on if d in ids))
            for j in jobs]


def _resubmit(job: JobSpec, submit_time: float) -> JobSpec:
    """The job submitted at another time; a deadline keeps its slack after submission."""
    if job.deadline is None:
        return dataclasses.replace(job, submit_time=submit_time)
    return dataclasses.replace(job, submit_time=submit_time,
                               deadline=submit_time + (job.deadline - job.submit_time))
