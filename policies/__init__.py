"""Scheduling policies and placers, registered by name (SPEC sec. 4)."""

from policies.base import Policy
from policies.placers import PLACERS, Placer
from policies.registry import make_policy, policy_class, register, registered_policies
from sim.model import Unschedulable

__all__ = [
    "PLACERS", "Placer", "Policy", "Unschedulable", "make_policy", "policy_class", "register",
    "registered_policies",
]
