"""Random small valid cases for fuzzing the engine and every policy ("Runs you can trust").

A case is a native topology (1-4 nodes, random sockets/switches/GPUs, sometimes racks, two
GPU types, HiveD-style `vcs:` that fit, `queues:` of docs/contract.md#sec-3), a trace of 5-30 jobs
exercising every column the engine reads (DAGs, retries, lifetimes, elastic ranges, gangs,
fractional GPUs, CPU-only jobs, container jobs, jobs too large for the cluster, unknown VCs
and GPU types)
and random engine parameters (placer, node failures, attempt failures, ...). Everything is
drawn from one seeded `numpy.random.Generator`, so a case is named by its seed::

    case = case_from_seed(1234)
    outcome = run_case(case, "hived", {"order": "sjf"})
    assert outcome.ok, outcome.detail

`run_case` runs the simulation and reports the first thing that went wrong: an exception
(our own `SimError` included, unless it is a documented refusal), a broken invariant of
`schedlab.policies.conformance.check_invariants`, a run over its time limit, or, when asked, two
runs of the same seed that differ. `minimize` shrinks a failing case to a few jobs and
`repro_code` prints it as a self-contained script. Lossy stops are drawn too (`stop=preempt`
or `checkpoint_on_suspend=false` under Gavel's rounds or Tiresias' promotions): their runs
end because the engine fails a job stopped too often without progress (`stop_retries`).
"""

from __future__ import annotations

import dataclasses
import re
import signal
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.policies.conformance import ConformanceError, check_invariants
from schedlab.sim.errors import SimError
from schedlab.topologies.native import native_from_dict
from schedlab.topologies.tree import Topology
from schedlab.traces.base import Trace
from schedlab.traces.synthetic import from_records

__all__ = [
    "DOCUMENTED_ERRORS", "FuzzCase", "Outcome", "RunTimeout", "case_from_seed", "draw_target",
    "fuzz_case", "fuzz_policy_params", "fuzz_target", "minimize",
    "repro_code", "run_case", "targets",
]

GPU_TYPES = ("V100", "K80")
"""GPU types of the (at most two) node groups."""

DOCUMENTED_ERRORS: tuple[tuple[type[SimError], str], ...] = ()
"""(error class, message regex) of refusals a valid case may meet by design.

Empty: every case `fuzz_case` builds is valid, so any `SimError` is a finding.
"""


class RunTimeout(Exception):
    """A run went past its time limit (raised by the SIGALRM guard of `run_case`)."""


@dataclass(frozen=True)
class FuzzCase:
    """One random case: where to run, what to run and the engine parameters.

    Attributes:
        topology: The cluster, built from `topology_data` by `native_from_dict`.
        trace: The jobs, validated like a canonical file (`schedlab.traces.synthetic.from_records`).
        params: Engine parameters (docs/contract.md#sec-7), e.g. `placer`, `mtbf`, `failure_rate`.
        seed: The simulation seed.
        topology_data: The native YAML mapping the topology was built from.
        records: One dict a job, as given to `from_records` (for repro scripts).
        case_seed: The seed of the generator the case was drawn from, when known.
    """

    topology: Topology
    trace: Trace
    params: Mapping[str, Any]
    seed: int = 0
    topology_data: Mapping[str, Any] = field(default_factory=dict)
    records: tuple[Mapping[str, Any], ...] = ()
    case_seed: int | None = None


