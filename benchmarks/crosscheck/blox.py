"""Blox (EuroSys'24, msr-fiddle/blox): its FIFO and SRTF beside schedlab's, job by job.

Peer data: Blox's own simulator run here, unmodified, by `_blox_run.py` (Blox's venv:
Python 3.11, pandas 1.5.3, grpcio/grpcio-tools 1.59.3, protobuf 4.25.1; its gRPC stubs
generated from its protos), on its own synthetic workload (`workload/workload.py`,
`cluster_job_log=None`: Poisson arrivals, `get_gavel_like_iter` durations with 1 s
iterations, `get_job_gpu_demand` 1/2/4/8 GPUs; the simulator's seed 1), load 1 job per
hour, 20 tracked jobs (ids 0-19; Blox runs until they end, the generator's later
jobs included), 4 machines of 4 GPUs, 300 s rounds, placement `placement.JobPlacement`
and admission AcceptAll (`blox_examples/blox_new_flow_multi_run.py`). Each run is
kept in `data/blox_<policy>.csv`: every job Blox was handed (submit, duration, GPUs),
its first launch and suspensions (from the driver's log of `exec_jobs`) and, for the
tracked jobs, Blox's own end (`*_job_stats.json`).

What Blox does each round (blox_new_flow_multi_run.main): `update_metrics` adds one
whole round of iterations to every running job (`grpc_client_rm.get_metrics`) and
retires those past their total at the round's time; jobs that arrived up to now join
(`pop_wait_queue`); the scheduler orders the active jobs (`schedulers/fifo.py`:
(job_priority, submit_time); `schedulers/srtf.py`: (job_priority, iteration time x
iterations - attained service)); `placement.JobPlacement.place` walks that order:
running jobs stay, a waiting job takes free GPUs (`_scattered_placement`), else
suspends running jobs from the end of the order until it fits, and the walk stops at the
first job that does not fit. schedlab: `fifo` (head-of-line blocking) and `srtf`
(preempts jobs with more remaining time), with `decision_round=300` (decide only at
round boundaries; arrivals held to the next). A job's end in Blox is the boundary at
which its last round ends, so schedlab's end is compared rounded up to the round (its
GPUs are idle from its true end to that boundary in both).

Run: `python benchmarks/crosscheck/blox.py` (the rows and the job-by-job table);
`python benchmarks/crosscheck/blox.py --import DIR --policy fifo` turns a Blox run's
folder (`_blox_run.py`'s output) into `data/blox_fifo.csv`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from _common import NO_LOCALITY, main, need, row

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ROUND = 300.0
PEER_RUNS: dict[str, tuple[str, str, str]] = {
    # data/blox_<name>.csv -> (schedlab policy, Blox's scheduler, the driver's extra flags)
    "fifo": ("fifo", "Fifo", ""),
    "srtf": ("srtf", "Srtf", ""),
    "srtf-1gpu": ("srtf", "Srtf", " --one-gpu"),
}
"""Blox's runs: its generator as is (1/2/4/8 GPUs), and for SRTF also with every job
asking 1 GPU (`--one-gpu`: `get_job_gpu_demand` replaced, the rest of the generator and
Blox unchanged), where Blox's multi-GPU placement and victim rules play no part."""
POLICIES = tuple(PEER_RUNS)
COLUMNS = ("job_id", "submit_time", "duration", "num_gpus", "tracked", "blox_start",
           "blox_end", "blox_suspends")
SOURCE = ("Blox @a377b28 (msr-fiddle/blox) simulator run unmodified here "
          "(benchmarks/crosscheck/_blox_run.py BLOX_SRC OUT --scheduler {sched} "
          "--load 1 --jobs 20{flags}: its synthetic workload with seed 1, 4 x 4 GPUs, 300 s "
          "rounds); per job in data/blox_{policy}.csv")
ENGINE = {"locality_factors": NO_LOCALITY, "restore_overhead": 0.0,
          "placer": "blox-scatter"}
RUNS: dict[str, dict[str, Any]] = {
    "rounds": {"decision_round": ROUND},
    "no rounds": {},
}
"""schedlab's two set-ups: Blox's rounds (`decision_round=300`), and none (the cost of
rounds: schedlab deciding at every event on the same jobs)."""
CAUSES: dict[Any, str] = {}


