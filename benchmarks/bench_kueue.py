"""Speed of `kueue` against `fifo` on the Philly job table, with two cohorts.

Not a test (minutes on the full trace). The config is generated from the trace: one
ClusterQueue per VC, the first half of the VCs (by name) in cohort `east`, the rest in
`west`, the cluster's GPUs split evenly as nominal quota, reclaimWithinCohort Any.

    python benchmarks/bench_kueue.py [--max-jobs N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"


def config(vcs: list[str], gpus: int) -> list[dict]:
    """Kueue objects: two cohorts of ClusterQueues, one LocalQueue per VC."""
    api = "kueue.x-k8s.io/v1beta2"
    docs: list[dict] = [{"apiVersion": api, "kind": "ResourceFlavor",
                         "metadata": {"name": "default"}, "spec": {}}]
    share = gpus // len(vcs)
    for i, vc in enumerate(vcs):
        name = f"cq-{vc}"
        docs.append({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name},
                     "spec": {"cohortName": "east" if i < len(vcs) // 2 else "west",
                              "preemption": {"reclaimWithinCohort": "Any"},
                              "resourceGroups": [{
                                  "coveredResources": ["nvidia.com/gpu"],
                                  "flavors": [{"name": "default", "resources": [
                                      {"name": "nvidia.com/gpu", "nominalQuota": share}]}]}]}})
        docs.append({"apiVersion": api, "kind": "LocalQueue",
                     "metadata": {"name": vc, "namespace": "default"},
                     "spec": {"clusterQueue": name}})
    return docs


def main() -> None:
    """Run fifo, then kueue, on the same trace and print their CPU seconds."""
    from schedlab.sim.engine import Simulation
    from schedlab.topologies import load_topology
    from schedlab.traces import shape
    from schedlab.traces.canonical import frame_to_trace
    from schedlab.traces.make_default import convert_philly

    ap = argparse.ArgumentParser()
    ap.add_argument("--max-jobs", type=int, default=None)
    args = ap.parse_args()
    trace = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full",
                           source=str(PHILLY))
    if args.max_jobs:
        trace = shape(trace, max_jobs=args.max_jobs)
    topo = load_topology("philly")
    vcs = sorted({j.vc for j in trace.jobs})
    path = Path(tempfile.mkdtemp()) / "kueue-philly.yaml"
    path.write_text(yaml.safe_dump_all(config(vcs, topo.num_gpus)))
    times = {}
    for policy, params in (("fifo", {}), ("kueue", {"config": str(path)})):
        t = time.process_time()
        r = Simulation(trace, topo, policy, params=params).run()
        times[policy] = time.process_time() - t
        s = r.summary
        print(f"{policy}: {len(trace.jobs)} jobs, {times[policy]:.1f} s CPU, "
              f"completed {s['jobs_completed']}, queueing delay mean "
              f"{s['queueing_delay_mean']:.0f} s, preemptions {s['preemptions']}", flush=True)
    print(f"kueue / fifo: {times['kueue'] / times['fifo']:.1f}x")
    sys.exit(0)


if __name__ == "__main__":
    main()
