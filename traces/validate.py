"""The one validation path of the canonical schema: a DataFrame in, a Trace out.

Validation is vectorized: each column is parsed once with pandas/numpy into a value array
and a "bad" mask, and error messages are only built for the bad rows. Every error names
the file, the row (1-based data row, plus the file line for CSV), the column, the value
and the rule, e.g.::

    trace.csv, row 7 (line 8), column num_gpus: value '2.5' is not an integer >= 0

Files (`schedlab.traces.canonical.read_canonical`), the format readers (`schedlab.traces.readers`),
in-memory records (`schedlab.traces.synthetic.from_records`) and the generators all come through
`frame_to_trace`.
"""

from __future__ import annotations

import gc
import json
import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import PRIORITY_NAMES, JobSpec, RestartPolicy, TaskRole, spec_builder
from schedlab.sim.roles import role_totals
from schedlab.traces.base import Trace
from schedlab.traces.dependencies import check_dependencies, check_duplicates
from schedlab.traces.roles import TASKS_RULE, parse_tasks
from schedlab.traces.rows import NA_TOKENS, FrameErrors, as_number, as_text
from schedlab.traces.schema import (
    BOOL_RULE,
    CANONICAL_COLUMNS,
    CHECKED_PASS_THROUGH,
    CONTAINER_COLUMNS,
    NUM_COLS,
    RESTART_POLICIES,
    TEXT_DEFAULTS,
    NumCol,
    missing_columns_error,
    missing_required,
    parse_bool,
    parse_deps,
    parse_speeds,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["frame_to_trace"]

FIELD_NAMES = tuple(f.name for f in fields(JobSpec))


@dataclass
class _Parsed:
    """The parsed columns: python values per field; per numeric column its values.

    `given` marks the usable values, `colbad` the bad cells of required columns.
    """

    out: dict[str, list[Any]] = field(default_factory=dict)
    numbers: dict[str, np.ndarray] = field(default_factory=dict)
    given: dict[str, np.ndarray] = field(default_factory=dict)
    colbad: dict[str, np.ndarray] = field(default_factory=dict)


def frame_to_trace(
    df: pd.DataFrame,
    *,
    label: str,
    name: str,
    source: str = "",
    skip_bad_rows: bool = False,
    rows: np.ndarray | None = None,
    lines: np.ndarray | None = None,
    check: FrameErrors | None = None,
) -> Trace:
    """Validate a DataFrame in the canonical schema and turn it into a Trace.

    This is the one validation path of schedlab: files, in-memory records and the
    synthetic generator all come through here.

    Args:
        df: One row a job; columns as in docs/contract.md#sec-2 (strings or typed values). Unknown
            columns are passed through.
        label: What messages call the input (usually the file name).
        name: Name of the resulting trace.
        source: Where the trace came from (a path), stored in `Trace.source`.
        skip_bad_rows: Skip and count bad rows instead of raising on the first.
        rows: 1-based row number of each frame row (default 1..n).
        lines: File line of each frame row, for CSV messages (None: no line numbers).
        check: An error collector already holding errors of the reader (ragged lines).

    Returns:
        The jobs sorted by (submit_time, row order).

    Raises:
        InvalidTrace: A missing required column, no rows, or (unless `skip_bad_rows`) a
            bad row.
    """
    df = df.rename(columns=lambda c: str(c).strip())
    columns = list(df.columns)
    if missing_required(columns):
        raise missing_columns_error(label, columns)
    if check is None:
        check = FrameErrors(label, len(df), skip_bad_rows, rows, lines)
    if len(df) == 0 and not check.n_errors:
        raise InvalidTrace(f"{label}: no job rows (only the header)")
    parsed = _parse_columns(df, check)
    if "duration" not in parsed.out:  # a trace of model jobs (`missing_required`)
        n = len(df)
        parsed.out["duration"] = [math.nan] * n
        parsed.numbers["duration"] = np.full(n, math.nan)
        parsed.given["duration"] = parsed.colbad["duration"] = np.zeros(n, dtype=bool)
    _cross_checks(df, check, parsed.numbers, parsed.given, parsed.colbad)
    _role_checks(df, check, parsed)
    check.raise_if_any()
    alive = ~check.bad_mask
    job_ids = parsed.out["job_id"]
    check_duplicates(df, check, job_ids, alive)
    check.raise_if_any()
    if "depends_on" in parsed.out and any(parsed.out["depends_on"]):
        check_dependencies(df, check, job_ids, parsed.out["depends_on"], alive)
        check.raise_if_any()
    keep = np.flatnonzero(alive)
    if keep.size == 0:
        raise InvalidTrace(f"{label}: no valid job rows; all {check.bad} rows are bad; "
                           f"first: {check.first_error()}")
    order = keep[np.argsort(parsed.numbers["submit_time"][keep], kind="stable")]
    extra_cols = tuple(c for c in columns if c not in CANONICAL_COLUMNS)
    return Trace(name=name, jobs=_build_jobs(df, parsed.out, order, extra_cols),
                 source=source, bad_rows=check.bad, bad_row_messages=check.messages(),
                 extra_columns=extra_cols)


def _parse_columns(df: pd.DataFrame, check: FrameErrors) -> _Parsed:
    """Parse every canonical column present, recording bad cells."""
    parsed = _Parsed()
    present = set(df.columns)
    for col in CANONICAL_COLUMNS:
        if col not in present:
            continue
        raw = df[col]
        if col == "job_id":
            text = as_text(raw)
            empty = (text == "").to_numpy(dtype=bool)
            check.cells(empty, col, raw, "is empty; job_id is required")
            parsed.out[col] = text.tolist()
        elif col in TEXT_DEFAULTS:
            text = as_text(raw)
            default = TEXT_DEFAULTS[col]
            if default:
                text = text.mask(text == "", default)
            parsed.out[col] = _shared_texts(text)
        elif col == "duration" and "model" in present:
            # a job of a performance model may leave it empty: its work makes it (NaN here)
            modelled = (as_text(df["model"]) != "").to_numpy(dtype=bool)
            _parse_number(raw, NUM_COLS[col], check, parsed, optional=modelled)
        elif col in NUM_COLS:
            _parse_number(raw, NUM_COLS[col], check, parsed)
        elif col == "depends_on":
            parsed.out[col] = _parse_depends_on(raw, check, parsed.out.get("job_id"))
        elif col == "gpu_speeds":
            parsed.out[col] = _parse_gpu_speeds(raw, check)
        elif col == "lazy_preemption":
            parsed.out[col] = _parse_bools(raw, col, check)
        elif col == "adaptive":
            parsed.out[col] = [bool(b) for b in _parse_bools(raw, col, check)]
        elif col == "tasks":
            parsed.out[col] = _parse_tasks(raw, check)
        elif col == "restart_policy":
            parsed.out[col] = _parse_restart_policy(raw, check, parsed)
    for col, spec in CHECKED_PASS_THROUGH.items():
        if col in present:
            raw = df[col]
            values, missing = as_number(raw)
            check.cells(~spec.ok(values) & ~missing, col, raw, f"is not {spec.rule}")
    return parsed


def _shared_texts(text: pd.Series) -> list[str]:
    """The cells as a list in which equal texts are one object (users, VCs repeat a lot)."""
    import pandas as pd

    codes, uniques = pd.factorize(text)
    if len(uniques) * 2 > len(text):  # mostly distinct: nothing to share
        return list(text.tolist())
    return list(np.asarray(uniques.tolist(), dtype=object)[codes].tolist())


def _parse_number(raw: pd.Series, spec: NumCol, check: FrameErrors, parsed: _Parsed,
                  optional: np.ndarray | None = None) -> None:
    """A numeric column: values, default in unusable cells, bad and missing cells.

    `optional`: rows where a required column may be empty (NaN in the output).
    """
    col = spec.name
    if col == "priority" and not _is_numeric(raw):
        # HAI level names (NORMAL, HIGH, AUTO, ...) stand for their numbers
        raw = as_text(raw).map(lambda t: str(PRIORITY_NAMES.get(t.upper(), t)))
    values, missing = as_number(raw)
    bad = ~spec.ok(values) & ~missing
    needed = missing if optional is None else missing & ~optional
    if spec.required:
        hint = "" if optional is None else " (or a model, with num_steps or samples)"
        check.cells(needed, col, raw, f"is missing; {col} is required{hint}")
    check.cells(bad, col, raw, f"is not {spec.rule}")
    unusable = bad | missing
    parsed.colbad[col] = bad | (needed if spec.required else False)
    parsed.given[col] = ~unusable
    parsed.numbers[col] = values
    out = _fill(values, unusable, spec)
    if optional is not None:  # left to the run's performance model
        out = [math.nan if v is None else v for v in out]
    parsed.out[col] = out


def _is_numeric(raw: pd.Series) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(raw.dtype))


