"""`benchmarks/crosscheck/run_all.py` finds every peer module and prints one table."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "crosscheck"


@pytest.fixture
def run_all(monkeypatch):
    monkeypatch.syspath_prepend(str(FOLDER))
    return importlib.import_module("run_all")


def test_every_module_with_rows_joins(run_all, tmp_path, monkeypatch):
    assert {"tiresias", "gavel", "fgd"} <= set(run_all.peer_modules())
    assert "run_all" not in run_all.peer_modules()
    # a module of another helper joins by defining rows(); a missing input is a skip
    (tmp_path / "xpeer.py").write_text(
        "from _common import MissingInput, row\n"
        "def rows():\n    return [row('x', 'c', 'm', 2.0, 3.0, 'src')]\n")
    (tmp_path / "ypeer.py").write_text(
        "from _common import MissingInput\n"
        "def rows():\n    raise MissingInput('no input here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rows, notes = run_all.collect(["xpeer", "ypeer"])
    assert rows == [{"peer": "x", "check": "c", "metric": "m", "peer_value": 2.0,
                     "schedlab": 3.0, "source": "src"}]
    assert notes[1] == "ypeer: skipped: no input here"
    assert "+50.00%" in run_all.table(rows)


def test_rows_with_text_values_and_the_other_key_names(run_all):
    rows = [{"peer": "HiveD", "case": "pod1", "metric": "placement", "peer_value": "n [0]",
             "schedlab_value": "n [0]", "source": "s"},
            {"peer": "HiveD", "case": "pod2", "metric": "placement", "peer_value": "n [1]",
             "schedlab_value": "waits", "source": "s"}]
    text = run_all.table(rows)
    assert "pod1" in text and " same " in text and " differs " in text
