"""Synthetic generator and from_records."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces import from_records, generate, load_trace


def test_deterministic_per_seed() -> None:
    a = generate(200, seed=7)
    np.random.seed(123)  # the global RNG must not matter
    b = generate(200, seed=7)
    assert a.jobs == b.jobs


def test_different_across_seeds() -> None:
    assert generate(50, seed=0).jobs != generate(50, seed=1).jobs


def test_shape_of_trace() -> None:
    t = generate(300, seed=3, n_users=4, n_vcs=2)
    assert len(t) == 300 and t.name == "synthetic"
    assert t.jobs[0].submit_time == 0.0
    times = [j.submit_time for j in t.jobs]
    assert times == sorted(times)
    assert len({j.job_id for j in t.jobs}) == 300
    assert {j.user for j in t.jobs} <= {f"user{i}" for i in range(4)}
    assert {j.vc for j in t.jobs} <= {"vc0", "vc1"}
    assert all(j.vc == f"vc{int(j.user[4:]) % 2}" for j in t.jobs)
    assert all(j.duration >= 1.0 for j in t.jobs)


def test_size_mix_roughly_honoured() -> None:
    t = generate(5000, seed=11)
    counts = Counter(j.num_gpus for j in t.jobs)
    assert set(counts) <= {1, 2, 4, 8}
    assert abs(counts[1] / 5000 - 0.7) < 0.03
    for g in (2, 4, 8):
        assert abs(counts[g] / 5000 - 0.1) < 0.02
    t2 = generate(2000, seed=1, size_mix={16: 1.0})
    assert {j.num_gpus for j in t2.jobs} == {16}


def test_arrival_rate_and_durations() -> None:
    t = generate(4000, seed=5, arrival_rate_per_hour=60.0)
    span_h = t.jobs[-1].submit_time / 3600
    assert 4000 / span_h == pytest.approx(60.0, rel=0.1)
    med = float(np.median([j.duration for j in t.jobs]))
    assert med == pytest.approx(1200, rel=0.15)
    e = generate(4000, seed=5, duration="exponential", mean_s=500.0, max_duration=2000.0)
    d = [j.duration for j in e.jobs]
    assert max(d) <= 2000.0
    assert float(np.mean(d)) == pytest.approx(500 - 500 * np.exp(-4), rel=0.1)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"n_jobs": 0}, "n_jobs"),
    ({"seed": -1}, "seed"),
    ({"arrival_rate_per_hour": 0}, "arrival_rate_per_hour"),
    ({"size_mix": {}}, "size_mix"),
    ({"size_mix": {1: -0.5}}, "size_mix"),
    ({"size_mix": {1.5: 1.0}}, "size_mix"),
    ({"size_mix": {1: 0.0}}, "all be 0"),
    ({"duration": "weibull"}, "lognormal, exponential"),
    ({"median_s": -1}, "median_s"),
    ({"sigma": float("nan")}, "sigma"),
    ({"mean_s": 0}, "mean_s"),
    ({"max_duration": 0}, "max_duration"),
    ({"n_users": 0}, "n_users"),
    ({"n_vcs": 0}, "n_vcs"),
])
def test_bad_params(kwargs: dict, fragment: str) -> None:
    args = {"n_jobs": 10, "seed": 0} | kwargs
    n = args.pop("n_jobs")
    with pytest.raises(ValueError, match=fragment):
        generate(n, **args)


def test_load_trace_synthetic() -> None:
    assert len(load_trace("synthetic")) == 1000
    t = load_trace("synthetic:25")
    assert len(t) == 25 and t.name == "synthetic:25"
    assert t.jobs == generate(25, seed=0).jobs
    for bad in ("synthetic:0", "synthetic:x", "synthetic:"):
        with pytest.raises(InvalidTrace, match="integer >= 1"):
            load_trace(bad)


def test_from_records_defaults_and_structures() -> None:
    t = from_records([
        {"job_id": "a", "submit_time": 3, "num_gpus": 1, "duration": 5, "team": "x"},
        {"job_id": "b", "submit_time": 1, "num_gpus": 2, "duration": 5,
         "depends_on": ["a"], "gpu_speeds": {"V100": 1, "K80": 0.2}, "priority": None},
    ])
    b, a = t.jobs
    assert (b.job_id, a.job_id) == ("b", "a")
    assert b.depends_on == ("a",) and b.gpu_speeds == (("K80", 0.2), ("V100", 1.0))
    assert b.priority == 0 and a.vc == "default"
    assert t.extra_columns == ("team",) and dict(a.extra) == {"team": "x"}


def test_from_records_errors() -> None:
    with pytest.raises(InvalidTrace, match="no job rows"):
        from_records([])
    with pytest.raises(InvalidTrace, match="missing required column"):
        from_records([{"job_id": "a"}])
    with pytest.raises(InvalidTrace, match=r"inline, row 1, column duration: value '0'"):
        from_records([{"job_id": "a", "submit_time": 0, "num_gpus": 1, "duration": 0}])
