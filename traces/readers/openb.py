"""Alibaba GPU cluster trace v2023 ("openb", FGD, USENIX ATC'23): pod lists and node lists.

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

Node list (`sn, cpu_milli, memory_mib, gpu, model`): one node a row, as a Topology.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import InvalidTopology, InvalidTrace
from sim.model import Level
from topologies.native import node_cell
from topologies.tree import CellSpec, Topology
from traces.base import Trace
from traces.readers._common import (
    Issues,
    check_columns,
    finish,
    iter_csv,
    label_of,
    number_field,
    resolve,
    stem_of,
)

__all__ = [
    "NODE_COLUMNS", "POD_COLUMNS", "is_openb_node_list", "read_openb_nodes", "read_openb_pods",
]

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time")
"""Columns of openb_pod_list_default.csv."""

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
"""Columns of openb_node_list_*.csv."""

GPU_MEM_GB = {"V100M16": 16.0, "V100M32": 32.0, "P100": 16.0, "T4": 16.0, "A10": 24.0}
"""GPU memory of the disclosed models (G1-G3 are undisclosed: 0 = unknown)."""

SHAPES = {8: (2, 2, 2), 4: (1, 2, 2)}
"""GPUs -> (sockets, switches per socket, GPUs per switch); other counts sit flat."""


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
    issues = Issues(label_of(p), skip_bad_rows)
    parts, line_parts = [], []
    for chunk in iter_csv(p, issues):
        df, lines = chunk.frame, chunk.lines
        cols = list(df.columns)
        check_columns(issues.label, cols, POD_COLUMNS[:5], "openb pod list")
        if "creation_time" not in cols or "deletion_time" not in cols:
            raise InvalidTrace(
                f"{issues.label}: an openb pod list without creation_time and deletion_time "
                "(the authors' multigpuNN variants) has no arrival or run times to replay; "
                f"found columns: {', '.join(cols)}"
            )
        n = len(df)

        bad = np.zeros(n, dtype=bool)

        def num(col: str, rule: str, *, integer: bool = False, required: bool = True,
                df: pd.DataFrame = df, lines: np.ndarray = lines,
                bad: np.ndarray = bad) -> np.ndarray:
            v, b = number_field(df, lines, issues, col, rule=rule, lo=0.0, integer=integer,
                                required=required)
            bad |= b  # in place: the caller's mask
            return v

        cpu = num("cpu_milli", "is not a number >= 0")
        mem = num("memory_mib", "is not a number >= 0")
        gpus = num("num_gpu", "is not an integer >= 0", integer=True)
        milli = num("gpu_milli", "is not a number >= 0")
        created = num("creation_time", "is not a number >= 0")
        deleted = num("deletion_time", "is not a number >= 0")
        if "scheduled_time" in cols:
            sched = num("scheduled_time", "is not a number >= 0", required=False)
        else:
            sched = np.full(n, np.nan)
        with np.errstate(invalid="ignore"):
            share_bad = ~bad & (gpus >= 1) & ((milli <= 0) | (milli > 1000))
            bad |= issues.errors(share_bad, lines, "gpu_milli", df["gpu_milli"],
                                 "is not in (0, 1000] for a pod with GPUs")
            start = np.where(np.isnan(sched), created, sched)
            early = ~bad & (deleted < start)
            bad |= issues.errors(early, lines, "deletion_time", df["deletion_time"],
                                 "is before scheduled_time (or creation_time)")
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
        parts.append(out)
        line_parts.append(lines[keep])
    return finish(parts, line_parts, issues, name=name or stem_of(p), source=str(p))


def is_openb_node_list(path: str | os.PathLike[str]) -> bool:
    """True when the file's header is the openb node list's."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return False
    return tuple(c.strip() for c in first.split(",")) == NODE_COLUMNS


def read_openb_nodes(path: str | os.PathLike[str], name: str | None = None) -> Topology:
    """Read an openb node list as a Topology: one node a row, no rack level.

    GPU type = `model` (a node without GPUs has none); `num_cpus = cpu_milli / 1000`,
    `mem_gb = memory_mib / 1024`; `gpu_mem_gb` from `GPU_MEM_GB` (0 when undisclosed);
    8-GPU nodes are 2 sockets x 2 switches x 2 GPUs, 4-GPU nodes 2 switches x 2 GPUs,
    others flat (the trace does not give the intra-node layout).

    Args:
        path: `openb_node_list_*.csv`.
        name: Topology name (default: the file name without suffixes).

    Returns:
        The topology.

    Raises:
        InvalidTopology: Wrong header or a bad row, naming file, line, field and value.
    """
    p = Path(path)
    label = p.name
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False, na_filter=False)
    except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError) as exc:
        raise InvalidTopology(f"{label}: cannot be read as CSV: {exc}") from None
    df = df.rename(columns=lambda c: str(c).strip())
    if tuple(df.columns) != NODE_COLUMNS:
        raise InvalidTopology(f"{label}: line 1: header {', '.join(df.columns)!r}; "
                              f"allowed: {', '.join(NODE_COLUMNS)!r}")
    nodes: list[CellSpec] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(df.itertuples(index=False)):
        line = i + 2
        sn, cpu, mem, gpu, model = (str(v).strip() for v in row)

        def bad(field: str, value: str, allowed: str, line: int = line) -> InvalidTopology:
            return InvalidTopology(f"{label}: line {line}: {field}: got {value!r}; "
                                   f"allowed: {allowed}")

        if not sn:
            raise bad("sn", sn, "a non-empty node id")
        if sn in seen:
            raise bad("sn", sn, f"a node id not used before (line {seen[sn]})")
        seen[sn] = line
        values = {}
        for field, text, integer in (("cpu_milli", cpu, False), ("memory_mib", mem, False),
                                     ("gpu", gpu, True)):
            try:
                v = float(text)
            except ValueError:
                v = -1.0
            if not (v >= 0 and v != float("inf")) or (integer and v != int(v)):
                raise bad(field, text, "an integer >= 0" if integer else "a number >= 0")
            values[field] = v
        gpus = int(values["gpu"])
        if gpus and not model:
            raise bad("model", model, "a GPU model for a node with GPUs")
        attrs = {"gpu_type": model if gpus else "", "num_cpus": values["cpu_milli"] / 1000.0,
                 "mem_gb": values["memory_mib"] / 1024.0,
                 "gpu_mem_gb": GPU_MEM_GB.get(model, 0.0) if gpus else 0.0}
        nodes.append(node_cell(sn, attrs, *SHAPES.get(gpus, (1, 1, gpus))))
    if not nodes:
        raise InvalidTopology(f"{label}: no nodes after the header; allowed: one line a node")
    topo_name = name or stem_of(p)
    return Topology(topo_name, CellSpec(Level.CLUSTER, topo_name, nodes), source=str(p))
