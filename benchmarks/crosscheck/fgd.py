"""FGD's openb fill experiment: schedlab's `fgd` placer beside FGD's own simulator.

Input: `traces/alibaba-gpu-v2023/` of the shared folder (Alibaba openb, FGD ATC'23): the
GPU pods of `openb_pod_list_default.csv` sampled with replacement (seeds 0, 1, 2) arrive
one a second and never leave, on the 1,213 GPU nodes of `openb_node_list_gpu_node.csv`,
until 130% of the cluster's GPU capacity has been asked for (the experiment of
`benchmarks/bench_baselines.py`, reused here). Metric: the share of GPU capacity left
unallocated once the arrived requests reach 130% of capacity, mean over the seeds. Peer
number: FGD's kubernetes-scheduler-simulator (hkust-adsl) with its FGD policy on the same
workload, measured in issue 15.

Run: `python benchmarks/crosscheck/fgd.py` (about 40 s).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from typing import Any

from _common import ROOT, main, need, row, shared_dir

SOURCE = "FGD kubernetes-scheduler-simulator, openb fill, measured in issue 15"
PEER = {"openb fill 130%, fgd": {"unallocated_at_130": 0.0461}}
SEEDS = (0, 1, 2)


def _bench() -> Any:
    """benchmarks/bench_baselines.py as a module (its fill experiment)."""
    name = "bench_baselines"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@cache
def unallocated(seed: int, over: float = 1.3) -> float:
    """Share of GPU capacity unallocated when `over` x capacity has been asked for."""
    import numpy as np

    from sim.engine import Simulation

    need(shared_dir() / "traces/alibaba-gpu-v2023/openb_pod_list_default.csv")
    bench = _bench()
    bench.OPENB = shared_dir() / "traces/alibaba-gpu-v2023"
    trace, topo = bench.fill_trace(sample_seed=seed, over=over)
    result = Simulation(trace, topo, "fgd").run(until=float(len(trace.jobs)))
    asked = np.cumsum([j.num_gpus * j.gpu_share for j in trace.jobs])
    k = min(int(np.searchsorted(asked, over * topo.num_gpus)), len(trace.jobs) - 1)
    tl = result.timeline
    at = tl[tl.time <= k].iloc[-1]
    return float(1.0 - at.gpus_busy / at.gpus_total)


def rows() -> list[dict[str, Any]]:
    """schedlab's mean unallocated share over the seeds beside FGD's."""
    ours = sum(unallocated(s) for s in SEEDS) / len(SEEDS)
    return [row("fgd", check, metric, peer, ours, SOURCE)
            for check, metrics in PEER.items() for metric, peer in metrics.items()]


if __name__ == "__main__":
    main(rows)
