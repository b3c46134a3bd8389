"""Warnings about results that look fine but say little (summary.json `warnings`).

A run can end cleanly and still be degenerate: a tenant-aware policy that saw a single
tenant equals a tenant-blind one, a run that rejected most of its jobs compares policies
on the few left, and one that started nothing measures nothing. Each warning is one
sentence naming what was seen and why it matters; the CLI prints them under the table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from schedlab.sim.jobstate import JobState

__all__ = ["result_warnings"]

MOSTLY = 0.5
"""A run that rejected more than this share of its jobs gets a warning."""


def result_warnings(policy: Any, jobs: Sequence[JobState]) -> list[str]:
    """The warnings of a run of `policy` over the trace's `jobs`, in a fixed order.

    Empty for a healthy run. `jobs`: the trace's own (not a container job's task runs).
    """
    out: list[str] = []
    if not jobs:
        return out
    field = getattr(policy, "tenant_field", None)
    if field:
        key = getattr(policy, "tenant_key", None)  # the policy's own rule, when it has one
        tenants = {key(j.spec) if callable(key) else getattr(j.spec, field) for j in jobs}
        if len(tenants) <= 1:
            only = next(iter(tenants))
            out.append(
                f"{policy.name} shares the cluster between tenants by {field}, but every "
                f"job has the same {field} ({only!r}): the result equals a tenant-blind "
                "policy's")
    rejected = [j for j in jobs if j.status == "rejected"]
    if len(rejected) > MOSTLY * len(jobs):
        why, n = Counter(j.reason for j in rejected).most_common(1)[0]
        out.append(f"{len(rejected)} of {len(jobs)} jobs were rejected; the most common "
                   f"reason ({n} jobs): {why}")
    if not any(j.started_before for j in jobs):
        out.append(f"no job ever started (of {len(jobs)} submitted): the metrics measure "
                   "nothing")
    return out

