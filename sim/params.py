"""Typed parameters (docs/contract.md#sec-7): declared once with a default, a parser and a doc line.

Values arrive as strings from `--param KEY=VALUE` or as Python values from YAML or the
API; each parser accepts both and raises ValueError with the rule it enforces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.sim.errors import InvalidParameter, did_you_mean
from schedlab.sim.model import Level


@dataclass(frozen=True)
class Param:
    """One parameter: default value, parser (str or value -> value) and a doc line."""

    default: Any
    parse: Callable[[Any], Any]
    doc: str


def as_bool(v: Any) -> bool:
    """Parse true/false/1/0/yes/no."""
    if isinstance(v, bool):
        return v
    t = str(v).strip().lower()
    if t in {"true", "1", "yes", "on"}:
        return True
    if t in {"false", "0", "no", "off"}:
        return False
    raise ValueError("expected a boolean (true/false)")


def as_float(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False
             ) -> Callable[[Any], float]:
    """A float parser with optional bounds."""

    def parse(v: Any) -> float:
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError("expected a number") from None
        if x != x or x in (float("inf"), float("-inf")):
            raise ValueError("expected a finite number")
        if lo is not None and (x < lo or (lo_open and x == lo)):
            raise ValueError(f"expected a number {'>' if lo_open else '>='} {lo:g}")
        if hi is not None and x > hi:
            raise ValueError(f"expected a number <= {hi:g}")
        return x

    return parse


def as_int(lo: int | None = None) -> Callable[[Any], int]:
    """An integer parser with an optional lower bound."""

    def parse(v: Any) -> int:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError("expected an integer") from None
        if f != int(f):
            raise ValueError("expected an integer")
        if lo is not None and f < lo:
            raise ValueError(f"expected an integer >= {lo}")
        return int(f)

    return parse


def as_choice(*choices: str) -> Callable[[Any], str]:
    """One of a fixed set of strings."""

    def parse(v: Any) -> str:
        t = str(v).strip()
        if t not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}{did_you_mean(t, choices)}")
        return t

    return parse


def as_path(v: Any) -> str:
    """A path to an existing file, made absolute so a saved config reruns from anywhere."""
    p = Path(str(v)).expanduser()
    if not p.is_file():
        raise ValueError("expected the path of an existing file")
    return str(p.resolve())


def as_optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """None / 'none' / '' stay None; anything else goes through `parse`."""

    def wrapped(v: Any) -> Any:
        if v is None or (isinstance(v, str) and v.strip().lower() in {"", "none", "null"}):
            return None
        return parse(v)

    return wrapped


def as_level_map(v: Any) -> dict[Level, float]:
    """Per-level factors: 'switch=1.0,socket=1.4' or a mapping; values must be >= 1."""
    items: list[tuple[Any, Any]]
    if isinstance(v, Mapping):
        items = list(v.items())
    else:
        items = []
        for part in str(v).replace(";", ",").split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"expected level=factor pairs, got {part.strip()!r}")
            k, _, x = part.partition("=")
            items.append((k, x))
    out: dict[Level, float] = {}
    for k, x in items:
        lv = k if isinstance(k, Level) else Level.parse(str(k))
        f = as_float(1.0)(x)
        out[lv] = f
    return out


def resolve(
    given: Mapping[str, Any], spec: Mapping[str, Param], owner: str
) -> dict[str, Any]:
    """Defaults overlaid with `given`, each value parsed; unknown keys are an error."""
    out = {k: p.default for k, p in spec.items()}
    for key, value in given.items():
        if key not in spec:
            known = ", ".join(sorted(spec)) or "(none)"
            raise InvalidParameter(
                f"unknown parameter {key!r} for {owner}{did_you_mean(key, spec)}; known: {known}"
            )
        try:
            out[key] = spec[key].parse(value)
        except ValueError as e:
            raise InvalidParameter(f"parameter {key}={value!r} for {owner}: {e}") from None
    return out


def parse_kv(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`KEY=VALUE` strings from the command line into a dict (later keys win)."""
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise InvalidParameter(f"--param {p!r}: expected KEY=VALUE")
        k, _, v = p.partition("=")
        if not k.strip():
            raise InvalidParameter(f"--param {p!r}: empty key")
        out[k.strip()] = v.strip()
    return out