def _parse_depends_on(raw: pd.Series, check: FrameErrors, ids: list[str] | None
                      ) -> list[tuple[str, ...]]:
    """'a;b' cells as id tuples; a job naming itself is a bad cell."""
    text = as_text(raw)
    nonempty = ~text.str.lower().isin(NA_TOKENS).to_numpy(dtype=bool)
    deps: list[tuple[str, ...]] = [()] * len(raw)
    for pos in np.flatnonzero(nonempty).tolist():
        d = parse_deps(text.iat[pos])
        if ids is not None and ids[pos] in d:
            check.cell(pos, "depends_on", raw.iat[pos], f"makes job {ids[pos]!r} depend on itself")
            continue
        deps[pos] = d
    return deps


def _parse_gpu_speeds(raw: pd.Series, check: FrameErrors) -> list[Any]:
    """'V100=1;P100=0.6' cells as sorted (type, speed) tuples."""
    text = as_text(raw)
    nonempty = ~text.str.lower().isin(NA_TOKENS).to_numpy(dtype=bool)
    speeds: list[Any] = [()] * len(raw)
    for pos in np.flatnonzero(nonempty).tolist():
        parsed, why = parse_speeds(text.iat[pos])
        if parsed is None:
            check.cell(pos, "gpu_speeds", raw.iat[pos],
                       "is not a list of TYPE=SPEED pairs separated by ';' with "
                       f"speeds > 0 ({why})")
            continue
        speeds[pos] = parsed
    return speeds


