"""Cross-check schedlab's `sia` against Sia's own simulator on one of Sia's workloads.

Sia's simulator (siasosp23/artifacts, `sia-simulator/`) is run unmodified, in its own
Python (`--sia-python`, an environment with numpy<1.24, pandas<2, scipy, cvxpy, cylp,
rich), from an extracted copy of the artifact (`--sia-dir`, not committed). Its
`multi_simulator.py` prints the JCT of every finished job each round; the last print is
its result. schedlab then runs the same workload on the same cluster (Sia's default: 6
aws nodes of 4 GPUs, 2 dgx-ext of 8, 3 rtx of 8) with `perf_model sia=<sia-dir>/traces`.
`--jobs N` keeps the first N jobs of the workload for a quicker run (the same for both).

    python benchmarks/crosscheck/sia_sim.py --sia-dir /work/sia-sim/sia-simulator \\
        --sia-python /work/venv-sia-sim/bin/python --workload workloads/philly/workload-1.csv
"""

from __future__ import annotations

import argparse
import ast
import csv
import subprocess
import tempfile
import time
from pathlib import Path

SIA_CLUSTER = (("aws", 6, 4), ("dgx-ext", 2, 8), ("rtx", 3, 8))
"""Sia's default simulated cluster (`simulator_config.cluster_nnodes`)."""


def truncated(workload: Path, jobs: int | None, out_dir: Path) -> Path:
    """The workload, or its first `jobs` rows in a file of its own."""
    if not jobs:
        return workload
    with open(workload, newline="") as f:
        rows = list(csv.reader(f))
    out = out_dir / f"{workload.stem}-first{jobs}.csv"
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows[: jobs + 1])
    return out


def run_sia_sim(sia_dir: Path, python: str, workload: Path, policy: str, interval: int,
                log: Path) -> dict[str, float]:
    """Sia's simulator on the workload: job -> JCT (s), from its last print."""
    with open(log, "w") as out:
        subprocess.run([python, "multi_simulator.py", str(workload), "--policy", policy,
                        "--interval", str(interval)], cwd=sia_dir, stdout=out,
                       stderr=subprocess.STDOUT, check=True)
    last = ""
    lines = log.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Completed jobs:") and i + 1 < len(lines):
            last = lines[i + 1]
    jcts = ast.literal_eval(last) if last else {}
    return {str(k): float(v) for k, v in jcts.items()}


def run_schedlab(sia_dir: Path, workload: Path, interval: int) -> dict[str, float]:
    """schedlab's sia on the workload: job -> JCT (s)."""
    from schedlab.policies.sia import SiaPolicy
    from schedlab.sim.engine import Simulation
    from schedlab.topologies.native import native_from_dict
    from schedlab.traces.readers import read_trace

    topo = native_from_dict({"name": "sia-default", "nodes": [
        {"count": n, "gpus_per_node": g, "gpu_type": t} for t, n, g in SIA_CLUSTER]},
        "sia-default.yaml")
    trace = read_trace(workload, "sia")
    res = Simulation(trace, topo, SiaPolicy(round=float(interval)),
                     params={"perf_model": f"sia={sia_dir / 'traces'}"}).run()
    jobs = res.jobs
    done = jobs[jobs.status == "completed"]
    return dict(zip(done.job_id, done.end_time - done.submit_time, strict=True))


def summary(jcts: dict[str, float], submit: dict[str, float]) -> tuple[int, float, float]:
    """Jobs finished, mean JCT (h), makespan (h, last end - 0)."""
    if not jcts:
        return 0, float("nan"), float("nan")
    ends = [submit[j] + v for j, v in jcts.items() if j in submit]
    return len(jcts), sum(jcts.values()) / len(jcts) / 3600, max(ends) / 3600


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sia-dir", type=Path, required=True)
    ap.add_argument("--sia-python", default="")
    ap.add_argument("--workload", default="workloads/philly/workload-1.csv")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--interval", type=int, default=60)
    ap.add_argument("--policies", default="sia", help="Sia-simulator policies: sia,gavel")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sia-xcheck-"))
    wl = truncated((args.sia_dir / args.workload).resolve(), args.jobs or None, tmp)
    with open(wl, newline="") as f:
        submit = {r["name"]: float(r["time"]) for r in csv.DictReader(f)}
    rows = []
    t = time.time()
    ours = run_schedlab(args.sia_dir, wl, args.interval)
    rows.append(("schedlab sia", *summary(ours, submit), time.time() - t))
    if args.sia_python:
        for pol in args.policies.split(","):
            t = time.time()
            theirs = run_sia_sim(args.sia_dir, args.sia_python, wl, pol, args.interval,
                                 tmp / f"{pol}.log")
            rows.append((f"Sia simulator {pol}", *summary(theirs, submit), time.time() - t))
    print(f"workload {args.workload} ({len(submit)} jobs), round {args.interval} s, "
          f"logs in {tmp}")
    print("| run | jobs finished | mean JCT (h) | makespan (h) | wall (s) |")
    print("| --- | --- | --- | --- | --- |")
    for name, n, jct, mk, wall in rows:
        print(f"| {name} | {n} | {jct:.3f} | {mk:.2f} | {wall:.0f} |")


if __name__ == "__main__":
    main()
