"""Alibaba PAI 2020 ("MLaaS in the Wild", NSDI'22): job/task tables and the machine spec.

The tables have no header line (the headers are separate `.header` files; a first line
equal to the header is accepted too):

- `pai_task_table`: `job_name, task_name, inst_num, status, start_time, end_time,
  plan_cpu, plan_mem, plan_gpu, gpu_type`; `plan_gpu` in percent of one GPU per
  instance, `plan_cpu` in percent of a core, `plan_mem` in GB, times in seconds; task
  `start_time` is the launch time.
- `pai_job_table`: `job_name, inst_id, user, status, start_time, end_time`; job
  `start_time` is the submit time.

One job a `job_name`, its tasks aggregated (a gang): an instance asking `g` GPUs
(`plan_gpu / 100`) takes `ceil(g)` whole GPUs, so `num_gpus` = sum over tasks of
`inst_num x ceil(g)`, except that a job of one instance asking less than one GPU is
`num_gpus = 1` with `gpu_share = g`; `gpus_per_task` = `ceil(g)` when every GPU task asks
the same; `num_cpus` = sum of `inst_num x plan_cpu / 100`, `mem_gb` = sum of
`inst_num x plan_mem`; `gpu_type` = the GPU tasks' `gpu_type` when they agree (`MISC`
and empty mean any). `duration` = last task end - first task start; `submit_time` = the
job table's `start_time` when the job table is given (or found next to the task table),
else the first task start; `user` and the job's `status` come from the job table. Jobs
with no task that both started and ended are excluded. A job of several task kinds
(`task_name` worker, ps, chief, evaluator, ...) also gets `tasks`: one role a task row
(count `inst_num`, per task `gpus` = `ceil(plan_gpu / 100)`, `cpus` = `plan_cpu / 100`,
`mem_gb` = `plan_mem`; an `evaluator` is a non-gang role, a kind named twice becomes
`kind-2`), and its `num_gpus` is the gang's GPUs (without the evaluator's). Reading
streams both tables in chunks and keeps one aggregated row a job.

The machine spec (`machine, gpu_type, cap_cpu, cap_mem, cap_gpu`) is a topology:
`schedlab.topologies.pai.read_pai_machines`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    RowErrors,
    finish,
    iter_csv,
    label_of,
    number_field,
    resolve,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["JOB_COLUMNS", "TASK_COLUMNS", "companion", "read_pai", "table_kind"]

TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")
"""Columns of pai_task_table (no header line in the file)."""

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
"""Columns of pai_job_table (no header line in the file)."""

ANY_TYPE = ("", "MISC")
"""Task gpu_type values that do not constrain the GPU type."""

NON_GANG_ROLES = frozenset({"evaluator"})
"""Task kinds that do not belong to the job's gang (a TensorFlow evaluator runs beside it)."""


def _has_header(path: Path, columns: tuple[str, ...]) -> bool:
    from schedlab.traces.readers._common import head_text

    first = head_text(path, 4096).split("\n", 1)[0]
    return tuple(c.strip() for c in first.split(",")) == columns


def companion(path: Path, kind: str) -> Path | None:
    """The other table next to `path` (`pai_job_table*` <-> `pai_task_table*`), if any."""
    other = "pai_job_table" if kind == "task" else "pai_task_table"
    mine = "pai_task_table" if kind == "task" else "pai_job_table"
    if mine not in path.name:
        return None
    candidate = path.with_name(path.name.replace(mine, other))
    return candidate if candidate.is_file() else None


def table_kind(path: Path) -> str | None:
    """'task' or 'job' for a PAI table, by file name or header line; None otherwise."""
    low = path.name.lower()
    if "pai_task_table" in low or _has_header(path, TASK_COLUMNS):
        return "task"
    if "pai_job_table" in low or _has_header(path, JOB_COLUMNS):
        return "job"
    return None


