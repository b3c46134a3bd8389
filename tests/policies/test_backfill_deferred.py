"""Conservative backfilling's profile defers reservations past its first zero exactly.

`_Profile.book` defers a reservation whose earliest start lies at or past the first
breakpoint with no free capacity, and `settle` replays the deferred ones in order when a
question could depend on them (a horizon for no GPUs, a reservation spanning the zero).
On random profiles (zeros, negative capacity, breakpoints close together) and random
sequences of reservations, starts at the profile's start and horizon questions, the
profile must answer and end as a plain one that makes every reservation at once.
"""

from __future__ import annotations

import random
from bisect import bisect_left

from schedlab.policies.backfill import _Profile


class _Plain(_Profile):
    """The profile without deferral: every reservation made at its earliest start.

    A `_Profile` that tracks no zero never defers; its `earliest` is the definition
    (every breakpoint the span covers has room), not the production search.
    """

    def __init__(self, times: list[float], free: list[int]) -> None:
        super().__init__(0.0, 0, [], (times, free))
        self.zero = None

    def earliest(self, need: int, length: float, first: int = 0, last: int = -1) -> int:
        times, free = self.times, self.free
        for i in range(first, len(times) if last < 0 else last):
            end = times[i] + length
            k = bisect_left(times, end)
            if all(f >= need for f in free[i:max(k, i + 1)]):
                return i
        return len(times)


def test_deferred_reservations_settle_to_the_plain_profile() -> None:
    rng = random.Random(7)
    points = [0.1, 0.2, 1.0, 2.0, 2.5, 3.0, 4.0, 5.5, 7.0, 9.0, 10.0, 12.0]
    settles = 0
    for trial in range(3000):
        times = sorted({0.0, *rng.choices(points, k=rng.randint(1, 12))})
        free = [rng.randint(-1 if rng.random() < 0.1 else 0, 6) * 1000 for _ in times]
        if rng.random() < 0.3:
            free.sort()
        got = _Profile(0.0, 0, [], (list(times), list(free)))
        want = _Plain(list(times), list(free))
        for step in range(rng.randint(1, 15)):
            r = rng.random()
            need = rng.choice([0, 1000, 1000, 2000, 3000, 500])
            length = rng.choice([0.5, 1.0, 2.0, 3.0, 6.0, 20.0, 1e-9])
            if r < 0.6:  # the next queued job's reservation (from the second breakpoint)
                first = rng.choice([0, 1]) if len(want.times) > 1 else 0
                i = want.earliest(need, length, first)
                if i < len(want.times):
                    want.reserve(i, need, length)
                got.book(need, length, first)
            elif r < 0.8:  # a job that starts now, maybe spanning the zero
                got.reserve(0, need, length)
                want.reserve(0, need, length)
            else:
                since = rng.choice([None, 0.0, 0.05])
                settles += need == 0 and bool(got.deferred)
                assert got.horizon(need, since) == want.horizon(need, since), (trial, step)
            done = _Profile(0.0, 0, [], (list(got.times), list(got.free)))
            done.deferred = list(got.deferred)
            done.settle()
            assert (done.times, done.free) == (want.times, want.free), (trial, step)
            if got.zero is not None:  # the first breakpoint with no free capacity
                z = next((j for j, f in enumerate(got.free) if f <= 0), len(got.free))
                assert got.zero == z, (trial, step)
    assert settles > 0  # the horizon for no GPUs settled deferred reservations
