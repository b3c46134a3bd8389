"""The canonical trace schema (docs/contract.md#sec-2): its columns, their rules and cell parsers.

What the canonical validation (`schedlab.traces.validate`) checks and the writer
(`schedlab.traces.canonical.trace_to_frame`) writes, in one place. Every number has an upper bound
(MAX_SECONDS for times, MAX_COUNT for counts, MAX_GB for sizes, MAX_HOURS, MAX_PRIORITY):
a finite but absurd value (1e300, a time in microseconds taken for seconds) is a bad
cell with its rule, e.g. "is not a number of seconds > 0 and <= 1e12 (~31,700 years)".
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import PRIORITY_NAMES, RestartPolicy

__all__ = [
    "BOOL_RULE", "CANONICAL_COLUMNS", "CHECKED_PASS_THROUGH", "CONTAINER_COLUMNS", "MAX_COUNT",
    "MAX_GB", "MAX_HOURS", "MAX_PRIORITY", "MAX_SECONDS", "NUM_COLS", "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS", "RESTART_POLICIES", "TEXT_DEFAULTS", "NumCol", "missing_columns_error",
    "missing_required",
    "parse_bool",
    "parse_deps", "parse_speeds",
]

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "num_gpus", "duration")
"""Columns every canonical trace must have."""

OPTIONAL_COLUMNS: tuple[str, ...] = (
    "user", "vc", "priority", "gpu_type", "num_cpus", "mem_gb", "gpus_per_task",
    "checkpoint_interval", "max_retries", "fail_at", "max_lifetime", "min_gpus",
    "max_gpus", "depends_on", "locality_sensitivity", "gpu_speeds", "gpu_share",
    "gpu_util", "gpu_mem_gb", "max_wait_hours", "deadline", "lazy_preemption", "disk_gb",
    "tasks", "completions", "parallelism", "active_deadline", "restart_policy",
    "backoff_limit", "target_util", "scale_interval", "model", "num_steps", "samples",
    "batch_size", "adaptive",
)
"""Optional columns of docs/contract.md#sec-2, in their documented order, then the project's own
(`target_util`, `scale_interval`: utilization-driven elastic jobs; `model`, `num_steps`,
`samples`, `batch_size`, `adaptive`: jobs whose speed comes from a performance model)."""

CANONICAL_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
"""Every column with a meaning; any other column is passed through as `JobSpec.extra`."""

MAX_INT = float(2**53)
"""Integers beyond this are not exact in float64."""

MAX_SECONDS = 1e12
"""Largest time in seconds (~31,700 years): submit_time, duration, checkpoint_interval,
fail_at, max_lifetime, deadline, active_deadline, scale_interval. A larger finite value
is an input error (a unit mix-up, a sentinel like 1e300), not a job."""

MAX_HOURS = 1e8
"""Largest time in hours (~11,400 years): max_wait_hours."""

MAX_COUNT = 1e6
"""Largest count: num_gpus, num_cpus, gpus_per_task, max_retries, min_gpus, max_gpus,
completions, parallelism, backoff_limit."""

MAX_GB = 1e9
"""Largest memory or disk size in GB (an exabyte): mem_gb, gpu_mem_gb, disk_gb."""

MAX_WORK = 1e15
"""Largest work of a job in steps or samples (`num_steps`, `samples`)."""

MAX_PRIORITY = 1e9
"""Largest priority magnitude: a priority is an integer in [-MAX_PRIORITY, MAX_PRIORITY]."""

TEXT_DEFAULTS = {"user": "", "vc": "default", "gpu_type": "", "model": ""}
"""Text columns and the value of an empty cell."""


def _e(x: float) -> str:
    """A bound as messages write it: 1e12, 1e6."""
    exp = round(math.log10(x))
    return f"1e{exp}" if 10.0**exp == x else f"{x:g}"


_YEARS = f"~{round(MAX_SECONDS / (365.25 * 86400), -2):,.0f} years"
_SECONDS_GE0 = f"a number of seconds >= 0 and <= {_e(MAX_SECONDS)} ({_YEARS})"
_SECONDS_GT0 = f"a number of seconds > 0 and <= {_e(MAX_SECONDS)} ({_YEARS})"
_HOURS = f"a number of hours >= 0 and <= {_e(MAX_HOURS)}"
_GB = f"a number of GB >= 0 and <= {_e(MAX_GB)}"


def _count_rule(lo: int) -> str:
    return f"an integer >= {lo} and <= {_e(MAX_COUNT)}"


@dataclass(frozen=True)
class NumCol:
    """A numeric column: its rule, its range and the default of an empty cell."""

    name: str
    integer: bool
    default: float | int | None
    rule: str
    lo: float = -math.inf
    lo_open: bool = False
    hi: float = math.inf
    hi_open: bool = False
    required: bool = False

    def ok(self, v: np.ndarray) -> np.ndarray:
        """Mask of values that satisfy the rule (NaN never does)."""
        with np.errstate(invalid="ignore"):
            m = np.isfinite(v)
            m &= (v > self.lo) if self.lo_open else (v >= self.lo)
            m &= (v < self.hi) if self.hi_open else (v <= self.hi)
            if self.integer:
                m &= (v == np.floor(v)) & (np.abs(v) <= MAX_INT)
        return m


def _seconds(name: str, *, positive: bool, required: bool = False) -> NumCol:
    return NumCol(name, False, None, _SECONDS_GT0 if positive else _SECONDS_GE0, lo=0.0,
                  lo_open=positive, hi=MAX_SECONDS, required=required)


def _count(name: str, default: int | None, lo: int = 0, *, required: bool = False) -> NumCol:
    return NumCol(name, True, default, _count_rule(lo), lo=float(lo), hi=MAX_COUNT,
                  required=required)


NUM_COLS: dict[str, NumCol] = {
    c.name: c
    for c in (
        _seconds("submit_time", positive=False, required=True),
        _count("num_gpus", None, required=True),
        _seconds("duration", positive=True, required=True),
        NumCol("priority", True, 0,
                f"an integer from -{_e(MAX_PRIORITY)} to {_e(MAX_PRIORITY)} or a level name ("
                + ", ".join(PRIORITY_NAMES) + ")", lo=-MAX_PRIORITY, hi=MAX_PRIORITY),
        NumCol("num_cpus", False, 0.0, f"a number >= 0 and <= {_e(MAX_COUNT)}", lo=0.0,
                hi=MAX_COUNT),
        NumCol("mem_gb", False, 0.0, _GB, lo=0.0, hi=MAX_GB),
        _count("gpus_per_task", 0, 1),
        _seconds("checkpoint_interval", positive=True),
        _count("max_retries", 0),
        _seconds("fail_at", positive=True),
        _seconds("max_lifetime", positive=True),
        _count("min_gpus", None),
        _count("max_gpus", None),
        NumCol("locality_sensitivity", False, 1.0, "a number in [0, 1]", lo=0.0, hi=1.0),
        NumCol("gpu_share", False, 1.0, "a number in (0, 1]", lo=0.0, lo_open=True, hi=1.0),
        NumCol("gpu_util", False, 1.0, "a number in [0, 1]", lo=0.0, hi=1.0),
        NumCol("gpu_mem_gb", False, 0.0, _GB, lo=0.0, hi=MAX_GB),
        NumCol("max_wait_hours", False, 0.0, _HOURS, lo=0.0, hi=MAX_HOURS),
        _seconds("deadline", positive=False),
        NumCol("disk_gb", False, 0.0, _GB, lo=0.0, hi=MAX_GB),
        _count("completions", None, 1),
        _count("parallelism", 1, 1),
        _seconds("active_deadline", positive=True),
        _count("backoff_limit", 6),
        NumCol("target_util", False, None, "a number in (0, 1]", lo=0.0, lo_open=True,
               hi=1.0),
        NumCol("scale_interval", False, 60.0, _SECONDS_GT0, lo=0.0, lo_open=True,
               hi=MAX_SECONDS),
        NumCol("num_steps", False, None, f"a number > 0 and <= {_e(MAX_WORK)}", lo=0.0,
               lo_open=True, hi=MAX_WORK),
        NumCol("samples", False, None, f"a number > 0 and <= {_e(MAX_WORK)}", lo=0.0,
               lo_open=True, hi=MAX_WORK),
        _count("batch_size", None, 1),
    )
}
"""Every numeric column of the schema the simulator reads, with its rule."""

CONTAINER_COLUMNS: tuple[str, ...] = ("parallelism", "active_deadline", "restart_policy",
                                      "backoff_limit")
"""Columns that only a container job (`completions` given) may set to other than default."""

RESTART_POLICIES: tuple[str, ...] = tuple(p.value for p in RestartPolicy)
"""Values of `restart_policy` (Kubernetes Job `restartPolicy`; an empty cell is Never)."""

CHECKED_PASS_THROUGH: dict[str, NumCol] = {"failed_runs": _count("failed_runs", None)}
"""Numeric columns checked and passed through as written (`JobSpec.extra`): the project's
`failed_runs` of a container job (its task runs 0..k-1 fail once at `fail_at`, read by
`schedlab.sim.containers`)."""


def parse_speeds(text: str) -> tuple[tuple[tuple[str, float], ...] | None, str]:
    """Parse 'V100=1;P100=0.6' into sorted pairs, or (None, reason)."""
    pairs: dict[str, float] = {}
    for token in text.split(";"):
        token = token.strip()
        if not token:
            continue
        name, sep, value = token.partition("=")
        name = name.strip()
        if not sep or not name:
            return None, f"{token!r} is not TYPE=SPEED"
        try:
            speed = float(value)
        except ValueError:
            return None, f"speed {value.strip()!r} of {name} is not a number"
        if not (math.isfinite(speed) and speed > 0):
            return None, f"speed of {name} is not a finite number > 0"
        if name in pairs:
            return None, f"{name} is given twice"
        pairs[name] = speed
    return tuple(sorted(pairs.items())), ""


BOOL_RULE = ("true or false (also yes/no, 1/0), or empty for the run's "
             "lazy_preemption parameter")
"""The rule of the boolean column `lazy_preemption`."""

_TRUE = frozenset({"true", "yes", "1", "1.0", "t", "y"})
_FALSE = frozenset({"false", "no", "0", "0.0", "f", "n"})


def parse_bool(text: str) -> bool:
    """'true'/'false' (any case; yes/no, 1/0) as a bool; raises ValueError otherwise."""
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(text)


def parse_deps(text: str) -> tuple[str, ...]:
    """Split 'a;b' into unique, stripped ids (empty tokens ignored)."""
    return tuple(dict.fromkeys(t.strip() for t in text.split(";") if t.strip()))


def missing_required(columns: Collection[str]) -> list[str]:
    """Required columns a table lacks.

    Not `duration` when it has `model`: a job of a performance model may give its work as
    `num_steps` or `samples`, or take its model's.
    """
    return [c for c in REQUIRED_COLUMNS
            if c not in columns and not (c == "duration" and "model" in columns)]


def missing_columns_error(label: str, columns: Sequence[str]) -> InvalidTrace:
    """The error of a table without every required column, naming what it has."""
    missing = missing_required(columns)
    found = ", ".join(repr(c) for c in columns) or "(none)"
    return InvalidTrace(
        f"{label}: missing required column{'s' if len(missing) > 1 else ''} "
        f"{', '.join(missing)}; found columns: {found}; "
        f"required: {', '.join(REQUIRED_COLUMNS)}"
    )
