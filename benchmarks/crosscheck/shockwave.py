"""Shockwave (NSDI'23): schedlab against a physical 32-GPU cluster and Shockwave's simulator.

Input: Shockwave's 120-job trace (`scheduler/traces/reproduce/120_0.2_5_100_40_25_
0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace`: jobs of 1, 2 or 4 GPUs whose batch
size changes during training, accordion or GNS) and its throughputs
(`scheduler/tacc_throughputs.json`), read with the `shockwave` trace reader and
performance model. Cluster: 32 V100 as TACC's 8 nodes of 4 GPUs. Rounds of 120 s
(Shockwave's `--time_per_iteration 120`), a 20 s pause when a job (re)starts
(Shockwave's simulator charges 20 s to a job not run in the previous round).

Peer values, both from Shockwave's result pickles
(`scheduler/reproduce/pickles/tacc_32gpus_comparison/<policy>_..._{physical,simulation}
.pickle`, makespan and avg_jct): the physical run on TACC and Shockwave's simulator on the
same trace. Finish-time fairness' physical makespan gets the hour its run lost to the
end of daylight saving time (Shockwave's `reproduce/analyze_fidelity.py`). Peer rows:
Gavel's max_min_fairness vs `gavel-mmf`, Gavel's finish_time_fairness (Themis) vs
`themis-ftf`. AlloX, OSSP and MST have no schedlab policy; `variants()` prints schedlab's
other policies beside them for context only (not compared).

Inputs are read from `SHOCKWAVE_ARTIFACT` (a checkout or extract holding `scheduler/`;
default `../shockwave` beside the repository), else from the git directory
`SHOCKWAVE_GIT` (default: the fetched mirror `/work/.mirror/uw-mad-dash+shockwave/repo`),
extracted once into a temporary folder. Run: `python benchmarks/crosscheck/shockwave.py`.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from _common import ROOT, MissingInput, main, row

TRACE_NAME = "120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic"
TRACE = f"scheduler/traces/reproduce/{TRACE_NAME}.trace"
THROUGHPUTS = "scheduler/tacc_throughputs.json"
PICKLES = "scheduler/reproduce/pickles/tacc_32gpus_comparison"
ART = Path(os.environ.get("SHOCKWAVE_ARTIFACT", ROOT.parent / "shockwave"))
GIT = Path(os.environ.get("SHOCKWAVE_GIT", "/work/.mirror/uw-mad-dash+shockwave/repo"))
COMMIT = "8a44f4a"
SOURCE = (f"uw-mad-dash/shockwave @{COMMIT} {PICKLES}/{{policy}}_..._{{kind}}.pickle "
          "({what})")
DST_HOURS = {"finish_time_fairness": 1.0}
"""Hours the physical run lost to the clock change (analyze_fidelity.py adds them)."""

ENGINE: dict[str, Any] = {"restore_overhead": 20.0}
RUNS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # check -> (Shockwave policy, schedlab policy, params)
    "max_min_fairness / gavel-mmf": (
        "max_min_fairness", "gavel-mmf",
        # Shockwave's rounds, its minimum time between allocation resets (1000 s), and a
        # new job waits for the next allocation as in Gavel's simulator
        {"round": 120.0, "reset_interval": 1000.0, "unallocated": "wait"}),
    "finish_time_fairness / themis-ftf": (
        "finish_time_fairness", "themis-ftf", {"lease": 120.0}),
}
CAUSES: dict[Any, str] = {
    ("max_min_fairness / gavel-mmf", "makespan", "physical"): (
        "schedlab is as far from the physical run as Shockwave's simulator is (9.19 h): "
        "both run the table's throughputs exactly, while the physical jobs ran slower "
        "(data loading, NFS checkpoints, stragglers) and the last job finished later"),
    ("max_min_fairness / gavel-mmf", "jct_mean", "physical"): (
        "as Shockwave's simulator (-8.4% from physical): table throughputs and a fixed "
        "20 s restart against the physical cluster's measured speeds and restarts; "
        "schedlab's allocation is the water-filling optimum, Gavel's an ECOS one"),
    ("max_min_fairness / gavel-mmf", "makespan", "simulation"): (
        "batch changes at epoch boundaries here; Shockwave's simulator applies one a "
        "round after it flags it and rounds the progress up to the end of the epoch"),
    ("max_min_fairness / gavel-mmf", "jct_mean", "simulation"): (
        "schedlab solves max-min by water-filling (Gavel: ECOS, a different optimum "
        "among many); no deficit tie-break; batch changes at epoch boundaries (Shockwave: "
        "one round after the flag, progress rounded up to the epoch's end)"),
    "finish_time_fairness / themis-ftf": (
        "not the same algorithm: Shockwave's finish_time_fairness is Gavel's LP (time "
        "fractions minimising the largest finish-time ratio, executed in 120 s rounds, "
        "so every job time-shares the cluster), schedlab's themis-ftf is Themis' lease "
        "auction (whole leases to the worst-off 20% of jobs first), which finishes short "
        "jobs sooner: the makespan agrees within 4%, the mean JCT is a third lower"),
}


def _extract(rel: str) -> Path:
    """A file of Shockwave's repository: from SHOCKWAVE_ARTIFACT, else its git directory."""
    p = ART / rel
    if p.is_file():
        return p
    if not GIT.is_dir():
        raise MissingInput(f"{p} (set SHOCKWAVE_ARTIFACT to a checkout of "
                           "uw-mad-dash/shockwave, or SHOCKWAVE_GIT to its git directory)")
    out = Path(tempfile.gettempdir()) / "schedlab-shockwave" / rel
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = subprocess.run(["git", f"--git-dir={GIT}", "show", f"HEAD:{rel}"],
                                  check=True, capture_output=True).stdout
        except subprocess.CalledProcessError as e:
            raise MissingInput(f"{GIT}: {rel}: {e.stderr.decode(errors='replace')}") from None
        out.write_bytes(data)
    return out


