"""Gavel's small LPs solved by scipy's HiGHS without `linprog`'s per-call overhead.

The allocation LPs have a few dozen variables (one per class of identical jobs and GPU
type), so `scipy.optimize.linprog(method="highs")` spends ~90% of its time in Python:
input cleaning, sparse re-stacking, and option checks that build a HiGHS options manager
per option, and a new HiGHS instance per call. `solve` hands the same model (the same
CSC arrays, bounds and options) to the same bundled HiGHS solver directly, so it returns
the same solution (bit for bit: tests compare it with `linprog`), and falls back to
`linprog` where scipy's private HiGHS bindings are not there. One HiGHS instance per
thread is reused, given the options once and cleared before each solve (tests check a
sequence of solves against linprog); linprog's check of the optimum is `feasible`.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csc_matrix

try:  # scipy's bundled HiGHS (private modules: the same ones `linprog` calls)
    import scipy.optimize._highspy._core as _h
except ImportError:  # pragma: no cover - another scipy layout: linprog itself
    _h = None

_OPTIONS: Any = None
_LOCAL = threading.local()  # one HiGHS instance per thread, cleared before each solve
_TOL = float(np.sqrt(1e-9) * 10)  # linprog's feasibility tolerance in `_check_result`


def _options() -> Any:
    """The options `linprog(method="highs")` passes by default (made once)."""
    global _OPTIONS
    if _OPTIONS is None:
        o = _h.HighsOptions()
        o.presolve = "on"
        o.highs_debug_level = _h.HighsDebugLevel.kHighsDebugLevelNone
        o.log_to_console = False
        o.output_flag = False
        o.simplex_strategy = _h.simplex_constants.SimplexStrategy.kSimplexStrategyDual
        _OPTIONS = o
    return _OPTIONS


class ColMatrix(NamedTuple):
    """A constraint matrix as HiGHS takes it (CSC arrays), without a scipy matrix."""

    shape: tuple[int, int]
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray


def solve(c: np.ndarray, a: csc_matrix | ColMatrix, b: np.ndarray, lb: np.ndarray,
          ub: np.ndarray) -> tuple[int, np.ndarray | None]:
    """Minimize c x subject to a x <= b, lb <= x <= ub: (linprog's status, x).

    Status 0 is an optimum that passed `linprog`'s own check of bounds and constraints
    (x is its solution); any other status is a failure (x may be None). `a` is in CSC
    form, as HiGHS takes it (the caller converts once for both of Gavel's LPs), or its
    arrays (`ColMatrix`).
    """
    if _h is None:  # pragma: no cover
        if isinstance(a, ColMatrix):
            a = csc_matrix((a.data, a.indices, a.indptr), shape=a.shape)
        res = linprog(c, A_ub=a, b_ub=b, bounds=np.column_stack([lb, ub]), method="highs")
        return int(res.status), res.x
    lp = _h.HighsLp()
    m, n = a.shape
    lp.num_col_ = n
    lp.num_row_ = m
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = m
    lp.a_matrix_.format_ = _h.MatrixFormat.kColwise
    lp.col_cost_ = np.asarray(c, dtype=float)
    lp.col_lower_ = np.asarray(lb, dtype=float)
    lp.col_upper_ = np.asarray(ub, dtype=float)
    lp.row_lower_ = _no_lower(m)
    lp.row_upper_ = np.asarray(b, dtype=float)
    lp.a_matrix_.start_ = a.indptr
    lp.a_matrix_.index_ = a.indices
    lp.a_matrix_.value_ = a.data
    highs = getattr(_LOCAL, "highs", None)
    if highs is None:
        highs = _LOCAL.highs = _h._Highs()
        if highs.passOptions(_options()) == _h.HighsStatus.kError:  # kept across solves
            _LOCAL.highs = None
            return 4, None
    highs.clearSolver()  # no basis or solution of the previous LP: solved from scratch
    if highs.passModel(lp) == _h.HighsStatus.kError or highs.run() == _h.HighsStatus.kError:
        return 4, None
    if highs.getModelStatus() != _h.HighsModelStatus.kOptimal:
        return 2, None  # linprog: infeasible, unbounded or another failure (all != 0)
    sol = highs.getSolution()
    x = sol.col_value  # Python lists: the checks below run on a few dozen floats
    slack = [bi - ri for bi, ri in zip(b.tolist(), sol.row_value, strict=True)]
    ok = _feasible(x, highs.getObjectiveValue(), slack, lb.tolist(), ub.tolist())
    return (0 if ok else 4), np.array(x)


@functools.lru_cache(maxsize=64)
def _no_lower(m: int) -> np.ndarray:
    """The lower bounds of m rows, all -inf (read-only: HiGHS copies what it is given)."""
    lower = np.full(m, -np.inf)
    lower.flags.writeable = False
    return lower


def feasible(x: np.ndarray, fun: float, slack: np.ndarray, lb: np.ndarray, ub: np.ndarray
             ) -> bool:
    """`linprog`'s check of an optimum (`_check_result`) for an LP without equalities.

    No NaN in x, the objective or the slacks; x within its bounds and every slack at
    least -tol, with linprog's tol (sqrt(1e-9) x 10): the same verdict without building
    the bounds array and `np.isclose` terms that are moot without integrality.
    """
    return _feasible(x.tolist(), fun, slack.tolist(), lb.tolist(), ub.tolist())


def _feasible(x: list[float], fun: float, slack: list[float], lb: list[float],
              ub: list[float]) -> bool:
    """`feasible` on Python floats: cheaper than numpy's calls on the LPs' few values.

    The same float comparisons (lb - tol and ub + tol rounded as numpy rounds them); a
    NaN fails every comparison, so it fails the check as `feasible`'s NaN test does.
    """
    if math.isnan(fun):
        return False
    for xi, lo, hi in zip(x, lb, ub, strict=True):
        if not lo - _TOL <= xi <= hi + _TOL:
            return False
    return all(s >= -_TOL for s in slack)
