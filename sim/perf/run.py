"""The performance models of one run: which backend answers for a job, and its work.

`perf_model` (engine parameter) names the backends, each `NAME=PATH` (a registered
backend or 'module:Class', built with the path) or a bare path whose kind is told from
the file (`*.json`: gavel, `*.csv`: table, a folder: pollux). A job's `model` is looked
up in them in order. Its work (`num_steps` or `samples`, or the model's own when it
gives neither) becomes `duration`: the work over its goodput alone on `num_gpus`
consolidated GPUs of its type at its initial batch size (the reference). The engine then
runs it at goodput(where it runs) / reference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from schedlab.sim.compact import record
from schedlab.sim.errors import InvalidParameter, InvalidTrace
from schedlab.sim.model import PLAIN_REST, JobSpec
from schedlab.sim.perf.base import SAMPLES, STEPS, PerfModel, Shape
from schedlab.sim.registry import PERF_MODELS


def parse_perf_model(v: Any) -> tuple[tuple[str, str], ...]:
    """`NAME=PATH` or `PATH` entries, comma-separated (or a list) -> ((name, path), ...)."""
    items = v if isinstance(v, list | tuple) else str(v).split(",")
    out = []
    for item in items:
        if isinstance(item, list | tuple) and len(item) == 2:
            out.append((str(item[0]), str(item[1])))
            continue
        t = str(item).strip()
        if not t:
            continue
        name, eq, path = t.partition("=")
        if not eq:
            name, path = _kind_of(t), t
        name = name.strip()
        if name not in PERF_MODELS and ":" not in name:
            known = ", ".join(PERF_MODELS.names())
            raise ValueError(f"performance model {name!r} unknown; known: {known} "
                             "(or module:Class)")
        out.append((name, path.strip()))
    return tuple(out)


def _kind_of(path: str) -> str:
    p = Path(path)
    if p.suffix.lower() == ".json":
        return "gavel"
    if p.suffix.lower() == ".csv":
        return "table"
    if p.is_dir():
        return "pollux"
    raise ValueError(f"{path!r}: cannot tell the kind of performance model; write "
                     "NAME=PATH (NAME: " + ", ".join(PERF_MODELS.names()) + ")")


def build_models(entries: Sequence[tuple[str, str]]) -> tuple[PerfModel, ...]:
    """The backends of `perf_model`, built in order."""
    out = []
    for name, path in entries:
        cls = PERF_MODELS.get(name)
        if not Path(path).exists():
            raise InvalidParameter(f"perf_model {name}={path}: no such file or folder")
        out.append(cls(path))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class JobModel:
    """How one job's speed is answered: backend, model, initial batch size, reference.

    `ref` is the goodput (backend units per second) at rate 1; `work` is in those units.
    """

    backend: PerfModel
    model: str
    batch_size: int | None
    adaptive: bool
    ref_type: str
    ref: float
    work: float  # in the backend's units

    def batch_for(self, shape: Shape, progress: float) -> int | None:
        """The batch size it runs with on `shape` at `progress`.

        An adaptive job's best there (the backend's choice), else its own.
        """
        if self.adaptive:
            return self.backend.best_batch(self.model, shape, self.batch_size, progress)
        return self.batch_size


class PerfSet:
    """The run's backends and, per job that names a model, its `JobModel`."""

    def __init__(self, models: Sequence[PerfModel], per_node: int,
                 types: Sequence[str] = (), adaptive: bool = True,
                 agent: str = "oracle") -> None:
        self.models = tuple(models)
        self.per_node = max(1, per_node)
        self.types = tuple(types)
        self.adaptive = adaptive  # the run lets `adaptive` jobs re-tune (adaptive_batch)
        self.agent = agent  # perf_agent: oracle, or fitted (sim/perf/agent.py)
        self.jobs: dict[str, JobModel] = {}

    def backend(self, spec: JobSpec) -> PerfModel:
        """The first backend that knows the job's model, or an error naming it."""
        for m in self.models:
            if spec.model in m.models():
                return m
        if not self.models:
            raise InvalidParameter(
                f"job {spec.job_id!r} names model {spec.model!r} but the run has no "
                "performance model: give --param perf_model=PATH (see docs/perf-models.md)")
        known = sorted({x for m in self.models for x in m.models()})
        shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        raise InvalidParameter(f"job {spec.job_id!r}: model {spec.model!r} is in no "
                               f"performance model of the run; known: {shown}")

    def resolve(self, spec: JobSpec, default_type: str) -> JobSpec:
        """The spec with its `duration` from its work, and its `JobModel` kept."""
        b = self.backend(spec)
        unit = b.units(spec.model)
        bsz = spec.batch_size if spec.batch_size is not None else b.default_batch(spec.model)
        ref_type = spec.gpu_type or b.reference_type(spec.model) or default_type
        shape = Shape.packed(ref_type, max(1, spec.num_gpus), self.per_node)
        adaptive = spec.adaptive and self.adaptive
        # an adaptive job's reference runs the batch it would pick there
        at = b.best_batch(spec.model, shape, bsz, 0.0) if adaptive else bsz
        ref = b.goodput(spec.model, shape, at, 0.0)
        if not (ref > 0 and math.isfinite(ref)):
            raise InvalidParameter(
                f"job {spec.job_id!r}: model {spec.model!r} has no throughput on "
                f"{max(1, spec.num_gpus)} {ref_type} GPU(s) in {b.name}; give a size and "
                "GPU type the model was measured on")
        if math.isfinite(spec.duration):  # given: it wins, the work is what it takes
            work, out = spec.duration * ref, spec
        else:
            work = _work(spec, b, unit, bsz)
            out = replace(spec, duration=work / ref)
        if not spec.gpu_speeds and len(self.types) > 1:
            # what placers and type-aware policies read: the model's speed on each type
            # (a type it cannot run on: 1e-9, so it goes there last)
            n = max(1, spec.num_gpus)
            out = replace(out, gpu_speeds=tuple(
                (t, max(1e-9, b.goodput(spec.model, Shape.packed(t, n, self.per_node), bsz,
                                        0.0) / ref)) for t in self.types))
        self.jobs[spec.job_id] = JobModel(b, spec.model, bsz, adaptive, ref_type, ref, work)
        return out


