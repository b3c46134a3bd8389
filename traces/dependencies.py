"""Checks across rows of a canonical trace: unique job ids and a dependency DAG.

A repeated `job_id` is an error on the later row, naming the earlier one; a
`depends_on` naming an unknown or skipped job, or closing a cycle, is an error on the
depending row, and (under skip_bad_rows) its dependents are skipped too.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from schedlab.traces.rows import FrameErrors

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["check_dependencies", "check_duplicates"]


def check_duplicates(
    df: pd.DataFrame, check: FrameErrors, job_ids: list[str], alive: np.ndarray
) -> None:
    """A repeated job_id is an error on the later row, naming the earlier one."""
    idx = np.flatnonzero(alive)
    import pandas as pd

    ids = pd.Series([job_ids[i] for i in idx.tolist()], dtype=object)
    dup = ids.duplicated(keep="first").to_numpy(dtype=bool)
    if not dup.any():
        return
    first_pos = dict(zip(ids[~dup].tolist(), idx[~dup].tolist(), strict=True))
    raw = df["job_id"]
    for pos in idx[dup].tolist():
        earlier = check.row_ref(first_pos[job_ids[pos]])
        check.cell(pos, "job_id", raw.iat[pos],
                   f"is a duplicate of {earlier}; job_id must be unique")
        alive[pos] = False


def check_dependencies(
    df: pd.DataFrame,
    check: FrameErrors,
    job_ids: list[str],
    deps: list[tuple[str, ...]],
    alive: np.ndarray,
) -> None:
    """Unknown or skipped dependencies and cycles; marks offending rows dead in `alive`."""
    graph = _Graph(df["depends_on"], check, job_ids, deps, alive)
    graph.check_missing()
    graph.propagate()
    while True:
        stuck = graph.unresolved()
        if not stuck:
            return
        graph.kill_cycle(stuck)
        if not check.skip:
            return
        graph.propagate()


class _Graph:
    """The dependency graph of the rows still alive; `kill` marks a row bad and dead."""

    def __init__(self, raw: pd.Series, check: FrameErrors, job_ids: list[str],
                 deps: list[tuple[str, ...]], alive: np.ndarray) -> None:
        self.raw = raw
        self.check = check
        self.job_ids = job_ids
        self.deps = deps
        self.alive = alive
        self.all_ids = set(job_ids)
        self.pos_of = {job_ids[p]: p for p in np.flatnonzero(alive).tolist()}
        self.with_deps = [p for p in np.flatnonzero(alive).tolist() if deps[p]]
        self.dependents: dict[str, list[int]] = {}
        for p in self.with_deps:
            for d in deps[p]:
                self.dependents.setdefault(d, []).append(p)
        self.dead: deque[int] = deque()

    def kill(self, pos: int, rule: str) -> None:
        """A bad depends_on cell: the row is dead, and so will be its dependents."""
        self.check.cell(pos, "depends_on", self.raw.iat[pos], rule)
        self.alive[pos] = False
        if self.pos_of.get(self.job_ids[pos]) == pos:
            del self.pos_of[self.job_ids[pos]]
        self.dead.append(pos)

    def propagate(self) -> None:
        """Kill every live row that depends on a dead one, transitively."""
        while self.dead:
            gone = self.job_ids[self.dead.popleft()]
            for p in self.dependents.get(gone, ()):
                if self.alive[p]:
                    self.kill(p, f"names job {gone!r}, which was skipped as a bad row")

    def check_missing(self) -> None:
        """Kill rows naming a job that is not in the trace or is a bad row."""
        for p in self.with_deps:
            if not self.alive[p]:
                continue
            unknown = [d for d in self.deps[p] if d not in self.all_ids]
            skipped = [d for d in self.deps[p] if d in self.all_ids and d not in self.pos_of]
            if unknown:
                self.kill(p, f"names unknown job{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(repr(u) for u in unknown)}; depends_on must list "
                             "job_ids of this trace")
            elif skipped:
                self.kill(p, f"names job {skipped[0]!r}, which was skipped as a bad row")

    def unresolved(self) -> list[int]:
        """Kahn's algorithm: the live rows on or behind a cycle, in row order."""
        nodes = [p for p in self.with_deps if self.alive[p]]
        remaining = {p: len(self.deps[p]) for p in nodes}
        ready = deque(self.pos_of[d] for p in nodes for d in self.deps[p]
                      if self.pos_of[d] not in remaining)
        resolved: set[int] = set()
        while ready:
            q = ready.popleft()
            if q in resolved:
                continue
            resolved.add(q)
            for p in self.dependents.get(self.job_ids[q], ()):
                if p in remaining:
                    remaining[p] -= 1
                    if remaining[p] == 0:
                        ready.append(p)
        return sorted(p for p in nodes if p not in resolved)

    def kill_cycle(self, stuck: list[int]) -> None:
        """Kill the rows of the first cycle found from the lowest stuck row."""
        cycle = _find_cycle(stuck[0], self.deps, self.pos_of, set(stuck))
        names = [self.job_ids[p] for p in cycle]
        for i, p in enumerate(cycle):
            loop = names[i:] + names[:i] + [names[i]]
            self.kill(p, f"makes a dependency cycle: {' -> '.join(loop)}")


def _find_cycle(
    start: int, deps: list[tuple[str, ...]], pos_of: dict[str, int], stuck: set[int]
) -> list[int]:
    """Follow unresolved dependencies from `start` until a job repeats; return the loop."""
    path: list[int] = []
    seen: dict[int, int] = {}
    p = start
    while p not in seen:
        seen[p] = len(path)
        path.append(p)
        p = next(pos_of[d] for d in deps[p] if pos_of[d] in stuck)
    return path[seen[p]:]
