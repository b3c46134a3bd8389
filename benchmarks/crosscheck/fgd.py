"""FGD's openb experiment: schedlab's `fgd` placer beside FGD's published numbers.

Input: `traces/alibaba-gpu-v2023/` of the shared folder (Alibaba openb, FGD ATC'23). The
experiment is `benchmarks/bench_fgd.py`'s reproduction of the authors' own set-up: the
8,152 openb pods (CPU-only ones included, placed like any pod) shuffled with the seed and
tuned with random pods to 130% of the GPU capacity, arriving one by one and never
leaving, on the 1,213 GPU nodes; the share of GPU capacity left unallocated when the
requested capacity reaches 100% and 130% (the authors' discrete curve). Peer numbers:
the mean of the authors' 10 seeds in their repository's expected results
(hkust-adsl/kubernetes-scheduler-simulator, `analysis_allo_discrete.csv`); ours: the
mean of seeds 42, 43, 44 (their first seeds; our generator draws other samples, so
compare at the seed spread, 0.1-0.3 points: `benchmarks/RESULTS_fgd.md`).

Run: `python benchmarks/crosscheck/fgd.py` (about 2 minutes).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from typing import Any

from _common import ROOT, main, need, row, shared_dir

SOURCE = ("FGD repository expected results (hkust-adsl/kubernetes-scheduler-simulator, "
          "analysis_allo_discrete.csv: mean of the authors' 10 seeds); ours: mean of seeds "
          "42-44")
SEEDS = (42, 43, 44)
CAUSE = ("seeds: ours draw other pod samples than the authors' Go generator, and the "
         "seed-to-seed spread is 0.1-0.3 points (benchmarks/RESULTS_fgd.md), so a +0.1 "
         "point difference is within it; also schedlab learns the workload online from the "
         "pods seen (the authors compute the popular shapes of the whole list first) and "
         "its gradient is exact where theirs is cut to an integer score, ties to the "
         "lowest node name")


def _bench() -> Any:
    """benchmarks/bench_fgd.py as a module (the authors' experiment)."""
    name = "bench_fgd"
    if name in sys.modules:
        return sys.modules[name]
    bench_dir = str(ROOT / "benchmarks")
    if bench_dir not in sys.path:  # bench_fgd imports its sibling bench_common
        sys.path.insert(0, bench_dir)
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@cache
def unallocated(seed: int) -> dict[int, float]:
    """% of GPU capacity unallocated at 100% and 130% requested, one seed."""
    need(shared_dir() / "traces/alibaba-gpu-v2023/openb_pod_list_default.csv")
    bench = _bench()
    got = bench.one("fgd", seed, "gpu")
    return {x: got[f"unalloc@{x}%"] for x in (100, 130)}


def rows() -> list[dict[str, Any]]:
    """schedlab's mean unallocated share over the seeds beside FGD's published one."""
    published = dict(zip((100, 130), _bench().PUBLISHED["fgd"], strict=True))
    out = []
    for x, peer in published.items():
        ours = sum(unallocated(s)[x] for s in SEEDS) / len(SEEDS)
        out.append(row("fgd", f"openb fill {x}%, fgd", "unallocated_pct", peer, ours,
                       SOURCE, CAUSE))
    return out


if __name__ == "__main__":
    main(rows)