def _tasks(path: Path, issues: RowErrors) -> pd.DataFrame:
    """Stream the task table; one aggregated row a job, with its first line."""
    import pandas as pd

    names = None if _has_header(path, TASK_COLUMNS) else TASK_COLUMNS
    aggs: list[pd.DataFrame] = []
    for chunk in iter_csv(path, issues, names=names):
        df, lines = chunk.frame, chunk.lines
        if tuple(df.columns) != TASK_COLUMNS:
            raise InvalidTrace(f"{issues.label}: columns {', '.join(df.columns)}; "
                               f"allowed: {', '.join(TASK_COLUMNS)}")
        bad = np.zeros(len(df), dtype=bool)
        job = df["job_name"].str.strip()
        bad |= issues.errors((job == "").to_numpy(), lines, "job_name", df["job_name"],
                             "is empty (required)")
        inst, b = number_field(df, lines, issues, "inst_num", rule="is not a number >= 0",
                               lo=0.0)
        bad |= b
        start, b = number_field(df, lines, issues, "start_time", rule="is not a number >= 0",
                                lo=0.0, required=False)
        bad |= b
        end, b = number_field(df, lines, issues, "end_time", rule="is not a number >= 0",
                              lo=0.0, required=False)
        bad |= b
        cpu, b = number_field(df, lines, issues, "plan_cpu", rule="is not a number >= 0",
                              lo=0.0, required=False)
        bad |= b
        mem, b = number_field(df, lines, issues, "plan_mem", rule="is not a number >= 0",
                              lo=0.0, required=False)
        bad |= b
        gpu, b = number_field(df, lines, issues, "plan_gpu", rule="is not a number >= 0",
                              lo=0.0, required=False)
        bad |= b
        with np.errstate(invalid="ignore"):
            bad |= issues.errors(~bad & (end < start), lines, "end_time", df["end_time"],
                                 "is before start_time")
        keep = ~bad
        inst = np.round(inst[keep])
        g = np.nan_to_num(gpu[keep], nan=0.0) / 100.0
        per = np.ceil(g)
        ran = ~np.isnan(start[keep]) & ~np.isnan(end[keep])
        gtype = df["gpu_type"].str.strip().to_numpy()[keep]
        gtype = np.where(g > 0, gtype, "")
        names = df["task_name"].str.strip().to_numpy()[keep]
        cpu_k = np.nan_to_num(cpu[keep], nan=0.0) / 100.0
        mem_k = np.nan_to_num(mem[keep], nan=0.0)
        off_gang = np.array([_role_name(n) in NON_GANG_ROLES for n in names], dtype=bool)
        part = pd.DataFrame({
            "job": job.to_numpy()[keep],
            "line": lines[keep],
            "gpus": inst * per,
            "inst_gpu": inst * (g > 0),
            "share": np.where(g > 0, g, np.nan),
            "per_min": np.where(g > 0, per, np.inf),
            "per_max": np.where(g > 0, per, -np.inf),
            "cpus": inst * np.nan_to_num(cpu[keep], nan=0.0) / 100.0,
            "mem": inst * np.nan_to_num(mem[keep], nan=0.0),
            "start": np.where(ran, start[keep], np.nan),
            "end": np.where(ran, end[keep], np.nan),
            "gpu_type": gtype,
            "gang_gpus": np.where(off_gang, 0.0, inst * per),
            "roles": [_role_text(n, i, p, c, m) if i >= 1 else ""
                      for n, i, p, c, m in zip(names.tolist(), inst.tolist(), per.tolist(),
                                               cpu_k.tolist(), mem_k.tolist(), strict=True)],
        })
        aggs.append(_aggregate(part))
    if not aggs:
        raise InvalidTrace(f"{issues.label}: no task rows")
    return _aggregate(pd.concat(aggs, ignore_index=True))


