"""Tiresias' 60-job trace on 16 GPUs: schedlab's fifo (first-fit) and tiresias-las give
Tiresias' own simulator's times, job by job (benchmarks/crosscheck/tiresias.py)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def _crosscheck(name: str):
    """Import a cross-check module (benchmarks/crosscheck is not a package)."""
    folder = ROOT / "benchmarks" / "crosscheck"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"crosscheck_{name}", folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("check", "peer_file"), [
    ("fifo first-fit", "tiresias_fifo_jobs.csv"),
    ("dlas-gpu / tiresias-las", "tiresias_dlas-gpu_jobs.csv"),
    # derived traces with demotions and preemptions, with the simulator's demotion
    # timing and requeueing (demotion_timer=simulator, requeue=front)
    ("dlas-gpu, x10, GPUs<=2", "tiresias_dlas-gpu_x10_gpus2_jobs.csv"),
    ("dlas-gpu, durations x10", "tiresias_dlas-gpu_x10_jobs.csv"),
])
def test_every_job_starts_and_ends_as_in_tiresias_simulator(check, peer_file):
    tiresias = _crosscheck("tiresias")
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
