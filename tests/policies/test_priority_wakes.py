"""Skipped work is output-neutral: idle re-walks after start-only walks, unasked wake-ups.

Each policy is run as shipped and as a subclass that turns the shortcut off (the
behaviour before it), on a contended generated trace; every frame must be equal.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from schedlab.policies.sjf import SjfPolicy
from schedlab.policies.tiresias import TiresiasGittinsPolicy, TiresiasLasPolicy
from schedlab.sim.context import SchedContext
from schedlab.sim.engine import Simulation
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace


def _run(policy: Any) -> Any:
    topo = uniform_topology(3)
    trace = load_trace("philly-like:400", topology=topo, load=1.6)
    return Simulation(trace, topo, policy).run()


def _same_frames(a: Any, b: Any) -> None:
    for name in ("jobs", "events", "timeline"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    drop = {"wall_seconds", "events_processed"}
    assert {k: v for k, v in a.summary.items() if k not in drop} == \
        {k: v for k, v in b.summary.items() if k not in drop}


class _RewalkSjf(SjfPolicy):
    def _no_victim_for_queue(self) -> bool:
        return False  # every walk that started something is walked again


class _EveryWakeLas(TiresiasLasPolicy):
    def _no_victim_for_queue(self) -> bool:
        return False

    def _settled(self, ctx: SchedContext) -> bool:
        return False  # a pass at every time a timer wanted one


class _EveryWakeGittins(TiresiasGittinsPolicy):
    def _no_victim_for_queue(self) -> bool:
        return False

    def _settled(self, ctx: SchedContext) -> bool:
        return False


def test_sjf_skips_only_idle_rewalks():
    _same_frames(_run(SjfPolicy()), _run(_RewalkSjf()))


@pytest.mark.parametrize("params", [
    {},
    {"thresholds": "300,1200", "promote_knob": 1.0},
    {"thresholds": "100,250", "demotion_timer": "simulator", "requeue": "front"},
    {"thresholds": "100,250,500", "num_queues": 4, "stop": "preempt"},
])
def test_las_wakes_only_when_a_pass_can_change_something(params):
    fast, every = _run(TiresiasLasPolicy(**params)), _run(_EveryWakeLas(**params))
    _same_frames(fast, every)
    assert fast.summary["events_processed"] <= every.summary["events_processed"]


def test_gittins_wakes_only_when_a_pass_can_change_something():
    params = {"thresholds": "300,1200"}
    fast, every = _run(TiresiasGittinsPolicy(**params)), _run(_EveryWakeGittins(**params))
    _same_frames(fast, every)
    assert fast.summary["events_processed"] <= every.summary["events_processed"]
