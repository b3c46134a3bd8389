"""HiveD against quota-only VCs on the full Philly table: does HiveD remove the anomaly?

Replays the whole Philly job table (82,247 jobs, 15 VCs) on the `philly` topology
(321 K80 nodes of 2 GPUs, 231 P40 nodes of 8 GPUs) under `vc-quota` (GPU quotas only,
YARN-CS style) and `hived` (the same shares as cells), and prints the queueing delay of
multi-GPU jobs (8+ GPUs) and of all jobs side by side, overall and per VC.

The sharing anomaly (HiveD, OSDI'20) is a tenant waiting longer in the shared cluster
than it would on a private cluster of its share under the same scheduler. So each policy
also replays each VC's jobs alone on a cluster made of that VC's own cells ("private"),
and the report names the VCs whose 8+ GPU jobs waited over 10% (and a minute) longer
shared than private.

VCs: each VC's share is its share of the table's GPU-hours. HiveD cells: every VC gets
that share of each chain's nodes (largest remainder, so the nodes add up), then at least
the whole P40 nodes its largest job needs, taken from the VCs with the most nodes (a
guaranteed job larger than its VC would wait for ever). `vc-quota` gets the same number
of GPUs per VC (8 per P40 node, 2 per K80 node). Every job is guaranteed (priority 0).

    python benchmarks/bench_hived.py [--load-scale X] [--max-jobs N]
        [--policy vc-quota --policy hived] [--json OUT]

`--load-scale X` divides submit times by X (X times the offered load: the table alone
keeps the cluster 15% busy). Each run is its own subprocess (peak memory is its own).
Target: under 20 s per shared run on a 2-core machine at load 1.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"
BIG = 8  # GPUs from which a job counts as multi-GPU in the report
EXCESS = 0.10  # a VC whose 8+ GPU jobs wait 10% (and a minute) more than when private
# where the two policies live, for a registry that does not list them yet
ENTRIES = {"hived": "schedlab.policies.hived:HivedPolicy",
           "vc-quota": "schedlab.policies.hived.vc_quota:VcQuotaPolicy"}
# node shapes of the philly machine list, per GPU type (native topology groups)
SHAPES = {"P40": {"sockets": 2, "switches_per_socket": 2, "gpus_per_switch": 2},
          "K80": {"gpus_per_node": 2}}


def load_trace(load_scale: float = 1.0, max_jobs: int | None = None):
    """The full Philly table as a trace, optionally compressed in time and cut."""
    from schedlab.traces.canonical import frame_to_trace
    from schedlab.traces.make_default import convert_philly
    from schedlab.traces.shaping import shape

    trace = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full",
                           source=str(PHILLY))
    if load_scale != 1 or max_jobs is not None:
        trace = shape(trace, load_scale=None if load_scale == 1 else load_scale,
                      max_jobs=max_jobs)
    return trace


def vc_cells(jobs, chains: dict[str, tuple[int, int]]) -> dict[str, dict[str, int]]:
    """Nodes per chain for each VC: shares of GPU-hours, floored at the largest job.

    `chains` maps chain name -> (nodes, GPUs per node); returns vc -> chain -> nodes.
    """
    hours: dict[str, float] = {}
    biggest: dict[str, int] = {}
    for s in jobs:
        hours[s.vc] = hours.get(s.vc, 0.0) + s.num_gpus * s.duration
        biggest[s.vc] = max(biggest.get(s.vc, 0), s.num_gpus)
    vcs = sorted(hours, key=lambda v: (-hours[v], v))
    total = sum(hours.values())
    out: dict[str, dict[str, int]] = {v: {} for v in vcs}
    for chain, (nodes, _) in chains.items():
        exact = {v: nodes * hours[v] / total for v in vcs}
        got = {v: math.floor(x) for v, x in exact.items()}
        rest = nodes - sum(got.values())
        for v in sorted(vcs, key=lambda v: (-(exact[v] - got[v]), v))[:rest]:
            got[v] += 1
        for v in vcs:
            out[v][chain] = got[v]
    big_chain = max(chains, key=lambda c: chains[c][1])
    per_node = chains[big_chain][1]
    for v in vcs:
        need = math.ceil(biggest[v] / per_node)
        while out[v][big_chain] < need:
            donor = max((d for d in vcs if d != v), key=lambda d: (out[d][big_chain], d))
            out[donor][big_chain] -= 1
            out[v][big_chain] += 1
    return out


def _result_rows(jobs):
    """Per-job (vc, num_gpus, queueing delay s) of the jobs that started."""
    started = jobs[jobs.start_time.notna()]
    return list(zip(started.job_id, started.vc, started.num_gpus,
                    started.queueing_delay.astype(float), strict=True))


def one(policy: str, private: bool, cells_file: str, load_scale: float,
        max_jobs: int | None) -> dict:
    """Run one policy in this process, shared or on private clusters: per-job delays."""
    from schedlab.policies import register, registered_policies
    from schedlab.sim.engine import Simulation
    from schedlab.topologies import load_topology

    if policy not in registered_policies():
        if policy not in ENTRIES:
            return {"policy": policy, "skipped": "not registered"}
        register(policy, ENTRIES[policy])
    cells = json.loads(Path(cells_file).read_text())
    trace = load_trace(load_scale, max_jobs)
    t0 = time.perf_counter()
    util = None
    if private:
        rows = _private(trace, cells["cells"], policy)
    else:
        params = {"vcs": cells["vcs_file"]} if policy == "hived" else {
            "quotas": cells["quotas_file"]}
        result = Simulation(trace, load_topology("philly"), policy, params=params).run()
        rows = _result_rows(result.jobs)
        util = round(result.summary["utilization_mean"], 4)
    return {"policy": policy, "private": private,
            "sim_seconds": round(time.perf_counter() - t0, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "utilization_mean": util, "rows": rows}


def _private(trace, cells: dict[str, dict[str, int]], policy: str) -> list:
    """Each VC's jobs alone on a cluster of its own cells, under the same policy."""
    from schedlab.sim.engine import Simulation
    from schedlab.topologies.native import native_from_dict
    from schedlab.traces.base import Trace

    by_vc: dict[str, list] = {}
    for s in trace.jobs:
        by_vc.setdefault(s.vc, []).append(s)
    rows: list = []
    for vc, jobs in sorted(by_vc.items()):
        groups = [{"count": n, "gpu_type": chain.split("-")[0], **SHAPES[chain.split("-")[0]]}
                  for chain, n in cells[vc].items() if n]
        topo = native_from_dict({"name": f"private-{vc}", "nodes": groups}, f"{vc}.yaml")
        result = Simulation(Trace(f"philly-{vc}", tuple(jobs)), topo, policy).run()
        rows.extend(_result_rows(result.jobs))
    return rows