def _parse_bools(raw: pd.Series, col: str, check: FrameErrors) -> list[bool | None]:
    """A boolean column: true/false (yes/no, 1/0) per cell, None where empty."""
    text = as_text(raw)
    nonempty = ~text.str.lower().isin(NA_TOKENS).to_numpy(dtype=bool)
    out: list[bool | None] = [None] * len(raw)
    for pos in np.flatnonzero(nonempty).tolist():
        try:
            out[pos] = parse_bool(text.iat[pos])
        except ValueError:
            check.cell(pos, col, raw.iat[pos], f"is not {BOOL_RULE}")
    return out


def _parse_tasks(raw: pd.Series, check: FrameErrors) -> list[tuple[TaskRole, ...]]:
    """JSON role lists (`schedlab.traces.roles`); an empty cell is no roles.

    A Parquet list-of-struct column (roles stored natively) is read as its JSON.
    """
    if raw.dtype == object and any(isinstance(v, list | tuple | np.ndarray) for v in raw):
        raw = raw.map(_native_roles)
    text = as_text(raw)
    nonempty = ~text.str.lower().isin(NA_TOKENS).to_numpy(dtype=bool)
    out: list[tuple[TaskRole, ...]] = [()] * len(raw)
    for pos in np.flatnonzero(nonempty).tolist():
        roles, why = parse_tasks(text.iat[pos])
        if roles is None:
            check.cell(pos, "tasks", raw.iat[pos], f"{TASKS_RULE}: {why}")
            continue
        out[pos] = roles
    return out


def _native_roles(value: Any) -> Any:
    """A natively stored list of role structs as JSON text (null struct fields dropped)."""
    if not isinstance(value, list | tuple | np.ndarray):
        return value

    def plain(x: Any) -> Any:
        return x.item() if isinstance(x, np.generic) else x

    roles = [{k: plain(x) for k, x in r.items() if x is not None} if isinstance(r, dict)
             else plain(r) for r in value]
    try:
        return json.dumps(roles)
    except (TypeError, ValueError):
        return str(value)


def _parse_restart_policy(raw: pd.Series, check: FrameErrors, parsed: _Parsed
                          ) -> list[RestartPolicy]:
    """Never | OnFailure (case as written by Kubernetes); an empty cell is Never."""
    text = as_text(raw)
    missing = text.str.lower().isin(NA_TOKENS).to_numpy(dtype=bool)
    bad = ~missing & ~text.isin(RESTART_POLICIES).to_numpy(dtype=bool)
    check.cells(bad, "restart_policy", raw, f"is not one of {', '.join(RESTART_POLICIES)}")
    parsed.given["restart_policy"] = ~missing & ~bad
    return [RestartPolicy(t) if ok else RestartPolicy.NEVER
            for t, ok in zip(text.tolist(), parsed.given["restart_policy"].tolist(),
                             strict=True)]


def _fill(values: np.ndarray, unusable: np.ndarray, spec: NumCol) -> list[Any]:
    """Python values of a numeric column with the default in unusable cells."""
    if spec.default is None:
        if spec.integer:
            arr = np.where(unusable, 0, values).astype(np.int64).astype(object)
        else:
            arr = values.astype(object)
        arr[unusable] = None
        return arr.tolist()
    filled = np.where(unusable, spec.default, values)
    if spec.integer:
        return filled.astype(np.int64).tolist()
    return filled.astype(np.float64).tolist()


