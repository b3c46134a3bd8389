"""Policy names -> classes: the policy face of `schedlab.sim.registry.POLICIES`.

Entries are lazy 'module:Class' strings; plugins come from the `schedlab.policies` entry
point group; `policy_class` also takes an importable path ('my_module:MyPolicy').
"""

from __future__ import annotations

from typing import Any

from schedlab.policies.base import Policy
from schedlab.sim.registry import POLICIES


def register(name: str, entry: str | type[Policy], *, replace: bool = False) -> None:
    """Register a policy class, or a lazy 'module:Class' string, under a lowercase name."""
    POLICIES.register(name, entry, replace=replace)


def unregister(name: str) -> None:
    """Remove a registered policy (used by tests and plugins)."""
    POLICIES.unregister(name)


def registered_policies() -> list[str]:
    """Names of every registered policy (plugins included), sorted."""
    return POLICIES.names()


def orderings() -> list[str]:
    """Registered policies that can order the jobs of another policy's queues, sorted."""
    return [n for n in POLICIES.names() if policy_class(n).orders]


def policy_class(name: str) -> type[Policy]:
    """The class behind a registered name or a 'module:Class' path, imported on first use."""
    cls: type[Policy] = POLICIES.get(name)
    return cls


def make_policy(name: str, **params: Any) -> Policy:
    """A fresh policy instance of a registered name, with validated parameters."""
    return policy_class(name)(**params)
