"""Statistics of a trace (`schedlab trace inspect`) and conversion to canonical (`convert`).

`trace_stats` computes what a researcher checks before replaying a trace: jobs and time
span, arrival rate and its burstiness (coefficient of variation of inter-arrival
times: 1 for Poisson, 9-21 for real GPU clusters), the GPUs-per-job mix, duration
percentiles, GPU-hours by job size, users and VCs, jobs of task roles (by role) and
container jobs, and the offered load against a topology (GPU-hours demanded per hour of
the submit span / GPUs of the topology).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.traces.base import Trace
from schedlab.traces.canonical import write_canonical

if TYPE_CHECKING:
    from schedlab.topologies.tree import Topology

__all__ = [
    "DURATION_PERCENTILES", "SIZE_CLASSES", "TraceStats", "convert", "format_stats",
    "plot_stats", "size_class", "trace_stats",
]

DURATION_PERCENTILES = (10, 25, 50, 75, 90, 95, 99)
"""Duration percentiles reported."""

SIZE_CLASSES = ("0", "<1", "1", "2", "3-4", "5-8", "9-16", "17-64", ">64")
"""Job size classes (GPUs) of the GPU-hours breakdown; `<1` is a shared GPU."""

_TOP = 5


def size_class(num_gpus: int, gpu_share: float = 1.0) -> str:
    """The size class label of a job."""
    if num_gpus == 0:
        return "0"
    if num_gpus == 1:
        return "<1" if gpu_share < 1 else "1"
    for hi, label in ((2, "2"), (4, "3-4"), (8, "5-8"), (16, "9-16"), (64, "17-64")):
        if num_gpus <= hi:
            return label
    return ">64"


@dataclass(frozen=True)
class TraceStats:
    """Statistics of one trace; times in seconds, shares in [0, 1]."""

    name: str
    jobs: int
    first_submit: float
    last_submit: float
    span_s: float
    arrival_rate_per_hour: float
    interarrival_mean_s: float
    interarrival_median_s: float
    interarrival_cv: float
    gpus_mix: tuple[tuple[int, int], ...]
    shared_gpu_jobs: int
    duration_mean_s: float
    duration_percentiles: tuple[tuple[int, float], ...]
    gpu_hours: float
    gpu_hours_by_size: tuple[tuple[str, float], ...]
    users: int
    top_users: tuple[tuple[str, int], ...]
    vcs: int
    top_vcs: tuple[tuple[str, int], ...]
    topology: str | None = None
    topology_gpus: int | None = None
    offered_load: float | None = None
    bad_rows: int = 0
    role_jobs: int = 0  # jobs with a `tasks` column (issue 16)
    role_kinds: tuple[tuple[str, int], ...] = ()  # role name -> jobs that have it
    container_jobs: int = 0  # jobs with `completions` (Kubernetes Job semantics)
    elastic_jobs: int = 0  # jobs with a min_gpus/max_gpus range
    util_scaled_jobs: int = 0  # elastic jobs with `target_util` (scale on utilization)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            if isinstance(value, tuple) and value and isinstance(value[0], tuple):
                out[key] = {str(k): v for k, v in value}
            else:
                out[key] = value
        return out


def _cv(x: np.ndarray) -> float:
    if x.size < 2 or x.mean() == 0:
        return math.nan
    return float(x.std() / x.mean())


def trace_stats(trace: Trace, topology: Topology | None = None) -> TraceStats:
    """Compute the statistics of a trace (one pass of numpy over its columns).

    Args:
        trace: A non-empty trace.
        topology: When given, the offered load is computed against its GPUs.

    Returns:
        The statistics.
    """
    jobs = trace.jobs
    submit = np.fromiter((j.submit_time for j in jobs), dtype=np.float64, count=len(jobs))
    gpus = np.fromiter((j.num_gpus for j in jobs), dtype=np.int64, count=len(jobs))
    dur = np.fromiter((j.duration for j in jobs), dtype=np.float64, count=len(jobs))
    gpu_time = np.fromiter((j.gpu_time for j in jobs), dtype=np.float64, count=len(jobs))
    order = np.sort(submit)
    gaps = np.diff(order)
    span = float(order[-1] - order[0]) if len(order) else 0.0
    mix = Counter(gpus.tolist())
    classes: dict[str, float] = dict.fromkeys(SIZE_CLASSES, 0.0)
    for j, t in zip(jobs, gpu_time.tolist(), strict=True):
        classes[size_class(j.num_gpus, j.gpu_share)] += t / 3600.0
    kinds = Counter(r.role for j in jobs for r in j.tasks)
    users = Counter(j.user for j in jobs if j.user)
    vcs = Counter(j.vc for j in jobs)
    gpu_hours = float(gpu_time.sum() / 3600.0)
    load = None
    topo_gpus = None
    if topology is not None:
        topo_gpus = int(topology.num_gpus)
        if span > 0 and topo_gpus > 0:
            load = gpu_hours / (span / 3600.0) / topo_gpus
    return TraceStats(
        name=trace.name,
        jobs=len(jobs),
        first_submit=float(order[0]) if len(order) else 0.0,
        last_submit=float(order[-1]) if len(order) else 0.0,
        span_s=span,
        arrival_rate_per_hour=(len(jobs) - 1) / (span / 3600.0) if span > 0 else math.nan,
        interarrival_mean_s=float(gaps.mean()) if gaps.size else math.nan,
        interarrival_median_s=float(np.median(gaps)) if gaps.size else math.nan,
        interarrival_cv=_cv(gaps),
        gpus_mix=tuple(sorted(mix.items())),
        shared_gpu_jobs=sum(1 for j in jobs if j.gpu_share < 1),
        duration_mean_s=float(dur.mean()) if dur.size else math.nan,
        duration_percentiles=tuple(
            (p, float(v)) for p, v in zip(DURATION_PERCENTILES,
                                          np.percentile(dur, DURATION_PERCENTILES), strict=True)
        ) if dur.size else (),
        gpu_hours=gpu_hours,
        gpu_hours_by_size=tuple((k, v) for k, v in classes.items() if v > 0),
        users=len(users),
        top_users=tuple(sorted(users.items(), key=lambda kv: (-kv[1], kv[0]))[:_TOP]),
        vcs=len(vcs),
        top_vcs=tuple(sorted(vcs.items(), key=lambda kv: (-kv[1], kv[0]))[:_TOP]),
        topology=None if topology is None else topology.name,
        topology_gpus=topo_gpus,
        offered_load=load,
        bad_rows=trace.bad_rows,
        role_jobs=sum(1 for j in jobs if j.tasks),
        role_kinds=tuple(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        container_jobs=sum(1 for j in jobs if j.completions is not None),
        elastic_jobs=sum(1 for j in jobs if j.min_gpus is not None or j.max_gpus is not None),
        util_scaled_jobs=sum(1 for j in jobs if j.target_util is not None),
    )


def _dur(s: float) -> str:
    if not math.isfinite(s):
        return "-"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.1f}m"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


def _shares(pairs: tuple[tuple[Any, int], ...] | tuple[tuple[Any, float], ...],
            total: float, fmt: str = "{}") -> str:
    if total <= 0:
        return "-"
    return ", ".join(f"{fmt.format(k)}: {100 * v / total:.1f}%" for k, v in pairs)


def format_stats(stats: TraceStats) -> str:
    """The statistics as the text `schedlab trace inspect` prints."""
    s = stats
    lines = [
        f"trace {s.name}: {s.jobs} jobs" + (f" ({s.bad_rows} bad/excluded rows skipped)"
                                            if s.bad_rows else ""),
        f"submit span: {_dur(s.span_s)} ({s.first_submit:g} .. {s.last_submit:g} s)",
        f"arrivals: {s.arrival_rate_per_hour:.2f} jobs/h; inter-arrival mean "
        f"{_dur(s.interarrival_mean_s)}, median {_dur(s.interarrival_median_s)}, "
        f"CV {s.interarrival_cv:.2f} (burstiness; Poisson = 1)",
        f"GPUs per job: {_shares(s.gpus_mix, s.jobs)}"
        + (f"; {s.shared_gpu_jobs} jobs share a GPU" if s.shared_gpu_jobs else ""),
        f"duration: mean {_dur(s.duration_mean_s)}; "
        + ", ".join(f"p{p} {_dur(v)}" for p, v in s.duration_percentiles),
        f"GPU-hours: {s.gpu_hours:,.1f}; by job size (GPUs): "
        f"{_shares(s.gpu_hours_by_size, s.gpu_hours)}",
        f"users: {s.users}" + (f" (top: {', '.join(f'{u} {n}' for u, n in s.top_users)})"
                                if s.users else ""),
        f"VCs: {s.vcs} (top: {', '.join(f'{v} {n}' for v, n in s.top_vcs)})",
    ]
    if s.role_jobs or s.container_jobs:
        kinds = ", ".join(f"{k} {n}" for k, n in s.role_kinds)
        lines.append(f"task roles: {s.role_jobs} jobs" + (f" (jobs per role: {kinds})"
                                                           if kinds else "")
                     + f"; container jobs: {s.container_jobs}")
    if s.elastic_jobs:
        lines.append(f"elastic jobs: {s.elastic_jobs} ({s.util_scaled_jobs} scale on "
                     "utilization: target_util)")
    if s.topology is not None:
        if s.offered_load is None:
            lines.append(f"offered load on {s.topology} ({s.topology_gpus} GPUs): - (all jobs "
                         "arrive at once)")
        else:
            lines.append(f"offered load on {s.topology} ({s.topology_gpus} GPUs): "
                         f"{s.offered_load:.3f} (GPU-hours demanded per hour of submit span "
                         "/ GPUs)")
    return "\n".join(lines)


def plot_stats(trace: Trace, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the distributions of a trace as PNG files; return their paths.

    Files: `<name>_sizes.png` (GPUs-per-job mix and GPU-hours by size),
    `<name>_durations.png` (duration CDF per size class, log scale),
    `<name>_arrivals.png` (jobs per hour over time and the inter-arrival CDF).

    Args:
        trace: The trace.
        out_dir: Folder to write into (created).

    Returns:
        The written paths.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = trace_stats(trace)
    written = []

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    sizes = [str(k) for k, _ in stats.gpus_mix]
    a.bar(sizes, [100 * v / stats.jobs for _, v in stats.gpus_mix])
    a.set_xlabel("GPUs per job")
    a.set_ylabel("% of jobs")
    a.set_title("Job size mix")
    labels = [k for k, _ in stats.gpu_hours_by_size]
    b.bar(labels, [100 * v / max(stats.gpu_hours, 1e-12) for _, v in stats.gpu_hours_by_size])
    b.set_xlabel("job size class (GPUs)")
    b.set_ylabel("% of GPU-hours")
    b.set_title("GPU-hours by job size")
    fig.suptitle(f"{trace.name}: {stats.jobs} jobs")
    fig.tight_layout()
    written.append(_save(fig, out / f"{trace.name}_sizes.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    by: dict[str, list[float]] = {}
    for j in trace.jobs:
        by.setdefault(size_class(j.num_gpus, j.gpu_share), []).append(j.duration)
    for label in SIZE_CLASSES:
        if label in by:
            d = np.sort(np.array(by[label]))
            ax.step(d, np.arange(1, d.size + 1) / d.size, where="post",
                    label=f"{label} GPUs ({d.size})")
    ax.set_xscale("log")
    ax.set_xlabel("duration (s, log)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"{trace.name}: duration CDF by job size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(_save(fig, out / f"{trace.name}_durations.png"))

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    submit = np.array([j.submit_time for j in trace.jobs])
    hours = max(1, int(math.ceil((submit.max() - submit.min()) / 3600.0)) or 1)
    a.hist((submit - submit.min()) / 3600.0, bins=min(hours, 500))
    a.set_xlabel("time (h)")
    a.set_ylabel("jobs submitted per bin")
    a.set_title("Arrivals over time")
    gaps = np.diff(np.sort(submit))
    gaps = gaps[gaps > 0]
    if gaps.size:
        g = np.sort(gaps)
        b.step(g, np.arange(1, g.size + 1) / g.size, where="post")
        b.set_xscale("log")
    b.set_xlabel("inter-arrival time > 0 (s, log)")
    b.set_ylabel("fraction")
    b.set_title(f"Inter-arrival CDF (CV {stats.interarrival_cv:.1f})")
    fig.tight_layout()
    written.append(_save(fig, out / f"{trace.name}_arrivals.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def convert(
    source: str | os.PathLike[str] | Trace,
    out: str | os.PathLike[str],
    *,
    trace_format: str | None = None,
    skip_bad_rows: bool = False,
    options: Mapping[str, Any] | None = None,
    **shaping: Any,
) -> Trace:
    """Read a trace in any format, shape it, and write it in the canonical schema.

    Args:
        source: A trace file, bundled name or Trace (as `schedlab.traces.load_trace` takes).
        out: Output path: `.parquet` (canonical Parquet), `.csv` or `.csv.gz`.
        trace_format: Format name (None: detect).
        skip_bad_rows: Count bad rows instead of failing.
        options: Format options (see `schedlab.traces.readers.read_trace`).
        **shaping: Keyword arguments of `schedlab.traces.shaping.shape`.

    Returns:
        The trace written (read back from `out` it gives equal jobs).
    """
    from schedlab.traces import load_trace
    from schedlab.traces.shaping import shape

    trace = load_trace(source, skip_bad_rows=skip_bad_rows, trace_format=trace_format,
                       options=options)
    if shaping:
        trace = shape(trace, **shaping)
    write_canonical(trace, out)
    return trace