def _cross_checks(
    df: pd.DataFrame,
    check: FrameErrors,
    numbers: dict[str, np.ndarray],
    given: dict[str, np.ndarray],
    colbad: dict[str, np.ndarray],
) -> None:
    """Rules that relate two columns of the same row (only on individually valid cells)."""
    _container_checks(df, check, numbers, given, colbad)
    _utilization_checks(df, check, numbers, given, colbad)
    gpus = numbers["num_gpus"]
    gpus_ok = ~colbad["num_gpus"]
    with np.errstate(invalid="ignore", divide="ignore"):
        if "gpus_per_task" in given:
            g = numbers["gpus_per_task"]
            m = given["gpus_per_task"] & gpus_ok
            bad = m & (np.fmod(np.where(m, gpus, 0), np.where(m, g, 1)) != 0)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "gpus_per_task", df["gpus_per_task"].iat[pos],
                           f"does not divide num_gpus ({int(gpus[pos])})")
        if "min_gpus" in given:
            bad = given["min_gpus"] & gpus_ok & (numbers["min_gpus"] > gpus)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "min_gpus", df["min_gpus"].iat[pos],
                           f"is greater than num_gpus ({int(gpus[pos])}); "
                           "need min_gpus <= num_gpus <= max_gpus")
        if "max_gpus" in given:
            bad = given["max_gpus"] & gpus_ok & (numbers["max_gpus"] < gpus)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "max_gpus", df["max_gpus"].iat[pos],
                           f"is less than num_gpus ({int(gpus[pos])}); "
                           "need min_gpus <= num_gpus <= max_gpus")
        if "gpu_share" in given:
            bad = given["gpu_share"] & gpus_ok & (numbers["gpu_share"] < 1.0) & (gpus != 1)
            for pos in np.flatnonzero(bad).tolist():
                check.cell(pos, "gpu_share", df["gpu_share"].iat[pos],
                           f"is < 1 but num_gpus is {int(gpus[pos])}; a fractional GPU "
                           "share needs num_gpus = 1")


def _container_checks(
    df: pd.DataFrame,
    check: FrameErrors,
    numbers: dict[str, np.ndarray],
    given: dict[str, np.ndarray],
    colbad: dict[str, np.ndarray],
) -> None:
    """Container-job columns need `completions`; a container job's row is one task run."""
    if not any(c in given for c in (*CONTAINER_COLUMNS, "completions")):
        return
    n = len(df)
    container = given.get("completions", np.zeros(n, dtype=bool))
    for col in CONTAINER_COLUMNS:
        if col not in given:
            continue
        spec = NUM_COLS.get(col)
        if spec is None:  # restart_policy: any given value but the default
            m = given[col] & (as_text(df[col]) != RestartPolicy.NEVER.value).to_numpy(bool)
        elif spec.default is None:
            m = given[col].copy()
        else:
            m = given[col] & (numbers[col] != spec.default)
        bad = m & ~container & ~colbad.get("completions", np.zeros(n, dtype=bool))
        for pos in np.flatnonzero(bad).tolist():
            check.cell(pos, col, df[col].iat[pos], "is set but completions is empty; "
                       f"{col} applies only to container jobs (completions >= 1)")
    for col in ("min_gpus", "max_gpus", "gpus_per_task"):
        if col not in given:
            continue
        bad = container & given[col] & ~colbad["num_gpus"]
        if col == "gpus_per_task":
            bad &= numbers[col] != numbers["num_gpus"]
        for pos in np.flatnonzero(bad).tolist():
            done = int(numbers["completions"][pos])
            check.cell(pos, col, df[col].iat[pos],
                       f"is set on a container job (completions {done}); each task run of "
                       "a container job is one task of the row's num_gpus")


