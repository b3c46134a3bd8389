"""The Trace container shared by every reader and generator."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.model import JobSpec


@dataclass(frozen=True)
class Trace:
    """A list of jobs in the canonical schema, with where it came from.

    `bad_rows` counts rows skipped under `skip_bad_rows`; `bad_row_messages` keeps the
    first few messages so a long run can say where its input was wrong.
    """

    name: str
    jobs: tuple[JobSpec, ...]
    source: str = ""
    bad_rows: int = 0
    bad_row_messages: tuple[str, ...] = field(default=(), compare=False)
    extra_columns: tuple[str, ...] = ()
    epoch: float | None = field(default=None, compare=False)  # Unix time of submit_time 0

    def __len__(self) -> int:
        return len(self.jobs)
