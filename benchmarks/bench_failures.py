"""Failure layer at LLM scale (issue 48): Llama 3's interruptions, speed, ETTR by size.

    python benchmarks/bench_failures.py llama3     # one 16,384-GPU job, 54 days
    python benchmarks/bench_failures.py llm-like   # llm-like workload on h100-2048, 54 days
    python benchmarks/bench_failures.py ettr OUT.png   # ETTR vs job size and interval

Prints one JSON line per case; numbers are in benchmarks/RESULTS_failures.md.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time

from schedlab.sim.engine import Simulation
from schedlab.sim.failure_models import LLAMA3_TABLE
from schedlab.sim.model import JobSpec
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace
from schedlab.traces.llm_like import llm_like

DAYS54 = 54 * 86400.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def llama3(seed: int = 0) -> dict:
    """One 16,384-GPU job for 54 days on 2,048 nodes + 64 hot spares (swap 10 min)."""
    topo = uniform_topology(2112, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            nodes_per_rack=16, gpu_type="H100", name="h100-2112")
    job = JobSpec("llama3", 0.0, 16384, 10 * DAYS54)  # runs past the 54 days
    c0, w0 = _cpu(), time.perf_counter()
    res = Simulation(Trace("one", (job,)), topo, "fifo", seed=seed, params={
        "failure_model": "llama3", "spare_nodes": 64, "spare_swap_time": 600,
        "checkpoint_cost": 60, "checkpoint_interval": "auto", "restore_overhead": 600,
        "events": False, "timeline": "off"}).run(until=DAYS54)
    cpu, wall = _cpu() - c0, time.perf_counter() - w0
    s = res.summary
    by = s["interruptions_by_component"]
    j = res.jobs.iloc[0]
    held_h = float(j.run_time) / 3600
    rate = 419 / (54 * 24)  # the report's interruptions per job-hour
    want = {n: c for n, _, c in LLAMA3_TABLE}
    return {"case": "llama3", "seed": seed, "interruptions": int(s["interruptions_total"]),
            "expected_at_held_time": round(rate * held_h, 1), "held_days": held_h / 24,
            "ettr": float(j.ettr), "interval_s": float(j.checkpoint_interval_used),
            "chi2_vs_table": round(sum((by.get(k, 0) * 419 / max(1, sum(by.values())) - v)
                                       ** 2 / v for k, v in want.items()), 1),
            "top": dict(sorted(by.items(), key=lambda kv: -kv[1])[:5]),
            "swaps": s["spare_swaps"], "cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}


def llm(seed: int = 0, n_jobs: int = 4000) -> dict:
    """The llm-like workload on h100-2048 with the llama3 model for 54 days."""
    topo = load_topology("h100-2048")
    trace = llm_like(n_jobs, span_days=54, seed=seed, max_gpus=topo.num_gpus)
    c0, w0 = _cpu(), time.perf_counter()
    res = Simulation(trace, topo, "fifo-backfill", seed=seed, params={
        "failure_model": "llama3", "checkpoint_cost": 60, "checkpoint_interval": "auto",
        "events": False, "timeline": "off"}).run(until=DAYS54)
    cpu, wall = _cpu() - c0, time.perf_counter() - w0
    s = res.summary
    return {"case": "llm-like", "jobs": n_jobs, "completed": s["jobs_completed"],
            "interruptions": s["interruptions_total"], "ettr_gpu_weighted":
            round(s["ettr_gpu_weighted"], 4), "utilization": round(s["utilization_mean"], 3),
            "mttf_hours_by_size": s["mttf_hours_by_size"],
            "events": s["events_processed"], "cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}


def ettr(out: str) -> list[dict]:
    """ETTR of one job of each size under llama3, for intervals around Daly's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = (512, 1024, 2048, 4096, 8192)
    intervals = ("auto", 600, 1800, 3600, 7200)
    topo = uniform_topology(1088, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            nodes_per_rack=16, gpu_type="H100", name="h100-1088")
    rows = []
    for iv in intervals:
        for n in sizes:
            jobs = tuple(JobSpec(f"j{s}", 0.0, n, 14 * 86400.0) for s in range(1))
            res = Simulation(Trace("one", jobs), topo, "fifo", seed=1, params={
                "failure_model": "llama3", "spare_nodes": 64, "checkpoint_cost": 120,
                "checkpoint_interval": iv, "restore_overhead": 600, "events": False,
                "timeline": "off"}).run()
            j = res.jobs.iloc[0]
            rows.append({"interval": iv, "gpus": n, "ettr": round(float(j.ettr), 4),
                         "interval_s": round(float(j.checkpoint_interval_used)),
                         "interruptions": int(j.interruptions)})
    fig, ax = plt.subplots(figsize=(6, 4))
    for iv in intervals:
        pts = [r for r in rows if r["interval"] == iv]
        ax.plot([r["gpus"] for r in pts], [r["ettr"] for r in pts], marker="o",
                label=f"interval {iv}" + (" (Daly)" if iv == "auto" else " s"))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("job size (GPUs)")
    ax.set_ylabel("ETTR (productive / wall time)")
    ax.set_title("llama3 failure model, 14-day job, checkpoint cost 120 s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return rows


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "llama3"
    if what == "llama3":
        print(json.dumps(llama3(int(sys.argv[2]) if len(sys.argv) > 2 else 0)))
    elif what == "llm-like":
        print(json.dumps(llm()))
    elif what == "ettr":
        for r in ettr(sys.argv[2] if len(sys.argv) > 2 else "ettr.png"):
            print(json.dumps(r))
    else:
        sys.exit(f"unknown case {what!r}: llama3, llm-like or ettr")
    _ = math
