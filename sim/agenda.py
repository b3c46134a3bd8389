"""The event agenda: future engine events in time order, with cancellation by version.

SimPy has no cancel, so a job's completion, failure and retry entries carry the job's
version when they were scheduled; a change of rate or placement bumps the version and the
old entries become stale. Stale entries are dropped when they reach the front, and the
heap is compacted when it has grown past twice its live size at the last compaction
(amortised O(1) a push; counting the dead instead overcounts, since a bump of a job with
no live entry cancels nothing, and made a run with a small heap rescan it every few
hundred jobs). The shape is SimPy's
(`schedule`, `peek`), over a plain heap of tuples for speed: the engine pops the entries
due at an instant from `heap` itself (stale ones included; it skips those by version).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Final

from mypy_extensions import mypyc_attr

from schedlab.sim.cfuncs import heapify, heappop, heappush
from schedlab.sim.jobstate import JobState


class Due(StrEnum):
    """Kinds of agenda entries."""

    FINISH = "finish"  # a job's work is done (versioned)
    FAIL = "fail"  # a running attempt fails (versioned)
    RETRY = "retry"  # a failed attempt is queued again (versioned)
    TIMER = "timer"  # a policy asked for a pass (`ctx.wake_at`)
    LIFETIME = "lifetime"  # a job's max_lifetime is up
    TICK = "tick"  # the policy's periodic pass
    NODE_FAIL = "node_fail"
    NODE_REPAIR = "node_repair"


VERSIONED: Final = frozenset({Due.FINISH, Due.FAIL, Due.RETRY})
Entry = tuple[float, int, Due, int, int]  # time, sequence, kind, job or node, version
_COMPACT_AT: Final = 1024
WATCH_MAX: Final = 4096
"""Indices a progress watch holds at most; past it, it holds `WATCH_ALL` alone."""
WATCH_ALL: Final = -1
"""In a progress watch: any job's version may have moved (too many to list)."""


def drain_watch(watch: set[int] | None, kept: int) -> list[int] | None:
    """The job indices a progress watch (`Agenda.watch`) collected, and clear it.

    None when the consumer must re-read all `kept` of its jobs instead: it has no watch,
    the watch overflowed (`WATCH_ALL`), or it names more jobs than are kept (reading
    each kept job is then as cheap).
    """
    if watch is None:
        return None
    if WATCH_ALL in watch or len(watch) > kept:
        watch.clear()
        return None
    moved = list(watch)  # (each consumer treats them one by one: order does not matter)
    watch.clear()
    return moved


@mypyc_attr(allow_interpreted_subclasses=True)
class Agenda:
    """A heap of (time, seq, kind, index, version) entries; ties go in scheduling order."""

    def __init__(self, jobs: Sequence[JobState]) -> None:
        self.heap: list[Entry] = []
        self._jobs = jobs
        self._seq = 0
        self._compact_at = _COMPACT_AT  # heap size that triggers the next compaction
        self._watchers: list[set[int]] = []  # see `watch`

    def __len__(self) -> int:
        return len(self.heap)

    def schedule(self, t: float, kind: Due, idx: int = -1, version: int = 0) -> None:
        """Add an entry; versioned kinds are stale once the job's version moves on."""
        self._seq += 1
        heap = self.heap
        heappush(heap, (t, self._seq, kind, idx, version))
        if len(heap) > self._compact_at:
            self.compact()

    def compact(self) -> None:
        """Drop every stale entry (pops come in the same order: keys are unique)."""
        jobs = self._jobs
        self.heap = [e for e in self.heap  # `stale` inlined
                     if e[2] not in VERSIONED or jobs[e[3]].version == e[4]]
        heapify(self.heap)
        self._compact_at = max(_COMPACT_AT, 2 * len(self.heap))

    def stale(self, entry: Entry) -> bool:
        """Whether an entry was cancelled by a later change of its job."""
        _, _, kind, idx, version = entry
        return kind in VERSIONED and self._jobs[idx].version != version

    def bump(self, job: JobState) -> None:
        """Cancel the job's pending versioned entries (they stay until popped or compacted)."""
        job.version += 1
        if self._watchers:
            idx = job.idx
            for w in self._watchers:
                if WATCH_ALL in w:  # overflowed: it says all already
                    continue
                if len(w) < WATCH_MAX:
                    w.add(idx)
                else:
                    w.clear()
                    w.add(WATCH_ALL)

    def watch(self) -> set[int]:
        """A set to which every later `bump` adds the job's index (its `version` moved).

        Every change of a job's progress fields (work, rate, segment start) or placement
        bumps its version, so a consumer that keeps those fields for the running jobs
        reads this set and clears it, and re-reads only the jobs in it instead of every
        job's version. Unread, it stays bounded: past `WATCH_MAX` indices it holds
        `WATCH_ALL` alone (any job may have changed: read them all).
        """
        w: set[int] = set()
        self._watchers.append(w)
        return w

    def peek(self) -> float:
        """Time of the next live entry (inf when none), dropping stale ones in front."""
        heap = self.heap
        jobs = self._jobs
        while heap:
            head = heap[0]
            if head[2] in VERSIONED and jobs[head[3]].version != head[4]:  # stale
                heappop(heap)
            else:
                return head[0]
        return math.inf

    def any_live(self, keep: Callable[[Due], bool]) -> bool:
        """Whether a live entry of a kind `keep` accepts is still due (scans the heap)."""
        return any(keep(e[2]) and not self.stale(e) for e in self.heap)
