"""HiveD's sharing anomaly (OSDI'20), set up as the paper's cluster as far as the data allows.

The paper: on a production cluster of 2,232 GPUs shared by 11 tenants, a tenant's jobs
waited up to 7x longer under quota-only sharing (a quota of GPUs per tenant, YARN-CS) than
on a private cluster of its share, because quota cannot keep a job's GPU affinity; HiveD
(VCs of cells) removes the anomaly. Here:

- cluster: 279 nodes of 8 GPUs = 2,232 GPUs (P40-shaped: 2 sockets x 2 PCIe switches x 2
  GPUs); the paper's cluster layout is not public, so one node shape;
- tenants: the Philly table's 11 VCs with more than 100 jobs (the 4 others hold 18 jobs
  and are left out), jobs as in the table (no GPU type), `--days` days (60: the paper's
  two months) from day `--start` (14: the table's first two weeks hold 22 jobs);
- shares: each VC gets its share of the table's GPU-hours in whole nodes (largest
  remainder), at least the nodes its largest job needs (taken from the VCs with the most);
- affinity (both policies and the private clusters): a job of up to 8 GPUs runs inside
  one node, a larger one on the fewest whole nodes (the `consolidated` placer; HiveD's
  pods of one node each); no relaxation;
- quota-only: `vc-quota` (a VC holds up to its quota of GPUs anywhere; strict FIFO per
  VC; no preemption, no borrowing) and `yarn-cs`, YARN's Capacity Scheduler as the paper's
  clusters ran it (`capacity`: the share is a guarantee, idle GPUs are lent up to the
  whole cluster, FIFO per queue, no preemption); HiveD: `hived` with the same shares as node cells,
  every job guaranteed (priority 0), FIFO per VC; private: each VC's jobs alone on a
  cluster of its own nodes, under `fifo` (what `vc-quota` is with one VC) and under
  `hived` (one VC owning it), so each shared run is compared with the same scheduler;
- load: `--load-scale X` divides submit times by X (the table alone keeps such a
  cluster ~17% busy; the paper's cluster was busy).

Prints per VC the mean queueing delay (min) of all jobs and of 8+ GPU jobs under each
set-up and the ratios shared / private (> 1: the anomaly). Each run is a subprocess.

    nice -n 10 python benchmarks/bench_hived_anomaly.py --load-scale 3
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hived import BIG, PHILLY  # noqa: E402  (the Philly table and the 8+ cut)

NODES, GPUS = 279, 8  # 2,232 GPUs
MIN_JOBS = 100  # a VC with fewer jobs in the table is left out (4 VCs, 18 jobs)


def load(load_scale: float, days: float, start: float = 14.0):
    """The Philly table: `days` days from day `start`, the 11 busy VCs, at `load_scale`."""
    from collections import Counter

    from schedlab.traces.canonical import frame_to_trace
    from schedlab.traces.make_default import convert_philly
    from schedlab.traces.shaping import shape

    full = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-11",
                          source=str(PHILLY))
    counts = Counter(s.vc for s in full.jobs)
    vcs = sorted(v for v, n in counts.items() if n > MIN_JOBS)
    return shape(full, window=(start * 86400.0, (start + days) * 86400.0), vcs=vcs,
                 load_scale=None if load_scale == 1 else load_scale)


def shares(jobs) -> dict[str, int]:
    """Nodes per VC: share of GPU-hours, largest remainder, floored at the largest job."""
    hours: dict[str, float] = {}
    biggest: dict[str, int] = {}
    for s in jobs:
        hours[s.vc] = hours.get(s.vc, 0.0) + s.num_gpus * s.duration
        biggest[s.vc] = max(biggest.get(s.vc, 0), s.num_gpus)
    vcs = sorted(hours, key=lambda v: (-hours[v], v))
    total = sum(hours.values())
    exact = {v: NODES * hours[v] / total for v in vcs}
    got = {v: math.floor(x) for v, x in exact.items()}
    for v in sorted(vcs, key=lambda v: (-(exact[v] - got[v]), v))[:NODES - sum(got.values())]:
        got[v] += 1
    for v in vcs:
        need = math.ceil(biggest[v] / GPUS)
        while got[v] < need:
            donor = max((d for d in vcs if d != v), key=lambda d: (got[d], d))
            got[donor] -= 1
            got[v] += 1
    return got


def topology(nodes: int, name: str, vcs: dict[str, int] | None = None):
    """`nodes` P40-shaped 8-GPU nodes; with `vcs`, native VCs of whole nodes."""
    from schedlab.topologies.native import native_from_dict

    data: dict = {"name": name, "nodes": [{"count": nodes, "gpu_type": "P40", "sockets": 2,
                                           "switches_per_socket": 2, "gpus_per_switch": 2}]}
    if vcs:
        data["vcs"] = {vc: {"node": n} for vc, n in vcs.items()}
    return native_from_dict(data, f"{name}.yaml")


def run_one(setup: str, cfg: dict) -> dict:
    """One set-up in this process: per-job (vc, GPUs, queueing delay s) and utilization."""
    from schedlab.sim.engine import Simulation
    from schedlab.traces.base import Trace

    trace = load(cfg["load_scale"], cfg["days"], cfg["start"])
    nodes = cfg["nodes"]
    t0 = time.perf_counter()
    rows: list = []
    util = []
    if setup.startswith("private"):
        policy = "hived" if setup == "private-hived" else "fifo"
        by_vc: dict[str, list] = {}
        for s in trace.jobs:
            by_vc.setdefault(s.vc, []).append(s)
        for vc, jobs in sorted(by_vc.items()):
            r = Simulation(Trace(f"private-{vc}", tuple(jobs)),
                           topology(nodes[vc], f"private-{vc}"), policy).run()
            rows += _rows(r.jobs)
            util.append((nodes[vc], r.summary["utilization_mean"]))
    else:
        topo = topology(NODES, "paper-2232", nodes)
        policy, params = {
            "vc-quota": ("vc-quota", {"quotas": cfg["quotas_file"]}),
            "yarn-cs": ("capacity", {"queues": cfg["queues_file"], "preempt": False}),
            "hived": ("hived", {"preemption_delay": 0.0}),
        }[setup]
        r = Simulation(trace, topo, policy, params=params).run()
        rows = _rows(r.jobs)
        util.append((NODES, r.summary["utilization_mean"]))
    used = sum(n * u for n, u in util) / sum(n for n, _ in util)
    return {"setup": setup, "rows": rows, "utilization_mean": round(used, 4),
            "sim_seconds": round(time.perf_counter() - t0, 1)}


def _rows(jobs) -> list:
    done = jobs[jobs.status != "rejected"]
    return list(zip(done.vc, done.num_gpus.astype(int), done.queueing_delay.astype(float),
                    strict=True))


def per_vc(rows: list) -> dict[str, dict[str, float | None]]:
    """vc -> mean delay (min) of all jobs and of 8+ GPU jobs, and their counts."""
    acc: dict[str, list[float]] = {}
    for vc, g, d in rows:
        a = acc.setdefault(vc, [0, 0.0, 0, 0.0])
        a[0] += 1
        a[1] += d
        if g >= BIG:
            a[2] += 1
            a[3] += d
    return {vc: {"jobs": a[0], "all": a[1] / a[0] / 60, "big_jobs": a[2],
                 "big": a[3] / a[2] / 60 if a[2] else None} for vc, a in acc.items()}


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-"
    if b < 0.05:  # under 3 s private: a ratio says nothing, print the difference
        return f"+{a - b:.1f}m" if a >= b else f"{a - b:.1f}m"
    return f"{a / b:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load-scale", type=float, default=3.0)
    ap.add_argument("--days", type=float, default=60.0, help="days of the table replayed")
    ap.add_argument("--start", type=float, default=14.0, help="from this day of the table")
    ap.add_argument("--setup", action="append", default=None,
                    help="private, private-hived, vc-quota, yarn-cs, hived (default: all)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--inproc", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inproc:
        cfg = json.loads(Path(args.inproc).read_text())
        print(json.dumps(run_one(args.setup[0], cfg)))
        return
    setups = args.setup or ["private", "private-hived", "vc-quota", "yarn-cs", "hived"]
    trace = load(args.load_scale, args.days, args.start)
    nodes = shares(trace.jobs)
    print(f"{len(trace.jobs)} jobs, {len(nodes)} VCs, load x{args.load_scale:g}, days "
          f"{args.start:g}-{args.start + args.days:g}; {NODES} nodes x {GPUS} GPUs; "
          "nodes per VC: "
          + ", ".join(f"{v}={n}" for v, n in nodes.items()))
    results = {}
    with tempfile.TemporaryDirectory() as d:
        qf = Path(d) / "quotas.yaml"
        qf.write_text(yaml.safe_dump({v: n * GPUS for v, n in nodes.items()}))
        yf = Path(d) / "queues.yaml"
        yf.write_text(yaml.safe_dump({"queues": [
            {"name": v, "capacity": n / NODES, "max_capacity": 1.0,
             "user_limit_factor": NODES / n} for v, n in nodes.items()]}))
        cfg_file = Path(d) / "cfg.json"
        cfg_file.write_text(json.dumps({"load_scale": args.load_scale, "days": args.days,
                                        "start": args.start, "queues_file": str(yf),
                                        "nodes": nodes, "quotas_file": str(qf)}))
        for s in setups:
            out = subprocess.run([sys.executable, __file__, "--inproc", str(cfg_file),
                                  "--setup", s], check=True, capture_output=True, text=True)
            results[s] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {s}: {results[s]['sim_seconds']} s, utilization "
                  f"{results[s]['utilization_mean']}", flush=True)
    table = {s: per_vc(r["rows"]) for s, r in results.items()}
    base = {s: ("private-hived" if s == "hived" and "private-hived" in table else "private")
            for s in setups if not s.startswith("private")}
    base = {s: b for s, b in base.items() if b in table}
    print("\nmean queueing delay (min), all jobs | 8+ GPU jobs; ratio = shared / private "
          "under the same scheduler")
    head = ["vc", "nodes", "jobs", "8+"] + [f"{s} all" for s in setups] + [
        f"{s} 8+" for s in setups]
    head += [f"{s}/{b} all" for s, b in base.items()] + [
        f"{s}/{b} 8+" for s, b in base.items()]
    print(" | ".join(head))
    out_rows = []
    for vc in sorted(nodes, key=lambda v: -nodes[v]):
        row = {"vc": vc, "nodes": nodes[vc]}
        for s in setups:
            m = table[s].get(vc, {})
            row["jobs"], row["8+"] = m.get("jobs", 0), m.get("big_jobs", 0)
            row[f"{s} all"] = m.get("all")
            row[f"{s} 8+"] = m.get("big")
        for s, b in base.items():
            row[f"{s}/{b} all"] = _ratio(row[f"{s} all"], row[f"{b} all"])
            row[f"{s}/{b} 8+"] = _ratio(row[f"{s} 8+"], row[f"{b} 8+"])
        out_rows.append(row)
        print(" | ".join(f"{row[h]:.1f}" if isinstance(row.get(h), float) else
                         str(row.get(h, "-")) for h in head))
    if args.json:
        Path(args.json).write_text(json.dumps({"load_scale": args.load_scale,
                                               "days": args.days, "start": args.start,
                                               "rows": out_rows,
                                               "runs": {s: {k: v for k, v in r.items()
                                                            if k != "rows"}
                                                        for s, r in results.items()}},
                                              indent=1))


if __name__ == "__main__":
    main()
