"""Pollux application profiles: a model's measured step times and training curves.

One directory per model, as in petuum/adaptdl's `simulator/traces/<model>/` (branch
osdi21-artifact): `placements.csv` (placement,local_bsz,step_time,sync_time: step and
all-reduce time per measured placement, a placement written as the GPUs of each node,
e.g. 1224), `scalability.csv` (num_nodes,num_replicas,local_bsz,step_time,sync_time:
larger spread-out runs) and `validation-<batch size>.csv` (progress,iteration,metric,
grad_sqr,grad_var: one row per epoch when trained at that global batch size). Answers
follow Pollux's `applications.py`: the true step time of a placement, the gradient
statistics of a batch size in an epoch, progress at epoch boundaries.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.sim.errors import SimError
from schedlab.sim.perf.pollux_goodput import GradParams

__all__ = [
    "MAX_INTERP_NODES",
    "POLLUX_APPLICATIONS",
    "AppDefaults",
    "InvalidProfile",
    "PolluxProfile",
    "ValidationCurve",
    "load_profile",
    "placement_key",
]

MAX_INTERP_NODES = 16
"""Node count at which an unmeasured placement's lookup is capped (Pollux: its 16 nodes)."""

PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
VALIDATION_COLUMNS = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
_LINE = "__line__"  # key of a table's file line numbers
_VALIDATION_NAME = re.compile(r"^validation-(\d+)\.csv$")


class InvalidProfile(SimError):
    """A Pollux profile directory or one of its files is missing or malformed."""


@dataclass(frozen=True)
class AppDefaults:
    """Per-model settings that Pollux's simulator passes to its Application."""

    max_epochs: int
    max_local_bsz: int | None = None


POLLUX_APPLICATIONS: Mapping[str, AppDefaults] = {
    "bert": AppDefaults(max_epochs=2),
    "cifar10": AppDefaults(max_epochs=100),
    "ncf": AppDefaults(max_epochs=10),
    "imagenet": AppDefaults(max_epochs=90),
    "deepspeech2": AppDefaults(max_epochs=80),
    "yolov3": AppDefaults(max_epochs=50, max_local_bsz=8),
}
"""Defaults by directory name: `APPLICATIONS` of petuum/adaptdl simulator/applications.py
(osdi21-artifact). Other names default to the profile's own data."""


@dataclass(frozen=True, eq=False)
class ValidationCurve:
    """One validation file: per-epoch progress, iterations, metric and gradient stats."""

    batch_size: int
    progress: np.ndarray
    iteration: np.ndarray
    metric: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray


def placement_key(placement: Sequence[int]) -> tuple[int, ...]:
    """GPUs per node without empty nodes, rotated to its lexicographically smallest form."""
    p = tuple(int(g) for g in placement if g)
    if not p:
        return p
    return min(p[i:] + p[:i] for i in range(len(p)))


def _fail(path: Path, problem: str) -> InvalidProfile:
    return InvalidProfile(f"{path}: {problem}")