def _utilization_checks(
    df: pd.DataFrame,
    check: FrameErrors,
    numbers: dict[str, np.ndarray],
    given: dict[str, np.ndarray],
    colbad: dict[str, np.ndarray],
) -> None:
    """`target_util` needs GPUs and an elastic range; `scale_interval` needs `target_util`."""
    if "target_util" not in given and "scale_interval" not in given:
        return
    n = len(df)
    none = np.zeros(n, dtype=bool)
    driven = given.get("target_util", none)
    if "target_util" in given:
        ranged = given.get("min_gpus", none) | given.get("max_gpus", none)
        ok_gpus = ~colbad["num_gpus"]
        for pos in np.flatnonzero(driven & ok_gpus & (numbers["num_gpus"] < 1)).tolist():
            check.cell(pos, "target_util", df["target_util"].iat[pos],
                       "is set on a job with num_gpus 0; utilization-driven scaling needs "
                       "num_gpus >= 1")
        bad = driven & ok_gpus & (numbers["num_gpus"] >= 1) & ~ranged \
            & ~colbad.get("min_gpus", none) & ~colbad.get("max_gpus", none)
        for pos in np.flatnonzero(bad).tolist():
            check.cell(pos, "target_util", df["target_util"].iat[pos],
                       "is set but the job has no elastic range; give min_gpus and/or "
                       "max_gpus (a utilization-driven job is resized within them)")
    if "scale_interval" in given:
        default = NUM_COLS["scale_interval"].default
        bad = given["scale_interval"] & (numbers["scale_interval"] != default) & ~driven \
            & ~colbad.get("target_util", none)
        for pos in np.flatnonzero(bad).tolist():
            check.cell(pos, "scale_interval", df["scale_interval"].iat[pos],
                       "is set but target_util is empty; scale_interval applies only to "
                       "utilization-driven jobs (target_util in (0, 1])")


def _role_checks(df: pd.DataFrame, check: FrameErrors, parsed: _Parsed) -> None:
    """A job with `tasks`: num_gpus is its gang's GPU total, the rest the roles' totals.

    The other job-level request columns are `schedlab.sim.roles.role_totals`: filled in when
    empty, checked when given.
    """
    tasks = parsed.out.get("tasks")
    if tasks is None or not any(tasks):
        return
    n = len(df)
    out, given = parsed.out, parsed.given
    for col in _ROLE_COLUMNS:
        if col not in out:
            out[col] = [_FIELD_DEFAULTS[col]] * n
    completions = given.get("completions", np.zeros(n, dtype=bool))
    gpus_bad = parsed.colbad["num_gpus"]
    for pos, roles in enumerate(tasks):
        if not roles:
            continue
        if completions[pos]:
            check.cell(pos, "tasks", df["tasks"].iat[pos],
                       "is set on a container job (completions given); a container job's "
                       "task runs are the row's own request")
            continue
        totals = role_totals(roles)
        if not gpus_bad[pos] and out["num_gpus"][pos] != totals.num_gpus:
            check.cell(pos, "num_gpus", df["num_gpus"].iat[pos],
                       f"is not the gang roles' GPU total {totals.num_gpus} of column tasks "
                       "(sum of count x gpus over roles with gang true)")
        for col in _ROLE_COLUMNS:
            want = getattr(totals, col)
            if col in given and given[col][pos]:
                have = out[col][pos]
                if abs(have - want) > 1e-9 * max(1.0, abs(want)):
                    check.cell(pos, col, df[col].iat[pos],
                               f"is not {want:g}, what column tasks gives "
                               f"({_ROLE_RULES[col]}); leave it empty or give that")
            else:
                out[col][pos] = want


_ROLE_COLUMNS = ("gpus_per_task", "num_cpus", "mem_gb", "disk_gb")
_ROLE_RULES = {
    "gpus_per_task": "the GPUs per task of the gang's GPU roles when they agree, else empty",
    "num_cpus": "sum of count x cpus over every role",
    "mem_gb": "sum of count x mem_gb over every role",
    "disk_gb": "the disk_gb per task of the gang's GPU roles when they agree, else 0",
}
_FIELD_DEFAULTS = {f.name: f.default for f in fields(JobSpec)}


def _build_jobs(
    df: pd.DataFrame, out: dict[str, Any], order: np.ndarray, extra_cols: tuple[str, ...]
) -> tuple[JobSpec, ...]:
    """Build JobSpecs in one pass over the given columns, defaults as constants."""
    pick = order.tolist()
    given = [f for f in FIELD_NAMES if f in out or (f == "extra" and extra_cols)]
    args: list[list[Any]] = []
    identity = len(pick) == len(df) and bool((order == np.arange(len(pick))).all())
    for fname in given:
        if fname == "extra":
            cols = [df[c].tolist() for c in extra_cols]
            args.append([tuple(zip(extra_cols, (col[i] for col in cols), strict=True))
                         for i in pick])
        else:
            col = out[fname]
            args.append(col if identity else list(map(col.__getitem__, pick)))
    build = spec_builder(tuple(given))
    # a JobSpec holds no reference cycle: the cyclic collector, run every few hundred
    # objects made, would only scan the growing heap of them (a third of the build)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return tuple(map(build, *args))
    finally:
        if collecting:
            gc.enable()
