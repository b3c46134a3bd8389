"""Helios' Philly set-up, VC 2869ce: fifo, sjf blocked=stop and qssf estimator=column give
Helios' own simulator's start and end of every job; srtf admit=gpus of all but the jobs
its per-size checkpoint cost moves (benchmarks/crosscheck/helios.py)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "crosscheck" / "data" / "helios_philly_2869ce.csv"
SRTF_MOVED = {"j80285", "j80301", "j80297", "j77680", "j76835", "j7027"}
"""The 32-GPU jobs Helios charges 60 s a stop (30 here) and the three 8-GPU jobs behind
them (the ledger's cause)."""


@pytest.fixture(scope="module")
def helios():
    folder = ROOT / "benchmarks" / "crosscheck"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("crosscheck_helios", folder / "helios.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from _common import MissingInput
    try:
        mod.trace_path()
    except MissingInput as e:
        pytest.skip(str(e))
    return mod


def peer(policy):
    with PEER.open() as f:
        return {r["jobname"]: r for r in csv.DictReader(f) if r["policy"] == policy}


@pytest.mark.parametrize("policy", ["fifo", "sjf", "qssf", "srtf"])
def test_every_job_as_in_helios_simulator(helios, policy):
    want = peer(policy)
    jobs = helios.run("2869ce", policy).jobs.set_index("job_id")
    assert set(jobs.index) == set(want) and len(want) == 94
    moved = {j for j, r in want.items()
             if (float(r["start_time"]), float(r["end_time"]))
             != (jobs.at[j, "start_time"], jobs.at[j, "end_time"])}
    assert moved == (SRTF_MOVED if policy == "srtf" else set())
    assert all(int(r["ckpt_times"]) == jobs.at[j, "preemptions"] for j, r in want.items())
