"""Replay the full Philly job table (82,247 jobs) on the `philly` topology.

Reports, per policy: wall seconds of the simulation (trace loading excluded and reported
apart), jobs/s, engine events per job and peak memory (max RSS of a fresh process).
Each policy runs in its own subprocess so the peak memory is its own.

    python benchmarks/bench_philly.py [--policy fifo --policy fifo-backfill] [--json OUT]

Target on a 2-core machine: under 5 s per policy, under 1 GB peak.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from bench_common import print_rows, run_child

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"


def one(policy: str, placer: str | None) -> dict:
    """Run one policy in this process and measure it."""
    from schedlab.sim.engine import Simulation
    from schedlab.topologies import load_topology
    from schedlab.traces.canonical import frame_to_trace
    from schedlab.traces.make_default import convert_philly

    t0 = time.perf_counter()
    trace = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full",
                           source=str(PHILLY))
    topo = load_topology("philly")
    load_s = time.perf_counter() - t0
    params = {"placer": placer} if placer else {}
    t1 = time.perf_counter()
    result = Simulation(trace, topo, policy, params=params).run()
    wall = time.perf_counter() - t1
    s = result.summary
    n = len(trace.jobs)
    return {
        "policy": policy,
        "placer": s["params"]["placer"],
        "jobs": n,
        "load_seconds": round(load_s, 3),
        "sim_seconds": round(wall, 3),
        "engine_seconds": round(s["wall_seconds"], 3),
        "jobs_per_second": round(n / wall),
        "events_per_job": round(s["events_processed"] / n, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "completed": s["jobs_completed"],
        "rejected": s["jobs_rejected"],
        "utilization_mean": round(s["utilization_mean"], 4),
        "queueing_delay_mean": round(s["queueing_delay_mean"], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", default=None)
    ap.add_argument("--placer", default=None)
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--inproc", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    policies = args.policy or ["fifo", "fifo-backfill"]
    if not PHILLY.exists():
        sys.exit(f"Philly table not found at {PHILLY} (set SCHEDLAB_SHARED)")
    if args.inproc:
        print(json.dumps(one(policies[0], args.placer)))
        return
    rows = []
    for p in policies:
        cmd = ["--policy", p]
        if args.placer:
            cmd += ["--placer", args.placer]
        row = run_child(__file__, cmd)
        assert row is not None  # no timeout given
        rows.append(row)
    print_rows(rows, args.json)


if __name__ == "__main__":
    main()