@dataclass(frozen=True)
class Outcome:
    """What one fuzz run gave.

    Attributes:
        kind: "pass", "documented" (an allowed `SimError`), "exception" (any other error,
            ours or not), "invariant", "timeout" or "nondeterminism".
        detail: The error type and message, or what differed.
        wall: Wall seconds of the run(s).
    """

    kind: str
    detail: str = ""
    wall: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (a pass or a documented refusal)."""
        return self.kind in ("pass", "documented")

    @property
    def error_type(self) -> str:
        """The exception class named at the start of `detail` (or the kind)."""
        if self.kind == "exception":
            return self.detail.split(":", 1)[0]
        return self.kind


# --- topology ---


def _fuzz_topology_data(rng: np.random.Generator) -> dict[str, Any]:
    """A native topology mapping (contract.md#sec-3) of 1-4 nodes, with VCs and queues sometimes."""
    total = int(rng.integers(1, 5))
    two_types = total >= 2 and rng.random() < 0.3
    counts = [total] if not two_types else [int(c) for c in _split(rng, total, 2)]
    groups: list[dict[str, Any]] = []
    for g, count in enumerate(counts):
        group: dict[str, Any] = {"count": count, "gpu_type": GPU_TYPES[g]}
        if rng.random() < 0.15:
            group["gpus_per_node"] = int(rng.choice([1, 2, 3, 4, 8]))
        else:
            group["sockets"] = int(rng.choice([1, 2]))
            group["switches_per_socket"] = int(rng.choice([1, 2]))
            group["gpus_per_switch"] = int(rng.choice([1, 2, 2, 4]))
        group["num_cpus"] = int(rng.choice([0, 16, 64]))
        group["mem_gb"] = int(rng.choice([0, 128, 512]))
        group["gpu_mem_gb"] = int(rng.choice([0, 16, 32]))
        groups.append(group)
    data: dict[str, Any] = {"name": "fuzz", "nodes": groups}
    if total >= 2 and rng.random() < 0.3:
        data["nodes_per_rack"] = int(rng.integers(1, total + 1))
    per_node = [_group_gpus(g) for g in groups for _ in range(g["count"])]
    vc_names: list[str] = []
    if rng.random() < 0.4:
        vcs = _fuzz_vcs(rng, per_node)
        if vcs:
            data["vcs"] = vcs
            vc_names = list(vcs)
    if rng.random() < 0.3:
        leaves = vc_names or [f"vc{i}" for i in range(int(rng.integers(1, 4)))]
        data["queues"] = _fuzz_queues(rng, leaves)
    return data


def _group_gpus(group: Mapping[str, Any]) -> int:
    if "gpus_per_node" in group:
        return int(group["gpus_per_node"])
    return int(group["sockets"] * group["switches_per_socket"] * group["gpus_per_switch"])


def _split(rng: np.random.Generator, total: int, parts: int) -> list[int]:
    """`total` as `parts` positive integers (total >= parts)."""
    cuts = sorted(rng.choice(np.arange(1, total), size=parts - 1, replace=False).tolist())
    edges = [0, *cuts, total]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


def _fuzz_vcs(rng: np.random.Generator, per_node: Sequence[int]) -> dict[str, dict[str, int]]:
    """VCs of whole nodes and of single GPUs that fit the cluster together (HiveD safety).

    Whichever nodes HiveD promises to the node cells, the GPU cells fit in the others: they
    total at most the GPUs left after the largest nodes are taken out.
    """
    nodes_left = len(per_node)
    largest = sorted(per_node, reverse=True)
    promised = 0
    out: dict[str, dict[str, int]] = {}
    for v in range(int(rng.integers(1, 4))):
        cells: dict[str, int] = {}
        taken = len(per_node) - nodes_left
        # node cells only as long as the GPU cells promised so far still fit beside them
        room = max((n for n in range(nodes_left + 1)
                    if sum(largest[taken + n:]) >= promised), default=0)
        if room and rng.random() < 0.5:
            n = int(rng.integers(1, room + 1)) if rng.random() < 0.3 else 1
            cells["node"] = n
            nodes_left -= n
        taken = len(per_node) - nodes_left
        gpus_left = sum(largest[taken:]) - promised
        if gpus_left > 0 and (not cells or rng.random() < 0.3):
            k = int(rng.integers(1, gpus_left + 1))
            cells["gpu"] = k
            promised += k
        if not cells:
            break
        out[f"vc{v}"] = cells
    return out


def _fuzz_queues(rng: np.random.Generator, leaves: Sequence[str]) -> list[dict[str, Any]]:
    """A `queues:` list whose leaves are `leaves`, sometimes under one parent queue.

    Capacities are all given (summing to 1) or all left out (equal shares); a
    `max_capacity` is never below its queue's capacity.
    """
    n = len(leaves)
    given = rng.random() < 0.6
    caps = [1.0 / n] * n
    if given:
        raw = np.maximum(np.round(rng.dirichlet(np.ones(n)), 3), 0.001)
        caps = [float(c) for c in raw[:-1]]
        caps.append(round(1.0 - sum(caps), 6))
        if caps[-1] <= 0.0:
            caps = [1.0 / n] * n
            given = False
    items: list[dict[str, Any]] = []
    for name, cap in zip(leaves, caps, strict=True):
        q: dict[str, Any] = {"name": name}
        if given:
            q["capacity"] = cap
        if rng.random() < 0.4:
            q["max_capacity"] = float(rng.choice([1.0, round(min(1.0, cap + 0.2), 6)]))
        if rng.random() < 0.2:
            q["user_limit_factor"] = float(rng.choice([0.5, 1.0, 2.0, 10.0]))
        items.append(q)
    if n >= 2 and rng.random() < 0.3:
        # a hierarchy: the first leaf stays at the top, the others under a parent
        kids = [{k: v for k, v in q.items() if k not in ("capacity", "max_capacity")}
                for q in items[1:]]
        return [{"name": items[0]["name"], "capacity": 0.5},
                {"name": "parent", "capacity": 0.5, "queues": kids}]
    return items


# --- trace ---


def _fuzz_records(rng: np.random.Generator, topo: Topology,
                  data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """5-30 job records of the canonical schema that validate, on the cluster `topo`."""
    n = int(rng.integers(5, 31))
    total = topo.num_gpus
    vcs = list(data.get("vcs") or {})
    leaves = _queue_leaves(data.get("queues") or [])
    tenants = vcs or leaves or ["default"]
    types = list(topo.gpu_types)
    users = [f"u{i}" for i in range(int(rng.integers(1, 5)))]
    mean_gap = float(rng.choice([0.0, 5.0, 30.0, 120.0]))
    t = 0.0
    out: list[dict[str, Any]] = []
    for i in range(n):
        if mean_gap and rng.random() > 0.15:
            t += float(rng.exponential(mean_gap))
        rec: dict[str, Any] = {
            "job_id": f"j{i}", "submit_time": round(t, 3),
            "duration": float(rng.choice([1.0, 10.0, 60.0, 300.0]) * rng.uniform(0.2, 2.0)),
            "user": str(rng.choice(users)),
        }
        rec["duration"] = round(max(rec["duration"], 0.5), 3)
        u = rng.random()
        if u < 0.1:
            g = 0
        elif u < 0.15:
            g = total + int(rng.integers(1, 4))  # too large for the cluster
        else:
            g = int(rng.choice([1, 1, 1, 2, 2, 3, 4, 8]))
            g = min(g, max(1, total)) if rng.random() < 0.8 else g
        rec["num_gpus"] = g
        if g >= 2 and rng.random() < 0.25:
            divisors = [d for d in range(1, g) if g % d == 0]
            rec["gpus_per_task"] = int(rng.choice(divisors))
        if g == 1 and rng.random() < 0.25:
            rec["gpu_share"] = float(rng.choice([0.25, 0.3, 0.5, 0.75]))
        if g >= 1 and "gpus_per_task" not in rec and rng.random() < 0.2:
            rec["min_gpus"] = int(rng.integers(1, g + 1))
            rec["max_gpus"] = int(g + rng.integers(0, 5))
        r = rng.random()
        if r < 0.15:
            rec["fail_at"] = round(float(rec["duration"] * rng.uniform(0.1, 1.5)), 3)
            rec["max_retries"] = int(rng.integers(0, 4))
        elif r < 0.25:
            rec["max_retries"] = int(rng.integers(1, 4))
        if rng.random() < 0.1:
            rec["max_lifetime"] = round(float(rec["duration"] * rng.uniform(0.3, 3.0)), 3)
        if rng.random() < 0.4:
            rec["checkpoint_interval"] = round(float(rec["duration"] * rng.uniform(0.1, 1.0)),
                                               3)
        if i and rng.random() < 0.2:
            deps = rng.choice(i, size=int(rng.integers(1, min(i, 3) + 1)), replace=False)
            rec["depends_on"] = [f"j{int(d)}" for d in sorted(deps.tolist())]
        if rng.random() < 0.5:
            rec["priority"] = int(rng.choice([-1, 0, 0, 5, 10, 20, 30, 50]))
            if i % 3:  # HiveD's per-job flag, from the index (the draws stay as they were)
                rec["lazy_preemption"] = bool(i % 2)
        rec["vc"] = str(rng.choice(tenants)) if rng.random() > 0.05 else "vc-unknown"
        if rng.random() < 0.05 and "parent" in _queue_names(data.get("queues") or []):
            rec["vc"] = "parent"  # a parent queue: capacity rejects it with the reason
        if rng.random() < 0.2:
            rec["gpu_type"] = str(rng.choice(types)) if rng.random() > 0.1 else "A100"
        if len(types) > 1 and rng.random() < 0.3:
            rec["gpu_speeds"] = {types[0]: 1.0, types[1]: round(float(rng.uniform(0.2, 1)), 2)}
        if rng.random() < 0.2:
            rec["num_cpus"] = int(rng.choice([1, 4, 16, 32]))
        if rng.random() < 0.1:
            rec["mem_gb"] = int(rng.choice([8, 64, 256]))
        if rng.random() < 0.2:
            rec["gpu_util"] = round(float(rng.uniform(0.05, 1.0)), 2)
        if rng.random() < 0.1:
            rec["gpu_mem_gb"] = int(rng.choice([4, 16, 24]))
        if rng.random() < 0.2:
            rec["locality_sensitivity"] = float(rng.choice([0.0, 0.5, 1.0]))
        if rng.random() < 0.15:
            rec["max_wait_hours"] = float(rng.choice([4, 6, 8, 24, 48]))
        if rng.random() < 0.05:
            rec["deadline"] = round(t + float(rng.uniform(10, 2000)), 3)
        out.append(rec)
    return out


def _queue_names(items: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for q in items:
        out.append(str(q["name"]))
        out.extend(_queue_names(q.get("queues") or []))
    return out


def _queue_leaves(items: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for q in items:
        kids = q.get("queues") or []
        out.extend(_queue_leaves(kids) if kids else [str(q["name"])])
    return out


# --- optional keys: only those the readers of this version know ---


def _optional_topology(rng: np.random.Generator, data: dict[str, Any]) -> None:
    """Node `disk_gb` / `interconnect` and queue `state`, when the native reader has them."""
    from schedlab.topologies import native

    group_keys = set(getattr(native, "GROUP_KEYS", ()))
    for group in data["nodes"]:
        if "disk_gb" in group_keys and rng.random() < 0.2:
            group["disk_gb"] = int(rng.choice([100, 500]))
        if "interconnect" in group_keys and rng.random() < 0.2:
            group["interconnect"] = str(rng.choice(["infiniband", "ethernet"]))
    if "state" in set(getattr(native, "QUEUE_KEYS", ())) and data.get("queues"):
        stack = list(data["queues"])
        while stack:
            q = stack.pop()
            if rng.random() < 0.1:
                q["state"] = "stopped"  # new jobs to it (and its children) are rejected
            stack.extend(q.get("queues") or [])


def _optional_columns(rng: np.random.Generator, records: list[dict[str, Any]]) -> None:
    """Job columns newer than the generator's core set, when JobSpec has them."""
    from schedlab.sim.model import JobSpec

    names = {f.name for f in dataclasses.fields(JobSpec)}
    for rec in records:
        if "disk_gb" in names and rng.random() < 0.1:
            rec["disk_gb"] = int(rng.choice([10, 50, 200]))
        if "completions" in names and rng.random() < 0.12 and not (
                {"min_gpus", "max_gpus", "gpus_per_task"} & rec.keys()):
            _container_columns(rng, rec)


def _container_columns(rng: np.random.Generator, rec: dict[str, Any]) -> None:
    """Make the record a container job (Kubernetes Job semantics, `schedlab.sim.containers`)."""
    rec["completions"] = int(rng.integers(1, 6))
    rec["parallelism"] = int(rng.integers(1, 4))
    rec["restart_policy"] = str(rng.choice(["Never", "OnFailure"]))
    rec["backoff_limit"] = int(rng.integers(0, 4))
    if rng.random() < 0.3:
        rec["active_deadline"] = round(float(rec["duration"] * rng.uniform(0.5, 4.0)), 3)
    if "fail_at" in rec and rng.random() < 0.7:
        rec["failed_runs"] = int(rng.integers(1, 4))


def _role_columns(rng: np.random.Generator, records: list[dict[str, Any]]) -> None:
    """Turn some gang jobs into jobs of roles (contract.md#sec-2 `tasks`), when JobSpec has them.

    TensorFlow-like (CPU-only `ps`, workers, a chief, sometimes a non-gang evaluator with
    or without its own duration) or PyTorch-like (a master and workers of another shape);
    the job-level GPU count becomes the gang's, the host columns the roles' (validation).
    """
    import json

    from schedlab.sim.model import JobSpec

    if "tasks" not in {f.name for f in dataclasses.fields(JobSpec)}:
        return
    for rec in records:
        g = rec["num_gpus"]
        if not 2 <= g <= 16 or rng.random() >= 0.15:
            continue
        if any(k in rec for k in ("gpus_per_task", "gpu_share", "min_gpus", "max_gpus",
                                  "completions")):  # a container row is one task run
            continue
        per = int(rng.choice([1, 2]))
        workers = max(1, (g - 1) // per)
        roles: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            roles.append({"role": "ps", "count": int(rng.integers(1, 3)), "gpus": 0,
                          "cpus": int(rng.choice([0, 2, 8])), "mem_gb": int(rng.choice([0, 8]))})
            roles.append({"role": "worker", "count": workers, "gpus": per, "cpus": 2})
            roles.append({"role": "chief", "count": 1, "gpus": 1})
            if rng.random() < 0.5:
                ev: dict[str, Any] = {"role": "evaluator", "count": 1, "gpus": 1,
                                      "gang": False}
                if rng.random() < 0.5:
                    ev["duration"] = round(float(rec["duration"] * rng.uniform(0.1, 2.0)),
                                           3) or 1.0
                roles.append(ev)
        else:
            roles.append({"role": "master", "count": 1, "gpus": 1, "cpus": 4})
            roles.append({"role": "worker", "count": workers, "gpus": per + 1})
        rec["num_gpus"] = sum(r["count"] * r["gpus"] for r in roles if r.get("gang", True))
        for k in ("num_cpus", "mem_gb", "disk_gb"):
            rec.pop(k, None)
        rec["tasks"] = json.dumps(roles)


def _utilization_columns(rng: np.random.Generator, records: list[dict[str, Any]]) -> None:
    """Make some elastic jobs scale on utilization (`target_util`, `scale_interval`)."""
    from schedlab.sim.model import JobSpec

    if "target_util" not in {f.name for f in dataclasses.fields(JobSpec)}:
        return
    for rec in records:
        if rec["num_gpus"] < 1 or not {"min_gpus", "max_gpus"} & rec.keys() or \
                "tasks" in rec or rng.random() >= 0.4:
            continue
        rec["target_util"] = round(float(rng.uniform(0.3, 1.0)), 3)
        rec.setdefault("gpu_util", round(float(rng.uniform(0.2, 1.0)), 3))
        if rng.random() < 0.5:
            rec["scale_interval"] = float(rng.choice([10.0, 60.0, 300.0]))


# --- parameters ---


def _fuzz_engine_params(rng: np.random.Generator) -> dict[str, Any]:
    """Engine parameters (docs/contract.md#sec-7), each given only sometimes."""
    p: dict[str, Any] = {}
    if rng.random() < 0.6:
        p["placer"] = str(rng.choice(["consolidated", "pack", "first-fit", "fgd", "best-fit",
                                      "gpu-packing", "dot-product"]))
    if rng.random() < 0.25:
        p["mtbf"] = float(rng.choice([300.0, 1000.0, 5000.0]))
        p["mttr"] = float(rng.choice([30.0, 200.0, 1000.0]))
        if rng.random() < 0.5:
            p["node_failure_retries"] = int(rng.integers(0, 4))
    if rng.random() < 0.15:
        p["failure_rate"] = float(rng.choice([0.5, 5.0, 30.0]))
    if rng.random() < 0.2:
        p["retry_delay"] = float(rng.choice([0.0, 5.0, 60.0]))
    if rng.random() < 0.2:
        p["restore_overhead"] = float(rng.choice([0.0, 5.0, 30.0]))
    if rng.random() < 0.15:
        p["checkpoint_on_suspend"] = bool(rng.random() < 0.5)
    if rng.random() < 0.15:
        p["elastic_scaling"] = "amdahl"
        p["serial_fraction"] = float(rng.choice([0.0, 0.05, 0.5]))
    return p


_STOP = ("suspend", "preempt")
_THRESHOLDS = ("60,600,3000", "100,1000", "3250,7200,18000")

POLICY_CHOICES: dict[str, dict[str, Sequence[Any]]] = {
    "capacity": {"preempt": (True, False), "preemption_interval": (1.0, 3.0, 30.0),
                 "total_preemption_per_round": (0.1, 0.5, 1.0),
                 "max_wait_before_kill": (0.0, 15.0)},
    "conservative-backfill": {"estimate_factor": (1.0, 1.5, 3.0),
                              "max_reservations": (1, 5, 25)},
    "drf": {"drf_by": ("user", "vc"), "preempt": (False, True)},
    "easy-backfill": {"estimate_factor": (1.0, 2.0)},
    "fifo-elastic": {"resize_interval": (0.0, 60.0, 300.0)},
    "gandiva": {"time_slice": (10.0, 60.0), "max_timeshare": (1, 2, 4),
                "introspective": (True, False), "introspection_interval": (10.0, 60.0),
                "migration": (True, False), "packing": (True, False),
                "grow_shrink": (True, False), "migration_threshold": (0.0, 0.5, 0.75),
                "max_migrations": (0, 1, 8)},
    "gavel-mmf": {"round": (60.0, 360.0), "reset_interval": (0.0, 1920.0), "stop": _STOP,
                  "unallocated": ("spare", "wait")},
    "gavel-mmf-agnostic": {"round": (60.0, 360.0), "reset_interval": (0.0, 1920.0),
                           "stop": _STOP},
    "hai": {"backfill": (False, True), "suspend_grace": (0.0, 5.0),
            "suspend_at_checkpoint": (True, False), "demote_after": (60.0, 1800.0),
            "plan_period": (0.0, 1.0, 10.0), "replan": ("event",)},
    "hived": {"lazy_preemption": (False, True), "preemption_delay": (0.0, 30.0)},
    "quota-priority": {"resume_weight": ("priority-wait", "wait", "suspensions")},
    "sjf": {"weight": ("none", "gpus")},
    "srtf": {"weight": ("none", "gpus"), "stop": _STOP},
    "themis-ftf": {"lease": (60.0, 600.0), "fairness_knob": (0.0, 0.8, 1.0), "stop": _STOP,
                   "perf": (False, True)},
    "tiresias-las": {"num_queues": (1, 2, 3), "thresholds": _THRESHOLDS,
                     "promote_knob": (0.0, 2.0), "stop": _STOP,
                     "demoted": ("behind", "running-first")},
    "tiresias-gittins": {"num_queues": (1, 2, 3), "thresholds": _THRESHOLDS,
                         "promote_knob": (0.0, 2.0), "stop": _STOP,
                         "gittins_delta": (100.0, 3250.0)},
}
"""Cheap valid values of each policy's own parameters (no files)."""


def fuzz_policy_params(rng: np.random.Generator, policy: str) -> dict[str, Any]:
    """Random valid values for some of `policy`'s own parameters (each drawn half the time).

    Args:
        rng: The generator to draw from.
        policy: A registered policy name.

    Returns:
        Parameter name -> value; `{}` for a policy with no cheap parameters.
    """
    out: dict[str, Any] = {}
    for key, values in POLICY_CHOICES.get(policy, {}).items():
        if rng.random() < 0.5:
            v = values[int(rng.integers(0, len(values)))]
            out[key] = v.item() if isinstance(v, np.generic) else v
    if out.get("replan") == "every-period" and not out.get("plan_period"):
        out["plan_period"] = 1.0
    return out


# --- cases ---


def fuzz_case(rng: np.random.Generator, *, case_seed: int | None = None) -> FuzzCase:
    """Draw one random small valid case.

    Args:
        rng: The only source of randomness (no global RNG is touched).
        case_seed: Recorded in the case to name it in repro lines (`case_from_seed`).

    Returns:
        The case; its topology and trace passed the readers' own validation.
    """
    extra = rng.spawn(1)[0]  # optional columns: drawn apart, the main stream stays put
    data = _fuzz_topology_data(rng)
    _optional_topology(extra, data)
    topo = native_from_dict(data, "<fuzz>")
    records = _fuzz_records(rng, topo, data)
    _optional_columns(extra, records)
    _role_columns(extra.spawn(1)[0], records)  # spawning draws nothing from `extra`
    _utilization_columns(extra.spawn(1)[0], records)
    trace = from_records(records, name="fuzz")
    params = _fuzz_engine_params(rng)
    seed = int(rng.integers(0, 2**31))
    if extra.random() < 0.2:  # low limits of futile restarts: the failing path is exercised
        params["stop_retries"] = int(extra.integers(0, 4))
    return FuzzCase(topo, trace, params, seed, data, tuple(records), case_seed)


def case_from_seed(seed: int) -> FuzzCase:
    """The case `fuzz_case(numpy.random.default_rng(seed))`, named by `seed`."""
    return fuzz_case(np.random.default_rng(seed), case_seed=seed)


def targets() -> list[tuple[str, dict[str, Any]]]:
    """Every registered policy (no params) and every composition (hived x each ordering)."""
    from schedlab.policies.conformance import compositions
    from schedlab.policies.registry import registered_policies

    return [(name, {}) for name in registered_policies()] + compositions()


def draw_target(rng: np.random.Generator, case: FuzzCase, policy: str,
                base: Mapping[str, Any] | None = None) -> tuple[FuzzCase, dict[str, Any]]:
    """Random policy params for `policy` on `case` (lossy stops included).

    Args:
        rng: The generator to draw the params from.
        case: The case, returned as it is.
        policy: A registered policy name.
        base: Params that must be kept (e.g. a composition's `order`).

    Returns:
        (case, params).
    """
    return case, {**fuzz_policy_params(rng, policy), **(base or {})}


def fuzz_target(seed: int) -> tuple[FuzzCase, str, dict[str, Any]]:
    """A case, a policy or composition and its random params, all named by `seed`.

    Args:
        seed: Seeds the case (`case_from_seed`) and, separately, the choice of target.

    Returns:
        (case, policy name, policy params).
    """
    case = case_from_seed(seed)
    rng = np.random.default_rng([seed, 1])
    options = targets()
    name, base = options[int(rng.integers(0, len(options)))]
    case, params = draw_target(rng, case, name, base)
    return case, name, params


# --- running ---


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise RunTimeout after `seconds` of wall time (main thread on Unix; else no limit)."""
    usable = (seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
              and _main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise RunTimeout(f"run exceeded {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(seconds or 0))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _documented(e: SimError) -> bool:
    return any(isinstance(e, cls) and re.search(rx, str(e)) for cls, rx in DOCUMENTED_ERRORS)


def _describe(e: BaseException) -> str:
    """`Type: message [at module.py:line]`, the line the innermost frame of ours raised at."""
    inner: BaseException = e
    while inner.__cause__ is not None and type(inner.__cause__) is type(e):
        inner = inner.__cause__  # SimPy re-raises a process's error from its own frame
    frames = [f for f in traceback.extract_tb(inner.__traceback__)
              if "site-packages" not in f.filename]
    where = ""
    if frames:
        f = frames[-1]
        where = f" [at {'/'.join(f.filename.split('/')[-2:])}:{f.lineno}]"
    return f"{type(e).__name__}: {e}{where}"


def run_case(case: FuzzCase, policy: str | Callable[[], Any],
             params: Mapping[str, Any] | None = None, *, determinism: bool = False,
             time_limit: float | None = None) -> Outcome:
    """Run `policy` on `case` and check it: no error, invariants kept, terminated.

    Args:
        case: The case (its `params` are the engine parameters).
        policy: A registered policy name (or `module:Class`), or a factory of fresh
            `Policy` instances (then `params` may hold engine parameters only).
        params: The policy's own parameters (and any engine ones, which win over the case's).
        determinism: Also run a second time with the same seed and compare the jobs and
            events tables (doubles the cost).
        time_limit: Wall seconds allowed for all runs together (SIGALRM; main thread only).

    Returns:
        The outcome; `outcome.ok` is False for a finding.
    """
    from schedlab.sim.engine import Simulation

    merged = {**case.params, **(params or {})}
    t0 = time.perf_counter()

    def once() -> Any:
        chosen = policy if isinstance(policy, str) else policy()
        return Simulation(case.trace, case.topology, chosen, seed=case.seed,
                          params=merged).run()

    try:
        with _time_limit(time_limit):
            result = once()
            try:
                check_invariants(result, case.topology, case.trace, finished=True)
            except ConformanceError as e:
                return Outcome("invariant", str(e), time.perf_counter() - t0)
            if determinism:
                again = once()
                for table in ("jobs", "events"):
                    if not getattr(result, table).equals(getattr(again, table)):
                        return Outcome("nondeterminism", f"same seed, different {table} table",
                                       time.perf_counter() - t0)
    except RunTimeout as e:
        return Outcome("timeout", str(e), time.perf_counter() - t0)
    except SimError as e:
        kind = "documented" if _documented(e) else "exception"
        return Outcome(kind, _describe(e), time.perf_counter() - t0)
    except Exception as e:  # every other error is a finding, reported
        return Outcome("exception", _describe(e), time.perf_counter() - t0)
    return Outcome("pass", "", time.perf_counter() - t0)


# --- shrinking and repro scripts ---


def _rebuild(case: FuzzCase, records: Sequence[Mapping[str, Any]],
             params: Mapping[str, Any]) -> FuzzCase:
    ids = {r["job_id"] for r in records}
    kept = []
    for r in records:
        r = dict(r)
        if "depends_on" in r:
            deps = [d for d in r["depends_on"] if d in ids]
            if deps:
                r["depends_on"] = deps
            else:
                del r["depends_on"]
        kept.append(r)
    return dataclasses.replace(case, trace=from_records(kept, name="fuzz"),
                               records=tuple(kept), params=dict(params))


def minimize(case: FuzzCase, fails: Callable[[FuzzCase], bool], *,
             max_steps: int = 400) -> FuzzCase:
    """Shrink a failing case: drop jobs, then job columns, then engine parameters.

    Args:
        case: A case for which `fails(case)` is True.
        fails: Whether a candidate still shows the failure (e.g. the same outcome kind).
        max_steps: At most this many candidate runs.

    Returns:
        A smaller case that still fails (the topology is kept as it is).
    """
    records = [dict(r) for r in case.records]
    params = dict(case.params)
    steps = 0

    def attempt(recs: list[dict[str, Any]], prm: dict[str, Any]) -> bool:
        nonlocal steps
        if steps >= max_steps or not recs:
            return False
        steps += 1
        try:
            cand = _rebuild(case, recs, prm)
        except SimError:
            return False
        return fails(cand)

    changed = True
    while changed and steps < max_steps:
        changed = False
        chunk = max(1, len(records) // 2)
        while chunk >= 1:  # drop jobs, halves first (delta debugging)
            i = 0
            while i < len(records):
                cand = records[:i] + records[i + chunk:]
                if attempt(cand, params):
                    records, changed = cand, True
                else:
                    i += chunk
            chunk //= 2
        for r_i in range(len(records)):  # drop optional columns of the jobs left
            for key in [k for k in records[r_i] if k not in _REQUIRED]:
                cand = [dict(r) for r in records]
                del cand[r_i][key]
                if attempt(cand, params):
                    records, changed = cand, True
        for key in list(params):
            cand_p = {k: v for k, v in params.items() if k != key}
            if attempt(records, cand_p):
                params, changed = cand_p, True
    return _rebuild(case, records, params)


_REQUIRED = ("job_id", "submit_time", "num_gpus", "duration")


def repro_code(case: FuzzCase, policy: str, params: Mapping[str, Any] | None = None) -> str:
    """A self-contained Python script that reruns `policy` on `case` and checks it."""
    merged = {**case.params, **(params or {})}
    recs = ",\n    ".join(repr(dict(r)) for r in case.records)
    return (
        "from schedlab.policies.conformance import check_invariants\n"
        "from schedlab.sim import Simulation\n"
        "from schedlab.topologies.native import native_from_dict\n"
        "from schedlab.traces.synthetic import from_records\n\n"
        f"topo = native_from_dict({dict(case.topology_data)!r}, 'repro')\n"
        f"trace = from_records([\n    {recs},\n])\n"
        f"result = Simulation(trace, topo, {policy!r}, seed={case.seed}, "
        f"params={merged!r}).run()\n"
        "check_invariants(result, topo, trace)\n"
    )
