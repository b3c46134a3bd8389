"""The literature's baselines side by side, and FGD against packing on Alibaba openb.

1. Every registered policy on the bundled default trace and topology and on the full
   Philly job table (82,247 jobs). One table: wall seconds of the simulation (trace
   loading excluded), engine events per job, and the summary metrics. Each run is its own
   subprocess. On the `philly` topology (2,490 GPUs) the full table barely queues, so
   `--philly-topology uniform:56` (448 GPUs) gives the contended variant.
2. openb "fill" (the FGD paper's experiment, as `bench_fgd.py` runs it, one seed): the
   openb pods (CPU-only ones included) shuffled and tuned to 130% of the GPU capacity
   arrive one a second and never leave, on the openb GPU nodes. Reported: the % of GPU
   capacity left unallocated when the arrived requests reach 90..130% of capacity, for
   `fgd` and for `fifo-backfill` with the `pack` and `consolidated` placers (same
   arrival-order-with-backfill scheduling; only the placement differs). Several seeds
   and the FGD authors' baselines: `bench_fgd.py`.

    python benchmarks/bench_baselines.py [--trace default --trace philly] [--policy P ...]
        [--philly-topology philly|uniform:N] [--skip-openb] [--timeout S] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench_common import run_child, text_table

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"
OPENB = SHARED / "traces" / "alibaba-gpu-v2023"

METRICS = ("jobs_completed", "jct_mean", "jct_p95", "queueing_delay_mean", "slowdown_mean",
           "utilization_mean", "fragmentation_mean", "preemptions", "lost_gpu_hours",
           "makespan")


def topology(name: str):
    """A bundled topology, or `uniform:N` (N DGX-like 8-GPU nodes)."""
    if name.startswith("uniform:"):
        from schedlab.topologies.build import uniform_topology

        return uniform_topology(int(name.split(":", 1)[1]), sockets=2, switches_per_socket=2,
                                gpus_per_switch=2, name=name)
    from schedlab.topologies import load_topology

    return load_topology(name)


def load(trace: str, philly_topology: str):
    """(trace, topology) of a benchmark case."""
    if trace == "default":
        from schedlab.traces import load_trace

        return load_trace("default"), topology("default")
    from schedlab.traces.canonical import frame_to_trace
    from schedlab.traces.make_default import convert_philly

    t = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full",
                       source=str(PHILLY))
    return t, topology(philly_topology)


def one(trace: str, policy: str, philly_topology: str) -> dict:
    """Run one policy on one case in this process and measure it."""
    from schedlab.sim.engine import Simulation

    t0 = time.perf_counter()
    tr, topo = load(trace, philly_topology)
    load_s = time.perf_counter() - t0
    c0 = time.process_time()
    t1 = time.perf_counter()
    s = Simulation(tr, topo, policy).run().summary
    row = {"trace": trace, "topology": topo.name, "policy": policy,
           "wall_s": round(time.perf_counter() - t1, 2),
           "cpu_s": round(time.process_time() - c0, 2), "load_s": round(load_s, 2),
           "events_per_job": round(s["events_processed"] / max(1, len(tr.jobs)), 2)}
    for k in METRICS:
        v = s[k]
        row[k] = round(v, 4) if isinstance(v, float) else v
    return row


def openb_fill(label: str) -> dict:
    """One placement on the FGD authors' openb experiment (seed 42), in this process."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_fgd import one as fgd_run

    return fgd_run(label, 42, "gpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", action="append", choices=("default", "philly"))
    ap.add_argument("--policy", action="append", default=None)
    ap.add_argument("--philly-topology", default="philly")
    ap.add_argument("--skip-openb", action="store_true")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--json", default=None, help="also write every row to this JSON file")
    ap.add_argument("--inproc", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fill", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inproc:
        row = openb_fill(args.fill) if args.fill else one(
            args.trace[0], args.policy[0], args.philly_topology)
        print(json.dumps(row))
        return
    traces = args.trace or ["default", "philly"]
    if "philly" in traces and not PHILLY.exists():
        sys.exit(f"Philly table not found at {PHILLY} (set SCHEDLAB_SHARED)")
    from schedlab.policies.registry import registered_policies

    policies = args.policy or registered_policies()
    rows = []
    for trace in traces:
        for p in policies:
            row = run_child(__file__, ["--trace", trace, "--policy", p, "--philly-topology",
                             args.philly_topology], args.timeout)
            rows.append(row or {"trace": trace, "policy": p, "wall_s": f">{args.timeout:g}"})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(text_table(rows))
    fills = []
    if not args.skip_openb and (OPENB / "openb_pod_list_default.csv").exists():
        for label in ("fgd", "pack", "consolidated"):
            row = run_child(__file__, ["--fill", label], args.timeout)
            fills.append(row or {"placement": label, "wall_s": f">{args.timeout:g}"})
        print()
        print(text_table(fills))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": rows, "openb_fill": fills},
                                              indent=2) + "\n")


if __name__ == "__main__":
    main()
