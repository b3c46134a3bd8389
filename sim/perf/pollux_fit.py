"""Pollux's analytic goodput model as a performance model: fitted parameters, no profiles.

A YAML (or JSON) file describes each model by the numbers Pollux's agent fits
(OSDI'21 sec. 3-4; adaptdl `goodput.py`): seven step-time parameters (compute alpha_c +
beta_c x atomic batch; all-reduce alpha_n/beta_n across nodes, alpha_r/beta_r within
one; overlap gamma), optionally per GPU type, and the gradient statistics (squared
gradient norm `sqr`, per-sample variance `var`) that set the statistical efficiency,
piecewise constant in the job's progress. Goodput = throughput x efficiency at the
global batch size; an adaptive job takes Pollux's `optimize` choice for its placement
(candidates, local-batch bounds, accumulation as Pollux's agent), a fixed one splits its
batch as Pollux's simulator does. Work is in samples at the initial batch size's
efficiency, as the `pollux` backend counts it. File format: docs/perf-models.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.base import SAMPLES, Shape, TableModel
from schedlab.sim.perf.pollux_goodput import (
    GoodputModel,
    GradParams,
    PerfParams,
    cap_atomic_bsz,
    split_batch,
)

_PERF_KEYS = ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma")
_MODEL_KEYS = frozenset({"perf_params", "gradient", "init_batch_size", "max_batch_size",
                         "local_bsz_bounds", "accumulation", "work", "restart_cost"})


@dataclass(frozen=True)
class FitModel:
    """One model: step-time parameters (by GPU type, '' for any), gradient segments."""

    perf: Mapping[str, PerfParams]
    starts: tuple[float, ...]  # progress (samples) where each gradient segment begins
    grads: tuple[GradParams, ...]
    init_batch_size: int
    max_batch_size: int
    min_local_bsz: int
    max_local_bsz: int
    accumulation: bool
    work: float | None
    restart_cost: float | None

    def segment(self, progress: float) -> int:
        """Index of the gradient segment in effect at `progress` samples."""
        k = 0
        for i, s in enumerate(self.starts):
            if s <= progress:
                k = i
        return k

    def params(self, gpu_type: str) -> PerfParams | None:
        """Step-time parameters on a GPU type (the type-free entry if any)."""
        return self.perf.get(gpu_type, self.perf.get(""))


def _num(where: str, key: str, value: Any, lo: float = 0.0, strict: bool = True) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameter(f"{where}: {key} = {value!r} is not a number") from None
    if not math.isfinite(v) or v < lo or (strict and v == lo):
        raise InvalidParameter(f"{where}: {key} = {value!r}; allowed: a finite number "
                               f"{'>' if strict else '>='} {lo:g}")
    return v


def _perf(where: str, value: Any) -> PerfParams:
    if isinstance(value, Mapping):
        missing = [k for k in _PERF_KEYS if k not in value]
        if missing:
            raise InvalidParameter(f"{where}: perf_params lacks {', '.join(missing)}")
        vals = [value[k] for k in _PERF_KEYS]
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 7:
        vals = list(value)
    else:
        raise InvalidParameter(f"{where}: perf_params = {value!r}; allowed: 7 numbers "
                               f"({', '.join(_PERF_KEYS)}) as a list or a mapping")
    nums = [_num(where, k, v, strict=False) for k, v in zip(_PERF_KEYS, vals, strict=True)]
    if not 1.0 <= nums[6] <= 10.0:
        raise InvalidParameter(f"{where}: gamma = {nums[6]:g}; allowed: 1 to 10")
    return PerfParams.from_array(nums)


def parse_model(where: str, spec: Any) -> FitModel:
    """One model's entry of the file (bad fields named with their value)."""
    if not isinstance(spec, Mapping):
        raise InvalidParameter(f"{where}: a mapping of fields expected, got {spec!r}")
    unknown = sorted(set(spec) - _MODEL_KEYS)
    if unknown:
        raise InvalidParameter(f"{where}: unknown field {unknown[0]!r}; allowed: "
                               f"{', '.join(sorted(_MODEL_KEYS))}")
    for key in ("perf_params", "gradient", "init_batch_size"):
        if key not in spec:
            raise InvalidParameter(f"{where}: {key} is required")
    raw = spec["perf_params"]
    if isinstance(raw, Mapping) and not set(raw) & set(_PERF_KEYS):
        perf = {str(t): _perf(f"{where}.perf_params.{t}", v) for t, v in raw.items()}
    else:
        perf = {"": _perf(f"{where}.perf_params", raw)}
    grad = spec["gradient"]
    rows = [grad] if isinstance(grad, Mapping) else grad
    if not isinstance(rows, Sequence) or not rows:
        raise InvalidParameter(f"{where}: gradient = {grad!r}; allowed: {{sqr, var}} or a "
                               "list of {from, sqr, var} (from: samples done)")
    starts: list[float] = []
    grads: list[GradParams] = []
    for i, r in enumerate(rows):
        w = f"{where}.gradient[{i}]"
        if not isinstance(r, Mapping) or "sqr" not in r or "var" not in r:
            raise InvalidParameter(f"{w}: {r!r}; allowed: {{from, sqr, var}}")
        start = _num(w, "from", r.get("from", 0.0), strict=False)
        if starts and start <= starts[-1]:
            raise InvalidParameter(f"{w}: from = {start:g} is not after {starts[-1]:g}")
        starts.append(start)
        grads.append(GradParams(_num(w, "sqr", r["sqr"], strict=False),
                                _num(w, "var", r["var"], strict=False)))
    if starts[0] != 0.0:
        raise InvalidParameter(f"{where}.gradient[0]: from = {starts[0]:g}; the first "
                               "segment starts at 0")
    init = int(_num(where, "init_batch_size", spec["init_batch_size"], lo=1, strict=False))
    top = int(_num(where, "max_batch_size", spec.get("max_batch_size", init), lo=init,
                   strict=False))
    bounds = spec.get("local_bsz_bounds", [1, top])
    if not isinstance(bounds, Sequence) or len(bounds) != 2:
        raise InvalidParameter(f"{where}: local_bsz_bounds = {bounds!r}; allowed: [min, max]")
    lo_b = int(_num(where, "local_bsz_bounds[0]", bounds[0], lo=1, strict=False))
    hi_b = int(_num(where, "local_bsz_bounds[1]", bounds[1], lo=lo_b, strict=False))
    work = spec.get("work")
    cost = spec.get("restart_cost")
    return FitModel(
        perf=perf, starts=tuple(starts), grads=tuple(grads), init_batch_size=init,
        max_batch_size=top, min_local_bsz=lo_b, max_local_bsz=hi_b,
        accumulation=bool(spec.get("accumulation", True)),
        work=None if work is None else _num(where, "work", work),
        restart_cost=None if cost is None else _num(where, "restart_cost", cost,
                                                    strict=False))


