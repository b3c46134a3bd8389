"""ArrayPool (srtf's column pool) answers every question as the plain VictimPool does.

Its columns come in any order; it sorts them by ((rem, 0, sub), idx), ties of rem broken
by a rank column when given one (as srtf does) or by (sub, idx), and hands out the jobs
and spans it was given (srtf's) or the context's.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.victims import ArrayPool, VictimPool
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import JobSpec

REM = st.sampled_from([0.0, -0.0, 1.0, 2.5, 7.0, 100.0])  # few values: ties are common
ROWS = st.lists(st.tuples(REM, st.sampled_from([0.0, 3.0, 9.0])), max_size=25)
KEYS = st.one_of(
    st.tuples(REM, st.just(1), st.sampled_from([0.0, 3.0, 9.0])),  # a pending srtf key
    st.tuples(REM, st.just(0), st.sampled_from([0.0, 3.0, 9.0])),  # a running one
    st.tuples(REM),
)
KINDS = st.sampled_from(["sorted", "shuffled", "ranked", "entries"])


def _job(i: int, sub: float) -> JobState:
    """A running job's state: index `i`, submitted at `sub` (a real one: the pool is compiled)."""
    return JobState(i, JobSpec(f"j{i}", sub, 1, 10.0))


CTX = SimpleNamespace(job_at=lambda i: ("job", i))  # the plain pool's jobs: by index


def pools(rows: list[tuple[float, float]], kind: str = "sorted", seed: int = 0
          ) -> tuple[VictimPool, ArrayPool]:
    """The same running jobs (idx = row number) as a plain pool and as columns.

    `kind`: the columns in the pool's order, shuffled, shuffled with a rank column of
    (sub, idx), or shuffled with the jobs and their spans handed in.
    """
    entries = sorted(((rem, 0, sub), i) for i, (rem, sub) in enumerate(rows))
    if kind == "sorted":
        cols = entries
    else:
        cols = [entries[p] for p in np.random.default_rng(seed).permutation(len(entries))]
    rem, sub, idx = ([k[0] for k, _ in cols], [k[2] for k, _ in cols], [i for _, i in cols])
    tie = pairs = None
    if kind == "ranked":
        by = sorted(range(len(cols)), key=lambda p: (sub[p], idx[p]))
        tie = np.empty(len(cols), dtype=np.int64)
        tie[by] = np.arange(len(cols)) * 3 + 7  # any numbers in that order
    if kind == "entries":
        pairs = [(_job(i, s), ((i % 3, 1 + i % 2),)) for i, s in zip(idx, sub, strict=True)]
    return VictimPool(entries), ArrayPool(rem, sub, idx, entries=pairs, tie=tie)


def same(plain: VictimPool, arr: ArrayPool, key: tuple) -> None:
    assert arr.below(key) == plain.below(key)
    assert arr.count_below(key) == plain.count_below(key) == len(plain.below(key))
    assert list(arr.lowest_first(key)) == list(plain.lowest_first(key)) \
        == [i for _, i in reversed(plain.below(key))]
    assert arr.lowest() == plain.lowest()
    got = list(arr.lowest_jobs(CTX, key))  # type: ignore[arg-type]
    if arr._pairs is None or arr._plain:
        assert got == list(plain.lowest_jobs(CTX, key))  # type: ignore[arg-type]
    else:  # the jobs and spans handed in
        assert [j.idx for j in got] == list(plain.lowest_first(key))
        assert list(arr.lowest_spans(CTX, key)) == [  # type: ignore[arg-type]
            (j, ((j.idx % 3, 1 + j.idx % 2),)) for j in got]


@settings(max_examples=300, deadline=None)
@given(ROWS, KINDS, st.integers(0, 9), st.lists(st.integers(0, 30), max_size=8),
       st.lists(KEYS, min_size=1, max_size=4))
def test_array_pool_equals_plain_pool_after_removals(rows, kind, seed, gone, keys):
    plain, arr = pools(rows, kind, seed)
    for key in keys:
        same(plain, arr, key)
    for i in gone:  # stopped victims, and indexes that are not in the pool
        plain.remove(i)
        arr.remove(i)
        for key in keys:
            same(plain, arr, key)


@settings(max_examples=100, deadline=None)
@given(ROWS, KINDS, st.lists(st.integers(0, 30), max_size=4), KEYS, REM)
def test_array_pool_add_turns_plain(rows, kind, gone, key, rem):
    plain, arr = pools(rows, kind)
    for i in gone:
        plain.remove(i)
        arr.remove(i)
    plain.add(0, (rem, 0, 1.0))
    arr.add(0, (rem, 0, 1.0))
    same(plain, arr, key)
    assert arr.keys == plain.keys


def test_a_stopped_job_leaves_the_spans_cache_and_a_rekeyed_one_keeps_it() -> None:
    # a pool kept for a whole run (fixed running keys) must not keep the spans of every
    # job it ever read as a candidate
    spans: dict[int, Any] = {1: ((0, 1), ((0, 2),)), 2: ((4,), ((1, 1),))}
    pool = VictimPool([((0, 0, 1.0), 1), ((0, 0, 2.0), 2)], spans)
    pool.add(1, (1, 0, 1.0))  # re-keyed (a demotion): still running on the same GPUs
    assert 1 in pool.spans and pool.lowest() == (1, 0, 1.0)
    pool.remove(2)
    pool.remove(1)
    assert pool.spans == {} and pool.lowest() is None


KEY = st.one_of(st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 5)),
                st.tuples(st.integers(0, 3)), st.tuples(st.integers(0, 3), st.integers(0, 1)))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), KEY, st.booleans()), max_size=30), KEY)
def test_flat_entries_order_as_key_idx_pairs(ops, probe):
    """Entries are flat (*key, idx) while keys share a length, pairs after one that does
    not: either way the pool answers as sorted (key, idx) pairs do."""
    pool, keys = VictimPool([]), {}
    for idx, key, add in ops:
        if add:
            pool.add(idx, key)
            keys[idx] = key
        else:
            pool.remove(idx)
            keys.pop(idx, None)
        pairs = sorted((k, i) for i, k in keys.items())
        want = [e for e in pairs if e > (probe, float("inf"))]
        assert pool.below(probe) == want and pool.count_below(probe) == len(want)
        assert list(pool.lowest_first(probe)) == [i for _, i in reversed(want)]
        assert pool.lowest() == (pairs[-1][0] if pairs else None)
