"""Shared helpers of the cross-check scripts: where the peers' inputs are, the row format,
and the table (see README.md for the `rows()` interface every peer module follows)."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere: import schedlab's packages
    sys.path.insert(0, str(ROOT))

FIELDS = ("peer", "check", "metric", "peer_value", "schedlab", "source")
"""Keys of one row: the peer, what was run, the metric, the peer's number, schedlab's
number, and where the peer's number comes from (optional: `cause`, why they differ)."""

NO_LOCALITY = "switch=1,socket=1,node=1,rack=1,cluster=1"
"""Engine locality factors of a simulator that models no placement slowdown."""


class MissingInput(Exception):
    """A peer's input is not on this machine: its rows are skipped, with this reason."""


def shared_dir() -> Path:
    """The shared folder: SCHEDLAB_SHARED, else ../shared beside the repository."""
    env = os.environ.get("SCHEDLAB_SHARED")
    for p in ([Path(env)] if env else []) + [ROOT.parent / "shared", ROOT / "../shared"]:
        if (p / "traces").is_dir():
            return p.resolve()
    raise MissingInput("no shared folder (set SCHEDLAB_SHARED or put shared/ beside the "
                       "repository)")


def need(path: Path) -> Path:
    """`path` if it exists, else MissingInput naming it."""
    if not path.exists():
        raise MissingInput(f"{path} not found")
    return path


def row(peer: str, check: str, metric: str, peer_value: float, schedlab: float,
        source: str, cause: str = "") -> dict[str, Any]:
    """One row of the table (README.md: the rows() interface); `cause` says where a
    difference comes from (the ledger requires one for every row that differs)."""
    out = {"peer": peer, "check": check, "metric": metric,
           "peer_value": float(peer_value), "schedlab": float(schedlab), "source": source}
    if cause:
        out["cause"] = cause
    return out


def cause_of(causes: Mapping[Any, str], check: str, metric: str) -> str:
    """The cause of a row from a module's table: keyed (check, metric), else check."""
    return causes.get((check, metric), causes.get(check, ""))


def ours(r: Mapping[str, Any]) -> Any:
    """schedlab's value of a row (`schedlab`, or `schedlab_value`)."""
    return r["schedlab"] if "schedlab" in r else r.get("schedlab_value")


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def rel_diff(r: Mapping[str, Any]) -> float:
    """(schedlab - peer) / |peer|; 0 when both are 0, nan when only the peer's is (or
    when the values are not numbers)."""
    p, s = r["peer_value"], ours(r)
    if not (_is_num(p) and _is_num(s)):
        return math.nan
    p, s = float(p), float(s)
    if p == 0:
        return 0.0 if s == 0 else math.nan
    return (s - p) / abs(p)


def _num(x: Any) -> str:
    if not _is_num(x):
        return str(x)
    x = float(x)
    if math.isnan(x):
        return "nan"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.4g}"


def diff_text(r: Mapping[str, Any]) -> str:
    """The relative difference, or same / differs for values that are not numbers."""
    p, s = r["peer_value"], ours(r)
    if not (_is_num(p) and _is_num(s)):
        return "same" if p == s else "differs"
    d = rel_diff(r)
    return "nan" if math.isnan(d) else f"{d:+.2%}"


def table(rows: Iterable[Mapping[str, Any]]) -> str:
    """The rows as a fixed-width text table with the relative difference."""
    head = ("peer", "check", "metric", "peer", "schedlab", "diff", "source")
    lines = [head]
    for r in rows:
        lines.append((str(r["peer"]), str(r.get("check", r.get("case", ""))),
                      str(r["metric"]), _num(r["peer_value"]), _num(ours(r)),
                      diff_text(r), str(r["source"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = []
    for k, line in enumerate(lines):
        cells = [c.rjust(w) if 3 <= i <= 5 else c.ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths, strict=True))]
        out.append("  ".join(cells).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def main(rows_fn: Any) -> None:
    """Print one peer's table (the script form of a peer module)."""
    try:
        print(table(rows_fn()))
    except MissingInput as e:
        print(f"skipped: {e}")
