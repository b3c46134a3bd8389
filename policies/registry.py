"""Name -> policy factory, with lazy `module:Class` entries and did-you-mean errors."""

from __future__ import annotations

import importlib
from typing import Any

from policies.base import Policy
from sim.errors import SimError, UnknownPolicy, unknown_name_message

_REGISTRY: dict[str, str | type[Policy]] = {}


def register(name: str, entry: str | type[Policy], *, replace: bool = False) -> None:
    """Register a policy class, or a lazy 'module:Class' string, under a lowercase name."""
    if name != name.lower() or not name:
        raise SimError(f"policy name {name!r} must be non-empty lowercase")
    if name in _REGISTRY and not replace:
        raise SimError(f"policy {name!r} is registered already (pass replace=True to override)")
    _REGISTRY[name] = entry


def unregister(name: str) -> None:
    """Remove a registered policy (used by tests and plugins)."""
    _REGISTRY.pop(name, None)


def registered_policies() -> list[str]:
    """Names of every registered policy, sorted."""
    return sorted(_REGISTRY)


def policy_class(name: str) -> type[Policy]:
    """The class behind a registered name, importing it on first use."""
    entry = _REGISTRY.get(name)
    if entry is None:
        raise UnknownPolicy(unknown_name_message("policy", name, _REGISTRY))
    if isinstance(entry, str):
        module, _, cls = entry.partition(":")
        entry = getattr(importlib.import_module(module), cls)
        _REGISTRY[name] = entry
    return entry


def make_policy(name: str, **params: Any) -> Policy:
    """A fresh policy instance of a registered name, with validated parameters."""
    return policy_class(name)(**params)


for _name, _entry in {
    "fifo": "policies.fifo:FifoPolicy",
    "fifo-backfill": "policies.fifo:FifoBackfillPolicy",
    "fifo-elastic": "policies.fifo_elastic:FifoElasticPolicy",
    "gandiva": "policies.gandiva:GandivaPolicy",
    "hai": "policies.hai:HaiPolicy",
    "quota-priority": "policies.quota_priority:QuotaPriorityPolicy",
    "hived": "policies.hived:HivedPolicy",
    "vc-quota": "policies.hived.vc_quota:VcQuotaPolicy",
    "drf": "policies.drf:DrfPolicy",
    "capacity": "policies.capacity:CapacityPolicy",
    "sjf": "policies.sjf:SjfPolicy",
    "srtf": "policies.sjf:SrtfPolicy",
    "tiresias-las": "policies.tiresias:TiresiasLasPolicy",
    "tiresias-gittins": "policies.tiresias:TiresiasGittinsPolicy",
    "easy-backfill": "policies.backfill:EasyBackfillPolicy",
    "conservative-backfill": "policies.backfill:ConservativeBackfillPolicy",
    "themis-ftf": "policies.themis:ThemisFtfPolicy",
    "fgd": "policies.fgd:FgdPolicy",
    "gavel-mmf": "policies.gavel:GavelPolicy",
    "gavel-mmf-agnostic": "policies.gavel:GavelAgnosticPolicy",
}.items():
    register(_name, _entry)
