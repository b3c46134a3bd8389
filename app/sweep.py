"""Parameter sweeps (contract.md#sec-1, #sec-7): a sweep file expanded into runs on any executor.

The public face of `schedlab.app.sweep_file` (parsing a sweep file into `RunPoint`s, with the
value checks of `schedlab.app.sweep_values`), `schedlab.app.sweep_run` (running them on a process
pool, Dask or inline) and `schedlab.app.sweep_summary` (summary.parquet and the --dry-run
table).
"""

from __future__ import annotations

from schedlab.app.sweep_file import (
    BASE_DEFAULTS,
    POINT_KEYS,
    TOP_KEYS,
    RunPoint,
    Sweep,
    load_sweep,
    parse_sweep,
)
from schedlab.app.sweep_run import (
    SCHEDULERS,
    InlineExecutor,
    RunOutcome,
    SweepReport,
    open_executor,
    run_point,
    run_sweep,
    shaped_trace,
    write_error,
)
from schedlab.app.sweep_summary import (
    RESERVED_COLUMNS,
    describe_points,
    is_finished,
    summary_frame,
    write_summary,
)

__all__ = [
    "BASE_DEFAULTS", "POINT_KEYS", "RESERVED_COLUMNS", "SCHEDULERS", "TOP_KEYS",
    "InlineExecutor", "RunOutcome", "RunPoint", "Sweep", "SweepReport", "describe_points",
    "is_finished", "load_sweep", "open_executor", "parse_sweep", "run_point", "run_sweep",
    "shaped_trace", "summary_frame", "write_error", "write_summary",
]
