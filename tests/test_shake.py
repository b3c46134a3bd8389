"""Input shaking (traces.shake): each perturbation does what docs/getting-started.md says."""

from __future__ import annotations

import dataclasses

import pytest

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec
from schedlab.traces.base import Trace
from schedlab.traces.shake import Shaking, replica_rng, shake, shaking_from

GAP = 100.0
JOBS = tuple(JobSpec(f"j{i}", GAP * i, (1, 2, 4)[i % 3], 1000.0 + 10.0 * i,
                     deadline=GAP * i + 5000.0 if i % 4 == 0 else None,
                     fail_at=500.0 if i % 5 == 0 else None)
             for i in range(400))
TRACE = Trace("t", JOBS)
NONE = Shaking(jitter=0.0, resample=0.0, duration_jitter=0.0, subset=1.0)


def by_id(trace: Trace) -> dict[str, JobSpec]:
    return {j.job_id: j for j in trace.jobs}


def test_no_perturbation_gives_the_same_jobs():
    assert shake(TRACE, NONE, replica_rng(0, 0)).jobs == JOBS


def test_a_replica_depends_only_on_its_seed_and_index():
    s = Shaking()
    a, b = shake(TRACE, s, replica_rng(0, 1)), shake(TRACE, s, replica_rng(0, 1))
    assert a.jobs == b.jobs
    assert shake(TRACE, s, replica_rng(0, 2)).jobs != a.jobs
    assert shake(TRACE, s, replica_rng(1, 1)).jobs != a.jobs


def test_subset_keeps_about_that_share_and_drops_dependencies_on_dropped_jobs():
    deps = Trace("d", tuple(dataclasses.replace(j, depends_on=(f"j{i - 1}",)) if i else j
                            for i, j in enumerate(JOBS)))
    out = shake(deps, dataclasses.replace(NONE, subset=0.5), replica_rng(0, 0))
    assert 160 <= len(out.jobs) <= 240
    ids = {j.job_id for j in out.jobs}
    assert all(d in ids for j in out.jobs for d in j.depends_on)
    assert any(j.depends_on for j in out.jobs)
    # at least one job always stays
    assert len(shake(Trace("one", JOBS[:1]), dataclasses.replace(NONE, subset=1e-9),
                     replica_rng(0, 0)).jobs) == 1


def test_jitter_moves_submits_within_the_bound_clipped_at_zero_and_sorted():
    out = shake(TRACE, dataclasses.replace(NONE, jitter=2.0), replica_rng(0, 0))
    old = by_id(TRACE)
    moved = [j.submit_time - old[j.job_id].submit_time for j in out.jobs]
    assert max(abs(m) for m in moved) <= 2.0 * GAP + 1e-9
    assert sum(1 for m in moved if abs(m) > GAP) > 50  # uses the whole range
    times = [j.submit_time for j in out.jobs]
    assert min(times) >= 0.0 and times == sorted(times)
    for j in out.jobs:  # a deadline keeps its slack after submission
        o = old[j.job_id]
        if o.deadline is not None:
            assert j.deadline == pytest.approx(j.submit_time + o.deadline - o.submit_time)


def test_resample_draws_durations_from_jobs_of_the_same_size():
    out = shake(TRACE, dataclasses.replace(NONE, resample=1.0), replica_rng(0, 0))
    pools = {n: {j.duration for j in JOBS if j.num_gpus == n} for n in (1, 2, 4)}
    assert all(j.duration in pools[j.num_gpus] for j in out.jobs)
    changed = sum(1 for j in out.jobs if j.duration != by_id(TRACE)[j.job_id].duration)
    assert changed > 350
    some = shake(TRACE, dataclasses.replace(NONE, resample=0.1), replica_rng(0, 0))
    changed = sum(1 for j in some.jobs if j.duration != by_id(TRACE)[j.job_id].duration)
    assert 20 <= changed <= 60


def test_duration_jitter_is_multiplicative_and_keeps_failure_points_in_proportion():
    out = shake(TRACE, dataclasses.replace(NONE, duration_jitter=0.2), replica_rng(0, 0))
    old = by_id(TRACE)
    for j in out.jobs:
        r = j.duration / old[j.job_id].duration
        assert 0.8 <= r <= 1.2
        if old[j.job_id].fail_at is not None:
            assert j.fail_at == pytest.approx(old[j.job_id].fail_at * r)


@pytest.mark.parametrize(("values", "message"), [
    ({"jitter": -1}, "jitter -1: expected a number in [0, inf)"),
    ({"subset": 0}, "subset 0: expected a number in (0, 1]"),
    ({"resample": 1.5}, "resample 1.5: expected a number in [0, 1]"),
    ({"duration_jitter": 1}, "duration_jitter 1: expected a number in [0, 1)"),
    ({"shift": 1}, "unknown key 'shift'; allowed: jitter, resample, duration_jitter, subset"),
])
def test_bad_values_are_one_clear_line(values, message):
    with pytest.raises(InvalidParameter, match="replicas: " + message.replace("[", r"\[")
                       .replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        shaking_from(values)
