"""The one error hierarchy of schedlab: every message names the culprit and what is allowed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SimError(Exception):
    """Base class of every error schedlab raises on purpose."""


class InvalidTrace(SimError):
    """A trace file or row breaks the canonical schema (docs/contract.md#sec-2)."""


class InvalidTopology(SimError):
    """A topology file or preset is malformed (docs/contract.md#sec-3)."""


class InvalidDecision(SimError):
    """A policy returned a decision the engine cannot apply to the cluster state."""


class InvalidParameter(SimError):
    """An unknown parameter key or a bad parameter value (docs/contract.md#sec-7)."""


class UnknownName(SimError):
    """A name (policy, placer, preset, trace) that is not registered."""


class UnknownPolicy(UnknownName):
    """A policy name that is not registered."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest known name, or '' when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    """Build the standard 'unknown X' message with the known names and a close match."""
    known = sorted(known)
    return f"unknown {kind} {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}"
