"""Failure models: per-component failure rates, repairs and maintenance, from a rates file.

A `FailureModel` says, per component (a GPU, its memory, a NIC, a host, a power supply,
a switch or rack), how often one unit fails (failures per unit per day, exponential or
Weibull inter-failure times), how long a failure takes to be detected and repaired, and
how often it takes its whole failure domain (a rack, a pod) down with it; plus job-level
software failures (per job-hour and per GPU-hour) and planned maintenance windows. The
engine reads one through the `failure_model` parameter: a registered preset name
(`schedlab.sim.registry.FAILURE_MODELS`) or a YAML/JSON rates file (docs/failures.md).
Nothing here draws a random number: `schedlab.sim.failure_health` does, from the run's
seeded generator.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.sim.errors import InvalidParameter

UNITS = ("gpu", "node", "rack")
"""What one unit of a component is: a GPU, a node, or a rack (a cell at rack level)."""
DOMAINS = ("node", "rack", "pod", "cluster")
"""Failure domains a correlated failure takes down whole."""
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Component:
    """One kind of hardware failure: its rate per unit and what it costs to mend.

    `per_day`: failures per unit per day (mean time between failures of one unit is
    1/per_day days). `shape`: Weibull shape of a unit's inter-failure times (1:
    exponential). A failure is noticed `detect_s` after it happens; a technician then
    mends it in `repair_s` on average (exponential) or exactly (`repair_fixed`). With
    probability `correlated` it takes down its whole `domain` instead of its own node.
    The smallest thing schedlab takes out of service is a node: a GPU-level failure
    downs its node until mended.
    """

    name: str
    unit: str = "node"
    per_day: float = 0.0
    shape: float = 1.0
    detect_s: float = 0.0
    repair_s: float = 3600.0
    repair_fixed: bool = False
    correlated: float = 0.0
    domain: str = "rack"


@dataclass(frozen=True, slots=True)
class Software:
    """A job-level software failure: the job's attempt fails, its nodes stay up.

    Rate per job-hour of running, plus per GPU-hour (so large jobs fail more often).
    """

    name: str
    per_job_hour: float = 0.0
    per_gpu_hour: float = 0.0


@dataclass(frozen=True, slots=True)
class Maintenance:
    """A planned window: the nodes under `target` go down at `start_s` for `duration_s`.

    `target`: a node, rack or other cell name, or `all`. `every_s` > 0 repeats it.
    `drain_s` > 0 drains the nodes that long before (no new placement; running jobs
    run on until the window or their end).
    """

    start_s: float
    duration_s: float
    target: str = "all"
    every_s: float = 0.0
    drain_s: float = 0.0


@dataclass(frozen=True, slots=True)
class FailureModel:
    """Every failure process of a run, and where its numbers come from."""

    name: str
    components: tuple[Component, ...] = ()
    software: tuple[Software, ...] = ()
    maintenance: tuple[Maintenance, ...] = ()
    pod_racks: int = 8  # racks per pod, for domain: pod (consecutive racks)
    source: str = ""

    def job_rate_per_hour(self, num_gpus: int, gpus_per_node: int, nodes_per_rack: int
                          ) -> float:
        """Expected interruptions per hour of a job of `num_gpus` GPUs (packed nodes).

        The sum over components of rate x units the job spans (GPUs, nodes, racks;
        Weibull by its mean rate), correlated failures of a domain the job does not span
        ignored (they are rare); plus software. Used for `checkpoint_interval=auto`.
        """
        nodes = max(1, math.ceil(num_gpus / max(1, gpus_per_node)))
        racks = max(1, math.ceil(nodes / nodes_per_rack)) if nodes_per_rack > 0 else 1
        span = {"gpu": max(num_gpus, 1), "node": nodes, "rack": racks}
        rate = sum(c.per_day * span[c.unit] for c in self.components) / 24.0
        rate += sum(s.per_job_hour + s.per_gpu_hour * num_gpus for s in self.software)
        return rate


def _num(where: str, field: str, v: Any, lo: float = 0.0, lo_open: bool = False) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = math.nan
    if not (x > lo if lo_open else x >= lo) or not math.isfinite(x):
        raise InvalidParameter(f"{where}: {field} {v!r} must be a number "
                               f"{'>' if lo_open else '>='} {lo:g}")
    return x


def _fields(where: str, row: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise InvalidParameter(f"{where}: expected a mapping, got {row!r}")
    bad = sorted(set(row) - set(allowed))
    if bad:
        raise InvalidParameter(f"{where}: unknown field {bad[0]!r}; allowed: "
                               f"{', '.join(allowed)}")
    return dict(row)


def model_from_dict(data: Mapping[str, Any], where: str) -> FailureModel:
    """A FailureModel from the parsed rates file (docs/failures.md); errors name the field."""
    top = _fields(where, data, ("name", "source", "pod_racks", "components", "software",
                                "maintenance"))
    comps = []
    for i, row in enumerate(top.get("components") or []):
        w = f"{where}, components[{i}]"
        r = _fields(w, row, Component.__slots__)
        if not r.get("name"):
            raise InvalidParameter(f"{w}: name missing")
        unit = str(r.get("unit", "node"))
        if unit not in UNITS:
            raise InvalidParameter(f"{w}: unit {unit!r}; allowed: {', '.join(UNITS)}")
        domain = str(r.get("domain", "rack"))
        if domain not in DOMAINS:
            raise InvalidParameter(f"{w}: domain {domain!r}; allowed: {', '.join(DOMAINS)}")
        p = _num(w, "correlated", r.get("correlated", 0.0))
        if p > 1:
            raise InvalidParameter(f"{w}: correlated {p:g} must be a probability 0..1")
        comps.append(Component(
            str(r["name"]), unit, _num(w, "per_day", r.get("per_day", 0.0)),
            _num(w, "shape", r.get("shape", 1.0), lo_open=True),
            _num(w, "detect_s", r.get("detect_s", 0.0)),
            _num(w, "repair_s", r.get("repair_s", 3600.0), lo_open=True),
            bool(r.get("repair_fixed", False)), p, domain))
    soft = []
    for i, row in enumerate(top.get("software") or []):
        w = f"{where}, software[{i}]"
        r = _fields(w, row, Software.__slots__)
        if not r.get("name"):
            raise InvalidParameter(f"{w}: name missing")
        soft.append(Software(str(r["name"]), _num(w, "per_job_hour", r.get("per_job_hour", 0)),
                             _num(w, "per_gpu_hour", r.get("per_gpu_hour", 0))))
    maint = []
    for i, row in enumerate(top.get("maintenance") or []):
        w = f"{where}, maintenance[{i}]"
        r = _fields(w, row, Maintenance.__slots__)
        maint.append(Maintenance(_num(w, "start_s", r.get("start_s", 0.0)),
                                 _num(w, "duration_s", r.get("duration_s"), lo_open=True),
                                 str(r.get("target", "all")),
                                 _num(w, "every_s", r.get("every_s", 0.0)),
                                 _num(w, "drain_s", r.get("drain_s", 0.0))))
    pod = int(_num(where, "pod_racks", top.get("pod_racks", 8), lo=1))
    return FailureModel(str(top.get("name") or Path(where).stem), tuple(comps), tuple(soft),
                        tuple(maint), pod, str(top.get("source", "")))


def read_model(path: str | Path) -> FailureModel:
    """A rates file: YAML (.yaml/.yml) or JSON (.json)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidParameter(f"failure model {str(path)!r}: no such file, and not a "
                               "registered failure model name")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as e:  # a parse error of either format
        raise InvalidParameter(f"failure model file {p}: cannot parse ({e})") from None
    return model_from_dict(data or {}, str(p))


