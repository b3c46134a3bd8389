"""Calibrated generators reproduce their source's statistics within stated tolerances."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from schedlab.sim.errors import InvalidParameter
from schedlab.topologies.build import uniform_topology
from schedlab.traces.calibrated import (
    HELIOS_LIKE,
    PHILLY_LIKE,
    QUANTILES,
    calibrated,
    duration_class,
    preset_names,
    sample_durations,
)
from schedlab.traces.inspect import trace_stats


def arrays(t):
    return (np.array([j.submit_time for j in t.jobs]), np.array([j.num_gpus for j in t.jobs]),
            np.array([j.duration for j in t.jobs]))


def hourly_shares(submit: np.ndarray) -> np.ndarray:
    h = np.bincount(((submit // 3600) % 24).astype(int), minlength=24)
    return h / h.sum()


def test_presets_and_determinism() -> None:
    assert preset_names() == ["helios-like", "philly-like"]
    a = calibrated("philly-like", 300, seed=5)
    assert a.jobs == calibrated("philly-like", 300, seed=5).jobs
    assert a.jobs != calibrated("philly-like", 300, seed=6).jobs
    assert [j.job_id for j in a.jobs[:2]] == ["philly-like-0", "philly-like-1"]
    assert a.jobs[0].submit_time == 0.0


def test_sample_durations_follow_the_quantile_table() -> None:
    rng = np.random.default_rng(0)
    table = dict(PHILLY_LIKE.durations)[1]
    d = sample_durations(rng, table, 40000)
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        expected = np.exp(np.interp(q, QUANTILES, np.log(table)))
        assert np.quantile(d, q) == pytest.approx(expected, rel=0.05)


def test_philly_like_matches_the_profile() -> None:
    """Tolerances: size shares +-2 points; per-class median +-20 %; rate exact; CV > 5 and
    within 0.4x-1.6x of the source's 15.1; hourly shares correlate > 0.7; top VC +-3 points."""
    t = calibrated("philly-like", 20000, seed=1)
    s = trace_stats(t)
    submit, gpus, dur = arrays(t)
    total = sum(w for _, w in PHILLY_LIKE.size_mix)
    for size in (1, 2, 4, 8):
        share = dict(PHILLY_LIKE.size_mix)[size] / total
        assert (gpus == size).mean() == pytest.approx(share, abs=0.02)
    for c in (1, 4, 8):
        sel = np.array([duration_class(int(g)) == c for g in gpus])
        assert np.median(dur[sel]) == pytest.approx(dict(PHILLY_LIKE.durations)[c][7], rel=0.2)
    assert s.arrival_rate_per_hour == pytest.approx(PHILLY_LIKE.rate_per_hour, rel=1e-6)
    assert 5 < s.interarrival_cv and 0.4 < s.interarrival_cv / 15.14 < 1.6
    assert s.interarrival_median_s < s.interarrival_mean_s / 5  # bursts: many tiny gaps
    target = np.array(PHILLY_LIKE.hourly) / sum(PHILLY_LIKE.hourly)
    assert np.corrcoef(hourly_shares(submit), target)[0, 1] > 0.7
    assert s.top_vcs[0][0] == "6214e9"
    assert s.top_vcs[0][1] / s.jobs == pytest.approx(41226 / 82247, abs=0.03)
    assert s.users > 50 and s.top_users[0][1] > 3 * (s.jobs / s.users)  # skewed activity


def test_philly_like_matches_the_real_file(shared_dir: Path) -> None:
    """Against the Pollux CSV itself: duration quartiles and p90 within 25 %."""
    src = pd.read_csv(shared_dir / "traces/philly/philly_jobs_pollux.csv").dropna(how="all")
    _, _, dur = arrays(calibrated("philly-like", 20000, seed=2))
    for q in (0.25, 0.5, 0.75, 0.9):
        assert np.quantile(dur, q) == pytest.approx(src.duration.quantile(q), rel=0.25)
    assert (src.num_gpus == 1).mean() == pytest.approx(0.932, abs=0.001)


def test_helios_like_cycle_and_sizes() -> None:
    """Helios Venus: 1-GPU share +-3 points, 8-GPU +-3 points, hourly correlation > 0.7,
    weekdays busier than weekends."""
    t = calibrated("helios-like", 20000, seed=3)
    submit, gpus, _ = arrays(t)
    assert (gpus == 1).mean() == pytest.approx(1549 / 3109, abs=0.03)
    assert (gpus == 8).mean() == pytest.approx(837 / 3109, abs=0.03)
    target = np.array(HELIOS_LIKE.hourly) / sum(HELIOS_LIKE.hourly)
    assert np.corrcoef(hourly_shares(submit), target)[0, 1] > 0.7
    day = ((submit // 86400) % 7).astype(int)
    per_day = np.bincount(day, minlength=7) / np.bincount(
        np.arange(int(submit.max() // 86400) + 1) % 7, minlength=7)
    assert per_day[:5].mean() > per_day[5:].mean()
    assert trace_stats(t).interarrival_cv > 5


@pytest.mark.parametrize("preset", ["philly-like", "helios-like"])
def test_target_load_on_a_topology(preset: str) -> None:
    topo = uniform_topology(8, sockets=2, switches_per_socket=2, gpus_per_switch=2)  # 64
    t = calibrated(preset, 500, seed=0, topology=topo, load=0.8)
    assert trace_stats(t, topo).offered_load == pytest.approx(0.8, rel=1e-6)
    assert max(j.num_gpus for j in t.jobs) <= 64
    low = calibrated(preset, 500, seed=0, topology=topo, load=0.4)
    assert trace_stats(low, topo).span_s == pytest.approx(2 * trace_stats(t, topo).span_s)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"profile": "phily-like", "n_jobs": 5}, "did you mean 'philly-like'"),
    ({"profile": "philly-like", "n_jobs": 0}, "n_jobs 0: expected an integer >= 1"),
    ({"profile": "philly-like", "n_jobs": 5, "seed": -1}, "seed -1"),
    ({"profile": "philly-like", "n_jobs": 5, "load": 0.5}, "load needs a topology"),
    ({"profile": "philly-like", "n_jobs": 5, "load": 0, "topology": None},
     "load 0: expected a number > 0"),
])
def test_errors(kwargs, fragment: str) -> None:
    with pytest.raises(InvalidParameter) as e:
        calibrated(**kwargs)
    assert fragment in str(e.value)
