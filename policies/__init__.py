"""Scheduling policies and placers, registered by name (SPEC sec. 4)."""

from policies.base import Policy
from policies.registry import make_policy, policy_class, register, registered_policies
from sim.interfaces import Placer
from sim.model import Unschedulable
from sim.registry import PLACERS

__all__ = [
    "PLACERS", "Placer", "Policy", "Unschedulable", "make_policy", "policy_class", "register",
    "registered_policies",
]
