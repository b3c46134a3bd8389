"""The loop driven directly (`Simulation.run`) and as a SimPy process (`start`/`advance`)
give the same run; a policy declaring `only_pending` is not asked while nothing waits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import assert_same_run

from schedlab.policies.fifo import FifoPolicy
from schedlab.sim.engine import Simulation
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace

TOPO = uniform_topology(4, sockets=2, switches_per_socket=2, gpus_per_switch=2, name="four")


@pytest.mark.parametrize(("policy", "params", "until"), [
    ("fifo", {}, None),
    ("fifo-backfill", {}, None),
    ("tiresias-las", {}, None),  # preemptions and requeues
    ("gandiva", {}, None),  # time slicing on a timer
    ("fifo", {"failure_rate": 0.5, "mtbf": 20000.0, "mttr": 600.0}, None),
    ("srtf", {}, 20000.0),  # cut by until
])
def test_direct_and_stepped_runs_are_the_same(policy: str, params: dict[str, Any],
                                              until: float | None) -> None:
    trace = load_trace("philly-like:300")
    direct = Simulation(trace, TOPO, policy, seed=3, params=params).run(until=until)
    if params:  # the case exercises node failures and attempt failures
        assert len(direct.nodes) > 0 and (direct.events["kind"] == "fail").any()
    if policy == "tiresias-las":
        assert direct.summary["preemptions"] > 0
    sim = Simulation(trace, TOPO, policy, seed=3, params=params)
    run = sim.start(until=until)
    assert run.advance() is False  # no Await: SimPy steps it to the end
    assert_same_run(direct, sim.result(run, 0.0))


class _Counting(FifoPolicy):
    """fifo that counts its passes and the passes it was asked with nothing queued."""

    name = "fifo-counting"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.passes = 0
        self.empty = 0

    def schedule(self, ctx: Any) -> Iterator[Any]:
        self.passes += 1
        self.empty += ctx.pending_count == 0
        yield from super().schedule(ctx)


class _Eager(_Counting):
    only_pending = False


def test_only_pending_policies_are_not_asked_with_an_empty_queue() -> None:
    trace = load_trace("philly-like:200")
    lazy, eager = _Counting(), _Eager()
    a = Simulation(trace, TOPO, lazy).run()
    b = Simulation(trace, TOPO, eager).run()
    assert lazy.empty == 0 and lazy.passes > 0
    assert eager.empty > 0 and eager.passes == lazy.passes + eager.empty
    assert_same_run(a, b)