class BloxScatter:
    """Blox's `JobPlacement._scattered_placement`: nodes in order, up to n free GPUs each.

    It extends the GPUs taken by at most n free GPUs of each node in turn (lowest first)
    and succeeds only when the count reaches n exactly: once it passes n it never comes
    back, so a job can be refused with enough free GPUs (8 GPUs with 2 + 4 + 3 + 4 free).
    """

    name = "blox-scatter"

    def place(self, job: Any, cluster: Any) -> Any:
        """GPU indices in node order, or Unschedulable where Blox finds none."""
        from schedlab.sim.model import Unschedulable

        n = job.num_gpus
        node_of = cluster.topo.gpu_node
        by_node: dict[int, list[int]] = {}
        for g in cluster.free_gpus_in(cluster.topo.root):
            by_node.setdefault(node_of[g], []).append(g)
        taken: list[int] = []
        for node in sorted(by_node):
            taken.extend(by_node[node][:n])
            if len(taken) == n:
                return tuple(taken)
        return Unschedulable("blox-scatter: no prefix of nodes gives exactly "
                             f"{n} GPUs", resolvable=True)


def _register() -> None:
    """Make `placer=blox-scatter` known (once)."""
    from schedlab.sim.registry import PLACERS

    if "blox-scatter" not in PLACERS:
        PLACERS.register("blox-scatter", BloxScatter)


def peer_jobs(policy: str) -> list[dict[str, Any]]:
    """The jobs of one Blox run (data/blox_<policy>.csv)."""
    with open(need(DATA / f"blox_{policy}.csv"), newline="") as f:
        return list(csv.DictReader(f))


def trace(policy: str) -> Any:
    """The jobs Blox was handed, as a schedlab trace."""
    from schedlab.sim.model import JobSpec
    from schedlab.traces.base import Trace

    jobs = tuple(JobSpec(job_id=r["job_id"], submit_time=float(r["submit_time"]),
                         num_gpus=int(r["num_gpus"]), duration=float(r["duration"]))
                 for r in peer_jobs(policy))
    return Trace(f"blox-synthetic-{policy}", jobs)


@cache
def run(policy: str, setup: str) -> Any:
    """schedlab's run of `policy` on the jobs of Blox's run of it."""
    from schedlab.sim import Simulation
    from schedlab.topologies.build import uniform_topology

    _register()
    topo = uniform_topology(4, gpus_per_switch=4, name="blox16")
    return Simulation(trace(policy), topo, PEER_RUNS[policy][0], seed=0,
                      params={**ENGINE, **RUNS[setup]}).run()


def to_round(t: float) -> float:
    """The first round boundary at or after t (where Blox sees a job done)."""
    return math.ceil(t / ROUND - 1e-9) * ROUND


def compare(policy: str, setup: str) -> dict[str, Any]:
    """Per tracked job: Blox's and schedlab's start and end; counts of agreement."""
    jobs = run(policy, setup).jobs.set_index("job_id")
    out: list[tuple[str, float, float, float, float, float, float]] = []
    for r in peer_jobs(policy):
        if r["tracked"] != "1":
            continue
        jid = r["job_id"]
        s, e = float(jobs.at[jid, "start_time"]), float(jobs.at[jid, "end_time"])
        out.append((jid, float(r["submit_time"]), float(r["blox_start"]), s,
                    float(r["blox_end"]), e, to_round(e)))
    same_start = sum(b == s for _, _, b, s, _, _, _ in out)
    same_end = sum(abs(b - er) < 1e-6 for _, _, _, _, b, _, er in out)
    jct_blox = sum(b - sub for _, sub, _, _, b, _, _ in out) / len(out)
    jct_ours = sum(e - sub for _, sub, _, _, _, e, _ in out) / len(out)
    jct_round = sum(er - sub for _, sub, _, _, _, _, er in out) / len(out)
    return {"jobs": out, "n": len(out), "same_start": same_start, "same_end": same_end,
            "jct_blox": jct_blox, "jct": jct_ours, "jct_rounded": jct_round}


