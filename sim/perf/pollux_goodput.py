"""Pollux's analytic job model (OSDI'21): step time, statistical efficiency and goodput.

A data-parallel job of `num_replicas` GPUs on `num_nodes` nodes computes `accum_steps`
gradient-accumulation steps of `atomic_bsz` samples per GPU, then one optimizer step whose
time overlaps its compute with an all-reduce. Its throughput is samples per second; its
statistical efficiency at a global batch size, relative to the initial batch size, comes
from the gradient noise scale; goodput = throughput x efficiency is progress per second
in units of initial-batch-size samples. Written after petuum/adaptdl's
`simulator/goodput.py` and `speedup.py` (branch osdi21-artifact, the code Pollux's
simulator runs); where adaptdl's master differs (it clamps the atomic batch size into
range instead of scoring out-of-range candidates 0), the artifact is followed.

`fit_perf_params` fits the seven step-time parameters to measured step times with
Pollux's objective and bounds, minimised by SciPy's L-BFGS-B with an analytic gradient
(Pollux differentiates with autograd).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass

import numpy as np

__all__ = [
    "BATCH_CANDIDATES",
    "EPS",
    "BatchChoice",
    "GoodputModel",
    "GradParams",
    "PerfParams",
    "Speedup",
    "accum_time",
    "cap_atomic_bsz",
    "fit_objective",
    "fit_objective_grad",
    "fit_perf_params",
    "network_time",
    "optim_time",
    "split_batch",
]

ArrayLike = float | int | np.ndarray | Sequence[float]

EPS = 1e-8
"""Pollux's tolerance of its ceil operations and floor of absent network terms."""

BATCH_CANDIDATES = 50
"""Global batch sizes tried by `GoodputModel.optimize` (np.geomspace's default, as Pollux)."""


@dataclass(frozen=True)
class PerfParams:
    """Fitted step-time parameters of one job (Pollux's PerfParams, same order).

    Compute: accum_time = alpha_c + beta_c * atomic_bsz. Network: alpha_n + beta_n *
    (replicas - 2) across nodes, alpha_r + beta_r * (replicas - 2) within one node.
    Optimizer step: (accum_time^gamma + network_time^gamma)^(1/gamma), gamma in [1, 10]
    (1: no overlap, large: compute and all-reduce fully overlapped).
    """

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def as_array(self) -> np.ndarray:
        """The seven parameters in field order."""
        return np.array(astuple(self), dtype=np.float64)

    @classmethod
    def from_array(cls, values: Sequence[float] | np.ndarray) -> PerfParams:
        """Parameters from seven numbers in field order."""
        vals = [float(v) for v in values]
        if len(vals) != 7:
            raise ValueError(f"PerfParams takes 7 numbers, got {len(vals)}")
        return cls(*vals)


@dataclass(frozen=True)
class GradParams:
    """Gradient statistics: squared norm of the true gradient and per-sample variance.

    Pollux's gradient noise scale is var / sqr * init_batch_size.
    """

    sqr: float
    var: float


def accum_time(params: PerfParams, atomic_bsz: ArrayLike) -> np.ndarray:
    """Time of one forward/backward pass of `atomic_bsz` samples (linear in the batch)."""
    return params.alpha_c + params.beta_c * np.asarray(atomic_bsz, dtype=np.float64)


