"""Tiresias' 60-job trace on 16 GPUs: schedlab beside Tiresias' own simulator.

Input: `traces/tiresias/60_job.csv` of the shared folder (SymbioticLab/Tiresias, Apache
2.0). Cluster: 4 nodes of 4 GPUs on one switch (16 GPUs; the simulator's
`--cluster_spec` with 1 switch, 4 nodes, 4 GPUs a node). Tiresias' simulator models no
placement slowdown and no restore pause, so neither does schedlab here
(`locality_factors` all 1, `restore_overhead` 0, first-fit placement: its `count`
scheme only counts free GPUs). Peer numbers: Tiresias' simulator @959f9b0 run
unmodified (`run_sim.py --scheme=count --schedule=fifo|dlas-gpu`, Python 2.7, with
stand-ins for its two unused imports: `numpy.mean` and `cplex`), sums over its
`job.csv` divided by 60. `fifo` and `dlas-gpu` (2D-LAS over GPU time, thresholds
3250/7200/18000 GPU-s: `tiresias-las`' defaults) agree job by job
(tests/crosscheck/test_tiresias_crosscheck.py); no job reaches a threshold in that
trace, so two derived traces (durations x10 with GPUs capped at 2; durations x10)
exercise the demotions and preemptions. With `demotion_timer=simulator` (demotions
when the simulator makes them) and `requeue=front` (a preempted job waits ahead of its
queue's waiting jobs, as the simulator's queues keep it) both agree job by job too;
README.md says what the defaults differ by, and why. `dlas-gpu-gittins` (the
simulator's Gittins, with its own sample file `yarn-gput1000.csv`) agrees job by job in
start and end with `tiresias-gittins` in the authors' mode (`AUTHORS_GITTINS`: the
simulator's rank table, running and waiting jobs of a queue ordered together); its
preemption count is higher by the jobs schedlab stops and restarts at the same instant
on other GPUs (the simulator only counts GPUs, so never moves a job).

Run: `python benchmarks/crosscheck/tiresias.py`.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path
from typing import Any

from _common import NO_LOCALITY, ROOT, cause_of, main, need, row, shared_dir

SOURCE = ("Tiresias simulator @959f9b0 (run_sim.py --scheme=count, Python 2.7, unmodified) "
          "run on the same input; sums over its job.csv")
# check -> {metric: Tiresias' number}; exact: sums of its job.csv over the 60 jobs
PEER: dict[str, dict[str, float]] = {
    "fifo first-fit": {"jct_mean": 12049 / 60, "queueing_delay_mean": 1344 / 60,
                       "makespan": 3335.0},
    "dlas-gpu / tiresias-las": {"jct_mean": 11441 / 60, "queueing_delay_mean": 736 / 60,
                                "makespan": 3271.0},
    "dlas-gpu, x10, GPUs<=2": {"jct_mean": 263987 / 60, "makespan": 23027.0,
                               "preemptions": 7.0},
    "dlas-gpu, x10, GPUs<=2, defaults": {"jct_mean": 263987 / 60, "makespan": 23027.0,
                                    "preemptions": 7.0},
    "dlas-gpu, durations x10": {"jct_mean": 402015 / 60, "makespan": 26665.0,
                                "preemptions": 33.0},
    "dlas-gpu, x10, schedlab defaults": {"jct_mean": 402015 / 60, "makespan": 26665.0,
                                     "preemptions": 33.0},
    # dlas-gpu-gittins (its sample file yarn-gput1000.csv): sums of its job.csv
    "dlas-gpu-gittins, authors' mode": {"jct_mean": 13143 / 60, "makespan": 3271.0,
                                        "preemptions": 35.0},
    "dlas-gpu-gittins, x10, authors' mode": {"jct_mean": 561969 / 60, "makespan": 26989.0,
                                             "preemptions": 259.0},
    "dlas-gpu-gittins, x10, GPUs<=2, authors' mode": {
        "jct_mean": 374735 / 60, "makespan": 23321.0, "preemptions": 249.0},
    "dlas-gpu-gittins, x10, schedlab defaults": {"jct_mean": 561969 / 60,
                                                 "makespan": 26989.0, "preemptions": 259.0},
    # the simulator on the traces of SCALED (--cluster_spec: 1 switch, 4k nodes of 4)
    "dlas-gpu, 180 jobs x10, 48 GPUs": {"jct_mean": 1155893 / 180, "makespan": 24588.0,
                                        "preemptions": 124.0},
    "dlas-gpu, 480 jobs x10, 128 GPUs": {"jct_mean": 2644241 / 480, "makespan": 26367.0,
                                         "preemptions": 313.0},
    "dlas-gpu-gittins, 480 jobs x10, 128 GPUs": {
        "jct_mean": 2995855 / 480, "makespan": 25765.0, "preemptions": 5644.0},
}
SCALED = {"dlas-gpu, 180 jobs x10, 48 GPUs": 3, "dlas-gpu, 480 jobs x10, 128 GPUs": 8,
          "dlas-gpu-gittins, 480 jobs x10, 128 GPUs": 8}
"""Checks on larger traces, by the copies they take: the 60 jobs k times (copy c: ids +
60c, submit + 600c s), durations x10, sorted by (submit, id), on 4k nodes of 4 GPUs
(1 switch; the simulator's n32g4.csv for k = 8), in the authors' mode."""
GITTINS_SAMPLES = ROOT / "tests" / "crosscheck" / "data" / "tiresias_yarn-gput1000.csv"
"""The simulator's Gittins sample file (`yarn-gput1000.csv`, which it reads from its
working folder for every dlas-gpu-gittins run), bundled with the tests."""
# demote when the simulator does, and requeue a preempted job ahead of its queue's
# waiting jobs as the simulator's queues do
SIM_TIMER = {"demotion_timer": "simulator", "requeue": "front"}
# Tiresias' Gittins as its simulator runs it: its rank table from its sample file, and
# a queue's running and waiting jobs ordered together by rank (README.md)
AUTHORS_GITTINS = {**SIM_TIMER, "gittins_samples": str(GITTINS_SAMPLES),
                   "gittins_index": "simulator", "order": "all"}
RUNS: dict[str, tuple[str, dict[str, Any], float, int]] = {
    # check -> (policy, params, duration factor, GPU cap)
    "fifo first-fit": ("fifo", {"placer": "first-fit"}, 1.0, 0),
    "dlas-gpu / tiresias-las": ("tiresias-las", {"placer": "first-fit"}, 1.0, 0),
    "dlas-gpu, x10, GPUs<=2": ("tiresias-las", {"placer": "first-fit", **SIM_TIMER}, 10.0, 2),
    "dlas-gpu, x10, GPUs<=2, defaults": ("tiresias-las", {"placer": "first-fit"}, 10.0, 2),
    "dlas-gpu, durations x10": ("tiresias-las", {"placer": "first-fit", **SIM_TIMER}, 10.0, 0),
    "dlas-gpu, x10, schedlab defaults": ("tiresias-las", {"placer": "first-fit"}, 10.0, 0),
    "dlas-gpu-gittins, authors' mode": ("tiresias-gittins", {"placer": "first-fit",
                                                            **AUTHORS_GITTINS}, 1.0, 0),
    "dlas-gpu-gittins, x10, authors' mode": ("tiresias-gittins", {
        "placer": "first-fit", **AUTHORS_GITTINS}, 10.0, 0),
    "dlas-gpu-gittins, x10, GPUs<=2, authors' mode": ("tiresias-gittins", {
        "placer": "first-fit", **AUTHORS_GITTINS}, 10.0, 2),
    "dlas-gpu-gittins, x10, schedlab defaults": ("tiresias-gittins", {
        "placer": "first-fit", "gittins_samples": str(GITTINS_SAMPLES)}, 10.0, 0),
    "dlas-gpu, 180 jobs x10, 48 GPUs": ("tiresias-las", {"placer": "first-fit",
                                                        **SIM_TIMER}, 10.0, 0),
    "dlas-gpu, 480 jobs x10, 128 GPUs": ("tiresias-las", {"placer": "first-fit",
                                                         **SIM_TIMER}, 10.0, 0),
    "dlas-gpu-gittins, 480 jobs x10, 128 GPUs": ("tiresias-gittins", {
        "placer": "first-fit", **AUTHORS_GITTINS}, 10.0, 0),
}
ENGINE = {"locality_factors": NO_LOCALITY, "restore_overhead": 0.0}


def trace_path() -> Path:
    """The 60-job trace in the shared folder."""
    return need(shared_dir() / "traces/tiresias/60_job.csv")


@cache
def run(check: str, path: Path | None = None) -> Any:
    """schedlab's result of one check (cached: the tests read the per-job times too)."""
    from schedlab.sim import Simulation, load_trace
    from schedlab.topologies.build import uniform_topology
    from schedlab.traces.base import Trace

    trace = load_trace(path or trace_path())
    policy, params, factor, cap = RUNS[check]
    if check in SCALED:  # copies 600 s apart, on 4 nodes of 4 GPUs a copy (SCALED)
        copies = SCALED[check]
        jobs = sorted((dataclasses.replace(
            j, job_id=str(c * 60 + int(j.job_id)), submit_time=j.submit_time + c * 600,
            duration=j.duration * factor) for c in range(copies) for j in trace.jobs),
            key=lambda j: (j.submit_time, int(j.job_id)))
        topo = uniform_topology(4 * copies, gpus_per_switch=4, name="tiresias-scaled")
        return Simulation(Trace(f"{trace.name}-{60 * copies}-x{factor:g}", tuple(jobs)),
                          topo, policy, seed=0, params={**ENGINE, **params}).run()
    if factor != 1.0 or cap:
        jobs = tuple(dataclasses.replace(
            j, duration=j.duration * factor,
            num_gpus=min(j.num_gpus, cap) if cap else j.num_gpus) for j in trace.jobs)
        trace = Trace(f"{trace.name}-x{factor:g}", jobs)
    topo = uniform_topology(4, gpus_per_switch=4, name="tiresias16")
    return Simulation(trace, topo, policy, seed=0, params={**ENGINE, **params}).run()