class _Stub:
    """Stands for Shockwave's classes in its pickles (only numbers are read)."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] in ("numpy", "collections", "builtins", "copyreg"):
            return super().find_class(module, name)
        return _Stub


@cache
def peer(policy: str, kind: str) -> dict[str, float]:
    """Makespan and mean JCT (s) of Shockwave's `kind` run (physical, simulation)."""
    path = _extract(f"{PICKLES}/{policy}_{TRACE_NAME}_{kind}.pickle")
    with open(path, "rb") as f:
        d = _Unpickler(f).load()
    makespan = float(d["makespan"])
    if kind == "physical":
        makespan += DST_HOURS.get(policy, 0.0) * 3600
    return {"makespan": makespan, "jct_mean": float(d["avg_jct"])}


def topology() -> Any:
    """TACC's 32 V100: 8 nodes of 4."""
    from schedlab.topologies.build import uniform_topology

    return uniform_topology(8, gpus_per_switch=4, name="tacc-32xV100")


@cache
def run(policy: str, params: tuple[tuple[str, Any], ...] = ()) -> Any:
    """schedlab's run of `policy` on the trace."""
    from schedlab.sim.engine import Simulation
    from schedlab.traces import load_trace

    trace = load_trace(_extract(TRACE), trace_format="shockwave")
    perf = f"shockwave={_extract(THROUGHPUTS)}"
    return Simulation(trace, topology(), policy, seed=0,
                      params={"perf_model": perf, **ENGINE, **dict(params)}).run()


def rows() -> list[dict[str, Any]]:
    """Makespan and mean JCT beside the physical run and Shockwave's simulator."""
    out = []
    for check, (theirs, policy, params) in RUNS.items():
        summary = run(policy, tuple(sorted(params.items()))).summary
        for kind, what in (("physical", "physical run, 32 V100 on TACC"),
                           ("simulation", "Shockwave's simulator")):
            src = SOURCE.format(policy=theirs, kind=kind, what=what)
            for metric in ("makespan", "jct_mean"):
                cause = CAUSES.get((check, metric, kind), CAUSES.get(check, ""))
                out.append(row(f"shockwave-{kind}", check, metric,
                               peer(theirs, kind)[metric], summary[metric], src, cause))
    return out


CONTEXT = {"allox": "AlloX", "min_total_duration": "OSSP",
           "max_sum_throughput_perf": "MST", "shockwave": "Shockwave"}
VARIANTS: dict[str, dict[str, Any]] = {"fifo": {}, "srtf": {}, "sjf": {},
                                       "tiresias-las": {}}


def variants() -> str:
    """Shockwave's other policies (physical / simulated) and schedlab's others, in hours."""
    lines = [f"{'policy':34s} {'makespan h':>10s} {'avg JCT h':>10s}"]
    for policy, label in CONTEXT.items():
        for kind in ("physical", "simulation"):
            p = peer(policy, kind)
            lines.append(f"{label + ' (' + kind + ')':34s} {p['makespan'] / 3600:10.2f} "
                         f"{p['jct_mean'] / 3600:10.2f}")
    for policy, params in VARIANTS.items():
        s = run(policy, tuple(sorted(params.items()))).summary
        lines.append(f"{'schedlab ' + policy:34s} {s['makespan'] / 3600:10.2f} "
                     f"{s['jct_mean'] / 3600:10.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main(rows)
    print()
    print(variants())
