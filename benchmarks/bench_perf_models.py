"""Speed of performance-model runs: 1,000 Pollux-workload jobs under pollux vs fifo.

Issue 46's target: a run of 1,000 Pollux-workload jobs under `pollux` within 10x fifo's
CPU time on the same input. The input is Pollux's workloads 1-7 (160 jobs each, about
8 h apart: each is shifted past the previous one's last arrival) cut at 1,000 jobs, on
Pollux's cluster (16 nodes x 4 GPUs), with Pollux's profiles as the performance model.
Needs Pollux's artifact (`POLLUX_ARTIFACT`, as benchmarks/crosscheck/pollux.py).

    python benchmarks/bench_perf_models.py [--jobs 1000] [--policies fifo pollux optimus]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

from schedlab.sim.engine import Simulation
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace
from schedlab.traces.base import Trace

ROOT = Path(__file__).resolve().parents[1]
ART = Path(os.environ.get("POLLUX_ARTIFACT", ROOT.parent / "pollux-artifact")) / "simulator"


def workload(n: int) -> Trace:
    """Pollux's workloads 1, 2, ... one after another, cut at n jobs."""
    jobs = []
    offset = 0.0
    for k in range(1, 9):
        t = load_trace(ART / "workloads" / f"workload-{k}.csv")
        jobs += [replace(j, job_id=f"w{k}-{j.job_id}", submit_time=j.submit_time + offset)
                 for j in t.jobs]
        offset = max(j.submit_time for j in jobs) + 60.0
        if len(jobs) >= n:
            break
    return Trace(f"pollux-workloads-{n}", tuple(jobs[:n]))


def main() -> None:
    """Run each policy once and print its CPU time and its ratio to fifo's."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--policies", nargs="+", default=["fifo", "pollux"])
    args = ap.parse_args()
    trace = workload(args.jobs)
    topo = uniform_topology(16, gpus_per_switch=4, name="pollux-16x4")
    params = {"perf_model": f"pollux={ART / 'traces'}"}
    cpu: dict[str, float] = {}
    for policy in args.policies:
        t0 = time.process_time()
        r = Simulation(trace, topo, policy, params=params).run()
        cpu[policy] = time.process_time() - t0
        print(f"{policy:10s} {len(trace.jobs)} jobs  cpu {cpu[policy]:7.1f} s  "
              f"jct_mean {r.summary['jct_mean']:9.0f} s  completed "
              f"{r.summary['jobs_completed']}", flush=True)
    if "fifo" in cpu:
        for p, c in cpu.items():
            if p != "fifo":
                print(f"{p}: {c / cpu['fifo']:.1f}x fifo (target: within 10x)")


if __name__ == "__main__":
    main()
