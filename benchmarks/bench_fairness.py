"""Multi-tenant policies (`drf`, `capacity`) against `fifo` on the full Philly job table.

The 15 Philly VCs are the tenants (DRF, `drf_by=vc`) and the leaf queues (capacity), with
DRF weights and queue capacities proportional to each VC's GPU-hours in the trace (queues:
max_capacity 1, user_limit_factor 1/capacity so the VC's single trace user may reach it).
Reports per run: wall and CPU seconds of the simulation (trace loading excluded; CPU time
is the fairer figure on a shared machine), engine events per job, preemptions, and JCT /
queueing delay (mean, p50, p95) with their ratio to fifo, and the worst and median VC's
mean queueing delay (the trace has no users: its per-user Jain index says nothing).
Each run is its own subprocess.

    python benchmarks/bench_fairness.py [--topology philly|uniform:56] [--max-jobs N]
                                        [--run NAME ...] [--json OUT]

On the `philly` topology (2,490 GPUs) the trace offers ~375 GPUs on average, so nothing
queues and every policy matches fifo; `--topology uniform:56` (448 GPUs) is contended.
Target on a 2-core machine: under 15 s per run on the `philly` topology.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench_common import print_rows, run_child

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"

RUNS: dict[str, tuple[str, dict]] = {
    "fifo": ("fifo", {}),
    "drf": ("drf", {"drf_by": "vc"}),
    "drf+preempt": ("drf", {"drf_by": "vc", "preempt": True}),
    "capacity": ("capacity", {}),
    "capacity-nopreempt": ("capacity", {"preempt": False}),
}


def vc_shares(trace) -> dict[str, float]:
    """Each VC's fraction of the trace's GPU-hours (sums to 1)."""
    hours: dict[str, float] = {}
    for s in trace.jobs:
        hours[s.vc] = hours.get(s.vc, 0.0) + s.duration * s.num_gpus
    total = sum(hours.values())
    return {vc: h / total for vc, h in sorted(hours.items())}


def write_tenant_files(shares: dict[str, float], folder: Path) -> tuple[Path, Path]:
    """A weights file (DRF) and a queues file (capacity) from the VC shares."""
    import yaml

    weights = folder / "weights.yaml"
    weights.write_text(yaml.safe_dump({vc: round(f, 9) for vc, f in shares.items()}))
    caps = {vc: round(f, 9) for vc, f in shares.items()}
    first = next(iter(caps))
    caps[first] = round(1.0 - sum(f for vc, f in caps.items() if vc != first), 9)
    queues = folder / "queues.yaml"
    queues.write_text(yaml.safe_dump({"queues": [
        {"name": vc, "capacity": f, "max_capacity": 1.0,
         "user_limit_factor": round(1.0 / f, 6)} for vc, f in caps.items()]}))
    return weights, queues


def _register() -> None:
    """Make `drf` and `capacity` available even before the registry lists them."""
    from schedlab.policies import register, registered_policies

    for name, entry in (("drf", "schedlab.policies.drf:DrfPolicy"),
                        ("capacity", "schedlab.policies.capacity:CapacityPolicy")):
        if name not in registered_policies():
            register(name, entry)


def _topology(name: str):
    """A preset or file, or `uniform:N` (N nodes of 8 P40 GPUs: a contended cluster)."""
    from schedlab.topologies import load_topology
    from schedlab.topologies.build import uniform_topology

    if name.startswith("uniform:"):
        n = int(name.partition(":")[2])
        return uniform_topology(n, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                                gpu_type="P40", name=f"uniform-{8 * n}")
    return load_topology(name)


def one(run: str, topology: str, max_jobs: int | None) -> dict:
    """One run in this process."""
    from schedlab.sim.engine import Simulation
    from schedlab.traces.canonical import frame_to_trace
    from schedlab.traces.make_default import convert_philly

    _register()
    t0 = time.perf_counter()
    trace = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full",
                           source=str(PHILLY))
    topo = _topology(topology)
    load_s = time.perf_counter() - t0
    policy, params = RUNS[run]
    params = dict(params)
    with tempfile.TemporaryDirectory() as tmp:
        weights, queues = write_tenant_files(vc_shares(trace), Path(tmp))
        if policy == "drf":
            params["weights"] = str(weights)
        elif policy == "capacity":
            params["queues"] = str(queues)
        t1 = time.perf_counter()
        c1 = time.process_time()
        result = Simulation(trace, topo, policy, params=params, max_jobs=max_jobs).run()
        wall = time.perf_counter() - t1
        cpu = time.process_time() - c1
    s = result.summary
    n = s["jobs_submitted"]
    per_vc = result.jobs.groupby("vc").queueing_delay.mean()
    return {
        "run": run,
        "jobs": n,
        "load_s": round(load_s, 2),
        "sim_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events_per_job": round(s["events_processed"] / n, 3),
        "completed": s["jobs_completed"],
        "rejected": s["jobs_rejected"],
        "preemptions": s["preemptions"],
        "util": round(s["utilization_mean"], 4),
        "jct_mean": round(s["jct_mean"], 1),
        "jct_p50": round(s["jct_p50"], 1),
        "jct_p95": round(s["jct_p95"], 1),
        "qd_mean": round(s["queueing_delay_mean"], 1),
        "qd_p50": round(s["queueing_delay_p50"], 1),
        "qd_p95": round(s["queueing_delay_p95"], 1),
        "vc_qd_max": round(float(per_vc.max()), 1),
        "vc_qd_median": round(float(per_vc.median()), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", default=None, choices=sorted(RUNS))
    ap.add_argument("--topology", default="philly")
    ap.add_argument("--max-jobs", type=int, default=None)
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--inproc", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    runs = args.run or list(RUNS)
    if not PHILLY.exists():
        sys.exit(f"Philly table not found at {PHILLY} (set SCHEDLAB_SHARED)")
    if args.inproc:
        print(json.dumps(one(runs[0], args.topology, args.max_jobs)))
        return
    rows = []
    for r in runs:
        cmd = ["--run", r, "--topology", args.topology]
        if args.max_jobs is not None:
            cmd += ["--max-jobs", str(args.max_jobs)]
        row = run_child(__file__, cmd)
        assert row is not None  # no timeout given
        rows.append(row)
        print(json.dumps(rows[-1]), file=sys.stderr)
    base = next((r for r in rows if r["run"] == "fifo"), None)
    for r in rows:
        for k in ("jct_mean", "qd_mean"):
            r[k + "_vs_fifo"] = (round(r[k] / base[k], 3) if base and base[k] else None)
    print_rows(rows, args.json)


if __name__ == "__main__":
    main()