def _links(num_nodes: np.ndarray, num_replicas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the inter-node and the intra-node (multi-replica, one node) cases."""
    inter = num_nodes > 1
    intra = ~inter & (num_replicas > 1)
    return inter, intra


def network_time(params: PerfParams, num_nodes: ArrayLike, num_replicas: ArrayLike
                 ) -> np.ndarray:
    """All-reduce time: its slowest link's constant plus retrogression per replica beyond 2.

    A single replica has no network; Pollux puts EPS for both terms there.
    """
    nodes = np.asarray(num_nodes)
    replicas = np.asarray(num_replicas)
    conds = [nodes > 1, replicas > 1]
    bottleneck = np.select(conds, [params.alpha_n, params.alpha_r], EPS)
    retro = np.select(conds, [params.beta_n, params.beta_r], EPS)
    return np.asarray(bottleneck + retro * np.maximum(replicas - 2, EPS), dtype=np.float64)


def optim_time(params: PerfParams, accum: ArrayLike, network: ArrayLike) -> np.ndarray:
    """Time of the optimizer step: the gamma-norm of its compute and network times."""
    g = params.gamma
    a = np.asarray(accum, dtype=np.float64)
    n = np.asarray(network, dtype=np.float64)
    return np.asarray(np.exp(np.log(a**g + n**g) / g))


@dataclass(frozen=True)
class BatchChoice:
    """The goodput-maximising configuration of one placement."""

    goodput: float
    atomic_bsz: int
    accum_steps: int
    num_replicas: int

    @property
    def batch_size(self) -> int:
        """Global batch size: replicas x atomic batch x (accumulation steps + 1)."""
        return self.num_replicas * self.atomic_bsz * (self.accum_steps + 1)


@dataclass(frozen=True)
class GoodputModel:
    """Goodput of one job: its step-time parameters, gradient statistics, initial batch."""

    perf: PerfParams
    grad: GradParams
    init_batch_size: float

    def throughput(self, num_nodes: ArrayLike, num_replicas: ArrayLike,
                   atomic_bsz: ArrayLike, accum_steps: ArrayLike) -> np.ndarray:
        """Samples per second: global batch / (accum_steps x accum time + optimizer step)."""
        acc = accum_time(self.perf, atomic_bsz)
        net = network_time(self.perf, num_nodes, num_replicas)
        steps = np.asarray(accum_steps)
        total = steps * acc + optim_time(self.perf, acc, net)
        batch = np.asarray(num_replicas) * np.asarray(atomic_bsz) * (steps + 1)
        return np.asarray(batch / total)

    def efficiency(self, batch_size: ArrayLike) -> np.ndarray:
        """Progress per sample at a global batch size, relative to the initial batch size.

        (PGNS + init) / (PGNS + batch) with PGNS = var / sqr x init, written as Pollux
        writes it: gain / scale, gain 1 where sqr + var / scale is not positive.
        """
        sqr, var = self.grad.sqr, self.grad.var
        scale = np.asarray(batch_size, dtype=np.float64) / self.init_batch_size
        with np.errstate(divide="ignore", invalid="ignore"):
            denom = var / scale + sqr
            gain = np.where(denom > 0, (var + sqr) / denom, 1.0)
        return np.asarray(gain / scale)

    def goodput(self, num_nodes: ArrayLike, num_replicas: ArrayLike, atomic_bsz: ArrayLike,
                accum_steps: ArrayLike) -> np.ndarray:
        """Throughput x efficiency of its global batch size."""
        batch = np.asarray(num_replicas) * np.asarray(atomic_bsz) * (np.asarray(accum_steps)
                                                                      + 1)
        return self.throughput(num_nodes, num_replicas, atomic_bsz, accum_steps) \
            * self.efficiency(batch)

    def optimize_many(
        self,
        num_nodes: ArrayLike,
        num_replicas: ArrayLike,
        max_batch_size: float | None = None,
        min_local_bsz: int | None = None,
        max_local_bsz: int | None = None,
        accumulation: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best (goodput, atomic_bsz, accum_steps) of each placement (Pollux's `optimize`).

        The candidates are `BATCH_CANDIDATES` global batch sizes in geometric space from
        max(init batch, min_local_bsz x replicas) to max_batch_size (default: the initial
        batch size). With accumulation, a local batch above max_local_bsz is split into
        accum_steps + 1 atomic batches, and a single replica above the initial batch
        accumulates at least once (its gradient statistics need two micro-batches).
        Candidates whose atomic batch falls outside [min_local_bsz, max_local_bsz] score
        0; the first best candidate wins (np.argmax).

        Args:
            num_nodes: Nodes of each placement (>= 1).
            num_replicas: GPUs of each placement (>= num_nodes); broadcast with num_nodes.
            max_batch_size: Largest global batch (>= the initial batch size).
            min_local_bsz: Smallest atomic batch per GPU (None: 1).
            max_local_bsz: Largest atomic batch per GPU (None: max_batch_size).
            accumulation: Allow gradient accumulation.

        Returns:
            Three arrays of the broadcast shape of the inputs.
        """
        if max_batch_size is None:
            max_batch_size = self.init_batch_size
        if max_batch_size < self.init_batch_size:
            raise ValueError(f"max_batch_size {max_batch_size} is below the initial batch "
                             f"size {self.init_batch_size}")
        nodes_in = np.asarray(num_nodes)
        replicas_in = np.asarray(num_replicas)
        if np.any(nodes_in < 1) or np.any(nodes_in > replicas_in):
            raise ValueError("a placement needs 1 <= num_nodes <= num_replicas; got "
                             f"num_nodes={num_nodes}, num_replicas={num_replicas}")
        min_atomic = min_local_bsz or 1
        max_atomic = max_local_bsz or max_batch_size
        shape = np.broadcast(nodes_in, replicas_in).shape
        nodes = np.broadcast_to(nodes_in, shape).flatten()
        replicas = np.broadcast_to(replicas_in, shape).flatten()
        min_batch = np.maximum(self.init_batch_size, min_atomic * replicas)
        batch = np.geomspace(min_batch, max_batch_size, BATCH_CANDIDATES)
        local = batch / replicas
        if accumulation:
            steps = np.ceil(local / max_atomic - EPS) - 1
            single = (replicas == 1) & (local > self.init_batch_size + EPS)
            accum = np.where(single, np.maximum(steps, 1), steps).astype(int)
        else:
            accum = np.zeros_like(local, dtype=int)
        atomic = np.ceil(local / (accum + 1) - EPS).astype(int)
        good = self.goodput(nodes, replicas, atomic, accum)
        good = np.where((min_atomic <= atomic) & (atomic <= max_atomic), good, 0.0)
        idx = np.argmax(good, axis=0), np.arange(good.shape[1])
        return (good[idx].reshape(shape), atomic[idx].reshape(shape),
                accum[idx].reshape(shape))

    def optimize(
        self,
        num_nodes: int,
        num_replicas: int,
        max_batch_size: float | None = None,
        min_local_bsz: int | None = None,
        max_local_bsz: int | None = None,
        accumulation: bool = False,
    ) -> BatchChoice:
        """The best configuration of one placement (see `optimize_many`)."""
        good, atomic, accum = self.optimize_many(num_nodes, num_replicas, max_batch_size,
                                                 min_local_bsz, max_local_bsz, accumulation)
        return BatchChoice(float(good.item()), int(atomic.item()), int(accum.item()),
                           int(num_replicas))


def split_batch(batch_size: int, num_replicas: int, init_batch_size: int,
                max_local_bsz: int) -> tuple[int, int]:
    """(atomic_bsz, accum_steps) of a fixed global batch size (Pollux's simulator).

    The local batch ceil(batch / replicas) is split into ceil(local / max_local_bsz)
    atomic batches; one GPU above the initial batch accumulates at least once.
    """
    local = math.ceil(batch_size / num_replicas - EPS)
    accum = math.ceil(local / max_local_bsz - EPS) - 1
    if num_replicas == 1 and batch_size > init_batch_size:
        accum = max(1, accum)
    return math.ceil(local / (accum + 1) - EPS), accum


def cap_atomic_bsz(atomic_bsz: int, accum_steps: int, num_replicas: int,
                   max_batch_size: float) -> int:
    """The atomic batch lowered so the global batch stays within max_batch_size.

    Pollux's simulator applies this after choosing or splitting a batch.
    """
    return min(atomic_bsz, int(max_batch_size / (num_replicas * (accum_steps + 1))))


class Speedup:
    """Pollux's speedup: best goodput on (nodes, replicas) over the best on one GPU.

    Answers are memoised in a table of `mem_size` x `mem_size` (nodes, replicas) as
    Pollux's SpeedupFunction does; (0, 0) is 0. One per job and fit: the cache belongs
    to the model it was built from.
    """

    def __init__(self, model: GoodputModel, max_batch_size: float | None = None,
                 min_local_bsz: int | None = None, max_local_bsz: int | None = None,
                 accumulation: bool = False, mem_size: int = 32) -> None:
        self.model = model
        self._opts = (max_batch_size, min_local_bsz, max_local_bsz, accumulation)
        self._mem_size = mem_size
        base, _, _ = model.optimize_many(1, 1, *self._opts)
        self.base_goodput = float(base.item())
        self._mem = -np.ones((mem_size, mem_size))
        self._mem[0, 0] = 0.0

    def many(self, num_nodes: ArrayLike, num_replicas: ArrayLike) -> np.ndarray:
        """Speedups of placements (arrays broadcast together; 0 nodes means 0 replicas)."""
        nodes_in = np.asarray(num_nodes, dtype=int)
        replicas_in = np.asarray(num_replicas, dtype=int)
        if np.any(nodes_in < 0) or np.any(nodes_in > replicas_in) or np.any(
                (nodes_in > 0) != (replicas_in > 0)):
            raise ValueError("a placement needs 0 <= num_nodes <= num_replicas, both 0 or "
                             f"both > 0; got num_nodes={num_nodes}, "
                             f"num_replicas={num_replicas}")
        shape = np.broadcast(nodes_in, replicas_in).shape
        nodes = np.broadcast_to(nodes_in, shape).flatten()
        replicas = np.broadcast_to(replicas_in, shape).flatten()
        out = -np.ones(nodes.shape)
        known = replicas < self._mem_size
        out[known] = self._mem[nodes[known], replicas[known]]
        missing = out < 0
        if np.any(missing):
            pairs, inverse = np.unique(np.stack([nodes[missing], replicas[missing]]),
                                       axis=1, return_inverse=True)
            good, _, _ = self.model.optimize_many(pairs[0], pairs[1], *self._opts)
            ratio = good / self.base_goodput
            keep = pairs[1] < self._mem_size
            self._mem[pairs[0][keep], pairs[1][keep]] = ratio[keep]
            out[missing] = ratio[np.ravel(inverse)]
        return out.reshape(shape)

    def __call__(self, num_nodes: int, num_replicas: int) -> float:
        """Speedup of one placement."""
        return float(self.many(num_nodes, num_replicas).item())


# ---- fitting -------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _FitData:
    """Measurements of a fit with what every objective evaluation reuses."""

    nodes: np.ndarray
    replicas: np.ndarray
    bsz: np.ndarray
    accum: np.ndarray
    log_accum: np.ndarray
    log_optim: np.ndarray
    inter: np.ndarray  # 1.0 where the measurement spans nodes
    intra: np.ndarray  # 1.0 where it is one node of several GPUs
    retro: np.ndarray  # max(replicas - 2, EPS)
    no_link: np.ndarray  # Pollux's network time where there is none


def _fit_parts(x: np.ndarray, data: _FitData) -> tuple[float, np.ndarray]:
    """Pollux's fit objective and its gradient at parameters x."""
    ac, bc, an, bn, ar, br, g = (float(v) for v in x)
    inter, intra, m, bsz = data.inter, data.intra, data.retro, data.bsz
    pa = ac + bc * bsz
    pn = inter * (an + bn * m) + intra * (ar + br * m) + data.no_link
    pa_g, pn_g = pa**g, pn**g
    s = pa_g + pn_g
    lo = np.log(s) / g
    log_pa, log_pn = np.log(pa), np.log(pn)
    r1 = log_pa - data.log_accum
    r2 = lo - data.log_optim
    err1 = math.sqrt(float(np.mean(r1**2)))
    err2 = math.sqrt(float(np.mean(r2**2)))
    value = (err1 + err2 + 1e-3 * (g - 1) ** 2
             + 1e-2 * ((bn / an) ** 2 + (br / ar) ** 2))
    # d err = mean(r * d residual) / err (0 where the error is 0).
    w1 = r1 / (err1 * r1.size) if err1 > 0 else np.zeros_like(r1)
    w2 = r2 / (err2 * r2.size) if err2 > 0 else np.zeros_like(r2)
    # residual derivatives: r1 through pa; r2 through pa, pn and gamma.
    w2s = w2 / s
    d_pa = w1 / pa + w2s * pa_g / pa
    d_pn = w2s * pn_g / pn
    dlo_dg = -lo / g + (pa_g * log_pa + pn_g * log_pn) / (g * s)
    d_inter, d_intra = d_pn * inter, d_pn * intra
    grad = np.array([
        d_pa.sum(),
        (d_pa * bsz).sum(),
        d_inter.sum() - 2e-2 * bn**2 / an**3,
        (d_inter * m).sum() + 2e-2 * bn / an**2,
        d_intra.sum() - 2e-2 * br**2 / ar**3,
        (d_intra * m).sum() + 2e-2 * br / ar**2,
        (w2 * dlo_dg).sum() + 2e-3 * (g - 1),
    ])
    return value, grad


def _fit_data(num_nodes: ArrayLike, num_replicas: ArrayLike, atomic_bsz: ArrayLike,
              accum_step_time: ArrayLike, optim_step_time: ArrayLike) -> _FitData:
    arrays = [np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in
              (num_nodes, num_replicas, atomic_bsz, accum_step_time, optim_step_time)]
    sizes = {a.size for a in arrays}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError("fit_perf_params needs equally long, non-empty measurements; got "
                         f"lengths {[a.size for a in arrays]}")
    nodes, replicas, bsz, accum, optim = arrays
    if np.any(accum <= 0) or np.any(optim <= 0):
        raise ValueError("measured step times must be > 0")
    inter, intra = _links(nodes, replicas)
    retro = np.maximum(replicas - 2, EPS)
    no_link = np.where(inter | intra, 0.0, EPS + EPS * retro)
    return _FitData(nodes, replicas, bsz, accum, np.log(accum), np.log(optim),
                    inter.astype(np.float64), intra.astype(np.float64), retro, no_link)


def fit_objective(x: ArrayLike, num_nodes: ArrayLike, num_replicas: ArrayLike,
                  atomic_bsz: ArrayLike, accum_step_time: ArrayLike,
                  optim_step_time: ArrayLike) -> float:
    """Pollux's fit objective at parameters x (field order of PerfParams).

    RMS log error of the accumulation step times plus that of the optimizer step times,
    plus 1e-3 (gamma - 1)^2 (a smaller gamma fits more easily) and 1e-2 ((beta_n /
    alpha_n)^2 + (beta_r / alpha_r)^2) (prefer little retrogression: optimistic).
    """
    data = _fit_data(num_nodes, num_replicas, atomic_bsz, accum_step_time, optim_step_time)
    return _fit_parts(np.asarray(x, dtype=np.float64), data)[0]


def fit_objective_grad(x: ArrayLike, num_nodes: ArrayLike, num_replicas: ArrayLike,
                       atomic_bsz: ArrayLike, accum_step_time: ArrayLike,
                       optim_step_time: ArrayLike) -> np.ndarray:
    """The analytic gradient of `fit_objective` with respect to x."""
    data = _fit_data(num_nodes, num_replicas, atomic_bsz, accum_step_time, optim_step_time)
    return _fit_parts(np.asarray(x, dtype=np.float64), data)[1]


def fit_perf_params(num_nodes: ArrayLike, num_replicas: ArrayLike, atomic_bsz: ArrayLike,
                    accum_step_time: ArrayLike, optim_step_time: ArrayLike) -> PerfParams:
    """Fit PerfParams to measured step times as Pollux does.

    Starts at (0.1, 0.01) for each (alpha, beta) pair and gamma 1.001, bounds
    [1e-8, inf) and gamma in [1, 10]. Parameters the data cannot tell are fixed: alpha_c
    at half the mean accum time when one atomic batch size was seen; alpha_n, beta_n at
    1e-8 without a multi-node measurement; alpha_r, beta_r at 1e-8 without a one-node
    multi-GPU one; beta_n, beta_r at 1e-8 without one of more than 2 GPUs. Without a
    multi-node measurement, alpha_n and beta_n are then raised to at least 1.1 x
    alpha_r and beta_r (inter-node is no faster than intra-node).

    Args:
        num_nodes: Nodes of each measurement.
        num_replicas: GPUs of each measurement.
        atomic_bsz: Atomic (per-GPU) batch size of each measurement.
        accum_step_time: Measured time of an accumulation step (compute only).
        optim_step_time: Measured time of an optimizer step (compute and all-reduce).

    Returns:
        The fitted parameters.
    """
    data = _fit_data(num_nodes, num_replicas, atomic_bsz, accum_step_time, optim_step_time)
    nodes, replicas, bsz, y_accum = data.nodes, data.replicas, data.bsz, data.accum
    x0 = [1e-1, 1e-2] * 3 + [1.0 + 1e-3]
    lower = [1e-8, 1e-8] * 3 + [1.0]
    upper = [math.inf, math.inf] * 3 + [10.0]
    if len(np.unique(bsz)) == 1:
        x0[0] = lower[0] = upper[0] = float(np.mean(y_accum)) / 2
    fixed: list[int] = []
    if not np.any(nodes > 1):
        fixed += [2, 3]
    if not np.any((nodes == 1) & (replicas > 1)):
        fixed += [4, 5]
    if not np.any(replicas > 2):
        fixed += [3, 5]
    for i in fixed:
        x0[i] = upper[i] = lower[i]
    import scipy.optimize  # here: importing the model stays light (no SciPy)

    bounds = scipy.optimize.Bounds(lower, upper, keep_feasible=True)
    result = scipy.optimize.minimize(lambda x: _fit_parts(x, data), x0, jac=True,
                                     bounds=bounds, method="L-BFGS-B")
    x = [float(v) for v in result.x]
    if not np.any(nodes > 1):
        x[2] = max(x[2], x[4] * 1.1)
        x[3] = max(x[3], x[5] * 1.1)
    return PerfParams.from_array(x)
