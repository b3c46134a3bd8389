"""Calibrated synthetic workloads: generators that reproduce a real trace's statistics.

A `Profile` holds the numbers measured on a real trace; `calibrated` draws a trace from
it, deterministic for a seed (one `numpy.random.default_rng(seed)`):

- sizes from the profile's GPUs-per-job mix (restricted to sizes that fit the
  topology, when one is given);
- durations from the empirical quantiles of the source *per size class* (1, 2, 3-4,
  5-8, >8 GPUs), sampled by inverse CDF with log-linear interpolation between quantiles;
- bursty arrivals: inter-arrival gaps in "operational time" are lognormal with the
  source's coefficient of variation (Philly 15; real GPU clusters 9-21, Poisson 1),
  then mapped through a daily x weekly rate cycle (168 hourly weights, a week starting
  Monday 00:00), so quiet nights and weekends stretch the gaps;
- VCs by the source's shares, and users inside each VC with Zipf-skewed activity;
- the time span: the source's mean arrival rate, or, given a topology and a target
  `load`, the span at which the jobs' GPU-time offers exactly that load
  (GPU-hours / span hours / topology GPUs, as `schedlab.traces.inspect.trace_stats` measures it).

Presets (`PROFILES`): `philly-like` (all numbers from the Microsoft Philly job table
as derived by the Pollux OSDI'21 artifact, CC BY 4.0, Jeon et al., ATC'19) and
`helios-like` (arrival level, hourly and weekday weights and the size mix from the
Helios Venus 10-minute aggregate counts, Apr-Sep 2020, SenseTime / S-Lab, Hu et al.,
SC'21, as published in the Lucid repository; only these derived numbers are shipped,
not the file, whose license is non-commercial). The Helios aggregate has no per-job
durations, users or VCs: `helios-like` takes Philly's per-size duration quantiles and
a Zipf VC mix over 10 VCs, which is a stated simplification. Its size mix is that of
the 10-minute bins holding exactly one GPU job (3,109 bins), the only bins where a
job's GPU count can be read off the aggregate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.sim.errors import InvalidParameter
from schedlab.traces.base import Trace
from schedlab.traces.canonical import frame_to_trace
from schedlab.traces.rows import release_arrow_memory

if TYPE_CHECKING:
    import pandas as pd

    from schedlab.topologies.tree import Topology

__all__ = [
    "DURATION_CLASSES", "HELIOS_LIKE", "PHILLY_LIKE", "PROFILES", "Profile", "calibrated",
    "duration_class", "preset_names", "sample_durations",
]

QUANTILES: tuple[float, ...] = (0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9,
                                0.95, 0.975, 0.99, 0.995, 0.999, 1)
"""Probability levels of the duration tables."""

DURATION_CLASSES = (1, 2, 4, 8, 16)
"""Size classes of the duration tables: <=1, 2, 3-4, 5-8 and >8 GPUs (key = upper size)."""


def duration_class(num_gpus: int) -> int:
    """The duration-table class of a job size."""
    for c in DURATION_CLASSES[:-1]:
        if num_gpus <= c:
            return c
    return DURATION_CLASSES[-1]


# Philly (Pollux-derived job table, 82,247 jobs, 2017-09-04 .. 2017-12-22), measured with
# pandas quantiles at QUANTILES on `duration` (s) per size class.
_PHILLY_DURATIONS: dict[int, tuple[float, ...]] = {
    1: (1, 30, 52, 62, 76, 215, 600, 1117, 1728, 2464, 3754, 8512, 19137, 55518, 135399,
        266914, 865709, 3256045),  # 76,627 jobs
    2: (2, 5, 9, 11, 15, 17, 19, 21, 25, 33, 149, 72740, 197062, 288912, 523316, 808064,
        1474215, 2582803),  # 1,818 jobs
    4: (3, 36, 75, 138, 405, 1696, 7468, 17410, 36288, 78660, 106284, 184435, 273968, 499351,
        907376, 1205990, 2446301, 2750674),  # 1,870 jobs
    8: (1, 33, 125, 216, 785, 4011, 12382, 23683, 65014, 140721, 203050, 351982, 525618,
        743403, 1060498, 2000448, 2656479, 4628226),  # 1,643 jobs
    16: (1, 4, 35, 72, 345, 890, 3167, 21137, 53750, 73311, 158991, 247972, 443240, 532107,
         922629, 1274181, 1612502, 1710643),  # 289 jobs (9-128 GPUs)
}


@dataclass(frozen=True)
class Profile:
    """The statistics a calibrated generator reproduces, with where they come from."""

    name: str
    attribution: str
    size_mix: tuple[tuple[int, float], ...]
    durations: tuple[tuple[int, tuple[float, ...]], ...]
    hourly: tuple[float, ...]
    weekday: tuple[float, ...]
    rate_per_hour: float
    interarrival_cv: float
    vc_shares: tuple[tuple[str, float], ...]
    n_users: int = 100
    user_skew: float = 1.1
    notes: tuple[str, ...] = field(default=(), compare=False)


PHILLY_LIKE = Profile(
    name="philly-like",
    attribution=("Microsoft Philly job table (Jeon et al., ATC'19; CC BY 4.0), as derived by "
                 "the Pollux OSDI'21 artifact (petuum/adaptdl philly.csv)"),
    size_mix=((1, 76627), (2, 1818), (4, 1870), (8, 1643), (12, 7), (16, 199), (24, 7),
              (32, 67), (64, 6), (128, 3)),
    durations=tuple(_PHILLY_DURATIONS.items()),
    # share of submissions per hour of day (file time, US Pacific) and per weekday
    # (Mon..Sun, normalized by the number of such days in the span)
    hourly=(0.0531, 0.041, 0.0466, 0.046, 0.0292, 0.048, 0.0697, 0.087, 0.0462, 0.0419,
            0.0427, 0.0362, 0.0312, 0.0294, 0.0266, 0.027, 0.0367, 0.0278, 0.0334, 0.0303,
            0.0423, 0.0382, 0.0472, 0.0421),
    weekday=(0.1247, 0.1542, 0.1645, 0.1744, 0.1956, 0.0944, 0.0921),
    rate_per_hour=31.47,
    interarrival_cv=15.14,
    vc_shares=(("6214e9", 41226), ("11cb48", 16091), ("6c71a0", 9953), ("b436b2", 7423),
               ("103959", 1934), ("ee9e8c", 1511), ("0e4a51", 1435), ("ed69ec", 1137),
               ("7f04ca", 723), ("2869ce", 422), ("e13805", 374), ("23dbec", 8),
               ("51b7ef", 4), ("925e2b", 3), ("795a4c", 3)),
    notes=("users are not in the source: Zipf(1.1) over 100 users, split across VCs",),
)
"""Profile of the Philly trace (sizes, per-size durations, cycle, rate, CV, VCs)."""

HELIOS_LIKE = Profile(
    name="helios-like",
    attribution=("Helios Venus cluster 10-minute aggregate counts, 2020-04-01 .. 2020-09-28 "
                 "(Hu et al., SC'21; SenseTime / S-Lab; from S-Lab-System-Group/Lucid "
                 "simulation/data/Venus/cluster_throughput.csv); derived numbers only"),
    # GPU counts of the 3,109 ten-minute bins that hold exactly one submitted GPU job
    size_mix=((1, 1549), (2, 151), (3, 2), (4, 224), (5, 1), (6, 9), (7, 14), (8, 837),
              (16, 170), (24, 45), (32, 90), (40, 4), (48, 1), (56, 2), (64, 4), (80, 1),
              (96, 1), (128, 1), (152, 1), (160, 2)),
    durations=tuple(_PHILLY_DURATIONS.items()),
    # share of submitted GPU jobs per hour of day, and per weekday (Mon..Sun) per day
    hourly=(0.0374, 0.0274, 0.025, 0.016, 0.0112, 0.0086, 0.0078, 0.0093, 0.0156, 0.0332,
            0.054, 0.0614, 0.0485, 0.0541, 0.065, 0.069, 0.0723, 0.0722, 0.0534, 0.0547,
            0.056, 0.0568, 0.0479, 0.0433),
    weekday=(0.146, 0.1578, 0.182, 0.1716, 0.1353, 0.0972, 0.1101),
    rate_per_hour=28.82,  # 125,214 GPU jobs over 4,344 hours
    interarrival_cv=18.0,
    vc_shares=tuple((f"vc{i}", 1.0 / (i + 1) ** 1.1) for i in range(10)),
    notes=("durations: Philly's per-size quantiles (the aggregate has none)",
           "VCs: Zipf(1.1) over 10 VCs; users: Zipf(1.1) over 100 users",
           "interarrival_cv 18: the aggregate has no gaps; 18 makes the generated 10-minute "
           "submit counts as dispersed as Venus' (variance / mean 15.4)"),
)
"""Profile of the Helios Venus cluster (arrivals and sizes measured, durations Philly's)."""

PROFILES: dict[str, Profile] = {p.name: p for p in (PHILLY_LIKE, HELIOS_LIKE)}
"""Calibrated presets by name."""


def preset_names() -> list[str]:
    """Names of the calibrated presets."""
    return sorted(PROFILES)


def sample_durations(
    rng: np.random.Generator, table: tuple[float, ...], n: int,
) -> np.ndarray:
    """Draw n durations from a quantile table (at QUANTILES) by log-linear inverse CDF."""
    u = rng.random(n)
    logs = np.log(np.maximum(np.asarray(table, dtype=np.float64), 1e-3))
    return np.exp(np.interp(u, QUANTILES, logs))


def _cycle(profile: Profile) -> np.ndarray:
    """168 relative rates (hour of the week from Monday 00:00), mean 1."""
    h = np.asarray(profile.hourly, dtype=np.float64)
    w = np.asarray(profile.weekday, dtype=np.float64)
    rates = (w[:, None] * h[None, :]).ravel()
    return rates / rates.mean()


def _arrivals(rng: np.random.Generator, n: int, span: float, profile: Profile) -> np.ndarray:
    """Bursty arrival times: n in [0, span], first at 0, last at span, following the cycle."""
    if n == 1:
        return np.zeros(1)
    cv = profile.interarrival_cv
    sigma = math.sqrt(math.log(1.0 + cv * cv))
    gaps = rng.lognormal(mean=-sigma * sigma / 2.0, sigma=sigma, size=n - 1)
    ops = np.concatenate([[0.0], np.cumsum(gaps)])
    rates = _cycle(profile)
    # cumulative intensity at each hour boundary; Lambda(t) is piecewise linear
    hours = int(math.ceil(span / 3600.0)) + 1
    per_hour = np.resize(rates, hours) * 3600.0
    edges = np.concatenate([[0.0], np.cumsum(per_hour)])
    t_edges = np.arange(hours + 1) * 3600.0
    total = float(np.interp(span, t_edges, edges))
    target = ops / ops[-1] * total
    times = np.interp(target, edges, t_edges)
    times[0], times[-1] = 0.0, span
    return times


def _vc_users(
    rng: np.random.Generator, n: int, profile: Profile,
) -> tuple[pd.Series, pd.Series]:
    """VC and user of each job (vectorized per VC), as Arrow text columns."""
    import pyarrow as pa

    names = [v for v, _ in profile.vc_shares]
    shares = np.array([s for _, s in profile.vc_shares], dtype=np.float64)
    shares /= shares.sum()
    vc_idx = rng.choice(len(names), size=n, p=shares)
    users_per_vc = np.maximum(1, np.round(profile.n_users * shares)).astype(int)
    user_draw = rng.random(n)
    labels: list[str] = []  # every user name, VC by VC
    first = np.zeros(len(names), dtype=np.int64)  # each VC's first label
    user_at = np.empty(n, dtype=np.int64)
    for k in range(len(names)):
        first[k] = len(labels)
        count = int(users_per_vc[k])
        labels.extend(f"{names[k]}-u{i}" for i in range(count))
        w = 1.0 / np.arange(1, count + 1) ** profile.user_skew
        cdf = np.cumsum(w) / w.sum()
        rows = np.flatnonzero(vc_idx == k)
        if rows.size:
            i = np.searchsorted(cdf, user_draw[rows], side="right")
            user_at[rows] = first[k] + np.minimum(i, count - 1)
    return (_text_column(pa.array(names, type=pa.large_string()).take(vc_idx)),
            _text_column(pa.array(labels, type=pa.large_string()).take(user_at)))


def _job_ids(label: str, n: int) -> pd.Series:
    """`{label}-{i}` for i in 0..n-1, made in Arrow (no Python string a job)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    return _text_column(pc.binary_join_element_wise(
        pa.scalar(f"{label}-", text), pc.cast(pa.array(np.arange(n)), text),
        pa.scalar("", text)))


def _text_column(values: Any) -> pd.Series:
    """An Arrow text array as a column for `frame_to_trace` (which reads it as text)."""
    import pandas as pd

    return pd.Series(values, dtype=pd.ArrowDtype(values.type))


def calibrated(
    profile: str | Profile,
    n_jobs: int,
    *,
    seed: int = 0,
    topology: Topology | None = None,
    load: float | None = None,
    name: str | None = None,
) -> Trace:
    """Generate a trace with a real trace's statistics (see the module doc).

    Args:
        profile: A preset name (`philly-like`, `helios-like`) or a Profile.
        n_jobs: Number of jobs (>= 1).
        seed: Seed of the one numpy Generator used.
        topology: Restrict sizes to those that fit it; needed with `load`.
        load: Target offered load on `topology` (> 0): GPU-hours / span hours / GPUs.
        name: Trace name (default: the profile's); job ids are `{name}-{i}`.

    Returns:
        The trace (validated like any canonical trace).

    Raises:
        InvalidParameter: An unknown preset, a bad count, seed or load, or a load without
            a topology.
    """
    import pandas as pd

    if isinstance(profile, str):
        if profile not in PROFILES:
            from schedlab.sim.errors import unknown_name_message

            raise InvalidParameter(unknown_name_message("calibrated preset", profile,
                                                        PROFILES))
        profile = PROFILES[profile]
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise InvalidParameter(f"n_jobs {n_jobs!r}: expected an integer >= 1")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidParameter(f"seed {seed!r}: expected an integer >= 0")
    if load is not None:
        if isinstance(load, bool) or not isinstance(load, (int, float)) \
                or not math.isfinite(load) or load <= 0:
            raise InvalidParameter(f"load {load!r}: expected a number > 0 (offered GPU "
                                   "load, e.g. 0.8)")
        if topology is None or topology.num_gpus == 0:
            raise InvalidParameter("load needs a topology with GPUs: the offered load is "
                                   "GPU-hours per hour / the topology's GPUs")
    n = int(n_jobs)
    rng = np.random.default_rng(int(seed))
    sizes = np.array([s for s, _ in profile.size_mix], dtype=np.int64)
    weights = np.array([w for _, w in profile.size_mix], dtype=np.float64)
    if topology is not None and topology.num_gpus > 0:
        fits = sizes <= topology.num_gpus
        sizes, weights = sizes[fits], weights[fits]
    gpus = rng.choice(sizes, size=n, p=weights / weights.sum())
    tables = dict(profile.durations)
    dur = np.empty(n)
    classes = np.array([duration_class(int(g)) for g in gpus.tolist()])
    for c in DURATION_CLASSES:
        idx = np.flatnonzero(classes == c)
        if idx.size:
            dur[idx] = sample_durations(rng, tables[c], idx.size)
    dur = np.maximum(np.round(dur, 3), 1.0)
    if load is not None and topology is not None:
        span = float((dur * gpus).sum()) / (load * topology.num_gpus)
    else:
        span = (n - 1) / profile.rate_per_hour * 3600.0
    submit = np.round(_arrivals(rng, n, span, profile), 3)
    vcs, users = _vc_users(rng, n, profile)
    label = name or profile.name
    df = pd.DataFrame({
        "job_id": _job_ids(label, n),
        "submit_time": submit,
        "num_gpus": gpus,
        "duration": dur,
        "user": users,
        "vc": vcs,
    })
    trace = frame_to_trace(df, label=label, name=label,
                           source=f"calibrated({profile.name}, seed={int(seed)})")
    del df, vcs, users
    release_arrow_memory()
    return trace
