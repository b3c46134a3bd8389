"""The failure layer of a run: its failure model, checkpoint plan, statistics, software failures.

Built once per run from the engine parameters (`failure_model`, `checkpoint_cost`,
`checkpoint_interval`); None when none of them is set, so a run without them takes the
engine's plain paths (the `mtbf`/`mttr` node process, free checkpoints) unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.failure_ckpt import CheckpointPlan
from schedlab.sim.failure_models import FailureModel, read_model
from schedlab.sim.failure_stats import AttemptStats
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Level
from schedlab.sim.registry import FAILURE_MODELS
from schedlab.topologies.tree import Topology


def resolve_model(name: str) -> FailureModel:
    """A registered preset, a 'module:function', or a YAML/JSON rates file."""
    if name.lower().endswith((".yaml", ".yml", ".json")) and Path(name).is_file():
        return read_model(name)
    got = FAILURE_MODELS.get(name)
    model = got() if callable(got) and not isinstance(got, FailureModel) else got
    if not isinstance(model, FailureModel):
        raise InvalidParameter(f"failure model {name!r}: gave {type(model).__name__}, "
                               "expected a FailureModel")
    return model


def topology_shape(topo: Topology) -> tuple[int, int]:
    """(GPUs per node, nodes per rack) of the largest node and rack (0: no racks)."""
    gpn = max((n.num_gpus for n in topo.nodes), default=1)
    racks = [c for c in topo.cells if c.level == Level.RACK]
    npr = max((len({topo.gpu_node[g] for g in range(c.gpu_lo, c.gpu_hi)}) for c in racks),
              default=0)
    return max(1, gpn), npr


class FailureLayer:
    """What the engine's failure paths ask of the failure layer."""

    def __init__(self, model: FailureModel | None, plan: CheckpointPlan | None,
                 topo: Topology, params: Mapping[str, Any]) -> None:
        self.model = model
        self.plan = plan
        self.stats = AttemptStats()
        self.software = model.software if model is not None else ()
        self.gpn, self.npr = topology_shape(topo)
        self.mtbf = params["mtbf"]
        self.failure_rate = float(params["failure_rate"])
        self._soft: dict[int, float] = {}  # software failures per hour, by job size

    def job_rate(self, num_gpus: int) -> float:
        """Expected failures per hour of a job of `num_gpus` GPUs, from every source."""
        rate = self.failure_rate
        if self.model is not None:
            rate += self.model.job_rate_per_hour(num_gpus, self.gpn, self.npr)
        if self.mtbf:
            rate += math.ceil(max(num_gpus, 1) / self.gpn) * 3600.0 / self.mtbf
        return rate

    def software_failure(self, job: JobState, rng: np.random.Generator) -> tuple[float, str]:
        """(run time of the attempt's software failure, its cause), drawn; inf: none."""
        n = job.spec.num_gpus
        rate = self._soft.get(n)
        if rate is None:
            rate = self._soft[n] = sum(s.per_job_hour + s.per_gpu_hour * n
                                       for s in self.software)
        if rate <= 0:
            return math.inf, ""
        t = float(rng.exponential(3600.0 / rate))
        pick = float(rng.random()) * rate
        for s in self.software:
            pick -= s.per_job_hour + s.per_gpu_hour * n
            if pick < 0:
                return t, s.name
        return t, self.software[-1].name


def build_layer(params: Mapping[str, Any], topo: Topology) -> FailureLayer | None:
    """The run's failure layer, or None when no failure-layer parameter is set."""
    name = params["failure_model"]
    interval, cost = params["checkpoint_interval"], float(params["checkpoint_cost"])
    ckpt = cost > 0 or interval is not None
    if name is None:
        for key in ("spare_nodes", "technicians"):
            if params[key]:
                raise InvalidParameter(f"{key}={params[key]} needs a failure_model (spares "
                                       "and technicians serve its failures)")
    if name is None and not ckpt:
        return None
    if name is not None and (params["mtbf"] or params["failures"]):
        raise InvalidParameter(
            f"failure_model {name!r} with {'mtbf' if params['mtbf'] else 'failures'}: the "
            "failure model replaces the node failure process; give one of them")
    if interval == "auto" and cost <= 0:
        raise InvalidParameter("checkpoint_interval=auto needs checkpoint_cost > 0 (Daly's "
                               "interval is sqrt(2 x cost x MTBF))")
    model = resolve_model(name) if name is not None else None
    layer = FailureLayer(model, None, topo, params)
    if ckpt:
        layer.plan = CheckpointPlan(interval, cost, layer.job_rate)
    return layer
