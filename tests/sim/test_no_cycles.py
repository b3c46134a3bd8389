"""No policy leaves reference cycles behind as it runs.

Compiled by mypyc, a closure defined in a generator (or one that calls itself, or that
another closure calls) and the frame that holds it reference each other: garbage only
the cyclic collector frees, which the engine runs rarely (`schedlab.sim.engine.GC_THRESHOLDS`),
so each pass's data stays alive until then (conservative backfilling's profile was
12 MB of it on full Philly). Module-level helpers or small classes do the same without.
"""

from __future__ import annotations

import gc

import pytest

from schedlab.policies import registered_policies
from schedlab.sim.engine import Simulation
from schedlab.topologies import load_topology
from schedlab.traces import load_trace


@pytest.fixture(scope="module")
def inputs():
    return load_trace("default"), load_topology("default")


@pytest.mark.parametrize("policy", registered_policies())
def test_a_run_makes_no_cyclic_garbage(policy, inputs):
    found: list[int] = []
    passes = [0]

    def collect(now: float, final: int, total: int) -> None:
        passes[0] += 1
        if passes[0] % 50 == 0:
            found.append(gc.collect())  # unreachable objects only a cycle kept alive

    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        # a third of the default trace: every policy's code paths, a third of the time
        Simulation(*inputs, policy, seed=0, max_jobs=1000).run(progress=collect)
    finally:
        if was:
            gc.enable()
    assert found, "the run made too few passes to look"
    assert sum(found) == 0, (f"{policy}: {sum(found)} objects in reference cycles made "
                             "during the run")