def load_file(path: Path) -> dict[str, FitModel]:
    """The models of a file (YAML or JSON): `models: {name: {...}}`."""
    where = f"perf_model pollux-fit={path}"
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidParameter(f"{where}: cannot read ({e.strerror})") from None
    try:
        if path.suffix == ".json":
            doc = json.loads(text)
        else:
            import yaml

            doc = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - any parse error is the file's
        raise InvalidParameter(f"{where}: not valid {path.suffix[1:] or 'YAML'}: "
                               f"{str(e).splitlines()[0]}") from None
    models = doc.get("models") if isinstance(doc, Mapping) else None
    if not isinstance(models, Mapping) or not models:
        raise InvalidParameter(f"{where}: a top-level 'models' mapping (name -> fields) "
                               "is required")
    return {str(k): parse_model(f"{where}: models.{k}", v) for k, v in models.items()}


class PolluxFitModels(TableModel):
    """Goodput from Pollux's fitted step-time and gradient parameters, per model."""

    name = "pollux-fit"

    def __init__(self, path: str | Path) -> None:
        self._m = load_file(Path(path))
        self._memo: dict[tuple[Any, ...], int] = {}

    def model(self, name: str) -> FitModel:
        """The model's parameters."""
        return self._m[name]

    def models(self) -> Collection[str]:
        """The file's model names."""
        return self._m.keys()

    def units(self, model: str) -> str:
        """Samples (at the initial batch size's efficiency)."""
        return SAMPLES

    def restart_cost(self, model: str) -> float | None:
        """The model's `restart_cost` (None: the run's `restore_overhead`)."""
        return self._m[model].restart_cost

    def default_work(self, model: str) -> float | None:
        """The model's `work` (samples), if given."""
        return self._m[model].work

    def default_batch(self, model: str) -> int | None:
        """The initial batch size."""
        return self._m[model].init_batch_size

    def _goodput_model(self, m: FitModel, shape: Shape, progress: float
                       ) -> GoodputModel | None:
        perf = m.params(shape.gpu_type)
        if perf is None:
            return None
        return GoodputModel(perf, m.grads[m.segment(progress)], m.init_batch_size)

    def _split(self, m: FitModel, replicas: int, batch: int) -> tuple[int, int]:
        if m.accumulation:
            atomic, accum = split_batch(batch, replicas, m.init_batch_size, m.max_local_bsz)
        else:
            atomic, accum = math.ceil(batch / replicas), 0
        return cap_atomic_bsz(atomic, accum, replicas, m.max_batch_size), accum

    def _configured(self, model: str, shape: Shape, batch_size: int | None,
                    progress: float) -> tuple[GoodputModel, int, int] | None:
        """The goodput model and (atomic batch, accumulation steps) of a global batch.

        On `shape`, the initial batch if None; None when it cannot run so.
        """
        m = self._m[model]
        gm = self._goodput_model(m, shape, progress)
        if gm is None or shape.num_gpus <= 0:
            return None
        atomic, accum = self._split(m, shape.num_gpus, batch_size or m.init_batch_size)
        return None if atomic <= 0 else (gm, atomic, accum)

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """Samples/s at a fixed global batch (the initial one if None).

        0 on a GPU type the model has no parameters for.
        """
        got = self._configured(model, shape, batch_size, 0.0)
        if got is None:
            return 0.0
        gm, atomic, accum = got
        return float(gm.throughput(shape.num_nodes, shape.num_gpus, atomic, accum))

    def goodput(self, model: str, shape: Shape, batch_size: int | None,
                progress: float) -> float:
        """Samples/s x statistical efficiency at `progress` samples done."""
        got = self._configured(model, shape, batch_size, progress)
        if got is None:
            return 0.0
        gm, atomic, accum = got
        return float(gm.goodput(shape.num_nodes, shape.num_gpus, atomic, accum))

    def best_batch(self, model: str, shape: Shape, batch_size: int | None,
                   progress: float) -> int | None:
        """Pollux's `optimize` choice for the placement and gradient segment."""
        m = self._m[model]
        seg = m.segment(progress)
        key = (model, shape.gpu_type, shape.num_nodes, shape.num_gpus, seg)
        got = self._memo.get(key)
        if got is not None:
            return got
        gm = self._goodput_model(m, shape, progress)
        if gm is None or shape.num_gpus <= 0:
            return batch_size
        choice = gm.optimize(shape.num_nodes, shape.num_gpus, m.max_batch_size,
                             m.min_local_bsz, m.max_local_bsz, m.accumulation)
        best = choice.batch_size if choice.goodput > 0 else (batch_size or m.init_batch_size)
        self._memo[key] = best
        return best

    def horizon(self, model: str, batch_size: int | None, progress: float) -> float:
        """The next gradient segment's start (samples), inf after the last."""
        m = self._m[model]
        later = [s for s in m.starts if s > progress]
        return later[0] if later else math.inf

    def max_gpus(self, model: str, batch_size: int | None, adaptive: bool) -> int | None:
        """Most GPUs at `min_local_bsz` each (as the `pollux` backend)."""
        m = self._m[model]
        batch = m.max_batch_size if adaptive else (batch_size or m.init_batch_size)
        return max(1, int(batch // m.min_local_bsz))