def rows() -> list[dict[str, Any]]:
    """Blox's FIFO and SRTF beside schedlab's, with and without its rounds."""
    out = []
    for policy in POLICIES:
        ours, sched, flags = PEER_RUNS[policy]
        for setup in RUNS:
            c = compare(policy, setup)
            jobs = "1-GPU jobs" if flags else "jobs"
            check = (f"Blox {sched} vs {ours}, {c['n']} tracked {jobs}, "
                     f"{'decision_round=300' if setup == 'rounds' else 'no rounds'}")
            src = SOURCE.format(sched=sched, policy=policy, flags=flags)
            ends = "end rounded up to the round" if setup == "rounds" else "end"
            out.append(row("blox", check, f"jobs with the same start and {ends}",
                           c["n"], min(c["same_start"], c["same_end"]), src,
                           cause_of_check(policy, setup, "jobs")))
            out.append(row("blox", check, "jct_mean", c["jct_blox"],
                           c["jct_rounded"] if setup == "rounds" else c["jct"], src,
                           cause_of_check(policy, setup, "jct_mean")))
    return out


def cause_of_check(policy: str, setup: str, metric: str) -> str:
    """Why a row differs (CAUSES, keyed by (policy, setup, metric) or (policy, setup))."""
    return CAUSES.get((policy, setup, metric), CAUSES.get((policy, setup), ""))


def job_table(policy: str, setup: str) -> str:
    """Every tracked job: submit, start and end in Blox and in schedlab."""
    c = compare(policy, setup)
    lines = [f"{policy}, {setup}: {c['same_start']}/{c['n']} same start, "
             f"{c['same_end']}/{c['n']} same end (schedlab's rounded up to the round); "
             f"mean JCT Blox {c['jct_blox']:,.0f} s, schedlab {c['jct']:,.0f} s "
             f"({c['jct_rounded']:,.0f} s rounded)",
             f"{'job':>5s} {'submit':>9s} {'start B':>9s} {'start S':>9s} {'end B':>9s} "
             f"{'end S':>11s} {'end S rnd':>9s}"]
    for jid, sub, bs, ss, be, e, er in c["jobs"]:
        mark = "" if bs == ss and abs(be - er) < 1e-6 else "  <- differs"
        lines.append(f"{jid:>5s} {sub:9.0f} {bs:9.0f} {ss:9.0f} {be:9.0f} {e:11.1f} "
                     f"{er:9.0f}{mark}")
    return "\n".join(lines)


def import_run(folder: Path, policy: str) -> Path:
    """data/blox_<policy>.csv from a Blox run's folder (`_blox_run.py`'s output)."""
    sched = PEER_RUNS[policy][1]
    stats = json.loads(next(folder.glob(f"*_{sched}_*_job_stats.json")).read_text())
    first: dict[str, float] = {}
    stops: dict[str, int] = {}
    last_t = 0.0
    for line in (folder / "rounds.jsonl").read_text().splitlines():
        r = json.loads(line)
        last_t = float(r["t"])
        for j in r["suspend"]:
            stops[str(j)] = stops.get(str(j), 0) + 1
        for j in r["launch"]:
            first.setdefault(str(j), float(r["t"]))
    DATA.mkdir(exist_ok=True)
    out = DATA / f"blox_{policy}.csv"
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for line in (folder / "jobs.jsonl").read_text().splitlines():
            j = json.loads(line)
            if float(j["job_arrival_time"]) > last_t:
                continue  # arrived after Blox stopped: never seen
            jid = str(j["job_id"])
            dur = float(j["job_iteration_time"]) * float(j["job_total_iteration"])
            end = stats.get(jid, [None, ""])[1]
            w.writerow((jid, j["job_arrival_time"], repr(dur), j["job_gpu_demand"],
                        int(jid in stats), first.get(jid, ""), end, stops.get(jid, 0)))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--import", dest="folder", type=Path, help="a Blox run's folder")
    ap.add_argument("--policy", choices=POLICIES, default="fifo")
    a = ap.parse_args()
    if a.folder:
        print(import_run(a.folder, a.policy))
    else:
        main(rows)
        for p in POLICIES:
            for s in RUNS:
                print()
                print(job_table(p, s))
