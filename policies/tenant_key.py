"""The tenant of a job for policies that share the cluster by user: its user, else its VC.

Traces without users (the bundled default window: Philly has virtual clusters but no
user names) would make every user-tenant policy equal a tenant-blind one; a job whose
`user` is empty counts under its `vc` instead, so those policies share by VC there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["user_or_vc"]


def user_or_vc(spec: Any) -> str:
    """`spec.user`, or `spec.vc` when the user is empty."""
    return spec.user or spec.vc
