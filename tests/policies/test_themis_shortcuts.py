"""Themis' fast paths against the plain ones they replace (issue 18, session 8)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from schedlab.policies.conformance import check_policy
from schedlab.policies.themis import ThemisFtfPolicy, _worst
from schedlab.sim.jobstate import RUNNING
from schedlab.sim.model import Decision


@pytest.mark.parametrize("seed", range(40))
def test_worst_is_the_lexsort_prefix(seed):
    """The m smallest (key, rank) by partition are np.lexsort's first m, ties and all."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    neg = rng.choice([-2.0, -1.0, -0.0, 0.0, -0.5, -3.25], n) if seed % 2 else -rng.random(n)
    if seed % 5 == 0:
        neg[rng.integers(0, n)] = np.nan
    rank = rng.permutation(n)
    for m in range(n + 2):
        got = _worst(neg, rank, m)
        want = np.lexsort((rank, neg))[:m]
        if got is None:
            assert np.isnan(neg[want]).any()
        else:
            assert got.tolist() == want.tolist()


class _Checked(ThemisFtfPolicy):
    """Themis asserting its running arrays are the running GPU jobs at every auction."""

    def _auction(self, ctx, pending, boundary) -> Iterator[Decision]:
        want = sorted(j.idx for j in ctx.running().values() if j.spec.num_gpus)
        assert sorted(j.idx for j in self.run.jobs) == want
        assert sorted(self.run.idx[:len(want)].tolist()) == want
        assert all(j.status == RUNNING for j in self.run.jobs)
        assert self.wait_demand == int(self._table(ctx).demand[pending].sum())
        yield from super()._auction(ctx, pending, boundary)


@pytest.mark.parametrize("params", [{"lease": 30.0}, {"lease": 50.0, "stop": "suspend"},
                                    {"lease": 40.0, "perf": True, "fairness_knob": 0.0}])
def test_running_arrays_follow_the_engine(params):
    check_policy(lambda: _Checked(**params))