def _work(spec: JobSpec, b: PerfModel, unit: str, bsz: int | None) -> float:
    if spec.num_steps is None and spec.samples is None:
        w = b.default_work(spec.model)
        if w is None:
            raise InvalidTrace(f"job {spec.job_id!r}: model {spec.model!r} has no work of "
                               "its own; give num_steps, samples or duration")
        return w
    given, have = ((spec.num_steps, STEPS) if spec.num_steps is not None
                   else (spec.samples, SAMPLES))
    assert given is not None
    if have == unit:
        return given
    if not bsz:
        raise InvalidTrace(f"job {spec.job_id!r}: work in {have} but model {spec.model!r} "
                           f"counts {unit}: give batch_size to convert")
    return given * bsz if have == STEPS else given / bsz


def resolve_jobs(jobs: Sequence[JobSpec], params: Mapping[str, Any], topo: Any
                 ) -> tuple[tuple[JobSpec, ...], PerfSet | None]:
    """Specs with their durations from the run's performance models.

    None for the models when the run has none: then jobs that name a model but give a
    `duration` run on it and the speed factors, as jobs without one do.
    """
    entries = params.get("perf_model") or ()
    # a plain spec (every rare field at its default, `model` one of them) is skipped by an
    # identity test: a trace of a million plain jobs pays one pass of them, no property
    named = [j for j in jobs if record(j) is not PLAIN_REST and j.model]
    if not entries or not named:
        for j in named:
            if not math.isfinite(j.duration):
                PerfSet((), 1).backend(j)  # raises: names the job, asks for perf_model
        return tuple(jobs), None
    per_node = max((n.num_gpus for n in topo.nodes), default=1)
    types = sorted({n.gpu_type for n in topo.nodes if n.num_gpus})
    perf = PerfSet(build_models(entries), per_node, types,
                   adaptive=bool(params.get("adaptive_batch", True)),
                   agent=str(params.get("perf_agent", "oracle")))
    default_type = types[0] if types else ""
    return tuple(perf.resolve(j, default_type) if j.model else j for j in jobs), perf
