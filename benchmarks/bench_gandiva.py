"""Gandiva on the full Philly table and on a hyper-parameter-search burst.

1. The 82,247-job Philly table on the `philly` topology under `fifo`, `gandiva`
   (reactive only) and `gandiva` (all introspective features): JCT, queueing delay,
   utilization, fragmentation, events per job and wall seconds side by side.
2. A hyper-parameter search: many same-size jobs submitted together on a small cluster;
   the time until every job has made its first progress (what time-slicing is for).

    python benchmarks/bench_gandiva.py [--max-jobs N]
"""

from __future__ import annotations

import argparse
import time

from bench_philly import PHILLY

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace
from schedlab.traces.canonical import frame_to_trace
from schedlab.traces.make_default import convert_philly

RUNS = (("fifo", "fifo", {}), ("gandiva-reactive", "gandiva", {"introspective": False}),
        ("gandiva", "gandiva", {}))
COLS = ("jct_mean", "jct_p95", "queueing_delay_mean", "queueing_delay_p95",
        "utilization_mean", "fragmentation_mean", "migrations", "preemptions")


def philly(max_jobs: int | None) -> None:
    trace = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full")
    topo = load_topology("philly")
    print(f"Philly: {len(trace.jobs) if max_jobs is None else max_jobs} jobs on philly "
          f"({topo.num_gpus} GPUs)")
    print("run".ljust(18) + "".join(c.rjust(20) for c in (*COLS, "events/job", "wall s")))
    for label, name, params in RUNS:
        t = time.perf_counter()
        s = Simulation(trace, topo, name, params=params, max_jobs=max_jobs).run().summary
        wall = time.perf_counter() - t
        vals = [f"{s[c]:.3f}" if isinstance(s[c], float) else str(s[c]) for c in COLS]
        vals += [f"{s['events_processed'] / s['jobs_submitted']:.2f}", f"{wall:.1f}"]
        print(label.ljust(18) + "".join(v.rjust(20) for v in vals))


def hyperparameter_search() -> None:
    # 64 one-GPU trials of 2 h each submitted at once on 2 nodes of 8 GPUs
    topo = uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2)
    jobs = tuple(JobSpec(f"trial{i}", 0.0, 1, 7200.0, checkpoint_interval=600.0)
                 for i in range(64))
    trace = Trace("hyperparameter-search", jobs)
    print("\nhyper-parameter search: 64 x 1-GPU trials of 2 h at t=0 on 16 GPUs")
    print("run".ljust(18) + "all started (h)".rjust(18) + "mean JCT (h)".rjust(16)
          + "makespan (h)".rjust(16))
    for label, name, params in RUNS:
        r = Simulation(trace, topo, name, params=params).run()
        first = r.jobs.start_time.max() / 3600
        print(label.ljust(18) + f"{first:18.2f}{r.summary['jct_mean'] / 3600:16.2f}"
              f"{r.summary['makespan'] / 3600:16.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-jobs", type=int, default=None)
    args = ap.parse_args()
    philly(args.max_jobs)
    hyperparameter_search()


if __name__ == "__main__":
    main()
