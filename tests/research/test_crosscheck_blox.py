"""Blox's FIFO on its own generated workload and its SRTF on the same generator with 1-GPU
jobs: schedlab's fifo / srtf with decision_round=300 make every launch and suspension at
the same round, and every tracked job ends in the same round
(benchmarks/crosscheck/blox.py; Blox's runs kept in data/blox_fifo.csv, blox_srtf-1gpu.csv)."""

from __future__ import annotations

from conftest import crosscheck_module


def test_blox_srtf_agrees_job_by_job_with_rounds():
    blox = crosscheck_module("blox")
    c = blox.compare("srtf-1gpu", "rounds")
    assert c["n_all"] == 102 and c["same_events"] == 102  # launches and suspensions
    assert c["done"] and c["n"] == 20 and c["same_end"] == 20
    assert c["jct_rounded"] == c["jct_blox"]
    # the run preempts: Blox suspended jobs, and schedlab suspends the same ones
    assert any("S" in r["blox_events"] for r in blox.peer_jobs("srtf-1gpu"))


class _Cluster:
    """Just what BloxScatter reads: 4 nodes of 4 GPUs and the free GPUs."""

    def __init__(self, free: list[int]) -> None:
        self.topo = type("T", (), {"root": 0, "gpu_node": [g // 4 for g in range(16)]})()
        self.free = free

    def free_gpus_in(self, cell: int) -> list[int]:
        return self.free


def test_blox_fifo_agrees_job_by_job_with_rounds():
    c = crosscheck_module("blox").compare("fifo", "rounds")
    assert c["n_all"] == 93 and c["same_events"] == 93
    assert c["done"] and c["n"] == 20 and c["same_end"] == 20
    assert c["jct_rounded"] == c["jct_blox"]


def test_blox_scatter_needs_an_exact_prefix():
    """Blox's _scattered_placement: up to n GPUs from each node in turn, exact count."""
    from schedlab.sim.model import JobSpec, Unschedulable

    place = crosscheck_module("blox").BloxScatter().place

    def job(n: int) -> JobSpec:
        return JobSpec(job_id="j", submit_time=0.0, num_gpus=n, duration=1.0)

    assert place(job(8), _Cluster(list(range(16)))) == tuple(range(8))
    # 2 + 4 + 3 + 4 free: 2 + 4 = 6, then 6 + 3 = 9 passes 8: refused (as in Blox)
    free = [2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15]
    assert isinstance(place(job(8), _Cluster(free)), Unschedulable)
    assert place(job(6), _Cluster(free)) == (2, 3, 4, 5, 6, 7)
    # 1 free on node 0, then 2 of node 1: 3 passes 2
    assert isinstance(place(job(2), _Cluster([3, 4, 5, 6, 7])), Unschedulable)


def test_blox_srtf_with_jobs_of_several_gpus_in_the_authors_mode():
    """Blox's generator as shipped (1/2/4/8 GPUs): `srtf admit=blox` makes every launch
    and suspension of Blox's SRTF (to where Blox's run was stopped)."""
    blox = crosscheck_module("blox")
    c = blox.compare("srtf", blox.LOOP)
    assert c["n_all"] == c["same_events"] == 841
