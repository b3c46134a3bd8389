"""Synthetic traces and in-memory traces, both validated like a canonical file.

`generate` draws a reproducible workload from `numpy.random.default_rng(seed)` (never the
global RNG); `from_records` turns a list of dicts (e.g. in tests and notebooks) into a
Trace through the same validation code as `read_canonical`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import TaskRole
from schedlab.traces.base import Trace
from schedlab.traces.canonical import frame_to_trace
from schedlab.traces.roles import format_tasks

__all__ = ["DEFAULT_SIZE_MIX", "from_records", "generate"]

DEFAULT_SIZE_MIX: dict[int, float] = {1: 0.7, 2: 0.1, 4: 0.1, 8: 0.1}
"""Default share of jobs per GPU count."""

_DURATIONS = ("lognormal", "exponential")


def _positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """Check a finite number > 0 (>= 0 with allow_zero) and return it as float."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        rule = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {rule}, got {value!r}")
    return x


def _count(name: str, value: Any, minimum: int) -> int:
    """Check an integer >= minimum (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _size_mix(size_mix: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Validate {GPUs: weight}; return sizes and normalized probabilities."""
    if not isinstance(size_mix, Mapping) or not size_mix:
        raise ValueError(f"size_mix must be a non-empty dict of GPUs -> probability, "
                         f"got {size_mix!r}")
    sizes, weights = [], []
    for gpus, weight in size_mix.items():
        sizes.append(_count(f"size_mix key {gpus!r} (GPUs)", gpus, 0))
        weights.append(_positive(f"size_mix[{gpus!r}]", weight, allow_zero=True))
    w = np.array(weights, dtype=np.float64)
    if w.sum() <= 0:
        raise ValueError(f"size_mix probabilities must not all be 0, got {size_mix!r}")
    return np.array(sizes, dtype=np.int64), w / w.sum()


def generate(
    n_jobs: int,
    *,
    seed: int,
    arrival_rate_per_hour: float = 30.0,
    size_mix: Mapping[int, float] | None = None,
    duration: str = "lognormal",
    median_s: float = 1200.0,
    sigma: float = 1.8,
    mean_s: float = 3600.0,
    max_duration: float | None = None,
    n_users: int = 10,
    n_vcs: int = 3,
    name: str = "synthetic",
) -> Trace:
    """Generate a synthetic trace, deterministic for a seed.

    Arrivals are a Poisson process (exponential gaps, mean 3600 / arrival_rate_per_hour
    seconds) shifted so the first job arrives at 0. Sizes are drawn from `size_mix`.
    Durations are lognormal (median `median_s`, shape `sigma`) or exponential (mean
    `mean_s`), capped at `max_duration` when given, rounded to milliseconds, at least 1 s.
    Users `user0..` are drawn uniformly; user `i` belongs to VC `vc{i % n_vcs}`.

    Args:
        n_jobs: Number of jobs (>= 1).
        seed: Seed of `numpy.random.default_rng`; the only source of randomness.
        arrival_rate_per_hour: Mean arrivals per hour (> 0).
        size_mix: GPUs -> probability (weights are normalized); default
            `{1: 0.7, 2: 0.1, 4: 0.1, 8: 0.1}`.
        duration: "lognormal" or "exponential".
        median_s: Median of the lognormal duration, seconds.
        sigma: Shape (sigma of the underlying normal) of the lognormal, >= 0.
        mean_s: Mean of the exponential duration, seconds.
        max_duration: Upper bound on durations, seconds (None: no cap).
        n_users: Number of users (>= 1).
        n_vcs: Number of virtual clusters (>= 1).
        name: Trace name; job ids are `{name}-{i}` in arrival order.

    Returns:
        The trace.

    Raises:
        ValueError: A parameter out of range, naming it and the value given.
    """
    import pandas as pd

    n = _count("n_jobs", n_jobs, 1)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    rate = _positive("arrival_rate_per_hour", arrival_rate_per_hour)
    sizes, probs = _size_mix(DEFAULT_SIZE_MIX if size_mix is None else size_mix)
    if duration not in _DURATIONS:
        raise ValueError(f"duration must be one of {', '.join(_DURATIONS)}, got {duration!r}")
    median = _positive("median_s", median_s)
    shape = _positive("sigma", sigma, allow_zero=True)
    mean = _positive("mean_s", mean_s)
    cap = None if max_duration is None else _positive("max_duration", max_duration)
    users = _count("n_users", n_users, 1)
    vcs = _count("n_vcs", n_vcs, 1)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")

    rng = np.random.default_rng(int(seed))
    gaps = rng.exponential(3600.0 / rate, size=n)
    gaps[0] = 0.0
    submit = np.round(np.cumsum(gaps), 3)
    gpus = rng.choice(sizes, size=n, p=probs)
    if duration == "lognormal":
        dur = rng.lognormal(mean=math.log(median), sigma=shape, size=n)
    else:
        dur = rng.exponential(mean, size=n)
    if cap is not None:
        dur = np.minimum(dur, cap)
    dur = np.maximum(np.round(dur, 3), 1.0)
    user_idx = rng.integers(0, users, size=n)
    df = pd.DataFrame(
        {
            "job_id": [f"{name}-{i}" for i in range(n)],
            "submit_time": submit,
            "num_gpus": gpus,
            "duration": dur,
            "user": [f"user{u}" for u in user_idx.tolist()],
            "vc": [f"vc{u % vcs}" for u in user_idx.tolist()],
        }
    )
    return frame_to_trace(df, label=name, name=name, source=f"synthetic(seed={int(seed)})")


def _join_cell(value: Any, column: str) -> Any:
    """Accept lists for depends_on, dicts/pairs for gpu_speeds, role dicts for tasks."""
    if column == "depends_on" and isinstance(value, (list, tuple)):
        return ";".join(str(v) for v in value)
    if column == "tasks" and isinstance(value, (list, tuple)):
        if value and all(isinstance(r, TaskRole) for r in value):
            return format_tasks(tuple(value))
        return json.dumps(list(value))
    if column == "gpu_speeds":
        if isinstance(value, Mapping):
            return ";".join(f"{k}={v}" for k, v in value.items())
        if isinstance(value, (list, tuple)) and all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in value
        ):
            return ";".join(f"{k}={v}" for k, v in value)
    return value


def from_records(records: Sequence[Mapping[str, Any]], name: str = "inline") -> Trace:
    """Build a Trace from a list of dicts, validated exactly like a canonical file.

    Keys are column names of docs/contract.md#sec-2 (others are passed through); a missing key or
    None takes the default. `depends_on` may be a list of ids, `gpu_speeds` a dict and
    `tasks` a list of role dicts (docs/contract.md#sec-2).

    Args:
        records: One dict a job.
        name: Trace name, also what error messages call the input.

    Returns:
        The trace, jobs sorted by (submit_time, record order).

    Raises:
        InvalidTrace: As `read_canonical` (messages name `name`, the row and column).
    """
    import pandas as pd

    if not records:
        raise InvalidTrace(f"{name}: no job rows (empty list of records)")
    rows = []
    for i, rec in enumerate(records, start=1):
        if not isinstance(rec, Mapping):
            raise InvalidTrace(f"{name}, row {i}: a record must be a dict, got {rec!r}")
        rows.append({k: _join_cell(v, k) for k, v in rec.items()})
    df = pd.DataFrame.from_records(rows)
    if df.columns.size:
        df = df.astype(object)
    return frame_to_trace(df, label=name, name=name, source="records")
