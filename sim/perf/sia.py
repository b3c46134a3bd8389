"""Sia's per-GPU-type profiles as a performance model (SOSP'23 artifact, `sia-simulator`).

Layout (the folder Sia's `applications.py` reads): one sub-folder per model holding
`placements-<type>.csv` (placement,local_bsz,step_time,sync_time; a placement is the GPUs
per node as digits, `22` = 2 nodes of 2), `scalability-<type>.csv`
(num_nodes,num_replicas,local_bsz,step_time,sync_time) and `validation-<bsz>.csv`
(progress,iteration,metric,grad_sqr,grad_var per epoch). GPU types are the file suffixes
(`aws`, `rtx`, `dgx-ext`, ...), matched case-insensitively.

Answers as Sia's simulator computes its *true* goodput (`job.py` `step`): the iteration
time of a placement comes from `placements` (linear in the per-GPU batch) or, for a
placement never measured, from a linear interpolation over (nodes, GPUs, per-GPU batch)
of all profiles; the batch is split into per-GPU batch and gradient accumulation as
Sia's `update_local_bsz` does; statistical efficiency is Pollux's gain
(var + sqr) / (var / scale + sqr) from the gradient statistics of the current epoch, and
every answer is scaled by Sia's calibration slowdown of the model. Work is counted in
Sia's progress units (steps at the model's initial batch size); a job is done after the
model's epochs (Sia's `max_epochs`). An adaptive job's batch size is the goodput-optimal
one over the profiled per-GPU batches and accumulation steps (an oracle: Sia picks it
with Pollux's model fitted online, which converges to it).
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.base import STEPS, Shape, TableModel

MAX_EPOCHS = {"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80,
              "yolov3": 50}
"""Epochs a job of the model trains (Sia's `applications.py`; others: the shortest
validation file)."""
RESCALE_TIME = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0,
                "imagenet": 250.0, "ncf": 15.0}
"""Seconds without progress at each (re)start (Sia's `rescale_time`; others 30)."""
SLOWDOWN = {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2,
            "ncf": 1.5, "gpt_pmp": 1.0}
"""Sia's calibration to its physical cluster: goodput is divided by it (others 1)."""
CALIBRATE_TYPE = "rtx"
"""Sia's reference GPU type (`calibrate_cluster`), when the model has it."""
MAX_ACCUM = 15
"""Accumulation steps an adaptive job may take at most (schedlab's bound on the search)."""


@dataclass(frozen=True)
class _Validation:
    bsz: int
    progress: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray


class _TypeProfile:
    """One model's step and sync times on one GPU type."""

    def __init__(self, placements: list[tuple[str, int, float, float]],
                 scal: list[tuple[int, int, int, float, float]]) -> None:
        by: dict[int, dict[int, list[tuple[float, float]]]] = {}
        self.rows: list[tuple[int, int, int, float, float]] = []
        self.max_by_replicas: dict[int, int] = {}
        for pl, local, step, sync in placements:
            by.setdefault(int(pl), {}).setdefault(local, []).append((step, sync))
            counts = [int(c) for c in pl]
            r = sum(counts)
            self.rows.append((len(counts), r, local, step, sync))
            self.max_by_replicas[r] = max(self.max_by_replicas.get(r, 0), local)
        self.placements = {
            pid: (np.array(sorted(d), dtype=float),
                  np.array([sum(v[0] for v in d[k]) / len(d[k]) for k in sorted(d)]),
                  np.array([sum(v[1] for v in d[k]) / len(d[k]) for k in sorted(d)]))
            for pid, d in by.items()}
        self.scal = scal
        locals_ = [r[1] for r in placements]
        self.min_local = min(locals_) if locals_ else 1
        self.max_local = max(locals_) if locals_ else 1
        self.locals = sorted({r[1] for r in placements} | {r[2] for r in scal})
        self._nd: object | None = None

    def _interp(self) -> object:
        if self._nd is None:
            from scipy.interpolate import LinearNDInterpolator
            grouped: dict[tuple[int, int, int], list[tuple[float, float]]] = {}
            for n, r, loc, st, sy in self.rows:
                grouped.setdefault((n, r, loc), []).append((st, sy))
            xs = [k for k in grouped]
            ys = [tuple(np.mean(np.array(v), axis=0)) for v in grouped.values()]
            xs += [(n, r, loc) for n, r, loc, _, _ in self.scal]
            ys += [(st, sy) for _, _, _, st, sy in self.scal]
            self._nd = LinearNDInterpolator(np.array(xs, dtype=float), np.array(ys))
        return self._nd

    def step_sync(self, placement: tuple[int, ...], local: int) -> tuple[float, float] | None:
        """Step and sync time per iteration (None: outside what was measured)."""
        pid = _placement_id(placement)
        got = self.placements.get(pid)
        if got is not None:
            xs, st, sy = got
            if not xs[0] <= local <= xs[-1]:
                return None
            return float(np.interp(local, xs, st)), float(np.interp(local, xs, sy))
        if len(self.rows) + len(self.scal) < 4:
            return None
        try:
            out = self._interp()([min(len(placement), 16), sum(placement), local])  # type: ignore[operator]
        except ValueError:
            return None
        step, sync = (float(v) for v in np.asarray(out).reshape(-1)[:2])
        if not (math.isfinite(step) and math.isfinite(sync)) or step <= 0:
            return None
        return step, sync

    def max_local_for(self, placement: tuple[int, ...]) -> int:
        """Largest per-GPU batch measured for the placement (Sia's `get_max_local_bsz`)."""
        got = self.placements.get(_placement_id(placement))
        if got is not None:
            return int(got[0][-1])
        n, r = len(placement), sum(placement)
        cand = [loc for sn, sr, loc, _, _ in self.scal if sn >= n and sr >= r]
        return max(cand) if cand else self.max_local


def _placement_id(placement: tuple[int, ...]) -> int:
    """Sia's key: the lexicographically smallest rotation, digits joined."""
    p = tuple(c for c in placement if c)
    if not p:
        return 0
    rot = min(p[i:] + p[:i] for i in range(len(p)))
    return int("".join(map(str, rot)))


class _App:
    """One model: validation curves and per-type profiles."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        vals = []
        for f in sorted(folder.glob("validation-*.csv")):
            bsz = int(f.stem.rsplit("-", 1)[-1])
            rows = _rows(f, ("progress", "grad_sqr", "grad_var"))
            vals.append(_Validation(bsz, *(np.array([float(r[c]) for r in rows])
                                           for c in ("progress", "grad_sqr", "grad_var"))))
        if not vals:
            raise InvalidParameter(f"perf_model sia {folder}: no validation-<bsz>.csv")
        self.vals = sorted(vals, key=lambda v: v.bsz)
        self.types: dict[str, _TypeProfile] = {}
        for f in sorted(folder.glob("placements-*.csv")):
            t = f.stem.split("-", 1)[1].lower()
            pl = [(r["placement"].strip(), int(float(r["local_bsz"])), float(r["step_time"]),
                   float(r["sync_time"]))
                  for r in _rows(f, ("placement", "local_bsz", "step_time", "sync_time"))]
            sf = folder / f"scalability-{f.stem.split('-', 1)[1]}.csv"
            sc = [(int(float(r["num_nodes"])), int(float(r["num_replicas"])),
                   int(float(r["local_bsz"])), float(r["step_time"]), float(r["sync_time"]))
                  for r in (_rows(sf, ("num_nodes", "num_replicas", "local_bsz", "step_time",
                                       "sync_time")) if sf.exists() else [])]
            prof = _TypeProfile(pl, sc)
            if name == "deepspeech2" and t == "rtx":
                prof.max_local = 57  # Sia's memory limit of this model on rtx
            self.types[t] = prof
        if not self.types:
            raise InvalidParameter(f"perf_model sia {folder}: no placements-<type>.csv")
        self.init_bsz = self.vals[0].bsz
        self.max_bsz = self.vals[-1].bsz
        self.max_epochs = MAX_EPOCHS.get(name, min(len(v.progress) for v in self.vals))
        if any(len(v.progress) < self.max_epochs for v in self.vals):
            raise InvalidParameter(f"perf_model sia {folder}: validation files have fewer "
                                   f"than {self.max_epochs} epochs")
        # get_progress(e): progress at the start of epoch e (min over the batch sizes)
        self.bounds = np.array([0.0] + [min(float(v.progress[e - 1]) for v in self.vals)
                                        for e in range(1, self.max_epochs + 1)])
        self.calib = 1.0 / SLOWDOWN.get(name, 1.0)

    def epoch(self, progress: float) -> int:
        """The epoch a job at `progress` is in (a bound reached within rounding: the next)."""
        p = progress + 1e-9 * max(1.0, abs(progress))
        e = int(np.searchsorted(self.bounds, p, side="right")) - 1
        return max(0, min(e, self.max_epochs - 1))

    def grad_stats(self, bsz: float, epoch: int) -> tuple[float, float]:
        """grad_sqr, grad_var interpolated between the validated batch sizes."""
        bsz = min(max(bsz, self.vals[0].bsz), self.vals[-1].bsz)
        lo = max((v for v in self.vals if v.bsz <= bsz), key=lambda v: v.bsz)
        hi = min((v for v in self.vals if v.bsz >= bsz), key=lambda v: v.bsz)
        if lo.bsz == hi.bsz:
            return float(lo.grad_sqr[epoch]), float(lo.grad_var[epoch])
        w = (bsz - lo.bsz) / (hi.bsz - lo.bsz)
        return (float((1 - w) * lo.grad_sqr[epoch] + w * hi.grad_sqr[epoch]),
                float((1 - w) * lo.grad_var[epoch] + w * hi.grad_var[epoch]))


def _rows(path: Path, need: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InvalidParameter(f"perf_model sia {path}: cannot be read: {exc}") from None
    missing = [c for c in need if rows and c not in rows[0]]
    if missing or not rows:
        raise InvalidParameter(f"perf_model sia {path}: needs columns {', '.join(need)} "
                               "and at least one row")
    return rows


class SiaProfiles(TableModel):
    """Goodput of Sia's models per GPU type, placement, batch size and progress."""

    name = "sia"

    def __init__(self, path: str | Path) -> None:
        root = Path(path)
        if not root.is_dir():
            raise InvalidParameter(f"perf_model sia={root}: expected a folder of model "
                                   "folders (Sia's sia-simulator/traces)")
        self.apps: dict[str, _App] = {}
        for d in sorted(root.iterdir()):
            if d.is_dir() and any(d.glob("placements-*.csv")) and any(
                    d.glob("validation-*.csv")):
                try:
                    self.apps[d.name] = _App(d.name, d)
                except (KeyError, ValueError) as exc:
                    raise InvalidParameter(f"perf_model sia {d}: bad profile: {exc}") from None
        if not self.apps:
            raise InvalidParameter(f"perf_model sia={root}: no model folder with "
                                   "placements-<type>.csv and validation-<bsz>.csv")

    def models(self) -> Collection[str]:
        """The model folders."""
        return self.apps.keys()

    def units(self, model: str) -> str:
        """Sia's progress: steps at the model's initial batch size."""
        return STEPS

    def reference_type(self, model: str) -> str:
        """`rtx` (Sia's calibration type) when profiled, else the first type."""
        types = self.apps[model].types
        return CALIBRATE_TYPE if CALIBRATE_TYPE in types else min(types)

    def gpu_types(self, model: str) -> tuple[str, ...]:
        """The GPU types the model was profiled on."""
        return tuple(sorted(self.apps[model].types))

    def restart_cost(self, model: str) -> float | None:
        """Sia's `rescale_time` of the model (30 s for others)."""
        return RESCALE_TIME.get(model, 30.0)

    def default_work(self, model: str) -> float | None:
        """Progress at the end of the model's last epoch."""
        app = self.apps[model]
        return float(app.bounds[-1])

    def default_batch(self, model: str) -> int | None:
        """The smallest validated batch size (Sia's `init_batch_size`)."""
        return self.apps[model].init_bsz

    def max_batch(self, model: str) -> int:
        """The largest validated batch size (Sia's `max_batch_size`)."""
        return self.apps[model].max_bsz

    def min_local(self, model: str, gpu_type: str) -> int:
        """The smallest per-GPU batch profiled on the type (Sia's `min_local_bsz`)."""
        prof = self.apps[model].types.get(gpu_type.lower())
        return prof.min_local if prof else 1

    def _iteration(self, model: str, shape: Shape, batch_size: int | None
                   ) -> tuple[float, int] | None:
        """Seconds per iteration and the batch it really runs (None: cannot run so)."""
        return self._iteration_c(model, shape.gpu_type.lower(),
                                 tuple(c for c in shape.per_node if c), batch_size)

    @functools.lru_cache(maxsize=65536)  # noqa: B019 - the model lives for the run
    def _iteration_c(self, model: str, gtype: str, placement: tuple[int, ...],
                     batch_size: int | None) -> tuple[float, int] | None:
        app = self.apps.get(model)
        prof = app.types.get(gtype) if app else None
        if app is None or prof is None or not placement:
            return None
        bsz = batch_size or app.init_bsz
        r = sum(placement)
        local = math.ceil(bsz / r - 1e-8)
        max_local = min(prof.max_local_for(placement), prof.max_local)
        accum = math.ceil(local / max_local - 1e-8) - 1
        if r == 1 and bsz > app.init_bsz:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        if r in prof.max_by_replicas:  # Sia's memory correction
            atomic = min(atomic, prof.max_by_replicas[r])
        atomic = min(atomic, int(app.max_bsz / (r * (accum + 1))))
        if atomic < 1:
            return None
        got = prof.step_sync(placement, atomic)
        if got is None:
            return None
        step, sync = got
        return step + (step - sync) * accum, r * atomic * (accum + 1)

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """Progress per second with every sample counting (efficiency 1)."""
        it = self._iteration(model, shape, batch_size)
        if it is None:
            return 0.0
        app = self.apps[model]
        return it[1] / app.init_bsz / it[0] * app.calib

    def goodput(self, model: str, shape: Shape, batch_size: int | None,
                progress: float) -> float:
        """Progress per second: Pollux's gain at the epoch over the iteration time."""
        app = self.apps[model]
        return self._goodput(model, shape.gpu_type.lower(),
                             tuple(c for c in shape.per_node if c), batch_size,
                             app.epoch(progress))

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def _goodput(self, model: str, gtype: str, placement: tuple[int, ...],
                 batch_size: int | None, epoch: int) -> float:
        it = self._iteration_c(model, gtype, placement, batch_size)
        if it is None:
            return 0.0
        app = self.apps[model]
        t, bsz = it
        scale = bsz / app.init_bsz
        sqr, var = app.grad_stats(bsz, epoch)
        gain = (var + sqr) / (var / scale + sqr) if (var / scale + sqr) > 0 else scale
        return gain / t * app.calib

    def best_batch(self, model: str, shape: Shape, batch_size: int | None,
                   progress: float) -> int | None:
        """The goodput-optimal batch over profiled per-GPU batches and accumulations."""
        app = self.apps[model]
        return self._best(model, shape.gpu_type.lower(),
                          tuple(c for c in shape.per_node if c), batch_size,
                          app.epoch(progress))

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def _best(self, model: str, gtype: str, placement: tuple[int, ...],
              batch_size: int | None, epoch: int) -> int | None:
        app = self.apps[model]
        prof = app.types.get(gtype)
        if prof is None or not placement:
            return batch_size
        r = sum(placement)
        cands = {batch_size or app.init_bsz, max(app.init_bsz, prof.min_local * r)}
        for loc in prof.locals:
            for k in range(MAX_ACCUM + 1):
                b = r * loc * (k + 1)
                if b > app.max_bsz:
                    break
                if b >= app.init_bsz:
                    cands.add(b)
        best, arg = -1.0, batch_size
        for b in sorted(cands):
            g = self._goodput(model, gtype, placement, b, epoch)
            if g > best * (1 + 1e-12):
                best, arg = g, b
        return arg

    def horizon(self, model: str, batch_size: int | None, progress: float) -> float:
        """The start of the next epoch (efficiency changes there)."""
        app = self.apps[model]
        e = app.epoch(progress)
        return float(app.bounds[e + 1]) if e + 1 < app.max_epochs else math.inf
