"""The max-min LP's CSC matrix built directly equals the CSR one converted (bit for bit)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.gavel import lp_matrix, lp_matrix_csc


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_direct_csc_equals_converted_csr(n: int, k: int, seed: int) -> None:
    """Same entries (explicit zeros and -0.0 too), row order, index type and shape."""
    rng = np.random.default_rng(seed)
    coef = rng.random((n, k))
    coef[rng.random((n, k)) < 0.3] = 0.0
    weight = rng.choice([0.0, 0.5, 1.0, 8.0], n)  # explicit zeros kept too
    live = (rng.random(n) < 0.7).astype(float)
    want = lp_matrix(coef, weight, live).tocsc()
    got = lp_matrix_csc(coef, weight, live)
    assert got.shape == want.shape
    for a, b in ((got.data, want.data), (got.indices, want.indices),
                 (got.indptr, want.indptr)):
        assert a.dtype == b.dtype
        assert a.tobytes() == b.tobytes()
