"""The `tasks` column (docs/contract.md#sec-2): JSON text to `TaskRole`s and back, with its rules.

A cell is a JSON list of role objects, e.g. ``[{"role":"ps","count":2,"gpus":0,"cpus":8},
{"role":"worker","count":4,"gpus":2}]``. Keys: `role` (required, a name of letters,
digits, `_ . -`, unique in the job), `count` (tasks, an integer >= 1; 1), `gpus` (per task,
an integer >= 0; 0), `cpus`, `mem_gb`, `disk_gb` (per task, numbers >= 0; 0), `gang`
(true or false; true) and `duration` (s > 0; the job's). Any other key is an error, and
at least one role must be a gang role.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from schedlab.sim.model import TaskRole

__all__ = ["ROLE_KEYS", "TASKS_RULE", "format_tasks", "parse_tasks"]

ROLE_KEYS = ("role", "count", "gpus", "cpus", "mem_gb", "disk_gb", "gang", "duration")
"""Keys of a role object, in the order `format_tasks` writes them."""

TASKS_RULE = ("is not a JSON list of roles {\"role\", \"count\" >= 1, \"gpus\" >= 0, "
              "\"cpus\", \"mem_gb\", \"disk_gb\" >= 0, \"gang\" true|false, \"duration\" > 0}")
"""What a `tasks` cell must be (the end of every message names the broken rule)."""

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_MAX_COUNT = 1e6  # the bounds of schedlab.traces.schema: MAX_COUNT, MAX_GB, MAX_SECONDS
_MAX_GB = 1e9
_MAX_SECONDS = 1e12


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object that names a key twice is an error, not the last value silently."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} is given twice")
        out[k] = v
    return out


def _number(role: str, key: str, v: Any, *, integer: bool, lo: float, lo_open: bool,
            hi: float) -> float | str:
    """A role's number, or the reason it is not one."""
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if ok and integer:
        ok = float(v).is_integer()
    if ok:
        ok = (v > lo if lo_open else v >= lo) and v <= hi
    if not ok:
        kind = "an integer" if integer else "a number"
        cmp = ">" if lo_open else ">="
        shown = f"{v:g}" if isinstance(v, float) else json.dumps(v)
        return (f"role {role!r}: {key} {shown} is not {kind} {cmp} {lo:g} and "
                f"<= 1e{round(math.log10(hi))}")
    return float(v)


def _role(obj: Any, index: int, seen: set[str]) -> TaskRole | str:
    """One role object, or the reason it is bad."""
    if not isinstance(obj, dict):
        return f"role {index + 1} is not a JSON object"
    unknown = [k for k in obj if k not in ROLE_KEYS]
    if unknown:
        return (f"role {index + 1}: unknown key {unknown[0]!r}; keys: {', '.join(ROLE_KEYS)}")
    name = obj.get("role")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return (f"role {index + 1}: role {json.dumps(name)} is not a name of letters, digits, "
                "'_', '.', '-'")
    if name in seen:
        return f"role {name!r} is given twice"
    seen.add(name)
    vals: dict[str, Any] = {}
    for key, integer, lo, lo_open, hi in (("count", True, 1.0, False, _MAX_COUNT),
                                          ("gpus", True, 0.0, False, _MAX_COUNT),
                                          ("cpus", False, 0.0, False, _MAX_COUNT),
                                          ("mem_gb", False, 0.0, False, _MAX_GB),
                                          ("disk_gb", False, 0.0, False, _MAX_GB),
                                          ("duration", False, 0.0, True, _MAX_SECONDS)):
        if key not in obj or (key == "duration" and obj[key] is None):
            continue
        got = _number(name, key, obj[key], integer=integer, lo=lo, lo_open=lo_open, hi=hi)
        if isinstance(got, str):
            return got
        vals[key] = int(got) if integer else got
    gang = obj.get("gang", True)
    if not isinstance(gang, bool):
        return f"role {name!r}: gang {json.dumps(gang)} is not true or false"
    return TaskRole(role=name, gang=gang, **vals)


def parse_tasks(text: str) -> tuple[tuple[TaskRole, ...] | None, str]:
    """Parse a `tasks` cell into roles, or (None, the reason it is bad)."""
    try:
        data = json.loads(text, object_pairs_hook=_pairs)
    except ValueError as exc:  # JSONDecodeError is a ValueError, as is a repeated key
        return None, f"bad JSON: {exc}"
    if not isinstance(data, list) or not data:
        return None, "is not a non-empty JSON list"
    seen: set[str] = set()
    roles: list[TaskRole] = []
    for i, obj in enumerate(data):
        got = _role(obj, i, seen)
        if isinstance(got, str):
            return None, got
        roles.append(got)
    if not any(r.gang for r in roles):
        return None, "has no gang role (every role has gang false)"
    return tuple(roles), ""


def format_tasks(tasks: tuple[TaskRole, ...]) -> str:
    """The roles as a compact JSON cell; keys at their defaults are left out."""
    out = []
    for r in tasks:
        d: dict[str, Any] = {"role": r.role, "count": r.count, "gpus": r.gpus}
        for key in ("cpus", "mem_gb", "disk_gb"):
            v = getattr(r, key)
            if v:
                d[key] = int(v) if float(v).is_integer() else v
        if not r.gang:
            d["gang"] = False
        if r.duration is not None:
            d["duration"] = r.duration
        out.append(d)
    return json.dumps(out, separators=(",", ":"))
