"""Gavel's fast paths give the same numbers as the straightforward ones they replace."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_matrix, vstack

from policies.gavel import _one_type, lp_matrix


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
