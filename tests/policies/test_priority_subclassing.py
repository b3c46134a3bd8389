"""Researchers' policies subclass the compiled priority policies as before (setup.py).

`PriorityPolicy`, Tiresias and SJF/SRTF run compiled: what an interpreted subclass
overrides (hooks, `choose_victims`, class attributes such as `preemptive`) must be what
the compiled walk calls and reads, and a policy left as it is must decide the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from schedlab.policies.priority import PriorityPolicy
from schedlab.policies.sjf import SrtfPolicy
from schedlab.policies.tiresias import TiresiasLasPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import JobState
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace


def _contended() -> tuple[Any, Any]:
    topo = uniform_topology(2)
    return topo, load_trace("philly-like:300", topology=topo, load=1.5)


@pytest.mark.parametrize("base", [TiresiasLasPolicy, SrtfPolicy])
def test_an_interpreted_subclass_hooks_are_called_and_decide_the_same(base: type) -> None:
    class Counting(base):  # type: ignore[valid-type,misc]
        def attach(self, ctx: Any) -> None:
            super().attach(ctx)
            self.seen = 0
            self.searches = 0

        def on_status(self, ctx: Any, job: JobState, old: str | None) -> None:
            self.seen += 1
            super().on_status(ctx, job, old)

        def choose_victims(self, ctx: Any, job: JobState, key: Any, pool: Any) -> Any:
            self.searches += 1
            return super().choose_victims(ctx, job, key, pool)

    topo, trace = _contended()
    plain = Simulation(trace, topo, base()).run()
    pol = Counting()
    got = Simulation(trace, topo, pol).run()
    assert pol.seen > 0 and pol.searches > 0
    assert got.summary["preemptions"] == plain.summary["preemptions"] > 0
    assert got.jobs["end_time"].tolist() == plain.jobs["end_time"].tolist()


def test_a_subclass_choosing_no_victims_or_not_preemptive_preempts_nobody() -> None:
    class NoVictims(TiresiasLasPolicy):
        def choose_victims(self, ctx: Any, job: JobState, key: Any, pool: Any) -> Any:
            return None

    class NotPreemptive(TiresiasLasPolicy):
        preemptive = False  # a class attribute the compiled walk reads

    topo, trace = _contended()
    for cls in (NoVictims, NotPreemptive):
        r = Simulation(trace, topo, cls()).run()
        assert r.summary["preemptions"] == 0, cls.__name__
        assert r.summary["jobs_completed"] == len(trace.jobs)


def test_a_priority_policy_of_a_few_lines_orders_the_queue() -> None:
    class LargestFirst(PriorityPolicy):
        name = "largest-first"

        def pending_key(self, ctx: Any, job: JobState) -> tuple[Any, ...]:
            return (-job.spec.num_gpus, job.spec.submit_time)

    topo, trace = _contended()
    r = Simulation(trace, topo, LargestFirst()).run()
    assert r.summary["jobs_completed"] == len(trace.jobs)
    assert r.summary["preemptions"] == 0