def write_configs(out_dir: Path, load_scale: float, max_jobs: int | None
                  ) -> tuple[str, dict]:
    """The HiveD `vcs` file, the `vc-quota` quotas file and the cells, in `out_dir`."""
    from schedlab.policies.hived.config import build_physical
    from schedlab.topologies import load_topology

    trace = load_trace(load_scale, max_jobs)
    pc = build_physical(load_topology("philly"))
    chains = {name: (info.tops, info.leaves[info.top_level]) for name, info in pc.chains.items()}
    cells = vc_cells(trace.jobs, chains)
    vcs = {vc: {"virtualCells": [{"cellType": ch, "cellNumber": n}
                                 for ch, n in per.items() if n]} for vc, per in cells.items()}
    quotas = {vc: sum(n * chains[ch][1] for ch, n in per.items()) for vc, per in cells.items()}
    vcs_file = out_dir / "philly-vcs.yaml"
    quotas_file = out_dir / "philly-quotas.yaml"
    vcs_file.write_text(yaml.safe_dump(vcs, sort_keys=False))
    quotas_file.write_text(yaml.safe_dump(quotas, sort_keys=False))
    cells_file = out_dir / "cells.json"
    cells_file.write_text(json.dumps({"cells": cells, "vcs_file": str(vcs_file),
                                      "quotas_file": str(quotas_file)}))
    return str(cells_file), cells


