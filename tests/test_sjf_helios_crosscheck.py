"""Helios' Philly set-up (VC 2869ce; 103959 and 7f04ca on fewer nodes): fifo, sjf
blocked=stop and qssf estimator=column give Helios' own simulator's start and end of
every job; srtf admit=gpus of all but the jobs its per-size checkpoint cost moves
(benchmarks/crosscheck/helios.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import crosscheck_module

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "crosscheck" / "data" / "helios_philly_jobs.csv"
SRTF_MOVED = {
    # the 32-GPU jobs Helios charges 60 s a stop (30 here) and three 8-GPU jobs behind them
    ("helios", "2869ce"): {"j80285", "j80301", "j80297", "j77680", "j76835", "j7027"},
    # 1-GPU jobs Helios charges 7 s a stop (30 here)
    ("fewer nodes", "103959"): {"j80279", "j80280", "j80282"},
}
"""Jobs whose times differ under srtf, by set-up and VC (the ledger's causes)."""


@pytest.fixture(scope="module")
def helios():
    mod = crosscheck_module("helios")
    from _common import MissingInput
    try:
        mod.trace_path()
    except MissingInput as e:
        pytest.skip(str(e))
    return mod


def peer(setup, vc, policy):
    with PEER.open() as f:
        return {r["jobname"]: r for r in csv.DictReader(f)
                if (r["setup"], r["vc"], r["policy"]) == (setup, vc, policy)}


@pytest.mark.parametrize("policy", ["fifo", "sjf", "qssf", "srtf"])
@pytest.mark.parametrize(("setup", "vc", "jobs"), [
    ("helios", "2869ce", 94), ("fewer nodes", "103959", 109), ("fewer nodes", "7f04ca", 53)])
def test_every_job_as_in_helios_simulator(helios, setup, vc, jobs, policy):
    want = peer(setup, vc, policy)
    got = helios.run(setup, vc, policy).jobs.set_index("job_id")
    assert set(got.index) == set(want) and len(want) == jobs
    moved = {j for j, r in want.items()
             if (float(r["start_time"]), float(r["end_time"]))
             != (got.at[j, "start_time"], got.at[j, "end_time"])}
    assert moved == (SRTF_MOVED.get((setup, vc), set()) if policy == "srtf" else set())
    assert all(int(r["ckpt_times"]) == got.at[j, "preemptions"] for j, r in want.items())