# --- presets -------------------------------------------------------------------------

_LLAMA3_GPUS = 16384
_LLAMA3_NODES = 2048
_LLAMA3_DAYS = 54.0
# Llama 3 (Dubey et al., "The Llama 3 Herd of Models", 2024, Table 5): root causes of the
# 419 unexpected interruptions of a 54-day snapshot of pre-training on 16,384 H100 GPUs
# (2,048 nodes of 8). (unit, count); counts add up to 419. The paper's share for Faulty
# GPU reads 30.1%, but 148/419 is 35.3%: we take the counts.
LLAMA3_TABLE: tuple[tuple[str, str, int], ...] = (
    ("faulty_gpu", "gpu", 148),
    ("gpu_hbm3", "gpu", 72),
    ("software_bug", "software", 54),
    ("network_switch_cable", "node", 35),
    ("host_maintenance", "node", 32),
    ("gpu_sram", "gpu", 19),
    ("gpu_system_processor", "gpu", 17),
    ("nic", "node", 7),
    ("nccl_watchdog", "software", 7),
    ("silent_data_corruption", "gpu", 6),
    ("gpu_thermal", "gpu", 6),
    ("ssd", "node", 3),
    ("power_supply", "node", 3),
    ("server_chassis", "node", 2),
    ("io_expansion_board", "node", 2),
    ("dependency", "software", 2),
    ("cpu", "node", 2),
    ("system_memory", "node", 2),
)


def llama3() -> FailureModel:
    """Llama 3's interruption table as rates per GPU-day, node-day and GPU-hour.

    Each count over the 54 days and the units of its kind on 16,384 GPUs (a GPU-level
    cause per GPU, a host or network cause per node: the report does not say which
    switch or cable, so one per node; software per GPU-hour of the job). Detection and
    repair times are ours: 10 min to detect and restart-decide (the report automates
    most restarts), 1 day to swap a GPU/host part (not given by the report).
    """
    comps = []
    soft = []
    for name, unit, n in LLAMA3_TABLE:
        if unit == "software":
            soft.append(Software(name, per_gpu_hour=n / (_LLAMA3_GPUS * _LLAMA3_DAYS * 24)))
        else:
            units = _LLAMA3_GPUS if unit == "gpu" else _LLAMA3_NODES
            comps.append(Component(name, unit, n / (units * _LLAMA3_DAYS), detect_s=600.0,
                                   repair_s=DAY))
    return FailureModel("llama3", tuple(comps), tuple(soft),
                        source="Llama 3 Herd of Models (2024), Table 5: 419 unexpected "
                               "interruptions in 54 days on 16,384 H100")


def _meta(name: str, per_1000_node_days: float, cluster: str) -> FailureModel:
    return FailureModel(
        name, (Component("node", "node", per_1000_node_days / 1000.0, detect_s=300.0,
                         repair_s=DAY),),
        source=f"Kokolis et al., Revisiting Reliability in Large-Scale ML Research Clusters "
               f"(HPCA 2025, arXiv:2410.21680): {cluster} failure rate "
               f"{per_1000_node_days} per 1000 node-days")


def meta_rsc1() -> FailureModel:
    """Meta RSC-1 (16k A100): 6.50 job-interrupting failures per 1000 node-days.

    The paper's fitted rate; it projects a 16,384-GPU job's MTTF at about 1.8 h, which
    this rate reproduces (1 / (2048 x 6.5e-3) day). Detection 5 min, repair 1 day: ours.
    """
    return _meta("meta-rsc1", 6.50, "RSC-1")


def meta_rsc2() -> FailureModel:
    """Meta RSC-2 (8k A100): 2.34 failures per 1000 node-days (same paper)."""
    return _meta("meta-rsc2", 2.34, "RSC-2")

