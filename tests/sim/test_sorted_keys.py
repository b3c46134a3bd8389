"""`SortedKeys`: the queues' sorted entries, a plain list while short, a SortedList beyond.

It must answer as a `SortedList` of the same entries does, in either form and across
the moves between them.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from schedlab.sim.queue import SMALL, SortedKeys

ENTRY = st.tuples(st.floats(0, 100, allow_nan=False), st.integers(0, 50))


def _same(got: SortedKeys, want: SortedList, probe: tuple[float, int]) -> None:
    assert len(got) == len(want) and bool(got) == bool(want)
    assert list(got) == list(want)
    if want:
        assert got[0] == want[0] and got[-1] == want[-1]
    assert got.bisect_right(probe) == want.bisect_right(probe)
    assert got.bisect_left(probe) == want.bisect_left(probe)
    for inc in (True, False):
        assert list(got.irange(probe, inclusive=(inc, True))) \
            == list(want.irange(probe, None, inclusive=(inc, True)))
    assert (probe in got) == (probe in want)
    for e in list(want)[:3]:
        assert e in got and got.index(e) == want.index(e)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), ENTRY), max_size=60), ENTRY)
def test_answers_as_a_sorted_list(ops, probe):
    got, want = SortedKeys(), SortedList()
    for add, e in ops:
        if add or e not in want:
            got.add(e)
            want.add(e)
        else:
            got.remove(e)
            want.remove(e)
        _same(got, want, probe)


def test_long_queues_move_to_a_sorted_list_and_back():
    got, want = SortedKeys(), SortedList()
    entries = [((i * 7919) % 5003 * 1.0, i) for i in range(SMALL + 500)]
    for e in entries:
        got.add(e)
        want.add(e)
    _same(got, want, entries[10])
    for e in entries[: SMALL + 200]:
        got.remove(e)
        want.remove(e)
    _same(got, want, entries[-1])
    assert len(SortedKeys(entries)) == len(entries)


def test_removing_an_absent_entry_is_an_error():
    keys = SortedKeys([(1.0, 1)])
    with pytest.raises(ValueError):
        keys.remove((2.0, 2))
    with pytest.raises(ValueError):
        keys.index((2.0, 2))
    keys.discard((2.0, 2))  # no error
    keys.discard((1.0, 1))
    assert not keys
