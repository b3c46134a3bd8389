"""Gavel's fast paths give the same numbers as the straightforward ones they replace."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_matrix, vstack

from schedlab.policies.gavel import _one_type, lp_matrix


def _stacked(coef: np.ndarray, weight: np.ndarray, live: np.ndarray):
    """The LP's constraint matrix built block by block with scipy's COO/LIL builders."""
    n, k = coef.shape
    rows, cols = np.repeat(np.arange(n), k), np.arange(n * k)
    fair = coo_matrix((-coef.ravel(), (rows, cols)), shape=(n, n * k + 1)).tolil()
    fair[:, n * k] = live[:, None]
    time = coo_matrix((np.ones(n * k), (rows, cols)), shape=(n, n * k + 1))
    cap = coo_matrix((np.repeat(weight, k), (np.tile(np.arange(k), n), cols)),
                     shape=(k, n * k + 1))
    return vstack([fair.tocoo(), time, cap]).tocsr()


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 12), k=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_lp_matrix_is_the_stacked_matrix_entry_for_entry(n, k, seed):
    rng = np.random.default_rng(seed)
    coef = rng.random((n, k)) * (rng.random((n, k)) < 0.6)
    live = (coef > 0).any(axis=1).astype(float)
    weight = rng.choice([0.0, 0.5, 1.0, 8.0], n)
    a, b = _stacked(coef, weight, live), lp_matrix(coef, weight, live)
    assert a.shape == b.shape
    for f in ("data", "indices", "indptr"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert np.array_equal(np.signbit(a.data), np.signbit(b.data))  # -0.0 kept as such


def _one_type_loop(scale: np.ndarray, capacity: float, usable: np.ndarray) -> np.ndarray:
    """Water-filling one job at a time, smallest first (the reference)."""
    x = np.zeros((len(scale), 1))
    idx = np.flatnonzero(usable & (scale > 0))
    left, m, z = capacity, len(idx), math.inf
    for i in idx[np.argsort(scale[idx], kind="stable")]:
        if scale[i] * m <= left:
            left -= scale[i]
            m -= 1
        else:
            z = left / m
            break
    for i in idx:
        x[i, 0] = min(1.0, z / scale[i])
    return np.round(x, 6)


@settings(max_examples=30, deadline=None)
@given(scale=st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0, 8.0]), min_size=1,
                      max_size=20),
       capacity=st.sampled_from([0.0, 1.0, 7.5, 16.0, 64.0]), seed=st.integers(0, 99))
def test_one_type_vectorized_equals_the_loop(scale, capacity, seed):
    s = np.array(scale)
    usable = np.random.default_rng(seed).random(len(s)) < 0.8
    assert np.array_equal(_one_type(s, capacity, usable), _one_type_loop(s, capacity, usable))


def _linprog_pair(tput: np.ndarray, scale: np.ndarray, mult: np.ndarray,
                  capacity: np.ndarray):
    """The allocation's two LPs as `linprog` solves them: [(status, x), (status, x)]."""
    from scipy.optimize import linprog

    n, k = tput.shape
    share = capacity / capacity.sum()
    prop = tput @ share
    prop[prop <= 0] = 1.0
    coef = tput * scale[:, None] / prop[:, None]
    live = (tput > 0).any(axis=1).astype(float)
    a = lp_matrix(coef, scale * mult, live)
    b = np.concatenate([np.zeros(n), np.ones(n), capacity])
    bounds = [(0.0, 1.0 if u else 0.0) for u in (tput > 0).ravel()] + [(0.0, None)]
    c1 = np.zeros(n * k + 1)
    c1[-1] = -1.0
    out = [linprog(c1, A_ub=a, b_ub=b, bounds=bounds, method="highs")]
    z = float(out[0].x[-1]) if out[0].status == 0 else 0.0
    b2 = b.copy()
    b2[:n] = 0.0
    bounds2 = bounds[:-1] + [(max(0.0, z * (1 - 1e-7) - 1e-9), None)]
    c2 = np.concatenate([-(coef * mult[:, None]).ravel(), [0.0]])
    out.append(linprog(c2, A_ub=a, b_ub=b2, bounds=bounds2, method="highs"))
    lb = np.zeros(n * k + 1)
    ub = np.append((tput > 0).ravel().astype(float), np.inf)
    lb2 = lb.copy()
    lb2[-1] = bounds2[-1][0]
    a = a.tocsc()
    return out, [(c1, a, b, lb, ub), (c2, a, b2, lb2, ub)]


def test_direct_highs_solves_gavel_lps_exactly_as_linprog():
    """`gavel_lp.solve` (HiGHS without linprog's overhead) gives linprog's x bit for bit."""
    from schedlab.policies import gavel_lp

    rng = np.random.default_rng(18)
    for _ in range(150):
        n, k = int(rng.integers(1, 10)), int(rng.integers(2, 5))
        tput = np.round(rng.random((n, k)) * 2, int(rng.integers(1, 4)))
        tput *= rng.random((n, k)) < 0.8
        if rng.random() < 0.3:  # repeated rows, as identical jobs of one class
            tput[n // 2:] = tput[0]
        scale = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0], n)
        mult = rng.choice([1.0, 3.0, 40.0], n)
        capacity = rng.choice([0.0, 8.0, 64.0, 642.0], k)
        if capacity.sum() == 0:
            capacity[0] = 8.0
        expected, problems = _linprog_pair(tput, scale, mult, capacity)
        for want, args in zip(expected, problems, strict=True):
            status, x = gavel_lp.solve(*args)
            assert status == want.status
            if want.status == 0:
                assert x is not None and np.array_equal(x, want.x)
