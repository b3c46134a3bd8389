"""ArrayPool (srtf's column pool) answers every question as the plain VictimPool does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.victims import ArrayPool, VictimPool

REM = st.sampled_from([0.0, 1.0, 2.5, 7.0, 100.0])  # few values: ties are common
ROWS = st.lists(st.tuples(REM, st.sampled_from([0.0, 3.0, 9.0])), max_size=25)
KEYS = st.one_of(
    st.tuples(REM, st.just(1), st.sampled_from([0.0, 3.0, 9.0])),  # a pending srtf key
    st.tuples(REM, st.just(0), st.sampled_from([0.0, 3.0, 9.0])),  # a running one
    st.tuples(REM),
)


def pools(rows: list[tuple[float, float]]) -> tuple[VictimPool, ArrayPool]:
    """The same running jobs (idx = row number) as a plain pool and as columns."""
    entries = sorted(((rem, 0, sub), i) for i, (rem, sub) in enumerate(rows))
    arr = ArrayPool([k[0] for k, _ in entries], [k[2] for k, _ in entries],
                    [i for _, i in entries])
    return VictimPool(entries), arr


def same(plain: VictimPool, arr: VictimPool, key: tuple) -> None:
    assert arr.below(key) == plain.below(key)
    assert arr.count_below(key) == plain.count_below(key) == len(plain.below(key))
    assert list(arr.lowest_first(key)) == list(plain.lowest_first(key)) \
        == [i for _, i in reversed(plain.below(key))]
    assert arr.lowest() == plain.lowest()


@settings(max_examples=200, deadline=None)
@given(ROWS, st.lists(st.integers(0, 30), max_size=8), st.lists(KEYS, min_size=1, max_size=4))
def test_array_pool_equals_plain_pool_after_removals(rows, gone, keys):
    plain, arr = pools(rows)
    for key in keys:
        same(plain, arr, key)
    for i in gone:  # stopped victims, and indexes that are not in the pool
        plain.remove(i)
        arr.remove(i)
        for key in keys:
            same(plain, arr, key)


@settings(max_examples=100, deadline=None)
@given(ROWS, st.lists(st.integers(0, 30), max_size=4), KEYS, REM)
def test_array_pool_add_turns_plain(rows, gone, key, rem):
    plain, arr = pools(rows)
    for i in gone:
        plain.remove(i)
        arr.remove(i)
    plain.add(0, (rem, 0, 1.0))
    arr.add(0, (rem, 0, 1.0))
    same(plain, arr, key)
    assert arr.keys == plain.keys
