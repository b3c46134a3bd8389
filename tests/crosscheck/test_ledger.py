"""The fidelity ledger (benchmarks/crosscheck/ledger.json): every row has a source and a
cause, its numbers are consistent, the docs page renders it, and the fast exact rows
recompute to the same values."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "crosscheck"


@pytest.fixture(scope="module")
def ledger():
    if str(FOLDER) not in sys.path:
        sys.path.insert(0, str(FOLDER))
    return importlib.import_module("_ledger")


def test_every_row_has_a_source_and_a_cause(ledger):
    rows = ledger.load()
    assert {"tiresias", "gavel", "fgd", "hived"} <= {e["module"] for e in rows}
    for e in rows:
        where = f"{e['module']}: {e['check']} / {e['metric']}"
        assert set(e) == set(ledger.KEYS), where
        assert e["source"].strip() and e["cause"].strip(), where
        assert e["agrees"] == (e["cause"] == ledger.AGREES or e["diff"] in ("same",
                                                                            "+0.00%")), where
        if e["rel_diff"] is not None:
            p, s = float(e["peer_value"]), float(e["schedlab"])
            assert math.isclose(e["rel_diff"], (s - p) / abs(p), abs_tol=1e-12), where
    assert len({ledger.key(e) for e in rows}) == len(rows), "a row is there twice"


def test_the_page_renders_every_row(ledger):
    rows = ledger.load()
    text = ledger.on_page_markdown(f"# x\n\n{ledger.MARKER}\n")
    assert ledger.MARKER not in text
    body = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line
            and not line.startswith("| check ")]
    assert len(body) == len(rows)
    page = (FOLDER.parents[1] / "docs" / "crosscheck.md").read_text(encoding="utf-8")
    assert ledger.MARKER in page


def test_merge_keeps_the_other_modules_rows(ledger):
    old = [{"module": "a", "peer": "p", "check": "c", "metric": "m"},
           {"module": "b", "peer": "p", "check": "c", "metric": "m", "schedlab": 1}]
    new = [{"module": "b", "peer": "p", "check": "c", "metric": "m", "schedlab": 2}]
    assert ledger.merge(old, new, ["b"]) == [old[0], new[0]]


def test_tiresias_rows_are_the_modules(ledger):
    """The ledger's Tiresias peer values are the module's; its exact rows are the ones
    test_tiresias_crosscheck.py recomputes job by job (no second run here)."""
    tiresias = importlib.import_module("tiresias")
    rows = [e for e in ledger.load() if e["module"] == "tiresias"]
    assert {(e["check"], e["metric"]) for e in rows} == {
        (c, m) for c, ms in tiresias.PEER.items() for m in ms}
    exact = {"fifo first-fit", "dlas-gpu / tiresias-las", "dlas-gpu, x10, GPUs<=2",
             "dlas-gpu, durations x10", "dlas-gpu-gittins, authors' mode",
             "dlas-gpu-gittins, x10, GPUs<=2, authors' mode"}  # job by job in the tests
    for e in rows:
        assert e["peer_value"] == tiresias.PEER[e["check"]][e["metric"]]
        if e["check"] in exact and e["metric"] != "preemptions":
            assert e["agrees"], e["check"]


def test_hived_rows_recompute(ledger):
    hived = importlib.import_module("hived")
    got = {(r["case"], r["metric"]): r["schedlab_value"] for r in hived.rows()}
    rows = [e for e in ledger.load() if e["module"] == "hived"]
    assert rows and len(rows) == len(got)
    for e in rows:
        assert got[(e["check"], e["metric"])] == e["schedlab"], e["check"]
