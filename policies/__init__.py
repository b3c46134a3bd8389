"""Scheduling policies and placers, registered by name (docs/contract.md#sec-4)."""

from schedlab.policies.base import Policy
from schedlab.policies.registry import make_policy, policy_class, register, registered_policies
from schedlab.sim.interfaces import Placer
from schedlab.sim.model import Unschedulable
from schedlab.sim.registry import PLACERS

__all__ = [
    "PLACERS", "Placer", "Policy", "Unschedulable", "make_policy", "policy_class", "register",
    "registered_policies",
]