_LAS_DEFAULTS = (
    "schedlab's defaults follow the paper: a job is demoted the instant its service "
    "crosses the threshold (demotion_timer=crossing; the simulator demotes at its next "
    "event or queue-jump timer, which subtracts run seconds, not GPU-seconds) and a "
    "preempted job waits by the time it entered its queue (requeue=entry; the simulator "
    "puts it ahead of its queue's waiting jobs). With demotion_timer=simulator "
    "requeue=front it agrees job by job (the row without 'defaults').")
_GITTINS_MOVES = (
    "every job starts and ends as in the simulator; schedlab also counts the jobs it "
    "stops and resumes at the same instant on other GPUs (the first-fit placer moves a "
    "job whose GPUs a higher-ranked one takes); the simulator only counts GPUs, so it "
    "never moves a job (tests/crosscheck/test_tiresias_crosscheck.py)")
CAUSES: dict[Any, str] = {
    "dlas-gpu, x10, GPUs<=2, defaults": _LAS_DEFAULTS,
    "dlas-gpu, x10, schedlab defaults": _LAS_DEFAULTS,
    ("dlas-gpu-gittins, authors' mode", "preemptions"): _GITTINS_MOVES,
    ("dlas-gpu-gittins, x10, authors' mode", "preemptions"): _GITTINS_MOVES,
    ("dlas-gpu-gittins, x10, GPUs<=2, authors' mode", "preemptions"): _GITTINS_MOVES,
    ("dlas-gpu-gittins, 480 jobs x10, 128 GPUs", "preemptions"): _GITTINS_MOVES,
    ("dlas-gpu, 480 jobs x10, 128 GPUs", "preemptions"): _GITTINS_MOVES,
    "dlas-gpu-gittins, x10, schedlab defaults": (
        "schedlab's Gittins defaults: only a queue's waiting jobs are ordered by index "
        "(running jobs stay ahead, so preemption happens at queue changes, as LAS; "
        "order=waiting) and the index is P/E at the attained service (gittins_index="
        "exact). The simulator sorts a queue's running and waiting jobs together by a "
        "step table of its sample file (its E sums the samples themselves, with integer "
        "division), so waiting jobs preempt running ones of their queue at each event "
        "(259 preemptions against 37). order=all gittins_index=simulator with its file "
        "agree (the authors' mode rows); plus the LAS defaults (demotion_timer, requeue)."),
}
"""Why a check differs from the simulator (README.md); keyed by check or (check, metric)."""


def rows() -> list[dict[str, Any]]:
    """schedlab beside Tiresias on each check and metric."""
    out = []
    for check, metrics in PEER.items():
        summary = run(check).summary
        for metric, peer in metrics.items():
            out.append(row("tiresias", check, metric, peer, summary[metric], SOURCE,
                           cause_of(CAUSES, check, metric)))
    return out


if __name__ == "__main__":
    main(rows)
