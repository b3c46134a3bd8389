"""Benchmark `hai` and `quota-priority` on the full Philly table (82,247 jobs), philly topology.

Mapping (Philly has neither users, priorities nor expected waits):
* user = vc = the Philly virtual cluster (`cluster` column, 15 teams);
* hai priority, drawn per job with a seeded generator (seed 0): NORMAL 70 %,
  ABOVE_NORMAL 20 %, HIGH 10 %; hai nodes: a job's GPUs rounded up to whole nodes of the
  group the policy picks (K80 nodes have 2 GPUs, P40 nodes 8);
* quota-priority max_wait_hours, drawn the same way: 0 (low) 60 %, else 4/6/8/24/48 h;
  `--param quotas=auto`: each vc gets 2490 GPUs x its share of the trace's GPU-hours x 0.5;
* every job checkpoints hourly (checkpoint_interval = 3600 s), as the seeds ask users to;
* LOAD_SCALE=k divides submit times by k (the table at scale 1 keeps the cluster 15 % busy
  under fifo, so nothing would ever be suspended).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", "/work/shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"


def load(policy):
    from schedlab.traces.base import Trace
    from schedlab.traces.canonical import frame_to_trace
    from schedlab.traces.make_default import convert_philly

    trace = frame_to_trace(
        convert_philly(PHILLY), label=PHILLY.name, name="philly-full", source=str(PHILLY)
    )
    rng = np.random.default_rng(0)
    n = len(trace.jobs)
    pri = rng.choice([10, 20, 30], size=n, p=[0.7, 0.2, 0.1])
    wait = rng.choice([0, 4, 6, 8, 24, 48], size=n, p=[0.6, 0.08, 0.08, 0.08, 0.08, 0.08])
    scale = float(os.environ.get("LOAD_SCALE", "1"))
    jobs = tuple(
        dataclasses.replace(
            s,
            user=s.vc,
            priority=int(p),
            max_wait_hours=float(w),
            submit_time=s.submit_time / scale,
            checkpoint_interval=3600.0,
        )
        for s, p, w in zip(trace.jobs, pri, wait, strict=True)
    )
    return Trace(trace.name, jobs, trace.source)


def quotas_file(trace, out):
    gh = {}
    for s in trace.jobs:
        gh[s.vc] = gh.get(s.vc, 0.0) + s.duration * s.num_gpus
    tot = sum(gh.values())
    Path(out).write_text(
        "".join(f"'{vc}': {int(2490 * g / tot * 0.5)}\n" for vc, g in sorted(gh.items()))
    )
    return out


def one(policy, extra):
    from schedlab.sim.engine import Simulation
    from schedlab.topologies import load_topology

    t0 = time.perf_counter()
    trace = load(policy)
    topo = load_topology("philly")
    params = dict(extra)
    if policy == "quota-priority" and params.get("quotas") == "auto":
        quota_path = Path(tempfile.mkdtemp()) / "philly_vc_quotas.yaml"
        params["quotas"] = quotas_file(trace, str(quota_path))
    load_s = time.perf_counter() - t0
    if policy == "fifo":
        from schedlab.policies.fifo import FifoPolicy as P
    elif policy == "hai":
        from schedlab.policies.hai import HaiPolicy as P
    else:
        from schedlab.policies.quota_priority import QuotaPriorityPolicy as P
    pol_keys = set(P.params)
    pol = P(**{k: v for k, v in params.items() if k in pol_keys})
    t1 = time.perf_counter()
    c1 = time.process_time()
    r = Simulation(
        trace, topo, pol, params={k: v for k, v in params.items() if k not in pol_keys}
    ).run()
    wall = time.perf_counter() - t1
    cpu = time.process_time() - c1
    s = r.summary
    return {
        "policy": policy,
        "params": extra,
        "load_scale": os.environ.get("LOAD_SCALE", "1"),
        "jobs": len(trace.jobs),
        "load_s": round(load_s, 2),
        "sim_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events_per_job": round(s["events_processed"] / len(trace.jobs), 3),
        "preemptions": s["preemptions"],
        "lost_gpu_hours": round(s["lost_gpu_hours"], 1),
        "completed": s["jobs_completed"],
        "rejected": s["jobs_rejected"],
        "unfinished": s["jobs_unfinished"],
        "utilization_mean": round(s["utilization_mean"], 4),
        "queueing_delay_mean_h": round(s["queueing_delay_mean"] / 3600, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "policy_metrics": pol.metrics() if hasattr(pol, "metrics") else {},
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("policy")
    ap.add_argument("--param", action="append", default=[])
    a = ap.parse_args()
    extra = dict(p.split("=", 1) for p in a.param)
    print(json.dumps(one(a.policy, extra)))
