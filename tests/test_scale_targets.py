"""`benchmarks/scale_targets.py`: issue 18's targets judged on `bench_scale.py`'s rows."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def targets(monkeypatch):
    monkeypatch.syspath_prepend(str(FOLDER))
    return importlib.import_module("scale_targets")


def size_row(policy, jobs, cpu, ms, peak=0.3):
    return {"policy": policy, "jobs": jobs, "run_cpu_s": cpu, "ms_per_job": ms,
            "peak_rss_gb": peak}


def test_million_and_flat_cost(targets):
    rows = [size_row("floor-procs", 10_000, 0.1, 0.010), size_row("floor-procs", 10**6, 17, 0.017),
            size_row("fifo", 10_000, 0.17, 0.017), size_row("fifo", 10**6, 19.4, 0.019, 1.34),
            # grows 1.46x: more than FLAT, less than the floor's own 1.7x
            size_row("tiresias-las", 10_000, 0.28, 0.028),
            size_row("tiresias-las", 10**6, 41.1, 0.041, 1.37),
            # too slow, too large, and growing faster than the floor
            size_row("fifo-backfill", 10_000, 0.19, 0.010),
            size_row("fifo-backfill", 10**6, 61.0, 0.061, 1.6)]
    got = {line.split(":")[0]: ok for ok, line in targets.size_verdicts(rows)}
    flat = "cost per job 10,000 -> 1,000,000 jobs"
    assert got == {"PASS 1M jobs, fifo": True, f"PASS {flat}, fifo": True,
                   "PASS 1M jobs, tiresias-las": True, f"PASS {flat}, tiresias-las": True,
                   "FAIL 1M jobs, fifo-backfill": False, f"FAIL {flat}, fifo-backfill": False}


def test_ratios_to_fifo_and_the_event_bound_reading(targets):
    rows = [{"policy": "floor-procs", "x_floor": 1.0},
            {"policy": "fifo", "x_fifo": 1.0, "x_fifo_event": 1.0, "x_floor": 1.14},
            {"policy": "srtf", "x_fifo": 6.25, "x_fifo_event": 3.7},
            {"policy": "themis-ftf", "x_fifo": 10.5, "x_fifo_event": 9.0},
            {"policy": "gavel-mmf", "x_fifo": 24.3, "x_fifo_event": 1.1, "events_per_job": 67},
            {"policy": "hived", "x_fifo": None, "note": "cut after 300 CPU s"}]
    verdicts = targets.philly_verdicts(rows, "uniform:56")
    lines = [line for _, line in verdicts]
    assert [ok for ok, _ in verdicts] == [True, True, False, True, False]
    assert lines[0].startswith("PASS fifo on full Philly (uniform:56, compiled build): 1.14x")
    assert "24.3x the whole run" in lines[3]  # the whole-run ratio is still said
    assert lines[4] == "FAIL hived: no measurement (cut after 300 CPU s)"
    # a cluster without a bar: only the floor target is judged
    assert len(targets.philly_verdicts(rows, "helios")) == 1
    # the pure build's bar is 3x the floor, the compiled build's 1.5x
    slow = [{"policy": "fifo", "x_floor": 2.6}]
    assert [ok for ok, _ in targets.philly_verdicts(slow, "philly", "pure")] == [True]
    assert [ok for ok, _ in targets.philly_verdicts(slow, "philly")] == [False]
