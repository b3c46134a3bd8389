"""The fidelity ledger: every cross-check row kept as data, and its documentation page.

`ledger.json` (beside this file) holds one object per row of `run_all.py`: the peer, the
check (what was run), the metric, the peer's value and how it was obtained (`source`),
schedlab's value, the difference and its cause. `run_all.py --write-ledger` rewrites the
rows of the modules it ran and keeps the others; a plain run reports rows whose value
moved. As a MkDocs hook (mkdocs.yml) it renders the ledger into the page that holds the
line `<!-- generated: crosscheck-ledger -->` (docs/crosscheck.md) at build time.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the hook runs inside `mkdocs`
    sys.path.insert(0, str(HERE))

from _common import diff_text, ours, rel_diff  # noqa: E402

LEDGER = HERE / "ledger.json"
MARKER = "<!-- generated: crosscheck-ledger -->"
AGREES = "none: agrees exactly"
"""The cause of a row whose values agree (a module may say more)."""
KEYS = ("module", "peer", "check", "metric", "peer_value", "source", "schedlab", "diff",
        "rel_diff", "agrees", "cause")
"""The fields of a ledger row, in the order they are written."""


def entry(module: str, r: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger row from a row of a peer module (README.md: the rows() interface)."""
    d = rel_diff(r)
    text = diff_text(r)
    agrees = text == "same" or d == 0.0
    cause = str(r.get("cause") or (AGREES if agrees else ""))
    return {"module": module, "peer": str(r["peer"]),
            "check": str(r.get("check", r.get("case", ""))), "metric": str(r["metric"]),
            "peer_value": r["peer_value"], "source": str(r["source"]),
            "schedlab": ours(r), "diff": text, "rel_diff": None if math.isnan(d) else d,
            "agrees": agrees, "cause": cause}


def key(e: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """What identifies a row: module, peer, check, metric."""
    return (e["module"], e["peer"], e["check"], e["metric"])


def load(path: Path = LEDGER) -> list[dict[str, Any]]:
    """The ledger's rows ([] when there is none yet)."""
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of rows, got {type(data).__name__}")
    return data


def merge(old: Iterable[Mapping[str, Any]], new: list[dict[str, Any]],
          modules: Iterable[str]) -> list[dict[str, Any]]:
    """`old` with the rows of `modules` replaced by `new` (other modules' rows kept)."""
    ran = set(modules)
    kept = [dict(e) for e in old if e["module"] not in ran]
    rows = kept + new
    order = {m: i for i, m in enumerate(sorted({e["module"] for e in rows}))}
    return sorted(rows, key=lambda e: order[e["module"]])  # stable: rows keep their order


def write(rows: list[dict[str, Any]], path: Path = LEDGER) -> None:
    """Write the ledger (keys in a fixed order, one row per object)."""
    out = [{k: e.get(k) for k in KEYS} for e in rows]
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def moved(old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]) -> list[str]:
    """The rows of `new` whose peer or schedlab value differs from the ledger's."""
    before = {key(e): e for e in old}
    out = []
    for e in new:
        b = before.get(key(e))
        if b is None:
            out.append(f"{' / '.join(key(e))}: not in the ledger")
        elif not _same(b["schedlab"], e["schedlab"]) or not _same(b["peer_value"],
                                                                   e["peer_value"]):
            out.append(f"{' / '.join(key(e))}: ledger {b['peer_value']} vs "
                       f"{b['schedlab']}, now {e['peer_value']} vs {e['schedlab']}")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def _num(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return f"`{x}`"
    x = float(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:,.1f}"
    return f"{x:.4g}"


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def markdown(rows: Iterable[Mapping[str, Any]]) -> str:
    """The ledger as Markdown: a table per peer, then its causes (numbered, each once)
    and how the peer's values were obtained."""
    by_peer: dict[str, list[Mapping[str, Any]]] = {}
    for e in rows:
        by_peer.setdefault(e["peer"], []).append(e)
    lines: list[str] = []
    for peer, group in by_peer.items():
        agree = sum(bool(e["agrees"]) for e in group)
        lines += [f"### {peer}", "",
                  f"{len(group)} rows, {agree} agree exactly (module "
                  f"`benchmarks/crosscheck/{group[0]['module']}.py`).", "",
                  "| check | metric | peer | schedlab | diff | cause |",
                  "|---|---|---:|---:|---:|---|"]
        causes: dict[str, int] = {}  # each cause written once, below the table
        for e in group:
            cause = str(e["cause"])
            if e["agrees"]:
                cell = "agrees"
            else:
                cell = f"({causes.setdefault(cause, len(causes) + 1)})"
            lines.append(f"| {_cell(e['check'])} | `{e['metric']}` | {_num(e['peer_value'])} "
                         f"| {_num(e['schedlab'])} | {e['diff']} | {cell} |")
        if causes:
            lines += ["", "Causes of the differences:", ""]
            lines += [f"{i}. {_cell(c)}" for c, i in causes.items()]
        sources = sorted({e["source"] for e in group})
        lines += ["", "How the peer's values were obtained:", ""]
        lines += [f"- {_cell(s)}" for s in sources]
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown_text: str, **_: Any) -> str:
    """MkDocs hook: the marker line becomes the ledger's tables."""
    if MARKER in markdown_text:
        markdown_text = markdown_text.replace(MARKER, markdown(load()))
    return markdown_text
