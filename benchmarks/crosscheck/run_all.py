"""Every peer cross-check in one table: `python benchmarks/crosscheck/run_all.py`.

Imports each module of this folder that exposes `rows()` (README.md: the interface), in
name order, and prints their rows with the relative difference of schedlab's number to
the peer's. A module whose input is missing (`MissingInput`, FileNotFoundError) is
listed as skipped; one that fails is listed with its error, and the others still run.
`--only NAME` (repeatable) runs some of them; `--json FILE` also writes the rows.

The fidelity ledger (`ledger.json`, `_ledger.py`): `--write-ledger` puts the rows of the
modules run into it (other modules' rows are kept); a plain run lists the rows whose
values moved from it. A row that differs from the peer without a `cause` is a failure:
every difference in the ledger is explained.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _ledger  # noqa: E402
from _common import MissingInput, diff_text, rel_diff, table  # noqa: E402


def peer_modules() -> list[str]:
    """Names of the modules of this folder (not this one, not `_private` ones)."""
    return sorted(p.stem for p in HERE.glob("*.py")
                  if not p.stem.startswith("_") and p.stem != "run_all")


def collect(names: list[str], ran: list[str] | None = None
            ) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows of every module, notes on the modules skipped or failed); each row's
    `module` is its module's name, and `ran` gets the modules that gave rows."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for name in names:
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(name)
        except Exception as e:  # a broken module must not hide the others
            notes.append(f"{name}: cannot be imported: {e!r}")
            continue
        fn = getattr(mod, "rows", None)
        if not callable(fn):
            continue  # a helper module without rows()
        try:
            got = list(fn())
        except (MissingInput, FileNotFoundError) as e:
            notes.append(f"{name}: skipped: {e}")
            continue
        except Exception as e:
            notes.append(f"{name}: failed: {e!r}\n{traceback.format_exc(limit=3)}")
            continue
        rows.extend(got)
        if ran is not None:
            ran.append(name)
            for r in got:
                r.setdefault("module", name)
        notes.append(f"{name}: {len(got)} rows in {time.perf_counter() - t0:.1f} s")
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 when a module failed (skips are not failures)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="module name to run")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--write-ledger", action="store_true",
                    help="put the rows of the modules run into ledger.json")
    ap.add_argument("--ledger", type=Path, default=_ledger.LEDGER, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = args.only or peer_modules()
    ran: list[str] = []
    rows, notes = collect(names, ran)
    entries = [_ledger.entry(r.get("module", ""), r) for r in rows]
    for e in entries:
        if not e["cause"]:
            notes.append(f"{e['module']}: failed: row {e['check']!r} / {e['metric']} "
                         f"differs ({e['diff']}) and has no cause")
    print(table(rows))
    print()
    old = _ledger.load(args.ledger)
    if args.write_ledger:
        _ledger.write(_ledger.merge(old, entries, ran), args.ledger)
        notes.append(f"ledger: {len(entries)} rows of {', '.join(ran) or 'no module'} "
                     f"written to {args.ledger}")
    else:
        notes += [f"ledger: moved: {m}" for m in _ledger.moved(old, entries)]
    for n in notes:
        print(n)
    if args.json:
        out = [{**r, "rel_diff": None if math.isnan(d := rel_diff(r)) else d,
                "diff": diff_text(r)} for r in rows]
        args.json.write_text(json.dumps(out, indent=2))
    return 1 if any(": failed:" in n or "cannot be imported" in n for n in notes) else 0


if __name__ == "__main__":
    sys.exit(main())
