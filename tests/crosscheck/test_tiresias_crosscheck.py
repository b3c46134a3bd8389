"""Tiresias' 60-job trace on 16 GPUs: schedlab's fifo (first-fit) and tiresias-las give
Tiresias' own simulator's times, job by job (benchmarks/crosscheck/tiresias.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import crosscheck_module

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize(("check", "peer_file"), [
    ("fifo first-fit", "tiresias_fifo_jobs.csv"),
    ("dlas-gpu / tiresias-las", "tiresias_dlas-gpu_jobs.csv"),
    # derived traces with demotions and preemptions, with the simulator's demotion
    # timing and requeueing (demotion_timer=simulator, requeue=front)
    ("dlas-gpu, x10, GPUs<=2", "tiresias_dlas-gpu_x10_gpus2_jobs.csv"),
    ("dlas-gpu, durations x10", "tiresias_dlas-gpu_x10_jobs.csv"),
    # three copies on 48 GPUs: a resumed job runs behind the jobs that ran while it
    # waited (requeue=front; 68 jobs differed without that rule)
    ("dlas-gpu, 180 jobs x10, 48 GPUs", "tiresias_dlas-gpu_180_x10_jobs.csv"),
])
def test_every_job_starts_and_ends_as_in_tiresias_simulator(check, peer_file):
    tiresias = crosscheck_module("tiresias")
    result = tiresias.run(check, DATA / "tiresias_60_job.csv")
    with open(DATA / peer_file, newline="") as f:
        peer = {r["job_id"]: r for r in csv.DictReader(f)}
    jobs = result.jobs.set_index("job_id")
    assert sorted(jobs.index) == sorted(peer)
    for jid, r in peer.items():
        assert jobs.at[jid, "start_time"] == float(r["start_time"]), jid
        assert jobs.at[jid, "end_time"] == float(r["end_time"]), jid
        assert jobs.at[jid, "preemptions"] == int(r["preempt"]), jid
    summary = result.summary
    for metric, value in tiresias.PEER[check].items():
        assert summary[metric] == pytest.approx(value, rel=1e-12), metric


def test_the_bundled_trace_is_the_shared_one(shared_dir):
    shared = shared_dir / "traces" / "tiresias" / "60_job.csv"
    if not shared.exists():
        pytest.skip("no shared Tiresias trace")
    assert (DATA / "tiresias_60_job.csv").read_bytes() == shared.read_bytes()


def _moves(result) -> dict[str, int]:
    """Per job: stops followed by a resume at the same instant (a move to other GPUs)."""
    out: dict[str, int] = {}
    ev = result.events
    ev = ev[ev["kind"].isin(("suspend", "resume"))]
    for jid, g in ev.groupby("job_id"):
        rows = list(zip(g["kind"], g["time"], strict=True))
        out[str(jid)] = sum(a[0] == "suspend" and b[0] == "resume" and a[1] == b[1]
                            for a, b in zip(rows, rows[1:], strict=False))
    return out


@pytest.mark.parametrize(("check", "peer_file"), [
    ("dlas-gpu-gittins, authors' mode", "tiresias_dlas-gpu-gittins_jobs.csv"),
    ("dlas-gpu-gittins, x10, GPUs<=2, authors' mode",
     "tiresias_dlas-gpu-gittins_x10_gpus2_jobs.csv"),
])
def test_gittins_in_the_authors_mode_is_the_simulators(check, peer_file):
    """tiresias-gittins with the simulator's rank table and queue order: every job starts
    and ends as in dlas-gpu-gittins; its stops are the simulator's preemptions plus the
    moves (stopped and resumed at once on other GPUs, which a count-only simulator never
    does)."""
    tiresias = crosscheck_module("tiresias")
    result = tiresias.run(check, DATA / "tiresias_60_job.csv")
    with open(DATA / peer_file, newline="") as f:
        peer = {r["job_id"]: r for r in csv.DictReader(f)}
    jobs = result.jobs.set_index("job_id")
    moves = _moves(result)
    assert sorted(jobs.index) == sorted(peer)
    for jid, r in peer.items():
        assert jobs.at[jid, "start_time"] == float(r["start_time"]), jid
        assert jobs.at[jid, "end_time"] == float(r["end_time"]), jid
        assert jobs.at[jid, "preemptions"] - moves.get(jid, 0) == int(r["preempt"]), jid
    assert result.summary["jct_mean"] == pytest.approx(tiresias.PEER[check]["jct_mean"],
                                                       rel=1e-12)


def test_the_simulators_gittins_table():
    """The rank table as the simulator computes it (ranks checked by hand on 3 samples)."""
    import numpy as np

    from schedlab.policies.tiresias import SimulatorGittinsTable

    t = SimulatorGittinsTable(np.array([100.0, 200.0, 5000.0]), 3250)
    # at 99: i=0, a+D=3349 <= 4999, j=2: P=2/3, E=(100+200+3250)//3=1183 -> 563.5503
    assert t.ranks[0] == round(round(2 / 3, 5) * 1e6 / 1183, 4)
    assert t(0) == t(99.5) == t.ranks[0]  # a step: the rank of the first sample above
    assert t(100) == t.ranks[1]
    assert t(200) == 0.0  # past the second largest sample
    from schedlab.policies.tiresias import read_samples

    # the simulator's own table on its sample file (printed by its parse_job_dist,
    # Python 2.7); 809 is a rounding tie, halves away from zero as Python 2 rounds
    sim = SimulatorGittinsTable(read_samples(str(DATA / "tiresias_yarn-gput1000.csv")), 3250)
    assert (sim.ranks[0], sim.ranks[809], sim.ranks[937]) == (299.701, 18.6735, 2.4128)
