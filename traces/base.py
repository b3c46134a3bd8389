"""The Trace container shared by every reader and generator."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from schedlab.sim.model import JobSpec


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


def with_epoch(trace: Trace, epoch: float | None) -> Trace:
    """The trace with its calendar origin (Unix s of submit_time 0; None: not calendar time)."""
    value = float(epoch) if epoch is not None and math.isfinite(epoch) else None
    if trace.epoch == value:
        return trace
    return dataclasses.replace(trace, epoch=value)


def trace_epoch(trace: Trace) -> float | None:
    """Unix time of the trace's submit_time 0, or None when it is not calendar time."""
    return float(trace.epoch) if trace.epoch is not None else None
