"""Small pieces the commands share: the error exit and the display name of a policy."""

from __future__ import annotations

import multiprocessing
import re
import sys
from typing import Any, NoReturn

import click

from schedlab.sim.registry import POLICIES

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def fail(e: Exception) -> NoReturn:
    """Print `error: E` on stderr and exit with status 2 (bad input, no traceback)."""
    click.echo(f"error: {e}", err=True)
    sys.exit(2)


def is_path(policy: str) -> bool:
    """Whether a policy is given as an importable path ('module:Class', 'file.py:Class')."""
    return ":" in policy and policy not in POLICIES


def policy_label(policy: str) -> str:
    """The name a policy's results go under (its folder in `run` and sweeps).

    A registered name is used as given; for a 'module:Class' or 'file.py:Class' path it
    is the class's `name` attribute (the class name when it has none of its own), made
    safe as a folder name.

    Raises:
        UnknownName: The path cannot be imported.
    """
    if not is_path(policy):
        return policy
    cls = POLICIES.get(policy)
    own = getattr(cls, "name", None)
    name = own if isinstance(own, str) and own.strip() and own != "policy" \
        else str(getattr(cls, "__name__", "policy"))
    return _UNSAFE.sub("-", name.strip()).strip("-.") or "policy"


def pool_context() -> Any:
    """The process pools' multiprocessing context: forkserver where there is one, else spawn."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
