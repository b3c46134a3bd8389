"""Kueue simulated from its own configuration objects (see `policy.py`, docs/kueue.md)."""

from schedlab.policies.kueue.policy import KueuePolicy

__all__ = ["KueuePolicy"]