def _aggregate(part: pd.DataFrame) -> pd.DataFrame:
    """Combine task rows (or partial aggregates) per job; associative, so chunks compose."""
    grouped = part.groupby("job", sort=False)
    types = grouped["gpu_type"].agg(_one_type)
    out = grouped.agg(line=("line", "min"), gpus=("gpus", "sum"), inst_gpu=("inst_gpu", "sum"),
                      share=("share", "max"), per_min=("per_min", "min"),
                      per_max=("per_max", "max"), cpus=("cpus", "sum"), mem=("mem", "sum"),
                      start=("start", "min"), end=("end", "max"),
                      gang_gpus=("gang_gpus", "sum"), roles=("roles", "sum"))
    out["gpu_type"] = types
    return out.reset_index()


def _role_name(task_name: str) -> str:
    """A task_name as a role name (letters, digits, `_ . -`; other characters become _)."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", task_name) or "task"


def _role_text(name: str, inst: float, per: float, cpus: float, mem: float) -> str:
    """One task row as a `name|count|gpus|cpus|mem` line (a job's lines are added up)."""
    return f"{_role_name(name)}|{int(inst)}|{int(per)}|{cpus!r}|{mem!r}\n"


def _roles(text: str) -> str:
    """A job's task rows as its `tasks` cell, or '' when it has one task kind (one gang).

    A task kind named twice in a job gets `-2`, `-3`, ... to stay unique; an `evaluator`
    is a non-gang role (NON_GANG_ROLES), every other kind belongs to the gang.
    """
    if text.count("\n") < 2:  # one task row: one gang (most jobs; no parsing)
        return ""
    rows = [t.split("|") for t in text.split("\n") if t]
    if len({r[0] for r in rows}) < 2:
        return ""
    seen: dict[str, int] = {}
    roles = []
    for name, count, gpus, cpus, mem in rows:
        seen[name] = seen.get(name, 0) + 1
        role: dict[str, object] = {
            "role": name if seen[name] == 1 else f"{name}-{seen[name]}",
            "count": int(count), "gpus": int(gpus), "cpus": float(cpus), "mem_gb": float(mem)}
        if name in NON_GANG_ROLES:
            role["gang"] = False
        roles.append(role)
    if not any(r.get("gang", True) for r in roles):
        return ""
    return json.dumps(roles, separators=(",", ":"))


def _one_type(values: pd.Series) -> str:
    """The GPU type the GPU tasks agree on; '' when none or when they differ ('*')."""
    kinds = [v for v in dict.fromkeys(values.tolist()) if v not in ANY_TYPE]
    if "*" in kinds or len(kinds) > 1:
        return "*"
    return kinds[0] if kinds else ""


def _jobs(path: Path, issues: RowErrors) -> pd.DataFrame:
    """Stream the job table: job_name -> submit, user, status (first row of a job wins)."""
    import pandas as pd

    names = None if _has_header(path, JOB_COLUMNS) else JOB_COLUMNS
    parts = []
    for chunk in iter_csv(path, issues, names=names):
        df, lines = chunk.frame, chunk.lines
        if tuple(df.columns) != JOB_COLUMNS:
            raise InvalidTrace(f"{issues.label}: columns {', '.join(df.columns)}; "
                               f"allowed: {', '.join(JOB_COLUMNS)}")
        submit, bad = number_field(df, lines, issues, "start_time",
                                   rule="is not a number >= 0", lo=0.0, required=False)
        keep = ~bad
        parts.append(pd.DataFrame({
            "job": df["job_name"].str.strip().to_numpy()[keep],
            "submit": submit[keep],
            "user": df["user"].str.strip().to_numpy()[keep],
            "status": df["status"].str.strip().to_numpy()[keep],
        }))
    if not parts:
        raise InvalidTrace(f"{issues.label}: no job rows")
    jobs = pd.concat(parts, ignore_index=True)
    return jobs.drop_duplicates("job", keep="first").set_index("job")


def read_pai(
    path: str | os.PathLike[str],
    *,
    skip_bad_rows: bool = False,
    name: str | None = None,
    job_table: str | os.PathLike[str] | None = None,
    task_table: str | os.PathLike[str] | None = None,
) -> Trace:
    """Read the PAI 2020 job/task tables as one trace (see the module doc for the mapping).

    Args:
        path: The task table, or the job table (then the task table must be given or lie
            next to it as `pai_task_table*`).
        skip_bad_rows: Count bad rows instead of failing on the first.
        name: Trace name (default: `pai`).
        job_table: The job table (default: `pai_job_table*` next to the task table).
        task_table: The task table, when `path` is the job table.

    Returns:
        The trace with the pass-through column `status` when the job table is known.

    Raises:
        InvalidTrace: No task table, or a bad row naming file, line, field and value.
    """
    import pandas as pd

    p = resolve(path)
    kind = table_kind(p) or "task"
    if kind == "job":
        jobs_path: Path | None = p
        tasks_path = resolve(task_table) if task_table is not None else companion(p, "job")
        if tasks_path is None:
            raise InvalidTrace(f"{p.name}: a PAI job table needs its task table (GPUs, run "
                               "times); give task_table= or put pai_task_table.csv next to it")
    else:
        tasks_path = p
        jobs_path = resolve(job_table) if job_table is not None else companion(p, "task")
    issues = RowErrors(label_of(tasks_path), skip_bad_rows)
    agg = _tasks(tasks_path, issues)
    submit = agg["start"].to_numpy(dtype=np.float64)
    extra: dict[str, np.ndarray] = {}
    if jobs_path is not None:
        job_issues = RowErrors(label_of(jobs_path), skip_bad_rows)
        jobs = _jobs(jobs_path, job_issues)
        joined = jobs.reindex(agg["job"])
        js = joined["submit"].to_numpy(dtype=np.float64)
        with np.errstate(invalid="ignore"):
            use = ~np.isnan(js) & ~(js > submit)
        submit = np.where(use, js, submit)
        extra["user"] = joined["user"].fillna("").to_numpy()
        extra["status"] = joined["status"].fillna("").to_numpy()
        issues.merge(job_issues)
    lines = agg["line"].to_numpy(dtype=np.int64)
    dur = agg["end"].to_numpy(dtype=np.float64) - agg["start"].to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        never = ~(dur > 0)
    for pos in np.flatnonzero(never).tolist():
        issues.exclude(int(lines[pos]), f"job {agg['job'].iat[pos]!r} has no task that ran "
                                        "(no start and end time, or 0 s)")
    keep = ~never
    gpus = agg["gpus"].to_numpy(dtype=np.float64)
    inst_gpu = agg["inst_gpu"].to_numpy(dtype=np.float64)
    share = agg["share"].to_numpy(dtype=np.float64)
    fractional = (inst_gpu == 1) & (share < 1)
    per_min = agg["per_min"].to_numpy(dtype=np.float64)
    per_max = agg["per_max"].to_numpy(dtype=np.float64)
    uniform = (per_min == per_max) & np.isfinite(per_min) & (per_min >= 1) & ~fractional
    tasks = np.array([_roles(t) for t in agg["roles"].tolist()], dtype=object)
    roled = tasks != ""
    # a job of roles: num_gpus is its gang's; the other request columns come from the roles
    gpus = np.where(roled, agg["gang_gpus"].to_numpy(dtype=np.float64), gpus)
    out = pd.DataFrame({
        "job_id": agg["job"].to_numpy()[keep],
        "submit_time": submit[keep],
        "num_gpus": gpus[keep].astype(np.int64),
        "duration": dur[keep],
        "num_cpus": np.where(roled, np.nan, agg["cpus"].to_numpy(dtype=np.float64))[keep],
        "mem_gb": np.where(roled, np.nan, agg["mem"].to_numpy(dtype=np.float64))[keep],
        "gpu_share": np.where(fractional, share, 1.0)[keep],
        "gpus_per_task": pd.array(np.where(uniform & ~roled, per_min, np.nan)[keep],
                                  dtype="Float64"),
        "gpu_type": agg["gpu_type"].replace("*", "").to_numpy()[keep],
    })
    if roled[keep].any():
        out["tasks"] = tasks[keep]
    for col, values in extra.items():
        out[col] = values[keep]
    return finish([out], [lines[keep]], issues, name=name or "pai", source=str(tasks_path))
