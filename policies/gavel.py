"""Gavel (OSDI 2020): heterogeneity-aware max-min fairness over GPU types, in rounds.

Allocation (the paper's LP, solved by scipy's HiGHS as `linprog` would, `gavel_lp`):
X[j, t] is the fraction of time job j should run on GPU type t. With throughput T[j, t]
(the job's speed on t, `gpu_speeds`, times the locality slowdown of its best placement
on an idle t, since Gavel's profiled throughputs include communication; 0 on a type it
may not use or cannot be placed on), scale s_j (its GPUs) and its throughput under an
equal split of every type, prop_j = sum_t T[j, t] N_t / sum N, Gavel maximizes min_j
sum_t T[j, t] s_j X[j, t] / prop_j subject to sum_t X[j, t] <= 1 and sum_j s_j X[j, t]
<= N_t (GPUs of type t).
Max-min optima are rarely unique; a second LP keeps the optimal minimum and maximizes the
total normalized throughput, so the allocation is deterministic and wastes nothing.
Identical jobs (same throughputs and GPUs) are one LP class with one allocation, which
the LP's symmetry allows and which keeps it as small as the variety of jobs. On a
cluster of one GPU type the optimum is computed in closed form instead: water-filling of
GPU time (job j gets min(s_j, z) GPUs over time, sum = the GPUs), which is the most even
of the LP's optima (Gavel's water-filling variant) and costs no solver call.
`gavel-mmf-agnostic` solves the same LP with every usable throughput set to 1, as
Gavel's heterogeneity-agnostic baseline does, and spreads each job's time over its usable
types in proportion to their sizes (the symmetric optimum: time on "a GPU", whatever its
type); jobs still run at their real speeds. An allocation is solved when a round first
reads it: only a round in which some type cannot take all its candidates ranks them by
priority, so on a cluster with room for every job no LP is solved at all.

Rounds (`round`, Gavel's 360 s): at each round every job's priority on type t is
X[j, t] / (its share of the time type t ran jobs since the allocation was computed),
X x 1e9 before it has run there. Jobs are taken greedily per type (fastest types first,
the agnostic variant shuffles types each round with the run's seed, as Gavel does), in
decreasing priority, while the type has GPUs for them. A job chosen for the type it runs
on keeps its GPUs; others stop (`stop`, suspend by default: Gavel checkpoints at round
ends) and the chosen ones are placed on their type, largest first (on another type with
GPUs left when the engine's placer finds the chosen type's free GPUs too scattered; a
type the placer can never use for a job, even idle, has throughput 0 for it). The
allocation is recomputed when the set of jobs changed, at most every `reset_interval` s
(Gavel's 1920); a job that arrived since has priority 0 and gets only GPUs nobody else
wants (`unallocated=spare`, default), or, as in Gavel's simulator, nothing until the
next recomputation (`unallocated=wait`: on the 1000-job msr trace its mean first-start
delay is 1,060 s there against 185 s with spare GPUs). Nothing starts between rounds;
rounds go on while jobs wait and something can change (jobs run, a round started some,
or failed nodes will come back). With `stop=preempt`, a job that never checkpoints loses
its work at every switch, so rounds shorter than such jobs can keep them from ever
finishing: the engine fails such a job after `stop_retries` stops without checkpointed
progress, so the run ends. Per-job priority weights and Gavel's deficit tie-break are not
modelled (ties go to the larger allocation, then the earlier submission).

Space sharing (`packing`, default false; Gavel's `max_min_fairness_packed`,
`MaxMinFairnessPolicyWithPacking` in its scheduler/policies/max_min_fairness.py), in
`gavel_packing`: when the run has a performance model (`perf_model`) and jobs name models,
the LP gets a variable per combination and type: each job alone and each pair of jobs
of the same GPU count whose packed throughputs the model measured (Gavel's pair table),
a job's normalized throughput summing over the combinations holding it; a job's time
fractions sum to <= 1, a pair counts its GPUs once against each type's capacity, and the
objective and its normalization are Gavel's (as above, from the jobs' throughputs
alone). Rounds rank combinations by Gavel's priority (allocation over the share of the
type's time the combination received) and run a chosen pair packed on the same GPUs, at
the table's pair throughputs. Gavel's code: the LP, its normalization, the priorities and
the greedy choice. Our choices: the same second LP (total throughput) as tie-break, a
pair with no allocation on a type never runs there, a member already on the chosen type
keeps its GPUs and its partner is packed onto them, fractional and elastic jobs are never
paired. Without a performance model `packing=true` changes nothing; the agnostic variant
rejects it (Gavel has no agnostic packing).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Generator, Iterable, Iterator
from operator import attrgetter
from typing import Any, ClassVar, Final, NamedTuple

import numpy as np
from mypy_extensions import mypyc_attr
from scipy.sparse import csc_matrix, csr_matrix

from schedlab.policies import gavel_lp
from schedlab.policies.base import Ctx, Policy, owner
from schedlab.policies.gavel_packing import PackedRounds
from schedlab.policies.priority import STOP_PARAM, cpu_only_pending, start_cpu_only
from schedlab.sim.cluster import ClusterState
from schedlab.sim.compact import hot_replacer
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.interfaces import Placer
from schedlab.sim.jobstate import RUNNING, JobState
from schedlab.sim.model import (
    MILLI,
    Decision,
    JobSpec,
    Preempt,
    Start,
    Suspend,
    Unschedulable,
    job_milli,
    request_class,
)
from schedlab.sim.params import Param, as_bool, as_choice, as_float
from schedlab.sim.registry import PLACERS

EPS: Final = 1e-9
OWED_MAX: Final = 64  # rounds of time owed (`GavelPolicy._credit`) kept before adding them
_IDX: Final = attrgetter("idx")
_HELD_SINCE: Final = attrgetter("held_since")
_REPLACE_TYPE: Final = hot_replacer(JobSpec, "gpu_type")


def with_gpu_type(spec: JobSpec, gpu_type: str) -> JobSpec:
    """`dataclasses.replace(spec, gpu_type=gpu_type)`, at a tenth of its cost.

    The GPU type is one of JobSpec's own slots (`schedlab.sim.compact`), so the copy shares the
    spec's record of rare fields (`hot_replacer`): one per job start on `philly`.
    """
    return _REPLACE_TYPE(spec, gpu_type)


def max_min_allocation(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray
                       ) -> np.ndarray:
    """Gavel's max-min fair time fractions X (jobs x types), efficiency as tie-break.

    Args:
        tput: Throughput of each job on each type (0: cannot run there).
        scale: GPUs each job takes (its scale factor).
        capacity: GPUs of each type.

    Returns:
        X with rows summing to <= 1 and sum_j scale_j X[j, t] <= capacity_t.
    """
    n, k = tput.shape
    if n == 0 or k == 0:
        return np.zeros((n, k))
    usable = (tput > 0) & (scale[:, None] <= capacity[None, :])
    if k == 1:
        return _one_type(scale, float(capacity[0]), usable[:, 0])
    tput = np.where(usable, tput, 0.0)
    # identical jobs (same throughputs and scale) get the same allocation: the LP is
    # convex and symmetric in them, so averaging any optimum over their permutations is
    # another optimum. Solving per class of identical jobs, weighted by its size, keeps
    # the LP as small as the variety of jobs rather than their number.
    uniq, inverse, counts = unique_rows(np.column_stack([tput, scale]))
    if len(uniq) < n:
        x = _max_min_classes(uniq[:, :k], uniq[:, k], counts.astype(float), capacity)
        return x[inverse]
    return _max_min_classes(tput, scale, np.ones(n), capacity)


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`np.unique(keys, axis=0, return_inverse=True, return_counts=True)` for NaN-free rows.

    The distinct rows in lexicographic order, each row's class and the class sizes, by
    one `lexsort` (first column first) instead of `unique`'s sort of a structured view.
    """
    n = len(keys)
    order = np.lexsort(keys.T[::-1])
    rows = keys[order]
    first = np.empty(n, dtype=bool)
    first[:1] = True
    first[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    return rows[starts], inverse, np.diff(np.append(starts, n))


def _max_min_classes(tput: np.ndarray, scale: np.ndarray, mult: np.ndarray,
                     capacity: np.ndarray) -> np.ndarray:
    """The max-min LP over classes of `mult` identical jobs each (one X row per class).

    Solved once per distinct LP (`_solved`: the same inputs give the same HiGHS
    solution, which depends on nothing but the LP); a copy, which the caller may change.
    """
    n, k = tput.shape
    family = (tput.dtype.str, tput.tobytes(), scale.dtype.str, scale.tobytes(),
              capacity.dtype.str, capacity.tobytes(), n, k)
    return _solved(family, mult.dtype.str, mult.tobytes()).copy()


@functools.lru_cache(maxsize=4096)
def _solved(family: tuple, mult_dtype: str, mult_bytes: bytes) -> np.ndarray:
    """`_max_min_classes` of the LP of `_lp_family(*family)` and these class sizes."""
    fam = _lp_family(*family)
    n, k = fam.coef.shape
    mult = np.frombuffer(mult_bytes, dtype=mult_dtype)
    weight = fam.scale * mult
    data = fam.data.copy()
    data[2:3 * n * k:3] = np.repeat(weight, k)  # each x[j, t] column's capacity entry
    a = gavel_lp.ColMatrix((2 * n + k, n * k + 1), fam.indptr, fam.indices, data)
    lb = np.zeros(n * k + 1)
    status, x1 = gavel_lp.solve(fam.c1, a, fam.b, lb, fam.ub)
    if status != 0 or x1 is None:
        x = np.outer(np.ones(n), fam.share) * fam.usable
    else:
        z = float(x1[-1])
        # keep everyone at >= z (a hair less, for the solver's tolerance), maximize the
        # total
        lb[-1] = max(0.0, z * (1 - 1e-7) - 1e-9)
        c2 = np.concatenate([-(fam.coef * mult[:, None]).ravel(), [0.0]])
        # the same right-hand side: its first n rows (z - coef x <= 0) are 0 already
        status, x2 = gavel_lp.solve(c2, a, fam.b, lb, fam.ub)
        x = x2 if status == 0 and x2 is not None else x1
        # rounded so that solver noise does not decide ties between equal jobs
        x = x[:-1].reshape(n, k).clip(0.0, 1.0).round(6)  # np.clip, np.round's methods
    x.flags.writeable = False
    return x


class _LpFamily(NamedTuple):
    """The parts of the max-min LP that the class sizes (`mult`) do not change.

    Made once per (class throughputs, scales, capacities) by `_lp_family`; read-only.
    An allocation's LPs differ mostly in how many jobs each class has, so only the
    matrix's capacity entries (scale x mult) and the second objective are made per LP.
    """

    coef: np.ndarray  # normalized throughput per unit of X (classes x types)
    scale: np.ndarray  # GPUs of each class's jobs
    usable: np.ndarray  # throughput > 0
    share: np.ndarray  # each type's share of the GPUs
    indptr: np.ndarray  # the constraint matrix's CSC pattern (`lp_columns`)
    indices: np.ndarray
    data: np.ndarray  # its values with 0 for the capacity entries (set per LP)
    b: np.ndarray  # right-hand side: 0 (fairness rows), 1 (time), the capacities
    ub: np.ndarray  # upper bounds: 1 where usable, else 0; z unbounded
    c1: np.ndarray  # the first objective: maximize z


@functools.lru_cache(maxsize=1024)
def _lp_family(tput_dtype: str, tput: bytes, scale_dtype: str, scale: bytes,
               cap_dtype: str, capacity: bytes, n: int, k: int) -> _LpFamily:
    """The `_LpFamily` of these classes and capacities (arrays given by their bytes)."""
    t = np.frombuffer(tput, dtype=tput_dtype).reshape(n, k)
    s = np.frombuffer(scale, dtype=scale_dtype)
    cap = np.frombuffer(capacity, dtype=cap_dtype)
    usable = t > 0
    share = cap / cap.sum() if cap.sum() > 0 else np.zeros(k)
    prop = t @ share
    prop[prop <= 0] = 1.0
    coef = t * s[:, None] / prop[:, None]  # normalized throughput per unit of X
    live = usable.any(axis=1).astype(float)
    a = lp_columns(coef, np.zeros(n), live)  # HiGHS takes columns
    b = np.concatenate([np.zeros(n), np.ones(n), cap.astype(float)])
    ub = np.append(usable.ravel().astype(float), np.inf)
    c1 = np.zeros(n * k + 1)
    c1[-1] = -1.0
    fam = _LpFamily(coef, s, usable, share, a.indptr, a.indices, a.data, b, ub, c1)
    for arr in fam:
        arr.flags.writeable = False
    return fam


def lp_matrix(coef: np.ndarray, weight: np.ndarray, live: np.ndarray) -> csr_matrix:
    """The constraint rows of the max-min LP, built directly in CSR form.

    Rows: z - sum_t coef[j, t] x[j, t] <= 0 per job (z only where `live`), sum_t x[j, t]
    <= 1 per job, sum_j weight[j] x[j, t] <= N_t per type; columns x[j, t] (row-major),
    then z. The same matrix (entries, explicit zeros, order, index type) as stacking
    the three blocks with scipy's COO/LIL builders, without their per-call overhead.
    """
    n, k = coef.shape
    nk = n * k
    itype = np.int32 if max(nk + 1, 2 * nk + n + k) < np.iinfo(np.int32).max else np.int64
    cols = np.arange(nk, dtype=itype).reshape(n, k)
    keep = np.ones((n, k + 1), dtype=bool)
    keep[:, k] = live != 0
    fair_data = np.column_stack([-coef, live])[keep]
    fair_idx = np.column_stack([cols, np.full(n, nk, dtype=itype)])[keep]
    fair_ptr = np.concatenate(([0], np.cumsum(keep.sum(axis=1))))
    data = np.concatenate([fair_data, np.ones(nk), np.tile(weight, k)])
    indices = np.concatenate([fair_idx, cols.ravel(), cols.T.ravel()])
    indptr = np.concatenate([fair_ptr, fair_ptr[-1] + k * np.arange(1, n + 1),
                             fair_ptr[-1] + nk + n * np.arange(1, k + 1)]).astype(itype)
    return csr_matrix((data, indices, indptr), shape=(2 * n + k, nk + 1))


def lp_matrix_csc(coef: np.ndarray, weight: np.ndarray, live: np.ndarray) -> csc_matrix:
    """`lp_matrix(coef, weight, live).tocsc()`, built column by column directly.

    Column x[j, t] holds rows j (-coef), n + j (1) and 2n + t (weight[j]), in that
    (increasing) order; column z holds 1 at the live rows j. The same entries, explicit
    zeros and order as the CSR matrix converted, without the conversion: the arrays of
    `lp_columns` (which the LP itself takes) as a scipy matrix.
    """
    cols = lp_columns(coef, weight, live)
    return csc_matrix((cols.data, cols.indices.copy(), cols.indptr.copy()), shape=cols.shape)


def lp_columns(coef: np.ndarray, weight: np.ndarray, live: np.ndarray
               ) -> gavel_lp.ColMatrix:
    """The CSC arrays of the LP's constraint matrix (`lp_matrix_csc`), without a scipy matrix.

    The index arrays depend only on the shape and the live rows, so they are made once
    per such pattern (`_lp_pattern`); only the values are built per LP, and no sparse
    matrix object (whose format checks cost more than the LP's arrays) is made.
    """
    n, k = coef.shape
    indices, indptr, zrows = _lp_pattern(n, k, live.tobytes())
    xdata = np.empty((n, k, 3))
    xdata[:, :, 0] = -coef
    xdata[:, :, 1] = 1.0
    xdata[:, :, 2] = weight[:, None]
    data = np.concatenate([xdata.ravel(), live[zrows].astype(float)])
    return gavel_lp.ColMatrix((2 * n + k, n * k + 1), indptr, indices, data)


@functools.lru_cache(maxsize=1024)
def _lp_pattern(n: int, k: int, live: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row indices, column pointers and live rows of `lp_columns` (read-only arrays)."""
    live_rows = np.frombuffer(live, dtype=float)
    nk = n * k
    itype = np.int32 if max(nk + 1, 2 * nk + n + k) < np.iinfo(np.int32).max else np.int64
    rows = np.arange(n, dtype=itype)
    xrows = np.empty((n, k, 3), dtype=itype)
    xrows[:, :, 0] = rows[:, None]
    xrows[:, :, 1] = (rows + n)[:, None]
    xrows[:, :, 2] = 2 * n + np.arange(k, dtype=itype)[None, :]
    zrows = np.flatnonzero(live_rows != 0).astype(itype)
    indices = np.concatenate([xrows.ravel(), zrows])
    indptr = np.append(3 * np.arange(nk + 1, dtype=itype), 3 * nk + len(zrows)).astype(itype)
    for arr in (indices, indptr, zrows):
        arr.flags.writeable = False
    return indices, indptr, zrows


def _one_type(scale: np.ndarray, capacity: float, usable: np.ndarray) -> np.ndarray:
    """The same optimum in closed form for one GPU type: water-filling of GPU time.

    Speeds cancel out (each job's normalized throughput is s_j X_j), so max-min gives
    every usable job min(s_j, z) GPUs over time with sum_j min(s_j, z) = capacity (all
    of s_j when they fit); the total is then the capacity, so the tie-break is moot.
    """
    x = np.zeros((len(scale), 1))
    idx = np.flatnonzero(usable & (scale > 0))
    m, z = len(idx), math.inf
    if m:
        # smallest first; `left` before each step is capacity minus the smaller ones,
        # subtracted one at a time (the same floats as a loop)
        s = scale[idx[np.argsort(scale[idx], kind="stable")]]
        left = np.subtract.accumulate(np.concatenate(([capacity], s)))[:-1]
        mm = m - np.arange(m)
        short = np.flatnonzero(s * mm > left)  # too large to get all its GPUs
        if len(short):
            z = left[short[0]] / mm[short[0]]
    x[idx, 0] = np.minimum(1.0, z / scale[idx])
    return np.round(x, 6)


def spread_by_capacity(x: np.ndarray, usable: np.ndarray, capacity: np.ndarray
                       ) -> np.ndarray:
    """Each job's total time fraction spread over its usable types in proportion to size.

    What a heterogeneity-agnostic allocation means: time on "a GPU", whatever its type
    (the LP with equal throughputs has many optima; this is its symmetric one).
    """
    weights = usable * capacity[None, :]
    rows = weights.sum(axis=1, keepdims=True)
    rows[rows <= 0] = 1.0
    return np.round(x.sum(axis=1, keepdims=True) * weights / rows, 6)


@mypyc_attr(allow_interpreted_subclasses=True)
class GavelPolicy(Policy):
    """Heterogeneity-aware max-min fairness (Gavel): an LP allocation run in rounds.

    Per-job state lives in arrays by job index (throughput, allocation, time received),
    so a round gathers and ranks with numpy instead of rebuilding per-job dicts, and
    only the jobs whose GPUs change get a decision (the others keep running).
    """

    name = "gavel-mmf"
    container_jobs = False  # its per-job arrays (allocation, time received) are fixed at attach
    description = "Gavel heterogeneity-aware max-min fairness over GPU types (LP, rounds)"
    params = {
        "round": Param(360.0, as_float(0.0, lo_open=True), "round length (s)"),
        "reset_interval": Param(1920.0, as_float(0.0),
                                "minimum seconds between two allocation recomputations"),
        "stop": STOP_PARAM,
        "unallocated": Param(
            "spare", as_choice("spare", "wait"),
            "a job that arrived after the last allocation: spare (runs on GPUs the "
            "allocated jobs leave free) or wait (nothing until the next recomputation, "
            "as Gavel's simulator)"),
        "packing": Param(
            False, as_bool,
            "space sharing (Gavel's max_min_fairness_packed): when the run's performance "
            "model measured packed pairs, pairs of jobs of the same size get LP time and "
            "run packed on the same GPUs (policies/gavel_packing.py)"),
    }
    aware: ClassVar[bool] = True

    def attach(self, ctx: Ctx) -> None:
        """Round clock, allocation and time received since it was computed."""
        self.types = sorted(ctx.topology.gpu_types)
        self.next_round = -math.inf
        self.last_round = -math.inf
        self.armed = -math.inf
        self.alloc_time = -math.inf
        self.type_ix = {t: i for i, t in enumerate(self.types)}
        k, n = len(self.types), ctx.num_jobs
        self.type_time = np.zeros(k)
        self.jobs = _JobArrays(ctx, k)
        topo = ctx.topology
        self.gpu_type_ix = np.array(
            [self.type_ix.get(topo.nodes[nd].gpu_type, 0) for nd in topo.gpu_node],
            dtype=np.int64)
        self.alloc = np.zeros((n, k))  # X rows by job index (zeros: no allocation)
        self.in_alloc = np.zeros(n, dtype=bool)
        self.alloc_ids = np.zeros(0, dtype=np.int64)
        # the allocation not solved yet (jobs, capacity) and the rows of the solved one
        self._due: tuple[np.ndarray, np.ndarray] | None = None
        self._alloc_rows = np.zeros(0, dtype=np.int64)
        self.recv = np.zeros((n, k))  # seconds held per type since the allocation
        self._chosen = np.full(n, -1, dtype=np.int64)  # this round's type per job
        self._on_type = np.zeros(n, dtype=np.int64)  # type of a running job's GPUs
        self._recv_rows: list[np.ndarray] = []  # job indices with a nonzero recv row
        # rounds' time held not yet added to recv: (now, since, held since, jobs, types)
        self._owed: list[tuple[float, float, np.ndarray, np.ndarray, np.ndarray]] = []
        # job -> type -> (its spec, that spec restricted to the type)
        self._typed: dict[int, dict[int, tuple[JobSpec, JobSpec]]] = {}
        self._fits: dict[tuple, float] = {}
        # throughput rows (all types) and kinds by request class, speeds and locality
        self._rows: dict[tuple, tuple[list[float], int]] = {}
        # kinds of jobs: (throughput row, GPU demand in milli) -> id, and back by id
        self._kinds: dict[tuple[tuple[float, ...], int], int] = {}
        self._kind_list: list[tuple[tuple[float, ...], int]] = []
        self._idle: ClusterState | None = None
        # (cluster version, type order) after a round the next one would repeat (`_round`)
        self._quiet: tuple[int, list[int]] | None = None
        self._ranked = False  # whether this round's `_choose` ranked a type's candidates
        self._placer: Placer | None = None
        self.counts = {"rounds": 0, "allocations": 0}
        self._full_cap: np.ndarray | None = None  # GPUs per type, every node up
        self._caps: dict[tuple[bool, ...], np.ndarray] = {}  # the same, by nodes up
        # whether any job asks for no GPU (else the per-pass scan for them is skipped)
        self._cpu_only = not bool(self.jobs.gpu.all())
        self._one_type = k == 1  # typed specs are the jobs' own then
        # packing=true in a run whose jobs name models: Gavel's packed LP and rounds
        self._packed: Any = None
        if self.p["packing"]:
            if not self.aware:
                raise InvalidParameter(f"{self.name}: packing=true needs the "
                                       "heterogeneity-aware gavel-mmf (Gavel has no "
                                       "agnostic packing)")
            if ctx.perf is not None:
                self._packed = PackedRounds(self, ctx)

    def metrics(self) -> dict[str, float]:
        """Counters of this run: rounds and allocation (LP) recomputations."""
        if self._packed is not None:
            return {**self.counts, **self._packed.counts}
        return dict(self.counts)

    # --- allocation ---

    def throughput(self, ctx: Ctx, job: JobState) -> np.ndarray:
        """The job's throughput per type as the LP sees it (1s when agnostic).

        Aware: the job's speed on the type times the locality slowdown of its best
        placement there, as a profiler would measure it (an 8-GPU job on 2-GPU nodes
        spans 4 nodes). 0 on a type the job may not use or cannot be placed on even when
        the type is idle (e.g. 8 GPUs on 2-GPU nodes under the consolidated placer).
        """
        t = self.jobs
        if not t.tput_ok[job.idx]:
            row, kind = self._row(ctx, job.spec)
            t.tput[job.idx] = row
            t.tput_ok[job.idx] = True
            t.kind[job.idx] = kind
        return t.tput[job.idx]

    def _row(self, ctx: Ctx, spec: JobSpec) -> tuple[list[float], int]:
        """A job's throughput row (`throughput`) and kind, made once per request class.

        The kind (`_kind`) is the row with the GPU demand, which the key also fixes (its
        request class holds the job's GPUs and share).
        """
        # what `_idle_speed` depends on, for every type at once
        key = (request_class(spec), spec.gpu_speeds, spec.locality_sensitivity, spec.model,
               spec.batch_size, spec.adaptive)
        got = self._rows.get(key)
        if got is None:
            speeds = [self._idle_speed(ctx, spec, ty) for ty in self.types]
            row = speeds if self.aware else [1.0 if v > 0 else 0.0 for v in speeds]
            got = self._rows[key] = (row, self._kind(tuple(row),
                                                     spec.num_gpus * job_milli(spec)))
        return got

    def _kind(self, row: tuple[float, ...], need: int) -> int:
        """The id of the jobs of this throughput row and GPU demand (made on first use)."""
        kind = self._kinds.get((row, need))
        if kind is None:
            kind = self._kinds[(row, need)] = len(self._kind_list)
            self._kind_list.append((row, need))
        return kind

    def _tputs(self, ctx: Ctx, ids: np.ndarray) -> np.ndarray:
        """Throughput rows of these jobs (computed once per job, on first need)."""
        return self._rows_kinds(ctx, ids)[0]

    def _rows_kinds(self, ctx: Ctx, ids: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Throughput rows and kinds of these jobs (computed once per job, on first need).

        A job without a kind yet (-1) has no row either: the new jobs' rows and kinds
        are stored at once (one numpy call per array, not per job: every job is new
        once, most rounds have a few).
        """
        t = self.jobs
        kinds = t.kind[ids]
        if len(kinds) and kinds.min() < 0:
            miss = ids[kinds < 0]
            job_at = ctx.job_at
            got = [self._row(ctx, job_at(i).spec) for i in miss.tolist()]
            t.tput[miss] = [row for row, _ in got]
            t.kind[miss] = [kind for _, kind in got]
            t.tput_ok[miss] = True
            kinds = t.kind[ids]
        return t.tput[ids], kinds

    def _idle_speed(self, ctx: Ctx, spec: JobSpec, gpu_type: str) -> float:
        """The job's speed on `gpu_type` placed by the engine's placer in an idle cluster.

        0 when it may not use the type or the placer cannot put it there.
        """
        if spec.gpu_type and spec.gpu_type != gpu_type:
            return 0.0
        key = (request_class(spec), spec.gpu_speeds, spec.locality_sensitivity, spec.model,
               spec.batch_size, spec.adaptive, gpu_type)
        v = self._fits.get(key)
        if v is None:
            if self._idle is None or self._placer is None:  # both are set together
                self._idle = ClusterState(ctx.topology)
                self._placer = PLACERS[ctx.params["placer"]]()
            typed = with_gpu_type(spec, gpu_type)
            got = self._placer.place(typed, self._idle)
            v = self._fits[key] = 0.0 if isinstance(got, Unschedulable) \
                else ctx.placement_speed(spec, got)
        return v

    def _capacity(self, ctx: Ctx) -> np.ndarray:
        """GPUs of each type on healthy nodes (read-only; made once per set of nodes up)."""
        topo = ctx.topology
        if ctx.cluster.healthy_gpus == topo.num_gpus:
            if self._full_cap is None:  # read-only: shared by every round
                self._full_cap = np.array([topo.gpu_types[t] for t in self.types],
                                          dtype=float)
                self._full_cap.flags.writeable = False
            return self._full_cap
        up = ctx.cluster.node_up
        key = tuple(up)  # which nodes are up: a few failure states recur for many rounds
        got = self._caps.get(key)
        if got is None:
            cap = dict.fromkeys(self.types, 0)
            for node in topo.nodes:
                if node.num_gpus and up[node.index]:
                    cap[node.gpu_type] += node.num_gpus
            got = np.array([cap[t] for t in self.types], dtype=float)
            got.flags.writeable = False  # read-only: shared by the rounds of this state
            if len(self._caps) >= 256:
                self._caps.clear()
            self._caps[key] = got
        return got

    def _reallocate(self, ctx: Ctx, ids: np.ndarray) -> None:
        """A new allocation for these jobs (by index order); time received restarts.

        Its LP is solved when a round first reads it (`_allocation`): only a round that
        must rank a type's candidates does, so an allocation that no round reads before
        the next one (on full Philly, every one) is never solved. Its inputs (the jobs'
        rows and demands, the capacity now) do not change, so it is the same X.
        """
        self._tputs(ctx, ids)  # every job's row and kind, as of now
        self._due = (ids, self._capacity(ctx))
        self.in_alloc[self.alloc_ids] = False
        self.in_alloc[ids] = True
        if self._typed:  # forget the typed specs of jobs not in the allocation
            typed = np.fromiter(self._typed, np.int64, len(self._typed))
            for i in typed[~self.in_alloc[typed]].tolist():
                del self._typed[i]
        self.alloc_ids = ids
        self.alloc_time = ctx.now
        self.counts["allocations"] += 1
        self._owed.clear()  # time received restarts: what was owed no longer counts
        for rows in self._recv_rows:
            self.recv[rows] = 0.0
        self._recv_rows = []
        self.type_time = np.zeros(len(self.types))

    def _allocation(self) -> np.ndarray:
        """X rows by job index (zeros: no allocation), the latest allocation solved."""
        due = self._due
        if due is not None:
            self._due = None
            ids, capacity = due
            x = self._solve(ids, capacity)
            self.alloc[self._alloc_rows] = 0.0
            self.alloc[ids] = x
            self._alloc_rows = ids
        return self.alloc

    def _solve(self, ids: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """The allocation X of these jobs (rows in `ids` order) on this capacity."""
        t = self.jobs
        x = self._by_class(ids, capacity)
        scale = t.need[ids] / MILLI
        tput = t.tput[ids]
        if x is None:
            x = max_min_allocation(tput, scale, capacity)
        if not self.aware:
            x = spread_by_capacity(x, (tput > 0) & (scale[:, None] <= capacity[None, :]),
                                   capacity)
        return x

    def _by_class(self, ids: np.ndarray, capacity: np.ndarray) -> np.ndarray | None:
        """`max_min_allocation` of these jobs, its classes found from the jobs' kinds.

        The same classes in the same (lexicographic) order as `unique_rows` finds in the
        jobs' masked throughput rows and scales, but from the few kinds present (a
        count per kind and a Python sort of their rows) instead of sorting every job's
        row. None where `max_min_allocation` would not solve by classes (one type, or
        no two jobs alike): the caller calls it then.
        """
        k = len(capacity)
        if k <= 1:
            return None
        kinds = self.jobs.kind[ids]
        counts = np.bincount(kinds).tolist()
        cap = capacity.tolist()
        classes: dict[tuple[float, ...], list[int]] = {}  # class row -> its kinds
        for kind, count in enumerate(counts):
            if count:
                row, need = self._kind_list[kind]
                scale = need / MILLI  # as numpy divides: both exact in float64
                key = tuple(v if v > 0 and scale <= c else 0.0
                            for v, c in zip(row, cap, strict=True)) + (scale,)
                classes.setdefault(key, []).append(kind)
        if len(classes) >= len(ids):
            return None  # solved per job, in the jobs' order
        rows = sorted(classes)
        lut = np.zeros(len(counts), dtype=np.int64)  # kind -> class
        mult = []
        for c, key in enumerate(rows):
            lut[classes[key]] = c
            mult.append(float(sum(counts[kind] for kind in classes[key])))
        uniq = np.array(rows)
        x = _max_min_classes(uniq[:, :k], uniq[:, k], np.array(mult), capacity)
        return x[lut[kinds]]

    def _credit(self, ctx: Ctx, hs: np.ndarray, held_ids: np.ndarray,
                held_type: np.ndarray) -> None:
        """Owe each running job the time it held its type since the last round.

        `hs` is when each running job got its GPUs. The time is added when priorities
        are next needed (`_settle`), round by round in the same order, so the sums are
        the same floats; a recomputed allocation forgets what is still owed (it restarts
        the time received), so most rounds never add anything.
        """
        owed = self._owed
        owed.append((ctx.now, max(self.last_round, self.alloc_time), hs, held_ids,
                     held_type))
        if len(owed) >= OWED_MAX:
            self._settle()

    def _settle(self) -> None:
        """Add the time owed since the allocation (`_credit`), oldest round first."""
        for now, since, hs, held_ids, held_type in self._owed:
            self._add_time(now, since, hs, held_ids, held_type)
        self._owed.clear()

    def _add_time(self, now: float, since: float, hs: np.ndarray, held_ids: np.ndarray,
                  held_type: np.ndarray) -> None:
        """Add one round's time held per running job and type (from `since` to `now`).

        The per-type totals are summed in the running jobs' order, one job at a time
        (`np.add.accumulate`), so they are the same floats as a loop over the jobs.
        """
        dt = now - np.maximum(hs, since)  # hs is never NaN: as where(since > hs, ...)
        got = dt > 0
        if not got.all():
            if not got.any():
                return
            held_ids, held_type, dt = held_ids[got], held_type[got], dt[got]
        self.recv[held_ids, held_type] += dt
        self._recv_rows.append(held_ids)
        if len(self.types) == 1:
            self.type_time[0] = np.add.accumulate(
                np.concatenate(([self.type_time[0]], dt)))[-1]
            return
        for t in range(len(self.types)):  # a type no job held keeps its total
            mask = held_type == t
            if mask.any():
                self.type_time[t] = np.add.accumulate(
                    np.concatenate(([self.type_time[t]], dt[mask])))[-1]

    def priorities(self, got: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        """Gavel's priorities of jobs (rows) on every type (columns).

        Allocation (`alloc`, the jobs' rows of it) over the share of the type's time
        received (`got`, seconds per type): 0 without an allocation on the type;
        allocation x 1e9 before the job (or the type) received time since the allocation.
        """
        total = self.type_time
        share = np.divide(got, total, out=np.zeros_like(got), where=total > 0)
        fresh = share <= 0
        prio = np.divide(alloc, share, out=alloc * 1e9, where=~fresh)
        prio[alloc <= EPS] = 0.0
        return prio

    def type_order(self, ctx: Ctx, tput: np.ndarray) -> list[int]:
        """Types to fill first: fastest on average for these jobs (shuffled if agnostic).

        Speed as the LP sees it (`tput`, the jobs' rows: type speed x the locality of
        the type's nodes), so a type whose nodes are too small for the jobs' gangs comes
        after the others.
        """
        if not self.aware:
            return [int(i) for i in ctx.rng.permutation(len(self.types))]
        if len(self.types) == 1:
            return [0]
        # np.mean's own steps (sum along axis 0, then divide by the count), without its
        # dispatch: the same floats
        n = len(tput)  # Python floats (the same division): cheaper to compare
        speed = ([v / n for v in np.add.reduce(tput, axis=0).tolist()] if n
                 else np.mean(tput, axis=0).tolist())
        return sorted(range(len(self.types)), key=lambda i: (-speed[i], self.types[i]))

    # --- rounds ---

    def schedule(self, ctx: Ctx) -> Iterable[Decision]:
        """A round's decisions at a round boundary, else none (CPU-only jobs aside)."""
        if self._packed is not None:
            return self._packed.schedule(ctx)
        if self._cpu_only or ctx.now >= self.next_round - EPS:
            return self._pass(ctx)
        return ()  # between rounds: no generator to make (most passes)

    def _pass(self, ctx: Ctx) -> Iterator[Decision]:
        """At a round boundary: allocate if needed, pick this round's jobs, place them."""
        now = ctx.now
        if self._cpu_only:
            yield from start_cpu_only(ctx, cpu_only_pending(ctx))
        if now < self.next_round - EPS:
            return
        gpu = self.jobs.gpu
        pend = np.fromiter(map(_IDX, ctx.pending()), np.int64, ctx.pending_count)
        if self._cpu_only:
            pend = pend[gpu[pend]]
        running = ctx.running()
        m = len(running)
        # running jobs in the engine's order: their indices (the keys) and since when
        # they hold their GPUs; the ones with GPUs are the GPU jobs
        held_ids = np.fromiter(running, np.int64, m)
        hs = np.fromiter(map(_HELD_SINCE, running.values()), float, m)
        if self._cpu_only:
            with_gpus = gpu[held_ids]
            held_ids, hs = held_ids[with_gpus], hs[with_gpus]
        if not len(pend) and not len(held_ids):
            self.last_round = now
            return
        held_type = self._on_type[held_ids]
        self._credit(ctx, hs, held_ids, held_type)
        self.last_round = now
        self.next_round = now + self.p["round"]
        ids = np.concatenate([pend, held_ids])
        split: np.ndarray | None = pend  # ids are these, then held_ids (unless re-sorted)
        same = len(ids) == len(self.alloc_ids) and bool(self.in_alloc[ids].all())
        quiet, self._quiet = self._quiet, None
        if not same and (not len(self.alloc_ids)
                         or now - self.alloc_time >= self.p["reset_interval"]):
            ids = np.sort(ids)
            split = None
            by_idx = np.argsort(held_ids, kind="stable")  # stops go by job index then
            held_ids, held_type = held_ids[by_idx], held_type[by_idx]
            self._reallocate(ctx, ids)
            quiet = None  # a new allocation: the round is chosen afresh
        self.counts["rounds"] += 1
        order: list[int] | None = None
        skip = False
        if quiet is not None and not len(pend) and quiet[0] == ctx.cluster.version:
            if not self.aware:  # the round's draw of the type order, as `_round` makes it
                order = self.type_order(ctx, self.jobs.tput[:0])
            skip = order is None or order == quiet[1]
        if skip:
            made = 0  # the same round as the last quiet one: every job keeps its GPUs
            self._quiet = quiet
        else:
            made = yield from self._round(ctx, ids, held_ids, held_type, order, split)
        waiting = made or ctx.running() or ctx.cluster.healthy_gpus < ctx.topology.num_gpus
        if not waiting and self.p["unallocated"] == "wait":
            waiting = not self.in_alloc[ids].all()  # for the next allocation
        if waiting and self.armed < self.next_round:
            self.armed = self.next_round
            ctx.wake_at(self.next_round)

    def _choose(self, ctx: Ctx, ids: np.ndarray, tp: np.ndarray,
                order: list[int], left: list[int], kinds: np.ndarray | None = None
                ) -> np.ndarray:
        """This round's type index for each of `ids` (-1: not chosen), greedily per type.

        Per type, candidates in decreasing priority (then larger allocation, earlier
        submission, job index) take its GPUs while they fit. Only the best-ranked
        candidates are sorted first; the rest only if GPUs are still left that one of
        them could take. When all of a type's candidates fit, they are all taken without
        ranking (priorities are computed only for a type that must choose). The leading
        run of candidates that all fit is taken at once (a
        cumulative sum of integer demands); the walk goes one by one only after the first
        that does not fit, and stops once no later one could. Same choice as taking them
        one at a time.
        """
        by_kind = self._choose_all_fit(self.jobs.kind[ids] if kinds is None else kinds,
                                       order, left)
        if by_kind is not None:
            return by_kind
        t = self.jobs
        # ranks, computed once a type cannot take all its candidates
        alloc: np.ndarray | None = None
        prio: np.ndarray | None = None
        need = t.need[ids]
        submit: np.ndarray | None = None  # submission times, read once a type must rank
        choice = np.full(len(ids), -1, dtype=np.int64)
        taken = np.zeros(len(ids), dtype=bool)
        if self.p["unallocated"] == "wait":  # not in the allocation: nothing this round
            taken |= ~self.in_alloc[ids]
        for ti in order:
            cand = np.flatnonzero((tp[:, ti] > 0) & ~taken)
            if not len(cand) or left[ti] <= 0:
                continue
            total = int(need[cand].sum())
            if total <= left[ti]:  # every candidate fits: all are taken, whatever the rank
                choice[cand] = ti
                left[ti] -= total
                taken[cand] = True
                continue
            if prio is None or alloc is None or submit is None:
                self._ranked = True
                self._settle()
                submit = t.submit[ids]
                alloc = self._allocation()[ids]
                prio = self.priorities(self.recv[ids], alloc)
            key = -prio[cand, ti]
            head = cand
            budget = 2 * left[ti] // max(1, int(need[cand].min())) + 64
            if len(cand) > 2 * budget:
                cut = np.partition(key, budget - 1)[budget - 1]
                inside = key <= cut  # every tie of the cut too: the rest rank after
                head, rest = cand[inside], cand[~inside]
            else:
                rest = cand[:0]
            for part in (head, rest):
                if not len(part) or left[ti] <= 0 or int(need[part].min()) > left[ti]:
                    break
                rank = part[np.lexsort((ids[part], submit[part], -alloc[part, ti],
                                        -prio[part, ti]))]
                d = need[rank]
                fit = int(np.searchsorted(np.cumsum(d), left[ti], side="right"))
                if fit:
                    choice[rank[:fit]] = ti
                    left[ti] -= int(d[:fit].sum())
                if left[ti] <= 0 or fit == len(rank):
                    continue
                low = np.minimum.accumulate(d[::-1])[::-1].tolist()  # least need from here
                for pos in range(fit, len(rank)):
                    if low[pos] > left[ti]:
                        break
                    di = int(d[pos])
                    if di <= left[ti]:
                        choice[rank[pos]] = ti
                        left[ti] -= di
                        if left[ti] <= 0:
                            break
            taken |= choice == ti
        return choice

    def _choose_all_fit(self, kinds: np.ndarray, order: list[int], left: list[int]
                        ) -> np.ndarray | None:
        """`_choose` when every type can take all of its candidates, else None.

        Then no candidate is ranked: each job goes to the first type in `order` it can
        use (that has GPUs left), which depends only on its kind (throughput row and
        demand). So the types are filled by kind, from a count of each kind's jobs,
        instead of by numpy calls on every job's row (the common round: the cluster has
        room for every job). The same integer totals; `left` is updated only when this
        succeeds. Not for `unallocated=wait` (which excludes jobs by allocation).
        """
        if self.p["unallocated"] == "wait":
            return None
        counts = np.bincount(kinds).tolist()
        kind_list = self._kind_list
        present = [kind for kind, count in enumerate(counts) if count]
        room = list(left)
        kind_type = [-1] * len(counts)
        for ti in order:
            cand = [kind for kind in present
                    if kind_type[kind] < 0 and kind_list[kind][0][ti] > 0]
            if not cand or room[ti] <= 0:
                continue
            total = sum(counts[kind] * kind_list[kind][1] for kind in cand)
            if total > room[ti]:
                return None  # this type must rank its candidates
            for kind in cand:
                kind_type[kind] = ti
            room[ti] -= total
        left[:] = room
        return np.array(kind_type, dtype=np.int64)[kinds]

    def _round(self, ctx: Ctx, ids: np.ndarray, held_ids: np.ndarray,
               held_type: np.ndarray, order: list[int] | None = None,
               pend: np.ndarray | None = None) -> Generator[Decision, None, int]:
        """Pick this round's (job, type) pairs greedily, then stop, keep and place.

        `held_ids` are the running jobs with GPUs (in the order their stops are issued)
        and `held_type` the type index each runs on; `order` the types in the order they
        fill (`type_order`, when already drawn); `pend`, when given, the jobs of `ids`
        before `held_ids` (ids = pend then held_ids: `_starts_after`). Only jobs
        that lose or change their GPUs get a decision: a job chosen for the type it runs
        on keeps running untouched.

        A round that ranked no type's candidates (each job went to the first type in
        `order` it can use: a choice that reads no time received) and after whose
        decisions every job of `ids` runs on the type chosen for it is remembered
        (`_quiet`, with the cluster's version once its decisions are applied). The next
        round, if the cluster did not change since (the same jobs run, each on its
        type) and no job waits, has the same jobs, capacity and type order (drawn again
        when agnostic), so it would choose the same and keep every job where it is:
        `_pass` skips it.
        """
        left = [int(c) * MILLI for c in self._capacity(ctx).tolist()]
        tp, kinds = self._rows_kinds(ctx, ids)
        if order is None:
            order = self.type_order(ctx, tp)
        self._ranked = False
        choice = self._choose(ctx, ids, tp, order, left, kinds)
        stop = Suspend if self.p["stop"] == "suspend" else Preempt
        made = 0
        why = f"{self.name}: round"
        job_at = ctx.job_at
        need, tput = self.jobs.need, self.jobs.tput
        if pend is not None:
            moved_ids, starts, firsts = self._starts_after(pend, held_ids, held_type, choice)
        else:
            chosen_type = self._chosen
            chosen_type[ids] = choice
            moved = chosen_type[held_ids] != held_type
            moved_ids = held_ids[moved].tolist()
            chosen_type[held_ids[~moved]] = -1  # kept: no start either
            new = ids[chosen_type[ids] >= 0]
            starts = new[np.lexsort((new, -need[new]))].tolist()
            firsts = chosen_type[starts].tolist()
            chosen_type[ids] = -1
        for i in moved_ids:
            yield stop(job_at(i).job_id, why)
            made += 1
        place, typed, started = ctx.place, self._typed_spec, self._started
        for i, first in zip(starts, firsts, strict=True):
            j = job_at(i)
            if j.status == RUNNING:
                continue
            got = place(typed(j.spec, i, first))
            if not isinstance(got, Unschedulable):
                yield Start(j.job_id, got)
                started(j)
                made += 1
                continue
            # the chosen type's free GPUs are too scattered for the job: any other
            # usable type with GPUs left this round
            d = int(need[i])
            for ti in [k for k in order if k != first and tput[i, k] > 0 and d <= left[k]]:
                got = place(typed(j.spec, i, ti))
                if not isinstance(got, Unschedulable):
                    left[ti] -= d
                    left[first] += d
                    yield Start(j.job_id, got)
                    started(j)
                    made += 1
                    break
        # (the decisions are applied by now: the engine applies each before the next)
        if (not self._ranked and not self._cpu_only and not ctx.pending_count
                and owner(ctx) is None
                and bool((self._on_type[ids] == choice).all())):
            self._quiet = (ctx.cluster.version, order)
        return made

    def _starts_after(self, pend: np.ndarray, held_ids: np.ndarray, held_type: np.ndarray,
                      choice: np.ndarray) -> tuple[list[int], list[int], list[int]]:
        """The round's stops, starts and starts' types when ids = pend then held_ids.

        Stops: the held jobs whose chosen type is not theirs (in `held_ids` order).
        Starts: the chosen pending jobs and chosen stopped ones, largest demand first
        (then by job index), with their chosen types. The choices of the two groups
        are slices of `choice`, so no per-job scatter is needed (the same lists as
        `_round`'s general path).
        """
        p = len(pend)
        moved = choice[p:] != held_type
        if moved.any():
            moved_ids = held_ids[moved]
            cand = np.concatenate([pend, moved_ids])
            cand_type = np.concatenate([choice[:p], choice[p:][moved]])
            stops = moved_ids.tolist()
        else:
            cand, cand_type, stops = pend, choice[:p], []
        go = cand_type >= 0
        new = cand[go]
        ranked = sorted(zip((-self.jobs.need[new]).tolist(), new.tolist(),
                            cand_type[go].tolist(), strict=True))
        return stops, [i for _, i, _ in ranked], [ti for _, _, ti in ranked]

    def _started(self, job: JobState) -> None:
        """Note the type of the GPUs a job just got (they stay its own until it stops)."""
        if job.gpus:
            self._on_type[job.idx] = self.gpu_type_ix[job.gpus[0]]

    def _typed_spec(self, spec: JobSpec, idx: int, ti: int) -> JobSpec:
        """The job's spec restricted to type `ti` (made once per job and type)."""
        t = self.types[ti]
        if spec.gpu_type == t or self._one_type:
            return spec
        per_type = self._typed.get(idx)
        if per_type is None:
            per_type = self._typed[idx] = {}
        got = per_type.get(ti)
        if got is None or got[0] is not spec:
            got = per_type[ti] = (spec, with_gpu_type(spec, t))
        return got[1]


class _JobArrays:
    """Per-job constants by job index: GPU demand (milli), submission, throughputs."""

    def __init__(self, ctx: Ctx, k: int) -> None:
        specs = [ctx.job_at(i).spec for i in range(ctx.num_jobs)]
        self.need = np.array([s.num_gpus * job_milli(s) for s in specs], dtype=np.int64)
        self.gpu = np.array([s.num_gpus > 0 for s in specs], dtype=bool)
        self.submit = np.array([s.submit_time for s in specs], dtype=float)
        self.tput = np.zeros((len(specs), k))
        self.tput_ok = np.zeros(len(specs), dtype=bool)
        # the job's kind (`GavelPolicy._kind`): throughput row and demand, set with tput
        self.kind = np.full(len(specs), -1, dtype=np.int64)  # -1: no row yet


class GavelAgnosticPolicy(GavelPolicy):
    """Gavel's heterogeneity-agnostic max-min fairness: the LP ignores GPU speeds."""

    name = "gavel-mmf-agnostic"
    description = "max-min fairness blind to GPU speeds (Gavel's agnostic baseline)"
    aware = False
