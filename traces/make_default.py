"""Rebuild the bundled default trace `traces/data/default.csv` from the Philly job table.

Source: `philly_jobs_pollux.csv` (Microsoft Philly trace, CC BY 4.0, as derived by the
Pollux OSDI'21 artifact; see `traces/data/README.md`). The default trace is a contiguous
window of it:

1. rows are sorted by `timestamp` (stable, so equal timestamps keep file order);
2. the window is the first `n_jobs` rows (3,000) whose timestamp is at or after `start`
   (2017-11-19 14:42:00, a Sunday afternoon; the window runs to Fri 24 November 2017,
   114 h, chosen because its longest job ends within 4 h of the last submission, so a
   replay measures queueing rather than one job's tail);
3. nothing else is dropped, and each row maps to the canonical schema as
   `job_id = philly-{R}` (R: 0-based data row index in the source file, i.e. file line
   minus 2, so ids are stable), `submit_time` = seconds since the first job of the window,
   `num_gpus`, `duration` as is, `vc` = `cluster`; `user` stays empty (the table has no
   users) and `gpu_time` is dropped (it is `duration * num_gpus`).

Run it again with::

    python -m schedlab.traces.make_default [--source PATH] [--out PATH] [--start TS] [--jobs N]

The output is byte-for-byte reproducible for the same source file and arguments.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from schedlab.traces.base import Trace
from schedlab.traces.canonical import read_canonical, write_canonical
from schedlab.traces.synthetic import from_records

__all__ = [
    "DEFAULT_JOBS",
    "DEFAULT_OUT",
    "DEFAULT_SOURCE",
    "DEFAULT_START",
    "convert_philly",
    "make_default",
    "philly_window",
    "trace_stats",
]

DEFAULT_SOURCE = Path(
    os.environ.get("SCHEDLAB_PHILLY_CSV", "/work/shared/traces/philly/philly_jobs_pollux.csv")
)
"""The Pollux-derived Philly job table (override with $SCHEDLAB_PHILLY_CSV)."""

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "default.csv"
"""Where the bundled default trace lives."""

DEFAULT_START = "2017-11-19 14:42:00"
"""First submit timestamp of the window (inclusive)."""

DEFAULT_JOBS = 3000
"""Jobs in the window."""


def philly_window(
    source: str | os.PathLike[str] = DEFAULT_SOURCE,
    *,
    start: str | None = DEFAULT_START,
    n_jobs: int | None = DEFAULT_JOBS,
) -> pd.DataFrame:
    """A contiguous window of the Philly job table, in the canonical schema.

    Args:
        source: Path to `philly_jobs_pollux.csv`.
        start: Timestamp (`YYYY-MM-DD HH:MM:SS`) where the window starts (None: the
            first job of the file).
        n_jobs: Number of jobs in the window (None: every job from `start` on).

    Returns:
        Columns job_id, submit_time, num_gpus, duration, vc; one row a job, in submit
        order; submit_time counts from the first job of the window.

    Raises:
        ValueError: The source has fewer than `n_jobs` rows at or after `start`.
    """
    df = pd.read_csv(source, dtype={"timestamp": str, "cluster": str})
    df = df.dropna(how="all")
    ts = pd.to_datetime(df["timestamp"], format="%Y-%m-%d %H:%M:%S")
    order = ts.sort_values(kind="stable").index
    df, ts = df.loc[order], ts.loc[order]
    window = df if start is None else df.loc[ts >= pd.Timestamp(start)]
    if n_jobs is not None:
        if len(window) < n_jobs:
            raise ValueError(f"{source}: only {len(window)} jobs at or after {start}, "
                             f"{n_jobs} asked")
        window = window.head(n_jobs)
    wts = ts.loc[window.index]
    return pd.DataFrame(
        {
            "job_id": [f"philly-{i}" for i in window.index],
            "submit_time": (wts - wts.iloc[0]).dt.total_seconds().to_numpy(),
            "num_gpus": window["num_gpus"].astype("int64").to_numpy(),
            "duration": window["duration"].astype("float64").to_numpy(),
            "vc": window["cluster"].to_numpy(),
        }
    )


def convert_philly(source: str | os.PathLike[str] = DEFAULT_SOURCE) -> pd.DataFrame:
    """The whole Philly job table in the canonical schema (same mapping, no window).

    Args:
        source: Path to `philly_jobs_pollux.csv`.

    Returns:
        The canonical frame; submit_time counts from the first job of the file.
    """
    return philly_window(source, start=None, n_jobs=None)


def trace_stats(trace: Trace) -> dict[str, object]:
    """Headline statistics of a trace (used for the README of the default trace).

    Args:
        trace: The trace.

    Returns:
        jobs, span_hours (first to last submit), gpu_hours (sum of duration x num_gpus),
        offered_gpus (GPU-hours per hour of span), max_num_gpus, size_mix (GPUs -> jobs),
        max_duration_hours, median_duration_s, vcs.
    """
    jobs = trace.jobs
    submit = [j.submit_time for j in jobs]
    span_h = (max(submit) - min(submit)) / 3600.0
    gpu_h = sum(j.duration * j.num_gpus for j in jobs) / 3600.0
    sizes: dict[int, int] = {}
    for j in jobs:
        sizes[j.num_gpus] = sizes.get(j.num_gpus, 0) + 1
    durations = sorted(j.duration for j in jobs)
    return {
        "jobs": len(jobs),
        "span_hours": span_h,
        "gpu_hours": gpu_h,
        "offered_gpus": gpu_h / span_h if span_h else float("nan"),
        "max_num_gpus": max(sizes),
        "size_mix": dict(sorted(sizes.items())),
        "max_duration_hours": durations[-1] / 3600.0,
        "median_duration_s": durations[len(durations) // 2],
        "vcs": len({j.vc for j in jobs}),
    }


def make_default(
    source: str | os.PathLike[str] = DEFAULT_SOURCE,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    *,
    start: str = DEFAULT_START,
    n_jobs: int = DEFAULT_JOBS,
) -> Trace:
    """Write the default trace (atomically) and return it as read back from the file.

    Args:
        source: Path to `philly_jobs_pollux.csv`.
        out: Output canonical CSV.
        start: Timestamp where the window starts.
        n_jobs: Number of jobs in the window.

    Returns:
        The trace read back with `read_canonical` (validated).
    """
    frame = philly_window(source, start=start, n_jobs=n_jobs)
    trace = from_records(frame.to_dict("records"), name="default")
    write_canonical(trace, out)
    return read_canonical(out, name="default")


def main(argv: list[str] | None = None) -> None:
    """Command line: rebuild the default trace and print its statistics."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=str(DEFAULT_SOURCE))
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--start", default=DEFAULT_START)
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS)
    args = parser.parse_args(argv)
    trace = make_default(args.source, args.out, start=args.start, n_jobs=args.jobs)
    print(f"wrote {args.out}")
    for key, value in trace_stats(trace).items():
        print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