def report(results: list[dict]) -> list[dict]:
    """Summary rows per run; a shared run also gets its excess over its private run."""
    private = {r["policy"]: r for r in results if r.get("private") and "skipped" not in r}
    out = []
    for r in results:
        name = r["policy"] + (" (private)" if r.get("private") else "")
        if "skipped" in r:
            out.append({"run": name, "skipped": r["skipped"]})
            continue
        rows = r["rows"]
        all_d = [d for *_x, d in rows]
        big = [(jid, d) for jid, _vc, g, d in rows if g >= BIG]
        row = {
            "run": name, "sim_seconds": r["sim_seconds"],
            "utilization_mean": r["utilization_mean"], "started": len(rows),
            "delay_mean_min": round(sum(all_d) / len(all_d) / 60, 1) if all_d else None,
            "big_jobs": len(big),
            "big_delay_mean_min": round(sum(d for _, d in big) / len(big) / 60, 1)
            if big else None,
            "peak_rss_mb": r["peak_rss_mb"],
        }
        row["per_vc"] = _per_vc(rows)
        base = private.get(r["policy"])
        if base is not None and not r.get("private"):
            mine, theirs = row["per_vc"], _per_vc(base["rows"])
            worse = [vc for vc in mine if mine[vc][0] is not None and theirs[vc][0] is not None
                     and mine[vc][0] > theirs[vc][0] * (1 + EXCESS) + 1.0]
            row["vcs_8+_worse_than_private"] = ",".join(sorted(worse)) or "none"
        out.append(row)
    return out


def _per_vc(rows: list) -> dict[str, tuple[float | None, float]]:
    """vc -> (mean delay of 8+ GPU jobs, mean delay of all jobs), minutes."""
    acc: dict[str, list[float]] = {}
    for _jid, vc, g, d in rows:
        v = acc.setdefault(vc, [0, 0.0, 0, 0.0])
        v[0] += 1
        v[1] += d
        if g >= BIG:
            v[2] += 1
            v[3] += d
    return {vc: (round(v[3] / v[2] / 60, 1) if v[2] else None, round(v[1] / v[0] / 60, 1))
            for vc, v in acc.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", default=None)
    ap.add_argument("--max-jobs", type=int, default=None)
    ap.add_argument("--load-scale", type=float, default=1.0,
                    help="divide submit times by X (X times the offered load); default 1")
    ap.add_argument("--json", default=None, help="also write the summary rows to this file")
    ap.add_argument("--inproc", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--private", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    policies = args.policy or ["vc-quota", "hived"]
    if not PHILLY.exists():
        sys.exit(f"Philly table not found at {PHILLY} (set SCHEDLAB_SHARED)")
    if args.inproc:
        print(json.dumps(one(policies[0], args.private, args.inproc, args.load_scale,
                             args.max_jobs)))
        return
    with tempfile.TemporaryDirectory() as d:
        cells_file, cells = write_configs(Path(d), args.load_scale, args.max_jobs)
        print(f"load scale {args.load_scale:g}; VC cells (nodes per chain):")
        for vc, per in cells.items():
            print(f"  {vc}: " + ", ".join(f"{ch}={n}" for ch, n in per.items()))
        results = []
        for p in policies:
            for private in (False, True):
                cmd = [sys.executable, __file__, "--inproc", cells_file, "--policy", p,
                       "--load-scale", str(args.load_scale)]
                if private:
                    cmd.append("--private")
                if args.max_jobs is not None:
                    cmd += ["--max-jobs", str(args.max_jobs)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                results.append(json.loads(out.strip().splitlines()[-1]))
    rows = report(results)
    cols = ["run", "sim_seconds", "utilization_mean", "started", "delay_mean_min",
            "big_jobs", "big_delay_mean_min", "vcs_8+_worse_than_private", "peak_rss_mb"]
    print("\n" + " | ".join(cols))
    for r in rows:
        if "skipped" in r:
            print(f"{r['run']} | skipped: {r['skipped']}")
        else:
            print(" | ".join(str(r.get(c, "")) for c in cols))
    done = [r for r in rows if "skipped" not in r]
    print("\nper VC: mean queueing delay (min) of 8+ GPU jobs / of all jobs")
    print("vc | " + " | ".join(r["run"] for r in done))
    for vc in sorted({vc for r in done for vc in r["per_vc"]}):
        print(f"{vc} | " + " | ".join(
            "{} / {}".format(*r["per_vc"].get(vc, (None, None))) for r in done))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
