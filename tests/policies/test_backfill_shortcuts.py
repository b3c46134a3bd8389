"""Backfilling's shortcuts (profile search, class lanes, skipped passes) change nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.backfill import ConservativeBackfillPolicy, _Lane, _Profile
from schedlab.sim.context import SchedContext
from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import PENDING, RUNNING
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace

TIMES = st.sampled_from([0.0, 1.0, 5.0, 10.0, 10.0, 12.5, 40.0, 1e9])
RELEASES = st.lists(st.tuples(TIMES, st.sampled_from([250, 1000, 2000, 8000])), max_size=20)
ASKS = st.lists(st.tuples(st.sampled_from([0, 500, 1000, 3000, 8000, 16000]),
                          st.sampled_from([1e-9, 0.5, 3.0, 10.0, 30.0, 1e6])), max_size=12)


def scan(prof: _Profile, need: int, length: float, first: int = 0) -> int:
    """The earliest breakpoint from `first` where `need` fits for `length`, point by point."""
    times, free = prof.times, prof.free
    for i in range(first, len(times)):
        end = times[i] + length
        if all(free[j] >= need for j in range(i, len(times)) if j == i or times[j] < end):
            return i
    return len(times)


@settings(max_examples=300, deadline=None)
@given(RELEASES, st.integers(0, 4000), ASKS, st.integers(0, 3))
def test_earliest_equals_a_plain_scan(releases, free, asks, first):
    prof = _Profile(0.0, free, releases)
    for need, length in asks:
        i = prof.earliest(need, length, min(first, len(prof.times)))
        assert i == scan(prof, need, length, min(first, len(prof.times)))
        if i < len(prof.times):
            before = list(prof.free)
            prof.reserve(i, need, length)
            assert min(prof.free) >= 0 or min(before) < 0


class _Jobs:
    """A stand-in context: every job is pending but those in `started`."""

    def __init__(self, started: set[int]) -> None:
        self.started = started

    def job_at(self, idx: int) -> SimpleNamespace:
        """The job's status only."""
        return SimpleNamespace(status=RUNNING if idx in self.started else PENDING)


KEYS = st.tuples(st.sampled_from([0.0, 1.0, 2.0, 3.0]), st.integers(0, 40))
OPS = st.lists(st.tuples(st.booleans(), KEYS, st.sampled_from([1.0, 5.0, 20.0, 100.0])),
               max_size=80)


@settings(max_examples=300, deadline=None)
@given(OPS, st.sets(st.integers(0, 40), max_size=5), KEYS,
       st.sampled_from([0.5, 1.0, 5.0, 30.0, 1e9]))
def test_lane_first_equals_a_walk(ops, started, since, limit):
    lane = _Lane()
    live: dict[tuple, float] = {}
    for add, key, est in ops:
        if add and key not in live:
            lane.add(key, est)
            live[key] = est
        elif not add and key in live:
            lane.drop(key)
            del live[key]
        assert len(lane) == len(live)
    want = next((k for k in sorted(live) if k > since and live[k] <= limit
                 and k[1] not in started), None)
    assert lane.first(_Jobs(started), since, limit) == want


class _Unskipped(ConservativeBackfillPolicy):
    """Conservative backfilling that runs every pass in full (no `_unchanged` skip)."""

    name = "conservative-backfill-unskipped"

    def _unchanged(self, ctx: SchedContext) -> bool:
        """Never skip."""
        return False


class _Counted(ConservativeBackfillPolicy):
    """Conservative backfilling that counts the passes it skips."""

    name = "conservative-backfill-counted"
    skipped = 0

    def _unchanged(self, ctx: SchedContext) -> bool:
        """Skip as usual, counting."""
        got = super()._unchanged(ctx)
        type(self).skipped += got
        return got


@pytest.mark.parametrize("params", [{"max_reservations": 5}, {"max_reservations": 2},
                                    {"estimate_factor": 2.0}])
def test_skipped_passes_change_no_decision(params):
    topo = uniform_topology(4)
    trace = load_trace("philly-like:600", topology=topo, load=1.5)
    _Counted.skipped = 0
    skipping = Simulation(trace, topo, _Counted(**params)).run()
    full = Simulation(trace, topo, _Unskipped(**params)).run()
    assert _Counted.skipped > 10
    cols = ["time", "job_id", "kind", "detail"]
    assert skipping.events[cols].equals(full.events[cols])
    assert skipping.jobs.equals(full.jobs)
