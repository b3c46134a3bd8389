"""`ClassHeads.firsts`: each class's first entry, kept as entries come and go.

The walk's merge starts from it instead of reading every class's sorted list, so it must
always be what the lists say, also after lists are handed in whole (themis does).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from schedlab.policies.priority import ClassHeads

_OP = st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 2), st.integers(0, 30))


def _expected(heads: ClassHeads) -> dict:
    return {ck: lst[0] for ck, lst in heads.lists.items()}


@settings(max_examples=200, deadline=None)
@given(st.lists(_OP, max_size=60))
def test_firsts_follow_adds_and_removes(ops):
    heads = ClassHeads()
    queued: dict[tuple, set] = {}
    for add, c, q, t in ops:
        ck = (c,)
        entry = ((q, 1, float(t)), t)
        have = queued.setdefault(ck, set())
        if add and entry not in have:
            heads.add(ck, entry)
            have.add(entry)
        elif not add and have:
            gone = sorted(have)[t % len(have)]
            heads.remove(ck, gone)
            have.discard(gone)
        assert heads.firsts() == _expected(heads)
    assert set(heads.lists) == {ck for ck, s in queued.items() if s}


def test_lists_handed_in_are_read_afresh():
    heads = ClassHeads()
    heads.add((1,), ((0, 1, 5.0), 5))
    heads.lists = {(2,): SortedList([((1, 1, 2.0), 2), ((0, 1, 9.0), 9)])}
    assert heads.firsts() == {(2,): ((0, 1, 9.0), 9)}
    heads.add((2,), ((0, 1, 1.0), 1))  # kept from then on
    assert heads.firsts() == {(2,): ((0, 1, 1.0), 1)}
    heads.remove((2,), ((0, 1, 1.0), 1))
    assert heads.firsts() == {(2,): ((0, 1, 9.0), 9)}
