"""The canonical trace schema (SPEC sec. 2): its columns, their rules and cell parsers.

What the canonical validation (`traces.validate`) checks and the writer
(`traces.canonical.trace_to_frame`) writes, in one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.errors import InvalidTrace
from sim.model import PRIORITY_NAMES

__all__ = [
    "CANONICAL_COLUMNS", "NUM_COLS", "OPTIONAL_COLUMNS", "REQUIRED_COLUMNS", "TEXT_DEFAULTS",
    "NumCol", "missing_columns_error", "parse_deps", "parse_speeds",
]

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "num_gpus", "duration")
"""Columns every canonical trace must have."""

OPTIONAL_COLUMNS: tuple[str, ...] = (
    "user", "vc", "priority", "gpu_type", "num_cpus", "mem_gb", "gpus_per_task",
    "checkpoint_interval", "max_retries", "fail_at", "max_lifetime", "min_gpus",
    "max_gpus", "depends_on", "locality_sensitivity", "gpu_speeds", "gpu_share",
    "gpu_util", "gpu_mem_gb", "max_wait_hours",
)
"""Optional columns of SPEC sec. 2, in their documented order."""

CANONICAL_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
"""Every column with a meaning; any other column is passed through as `JobSpec.extra`."""

MAX_INT = float(2**53)
"""Integers beyond this are not exact in float64."""

TEXT_DEFAULTS = {"user": "", "vc": "default", "gpu_type": ""}
"""Text columns and the value of an empty cell."""


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


NUM_COLS: dict[str, NumCol] = {
    c.name: c
    for c in (
        NumCol("submit_time", False, None, "a finite number >= 0", lo=0.0, required=True),
        NumCol("num_gpus", True, None, "an integer >= 0", lo=0.0, required=True),
        NumCol("duration", False, None, "a finite number > 0", lo=0.0, lo_open=True,
                required=True),
        NumCol("priority", True, 0,
                "an integer or a level name (" + ", ".join(PRIORITY_NAMES) + ")"),
        NumCol("num_cpus", False, 0.0, "a finite number >= 0", lo=0.0),
        NumCol("mem_gb", False, 0.0, "a finite number >= 0", lo=0.0),
        NumCol("gpus_per_task", True, 0, "an integer >= 1", lo=1.0),
        NumCol("checkpoint_interval", False, None, "a finite number > 0", lo=0.0,
                lo_open=True),
        NumCol("max_retries", True, 0, "an integer >= 0", lo=0.0),
        NumCol("fail_at", False, None, "a finite number > 0", lo=0.0, lo_open=True),
        NumCol("max_lifetime", False, None, "a finite number > 0", lo=0.0, lo_open=True),
        NumCol("min_gpus", True, None, "an integer >= 0", lo=0.0),
        NumCol("max_gpus", True, None, "an integer >= 0", lo=0.0),
        NumCol("locality_sensitivity", False, 1.0, "a number in [0, 1]", lo=0.0, hi=1.0),
        NumCol("gpu_share", False, 1.0, "a number in (0, 1]", lo=0.0, lo_open=True, hi=1.0),
        NumCol("gpu_util", False, 1.0, "a number in [0, 1]", lo=0.0, hi=1.0),
        NumCol("gpu_mem_gb", False, 0.0, "a finite number >= 0", lo=0.0),
        NumCol("max_wait_hours", False, 0.0, "a finite number >= 0", lo=0.0),
    )
}

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


def parse_deps(text: str) -> tuple[str, ...]:
    """Split 'a;b' into unique, stripped ids (empty tokens ignored)."""
    return tuple(dict.fromkeys(t.strip() for t in text.split(";") if t.strip()))


def missing_columns_error(label: str, columns: Sequence[str]) -> InvalidTrace:
    """The error of a table without every required column, naming what it has."""
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    found = ", ".join(repr(c) for c in columns) or "(none)"
    return InvalidTrace(
        f"{label}: missing required column{'s' if len(missing) > 1 else ''} "
        f"{', '.join(missing)}; found columns: {found}; "
        f"required: {', '.join(REQUIRED_COLUMNS)}"
    )
