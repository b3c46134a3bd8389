"""Conservative backfilling's faster profile search gives the breakpoints a plain scan gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.backfill import _Profile

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