def _read_table(path: Path, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """The named numeric columns of a CSV file, checked (one-line errors naming the file).

    Cells are parsed by Python's float (correctly rounded, whatever the pandas version).
    """
    if not path.is_file():
        raise _fail(path, "missing (a Pollux profile has placements.csv, scalability.csv "
                          "and validation-<batch size>.csv files)")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            lines = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise _fail(path, f"cannot be read as CSV ({str(exc).splitlines()[0]})") from None
    header = [c.strip() for c in lines[0]] if lines else []
    missing = [c for c in columns if c not in header]
    if missing:
        raise _fail(path, f"missing column{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(missing)}; found: {', '.join(header) or '(none)'}; "
                          f"required: {', '.join(columns)}")
    body = [(i + 1, row) for i, row in enumerate(lines[1:], start=1) if any(row)]
    if not body:
        raise _fail(path, "has no data rows")
    where = [header.index(c) for c in columns]
    out = {c: np.empty(len(body)) for c in columns}
    for k, (line, row) in enumerate(body):
        for col, j in zip(columns, where, strict=True):
            cell = row[j].strip() if j < len(row) else ""
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise _fail(path, f"line {line}, column {col}: value {cell!r} is not a "
                                  "finite number")
            out[col][k] = value
    out[_LINE] = np.array([line for line, _ in body])
    return out


def _positive(path: Path, table: Mapping[str, np.ndarray], columns: Sequence[str],
              integer: bool = False) -> None:
    for col in columns:
        values = table[col]
        bad = (values <= 0) | ((values != np.floor(values)) if integer else False)
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            what = "an integer > 0" if integer else "a number > 0"
            raise _fail(path, f"line {table[_LINE][row]}, column {col}: value "
                              f"{values[row]:g} is not {what}")


def _digits(path: Path, line: int, value: float) -> tuple[int, ...]:
    text = str(int(value))
    if value != math.floor(value) or value <= 0 or "0" in text:
        raise _fail(path, f"line {line}, column placement: value {value:g} is not a "
                          "placement (GPUs of each node as digits 1-9, e.g. 1224)")
    return tuple(int(c) for c in text)


@dataclass(frozen=True, eq=False)
class PolluxProfile:
    """One model's profile, answering what Pollux's simulator asks its Application."""

    name: str
    init_batch_size: int
    max_batch_size: int
    min_local_bsz: int
    max_local_bsz: int
    max_epochs: int
    curves: tuple[ValidationCurve, ...]  # by batch size, ascending
    measured: Mapping[tuple[int, ...], tuple[np.ndarray, np.ndarray]]  # local_bsz, (n, 2)
    nd_points: np.ndarray  # (num_nodes, num_replicas, local_bsz) of unmeasured lookups
    nd_values: np.ndarray  # (step_time, sync_time) at nd_points
    source: str = ""
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        """The validated global batch sizes, ascending."""
        return tuple(c.batch_size for c in self.curves)

    # ---- throughput ------------------------------------------------------------------

    def step_time(self, placement: Sequence[int], local_bsz: float) -> tuple[float, float]:
        """True (step_time, sync_time) in seconds of an optimizer step of a placement.

        A measured placement (after `placement_key`) interpolates linearly over its
        local batch sizes; any other over (nodes capped at `MAX_INTERP_NODES`, replicas,
        local_bsz) in the per-configuration means of placements.csv plus scalability.csv
        (SciPy's interp1d and LinearNDInterpolator, as Pollux).

        Raises:
            ValueError: An empty placement, or a point outside the measured range.
        """
        key = placement_key(placement)
        memo = ("step", key, float(local_bsz))
        hit = self._cache.get(memo)
        if hit is not None:
            return hit
        if not key:
            raise ValueError(f"profile {self.name}: placement {tuple(placement)} has no GPU")
        if key in self.measured:
            ret = self._measured_interp(key)(float(local_bsz))
        else:
            nodes = min(len(key), MAX_INTERP_NODES)
            ret = self._nd_interp()([nodes, sum(key), float(local_bsz)])[0]
        step, sync = float(ret[0]), float(ret[1])
        if not (math.isfinite(step) and math.isfinite(sync)):
            raise ValueError(f"profile {self.name}: placement {key} at local batch size "
                             f"{local_bsz} lies outside the profiled configurations")
        self._cache[memo] = (step, sync)
        return step, sync

    def _measured_interp(self, key: tuple[int, ...]) -> Any:
        cached = self._cache.get(("interp1d", key))
        if cached is None:
            from scipy.interpolate import interp1d

            bsz, values = self.measured[key]
            inner = interp1d(bsz, values, axis=0)
            lo, hi = float(bsz.min()), float(bsz.max())

            def cached(x: float) -> np.ndarray:
                if not lo <= x <= hi:
                    raise ValueError(f"profile {self.name}: local batch size {x:g} of "
                                     f"placement {key} is outside its measured range "
                                     f"[{lo:g}, {hi:g}]")
                return np.asarray(inner(x))

            self._cache[("interp1d", key)] = cached
        return cached

    def _nd_interp(self) -> Any:
        cached = self._cache.get("nd")
        if cached is None:
            from scipy.interpolate import LinearNDInterpolator

            cached = LinearNDInterpolator(self.nd_points, self.nd_values)
            self._cache["nd"] = cached
        return cached

    def progress_rate(self, placement: Sequence[int], atomic_bsz: int, accum_steps: int,
                      epoch: int) -> float:
        """True progress per second of a job in an epoch (Pollux's simulated goodput).

        gain / (step_time + accum_steps x (step_time - sync_time)) with the step times of
        the placement at atomic_bsz and gain = (var + sqr) / (var / scale + sqr) at the
        global batch's scale over the initial batch, as Pollux's `Job.step` (before its
        interference factor).
        """
        key = placement_key(placement)
        batch = sum(key) * atomic_bsz * (accum_steps + 1)
        scale = batch / self.init_batch_size
        step, sync = self.step_time(key, atomic_bsz)
        grad = self.grad_stats(batch, epoch)
        gain = (grad.var + grad.sqr) / (grad.var / scale + grad.sqr)
        return float(gain / (step + (step - sync) * accum_steps))

    # ---- statistical efficiency and progress ----------------------------------------

    def _bracket(self, batch_size: float) -> tuple[ValidationCurve, ValidationCurve]:
        lower = upper = None
        for curve in self.curves:
            if curve.batch_size <= batch_size:
                lower = curve
            if curve.batch_size >= batch_size:
                upper = curve
                break
        if lower is None or upper is None:
            raise ValueError(f"profile {self.name}: batch size {batch_size:g} is outside "
                             f"the validated ones {list(self.batch_sizes)}")
        return lower, upper

    def _epoch_row(self, epoch: int) -> int:
        rows = min(len(c.progress) for c in self.curves)
        if not 0 <= epoch < rows:
            raise ValueError(f"profile {self.name}: epoch {epoch} is outside 0..{rows - 1}")
        return int(epoch)

    @staticmethod
    def _between(batch_size: float, lo: int, hi: int, lo_val: float, hi_val: float) -> float:
        """Linear interpolation in Pollux's arithmetic (so answers match to the bit)."""
        return ((batch_size - lo) * hi_val + (hi - batch_size) * lo_val) / (hi - lo)

    def grad_stats(self, batch_size: float, epoch: int) -> GradParams:
        """Gradient (sqr, var) during an epoch, linear between the validated batch sizes."""
        row = self._epoch_row(epoch)
        lo, hi = self._bracket(batch_size)
        if lo is hi:
            return GradParams(float(lo.grad_sqr[row]), float(lo.grad_var[row]))
        b = float(batch_size)
        return GradParams(
            self._between(b, lo.batch_size, hi.batch_size, lo.grad_sqr[row], hi.grad_sqr[row]),
            self._between(b, lo.batch_size, hi.batch_size, lo.grad_var[row], hi.grad_var[row]))

    def iteration(self, batch_size: float, epoch: int) -> float:
        """Optimizer steps done at the end of an epoch, linear between validated sizes."""
        row = self._epoch_row(epoch)
        lo, hi = self._bracket(batch_size)
        if lo is hi:
            return float(lo.iteration[row])
        return self._between(float(batch_size), lo.batch_size, hi.batch_size,
                             lo.iteration[row], hi.iteration[row])

    def progress(self, epoch: int) -> float:
        """Progress at the start of an epoch: the least over the validation files (0 at 0)."""
        if epoch == 0:
            return 0.0
        row = self._epoch_row(epoch - 1)
        return float(min(c.progress[row] for c in self.curves))

    def epoch(self, progress: float) -> int:
        """The epoch a progress lies in: the greatest over the validation files."""
        return max(int(np.searchsorted(c.progress, progress, side="right"))
                   for c in self.curves)

    def completion_epoch(self, batch_size: float) -> int:
        """The last epoch a job trains (Pollux runs to max_epochs: no target metric)."""
        del batch_size
        return self.max_epochs - 1


def load_profile(
    path: str | Path,
    *,
    init_batch_size: int | None = None,
    max_batch_size: int | None = None,
    min_local_bsz: int | None = None,
    max_local_bsz: int | None = None,
    max_epochs: int | None = None,
) -> PolluxProfile:
    """Read one Pollux profile directory.

    Defaults (as Pollux's Application): init/max batch size the smallest/largest
    validated batch size, min/max local batch size the smallest/largest in
    placements.csv, max_epochs the fewest rows of a validation file; then
    `POLLUX_APPLICATIONS` for a known directory name; then the arguments.

    Raises:
        InvalidProfile: A missing directory or file, a missing column, a bad cell or a
            bad setting, in one line naming the file or setting.
    """
    import pandas as pd

    root = Path(path)
    if not root.is_dir():
        raise _fail(root, "is not a directory (a Pollux profile is a directory "
                          "simulator/traces/<model>/)")
    name = root.name
    curves = []
    for file in sorted(root.glob("validation-*.csv")):
        match = _VALIDATION_NAME.match(file.name)
        if match is None or int(match.group(1)) <= 0:
            raise _fail(file, "name is not validation-<batch size>.csv with a batch size > 0")
        table = _read_table(file, VALIDATION_COLUMNS)
        steps = np.flatnonzero(np.diff(table["progress"]) < 0)
        if steps.size:
            raise _fail(file, f"line {table[_LINE][steps[0] + 1]}, column progress: value "
                              f"{table['progress'][steps[0] + 1]:g} is below the line before "
                              "(progress never decreases)")
        curves.append(ValidationCurve(int(match.group(1)), *(table[c] for c in
                                                             VALIDATION_COLUMNS)))
    if not curves:
        raise _fail(root / "validation-<batch size>.csv", "missing: no validation file")
    curves.sort(key=lambda c: c.batch_size)
    place_file = root / "placements.csv"
    place = _read_table(place_file, PLACEMENT_COLUMNS)
    _positive(place_file, place, ("local_bsz", "step_time"))
    keys = [_digits(place_file, int(line), v)
            for line, v in zip(place[_LINE], place["placement"], strict=True)]
    scal_file = root / "scalability.csv"
    scal = _read_table(scal_file, SCALABILITY_COLUMNS)
    _positive(scal_file, scal, ("num_nodes", "num_replicas"), integer=True)
    _positive(scal_file, scal, ("local_bsz", "step_time"))

    measured: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    rows_of: dict[tuple[int, ...], list[int]] = {}
    for i, key in enumerate(keys):
        rows_of.setdefault(key, []).append(i)
    ys = np.column_stack([place["step_time"], place["sync_time"]])
    for key, where in rows_of.items():
        idx = np.array(where)
        bsz = place["local_bsz"][idx]
        if len(np.unique(bsz)) != len(bsz):
            raise _fail(place_file, f"placement {''.join(map(str, key))} lists a local_bsz "
                                    "twice")
        measured[key] = (bsz, ys[idx])
    # Unmeasured placements: per-(nodes, replicas, local_bsz) means, then scalability.csv.
    frame = pd.DataFrame({
        "num_nodes": [float(len(k)) for k in keys],
        "num_replicas": [float(sum(k)) for k in keys],
        "local_bsz": place["local_bsz"],
        "step_time": place["step_time"],
        "sync_time": place["sync_time"],
    })
    xs = ["num_nodes", "num_replicas", "local_bsz"]
    means = frame.groupby(xs)[["step_time", "sync_time"]].mean().reset_index()
    nd_points = np.vstack([means[xs].to_numpy(dtype=np.float64),
                           np.column_stack([scal[c] for c in xs])])
    nd_values = np.vstack([means[["step_time", "sync_time"]].to_numpy(dtype=np.float64),
                           np.column_stack([scal["step_time"], scal["sync_time"]])])

    defaults = POLLUX_APPLICATIONS.get(name)
    if max_epochs is None and defaults is not None:
        max_epochs = defaults.max_epochs
    if max_local_bsz is None and defaults is not None:
        max_local_bsz = defaults.max_local_bsz
    init = init_batch_size or curves[0].batch_size
    top = max_batch_size or curves[-1].batch_size
    lo_local = min_local_bsz or int(place["local_bsz"].min())
    hi_local = max_local_bsz or int(place["local_bsz"].max())
    rows = min(len(c.progress) for c in curves)
    epochs = max_epochs or rows
    for setting, value, ok, rule in (
        ("max_batch_size", top, top >= lo_local, f">= min_local_bsz {lo_local}"),
        ("max_batch_size", top, top >= init, f">= init_batch_size {init}"),
        ("max_local_bsz", hi_local, hi_local >= lo_local, f">= min_local_bsz {lo_local}"),
        ("max_epochs", epochs, 0 < epochs <= rows,
         f"in 1..{rows} (the fewest rows of a validation file)"),
    ):
        if not ok:
            raise _fail(root, f"{setting} {value} is not {rule}")
    return PolluxProfile(
        name=name, init_batch_size=int(init), max_batch_size=int(top),
        min_local_bsz=int(lo_local), max_local_bsz=int(hi_local), max_epochs=int(epochs),
        curves=tuple(curves), measured=measured, nd_points=nd_points, nd_values=nd_values,
        source=str(root))
