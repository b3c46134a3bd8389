"""The pending queue: jobs waiting for GPUs, in arrival order and by request class.

Keys are (submit time, job index), so the order is the trace's arrival order. Request
classes group jobs whose requests are identical: they fit or fail to fit together, so a
backfilling pass tries only each class's head; they are built on first use (a policy
that never asks, such as strict fifo, never pays for them) and kept from then on. Demand
counts (milli-GPUs per request) let the timeline tell idle capacity that some waiting job
could use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, Final

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from schedlab.sim.cfuncs import bisect_left, bisect_right, insort
from schedlab.sim.jobstate import PENDING, JobState, plain_spec, transition
from schedlab.sim.model import MILLI, job_milli

QueueKey = tuple[float, int]

SMALL: Final = 2048
"""Up to this many entries a `SortedKeys` is a plain list (beyond, a `SortedList`)."""


@mypyc_attr(allow_interpreted_subclasses=True)
class SortedKeys:
    """Entries kept sorted: a plain list moved by C `bisect` while short, else a SortedList.

    Queues are mostly short (hundreds of waiting jobs, even at a million jobs), where an
    insert's move of the list's tail costs less than a `SortedList`'s Python; a long one
    (a contended trace's tens of thousands) moves into a `SortedList` past `SMALL`
    entries, and back below a quarter of that. The subset of `SortedList` the queues
    use: `add`, `remove` (ValueError when absent), `discard`, `in`, `len`, indexing,
    iteration, `bisect_left`, `bisect_right`, `index` and `irange` from a minimum.
    """

    def __init__(self, entries: Iterable[Any] = ()) -> None:
        self._list: list[Any] = sorted(entries)
        self._big: SortedList | None = None
        if len(self._list) > SMALL:
            self._big = SortedList(self._list)
            self._list = []

    def add(self, entry: Any) -> None:
        """Insert an entry in its place."""
        big = self._big
        if big is not None:
            big.add(entry)
            return
        lst = self._list
        insort(lst, entry)
        if len(lst) > SMALL:
            self._big = SortedList(lst)
            self._list = []

    def remove(self, entry: Any) -> None:
        """Take an entry out (ValueError when it is not there)."""
        big = self._big
        if big is not None:
            big.remove(entry)
            if len(big) < SMALL // 4:
                self._list = list(big)
                self._big = None
            return
        del self._list[self.index(entry)]

    def __len__(self) -> int:
        big = self._big
        return len(self._list) if big is None else len(big)

    def __bool__(self) -> bool:
        big = self._big
        return bool(self._list) if big is None else bool(big)

    def __getitem__(self, i: int) -> Any:
        big = self._big
        return self._list[i] if big is None else big[i]

    def __iter__(self) -> Iterator[Any]:
        big = self._big
        return iter(self._list) if big is None else iter(big)

    def bisect_right(self, entry: Any) -> int:
        """Position after every entry <= `entry`."""
        big = self._big
        return bisect_right(self._list, entry) if big is None else big.bisect_right(entry)

    def irange(self, minimum: Any, inclusive: tuple[bool, bool] = (True, True)
               ) -> Iterator[Any]:
        """`SortedList.irange` from `minimum` on, with no maximum (lazily).

        Entries >= `minimum`, or > it when not `inclusive[0]`; stop when they change.
        """
        big = self._big
        if big is not None:
            return big.irange(minimum, None, inclusive)
        lst = self._list
        i = bisect_left(lst, minimum) if inclusive[0] else bisect_right(lst, minimum)
        return islice(lst, i, None)

    def bisect_left(self, entry: Any) -> int:
        """Position of the first entry >= `entry`."""
        big = self._big
        return bisect_left(self._list, entry) if big is None else big.bisect_left(entry)

    def index(self, entry: Any) -> int:
        """Position of `entry` (ValueError when it is not there)."""
        big = self._big
        if big is not None:
            return big.index(entry)
        i = self._find(entry)
        if i < 0:
            raise ValueError(f"{entry!r} not in list")
        return i

    def __contains__(self, entry: Any) -> bool:
        big = self._big
        return entry in big if big is not None else self._find(entry) >= 0

    def _find(self, entry: Any) -> int:
        """Position of `entry` in the plain list, or -1."""
        lst = self._list
        i = bisect_left(lst, entry)
        return i if i < len(lst) and lst[i] == entry else -1

    def discard(self, entry: Any) -> None:
        """Take an entry out if it is there."""
        if entry in self:
            self.remove(entry)


@mypyc_attr(allow_interpreted_subclasses=True)
class PendingQueue:
    """Sorted pending keys, per-class sorted keys and demand counts, kept in step."""

    def __init__(self) -> None:
        self.keys = SortedKeys()
        self._classes: dict[tuple[Any, ...], SortedList] | None = None  # built on first use
        # until then, queued jobs per class, in the order `classes` would hold the classes
        self._class_count: dict[tuple[Any, ...], int] = {}
        self.demand_count: dict[int, int] = {}
        self.version = 0  # grows on every change, so iterators know when to re-seek
        # per queued job: its key, request class and demand, computed once when it is added
        # (read-only outside; its truth is the queue's, read without a call by the engine)
        self.held: dict[int, tuple[QueueKey, tuple[Any, ...], int]] = {}

    def __len__(self) -> int:
        return len(self.held)  # one entry per queued job, as in `keys` (a dict is cheaper)

    def __bool__(self) -> bool:
        return bool(self.held)

    @property
    def classes(self) -> dict[tuple[Any, ...], SortedList]:
        """Queued keys by request class, each sorted (built on first use, then kept)."""
        classes = self._classes
        if classes is None:
            # the classes in the order they were created (as if kept all along)
            classes = self._classes = {ck: SortedList() for ck in self._class_count}
            for key, ck, _ in self.held.values():
                classes[ck].add(key)
            self._class_count.clear()
        return classes

    def add(self, job: JobState, now: float) -> None:
        """Queue a job (its status becomes pending, its wait starts now)."""
        transition(job, PENDING)
        self.version += 1
        job.queued_since = now
        s = job.spec
        idx = job.idx
        key = (s.submit_time, idx)
        self.keys.add(key)
        ck = job.request_class()
        classes = self._classes
        if classes is None:
            count = self._class_count
            count[ck] = count.get(ck, 0) + 1
        else:
            lst = classes.get(ck)
            if lst is None:
                lst = classes[ck] = SortedList()
            lst.add(key)
        n = s.num_gpus
        d = n * (MILLI if plain_spec(s) or s.gpu_share >= 1.0 else job_milli(s)) if n > 0 else 0
        if d:
            self.demand_count[d] = self.demand_count.get(d, 0) + 1
        self.held[idx] = (key, ck, d)

    def remove(self, job: JobState, now: float) -> None:
        """Take a job out, adding the time it waited to its queueing time."""
        idx = job.idx
        key, ck, d = self.held.pop(idx)
        self.keys.remove(key)
        self.version += 1
        classes = self._classes
        if classes is None:
            count = self._class_count
            left = count[ck] - 1
            if left:
                count[ck] = left
            else:
                del count[ck]
        else:
            lst = classes[ck]
            lst.remove(key)
            if not lst:
                del classes[ck]
        if d:
            left = self.demand_count[d] - 1
            if left:
                self.demand_count[d] = left
            else:
                del self.demand_count[d]
        waited = now - job.queued_since
        if waited:  # adding 0.0 would only make a new float object (x + 0.0 == x here)
            job.queue_time += waited

    def iter_jobs(self) -> Iterator[int]:
        """Indices of the queued jobs in order, while the queue may change meanwhile.

        Walks the sorted keys directly; after a change it re-seeks just past the last
        key yielded (or starts over, when every key lies past it), so keys added or
        removed meanwhile are seen or skipped as their place says.
        """
        keys = self.keys
        last: QueueKey | None = None
        while True:
            seen = self.version
            # from the start when every key lies after `last` (the common case: the job
            # yielded last has started), without the sorted list's Python seek
            if last is None or not keys or keys[0] > last:
                it = iter(keys)
            else:
                it = keys.irange(last, inclusive=(False, False))
            for key in it:
                last = key
                yield key[1]
                if self.version != seen:
                    break
            else:
                return

    def blocked_free(self, free_gpus: float) -> float:
        """Free GPUs idle while some waiting job would fit them by count (else 0)."""
        if self.demand_count and free_gpus > 0 \
                and min(self.demand_count) <= free_gpus * 1000 + 1e-6:
            return free_gpus
        return 0.0
