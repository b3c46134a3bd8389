"""Alibaba GPU cluster trace v2023 ("openb", FGD, USENIX ATC'23): the pod lists.

Pod list (`name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
creation_time, deletion_time, scheduled_time`): one pod a job. `name` -> `job_id`,
`creation_time` -> `submit_time` (seconds from the first), `num_gpu` -> `num_gpus`,
`gpu_milli / 1000` -> `gpu_share` for a one-GPU pod asking less than a whole GPU,
`cpu_milli / 1000` -> `num_cpus`, `memory_mib / 1024` -> `mem_gb`. `duration` is
`deletion_time - scheduled_time`; a pod never scheduled (Pending at the end of the
trace, `scheduled_time` empty) lives `deletion_time - creation_time`, the time it asked
for resources. `gpu_spec` (allowed GPU types, `|`-separated) -> `gpu_type` when it names
one type; every non-empty spec is also kept as the pass-through column `gpu_spec`
(the canonical schema has one GPU type a job, so a multi-type spec is not enforced).
`qos` and `pod_phase` are pass-through. The authors' `multigpuNN` variants have no times
and are refused with that reason.

The node list (`sn, cpu_milli, memory_mib, gpu, model`) is a topology:
`schedlab.topologies.openb.read_openb_nodes`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.base import Trace
from schedlab.traces.readers._common import (
    RowErrors,
    check_columns,
    finish,
    iter_csv,
    label_of,
    number_field,
    resolve,
    stem_of,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["POD_COLUMNS", "read_openb_pods"]

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time")
"""Columns of openb_pod_list_default.csv."""


def read_openb_pods(
    path: str | os.PathLike[str], *, skip_bad_rows: bool = False, name: str | None = None,
) -> Trace:
    """Read an openb pod list (see the module doc for the mapping).

    Args:
        path: `openb_pod_list_*.csv` with creation/deletion times.
        skip_bad_rows: Count bad rows instead of failing on the first.
        name: Trace name (default: the file name without suffixes).

    Returns:
        The trace, with pass-through columns `gpu_spec`, `qos` and `pod_phase` when present.

    Raises:
        InvalidTrace: Missing columns (the time-less variants), or a bad row naming file,
            line, field and value.
    """
    p = resolve(path)
    issues = RowErrors(label_of(p), skip_bad_rows)
    parts, line_parts = [], []
    for chunk in iter_csv(p, issues):
        out, lines = _pods(chunk.frame, chunk.lines, issues)
        parts.append(out)
        line_parts.append(lines)
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p))


def _pods(df: pd.DataFrame, lines: np.ndarray, issues: RowErrors
          ) -> tuple[pd.DataFrame, np.ndarray]:
    """One chunk of the pod list as canonical rows, and the file line of each."""
    import pandas as pd

    cols = list(df.columns)
    check_columns(issues.label, cols, POD_COLUMNS[:5], "openb pod list")
    if "creation_time" not in cols or "deletion_time" not in cols:
        raise InvalidTrace(
            f"{issues.label}: an openb pod list without creation_time and deletion_time "
            "(the authors' multigpuNN variants) has no arrival or run times to replay; "
            f"found columns: {', '.join(cols)}"
        )
    bad = np.zeros(len(df), dtype=bool)

    def num(col: str, rule: str, *, integer: bool = False, required: bool = True
            ) -> np.ndarray:
        v, b = number_field(df, lines, issues, col, rule=rule, lo=0.0, integer=integer,
                            required=required)
        bad[:] |= b  # in place: the enclosing mask
        return v

    cpu = num("cpu_milli", "is not a number >= 0")
    mem = num("memory_mib", "is not a number >= 0")
    gpus = num("num_gpu", "is not an integer >= 0", integer=True)
    milli = num("gpu_milli", "is not a number >= 0")
    created = num("creation_time", "is not a number >= 0")
    deleted = num("deletion_time", "is not a number >= 0")
    sched = (num("scheduled_time", "is not a number >= 0", required=False)
             if "scheduled_time" in cols else np.full(len(df), np.nan))
    with np.errstate(invalid="ignore"):
        bad |= issues.errors(~bad & (gpus >= 1) & ((milli <= 0) | (milli > 1000)), lines,
                             "gpu_milli", df["gpu_milli"],
                             "is not in (0, 1000] for a pod with GPUs")
        start = np.where(np.isnan(sched), created, sched)
        bad |= issues.errors(~bad & (deleted < start), lines, "deletion_time",
                             df["deletion_time"], "is before scheduled_time (or creation_time)")
        dur = deleted - start
        zero = ~bad & (dur <= 0)
    issues.excludes(zero, lines, "pod lived 0 s (deletion_time = start)")
    keep = ~(bad | zero)
    share = np.where((gpus == 1) & (milli < 1000), milli / 1000.0, 1.0)
    out = pd.DataFrame({
        "job_id": df["name"].str.strip().to_numpy()[keep],
        "submit_time": created[keep],
        "num_gpus": gpus[keep].astype(np.int64),
        "duration": dur[keep],
        "num_cpus": cpu[keep] / 1000.0,
        "mem_gb": mem[keep] / 1024.0,
        "gpu_share": share[keep],
    })
    if "gpu_spec" in cols:
        spec = df["gpu_spec"].str.strip()
        single = ~spec.str.contains("|", regex=False) & (spec != "")
        out["gpu_type"] = spec.where(single, "").to_numpy()[keep]
        out["gpu_spec"] = spec.to_numpy()[keep]
    for col in ("qos", "pod_phase"):
        if col in cols:
            out[col] = df[col].str.strip().to_numpy()[keep]
    return out, lines[keep]
