"""Policies see a run through `schedlab.sim.interfaces.PolicyContext`, whole or narrowed."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest
from conftest import make_trace

from schedlab.policies.base import Ctx
from schedlab.policies.fifo import FifoPolicy
from schedlab.policies.registry import policy_class, register, registered_policies, unregister
from schedlab.sim.context import SchedContext
from schedlab.sim.engine import Simulation
from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.model import Decision, JobSpec
from schedlab.topologies.build import uniform_topology

HOOKS = ("attach", "schedule", "notify", "explain")


def test_ctx_is_the_protocol():
    assert Ctx is PolicyContext


@pytest.mark.parametrize("name", registered_policies())
def test_registered_policies_type_their_context_by_the_protocol(name):
    cls = policy_class(name)
    for hook in HOOKS:
        fn = getattr(cls, hook)
        if not inspect.isfunction(fn):  # compiled (mypyc): no annotations to read
            continue
        params = list(inspect.signature(fn).parameters.values())
        ann = params[1].annotation
        where = f"{cls.__qualname__}.{hook}"
        if isinstance(ann, str):  # postponed: a name of the module, or under TYPE_CHECKING
            assert ann in ("Ctx", "PolicyContext"), where
            ann = fn.__globals__.get(ann, PolicyContext)
        assert ann is PolicyContext, where


SEEN: list[object] = []  # every context a `_Probe` was handed


class _Probe(FifoPolicy):
    """fifo that keeps every context it is handed."""

    name = "ctx-probe"

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        SEEN.append(ctx)
        yield from super().schedule(ctx)


@pytest.fixture
def probe():
    SEEN.clear()
    register("ctx-probe", _Probe)
    try:
        yield "ctx-probe"
    finally:
        unregister("ctx-probe")
        SEEN.clear()


def _jobs():
    return make_trace(JobSpec("a", 0.0, 2, 10.0), JobSpec("b", 1.0, 1, 10.0))


def test_the_runs_context_satisfies_the_protocol(probe):
    Simulation(_jobs(), uniform_topology(1), probe).run()
    assert SEEN and all(type(c) is SchedContext for c in SEEN)
    assert all(isinstance(c, PolicyContext) for c in SEEN)


def test_hiveds_narrowed_context_satisfies_the_protocol(probe):
    Simulation(_jobs(), uniform_topology(1), "hived", params={"order": probe}).run()
    assert SEEN and all(type(c).__name__ == "_QueueContext" for c in SEEN)
    assert all(isinstance(c, PolicyContext) for c in SEEN)


def test_hiveds_narrowed_context_defines_every_member_itself(probe):
    """Not by its `__getattr__` fallback, which `isinstance` does not see on Python 3.12+."""
    from typing import _get_protocol_attrs  # type: ignore[attr-defined]

    Simulation(_jobs(), uniform_topology(1), "hived", params={"order": probe}).run()
    qctx = SEEN[0]
    for name in sorted(_get_protocol_attrs(PolicyContext)):
        inspect.getattr_static(qctx, name)  # raises AttributeError when missing
