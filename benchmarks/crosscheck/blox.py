"""Blox (EuroSys'24, msr-fiddle/blox): its FIFO and SRTF beside schedlab's, job by job.

Peer data: Blox's own simulator run here, unmodified, by `_blox_run.py` (Blox's venv:
Python 3.11, pandas 1.5.3, grpcio/grpcio-tools 1.59.3, protobuf 4.25.1; its gRPC stubs
generated from its protos), on its own synthetic workload (`workload/workload.py`,
`cluster_job_log=None`: Poisson arrivals, `get_gavel_like_iter` durations with 1 s
iterations, `get_job_gpu_demand` 1/2/4/8 GPUs; the simulator's seed 1), load 1 job per
hour, 20 tracked jobs (ids 0-19; Blox runs until they end, the generator's later
jobs included), 4 machines of 4 GPUs, 300 s rounds, placement `placement.JobPlacement`
and admission AcceptAll (`blox_examples/blox_new_flow_multi_run.py`). Three runs
(`PEER_RUNS`): FIFO and SRTF on the generator as is, and SRTF with every job asking 1
GPU. Each is kept in `data/blox_<run>.csv`: every job Blox was handed (submit,
duration, GPUs), its launches and suspensions (from the driver's log of `exec_jobs`),
for the tracked jobs Blox's own end (`*_job_stats.json`), and the last round logged
(a run imported while still going is compared up to there).

What Blox does each round (blox_new_flow_multi_run.main): `update_metrics` adds one
whole round of iterations to every running job (`grpc_client_rm.get_metrics`) and
retires those past their total at the round's time; jobs that arrived up to now join
(`pop_wait_queue`); the scheduler orders the active jobs (`schedulers/fifo.py`:
(job_priority, submit_time); `schedulers/srtf.py`: (job_priority, iteration time x
iterations - attained service)); `placement.JobPlacement.place` walks that order:
running jobs stay, a waiting job takes free GPUs (`_scattered_placement`), else
suspends running jobs one at a time from the end of the order, retrying after each
(kept suspended even if the job still does not fit), and the walk stops at the first
job that does not fit. `_scattered_placement` takes up to n free GPUs from each node in
turn and succeeds only when the count hits n exactly (`BloxScatter` here).
schedlab: `fifo` (head-of-line blocking) and `srtf` (preempts jobs with more remaining
time), with `decision_round=300` (decide only at round boundaries; arrivals held to the
next). A job's end in Blox is the boundary at
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

from schedlab.sim.model import Unschedulable

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
COLUMNS = ("job_id", "submit_time", "duration", "num_gpus", "tracked", "blox_events",
           "blox_end", "horizon")
"""data/blox_<run>.csv: per job Blox was handed, its launches and suspensions ('L600;
S59100': round times), its end (tracked jobs, from Blox's job_stats) and the last round
Blox logged (the comparison's horizon)."""
TRACKED = 20
SOURCE = ("Blox @a377b28 (msr-fiddle/blox) simulator run unmodified here "
          "(benchmarks/crosscheck/_blox_run.py BLOX_SRC OUT --scheduler {sched} "
          "--load 1 --jobs 20{flags}: its synthetic workload with seed 1, 4 x 4 GPUs, 300 s "
          "rounds); per job in data/blox_{policy}.csv")
ENGINE = {"locality_factors": NO_LOCALITY, "restore_overhead": 0.0,
          "placer": f"{Path(__file__).resolve()}:BloxScatter"}
"""No locality factors or restore pause (Blox's simulator has none), and Blox's placement
(`BloxScatter`, loaded by path: nothing is registered)."""
LOOP = "rounds, admit=blox"
RUNS: dict[str, dict[str, Any]] = {
    "rounds": {"decision_round": ROUND},
    "no rounds": {},
    LOOP: {"decision_round": ROUND},
}
"""schedlab's set-ups: Blox's rounds (`decision_round=300`); none (the cost of rounds:
schedlab deciding at every event on the same jobs); and, for SRTF, Blox's rounds with
srtf's authors' mode `admit=blox` (Blox's placement walk), which reproduces Blox's SRTF."""
_NO_ROUNDS = (
    "the cost of rounds: without decision_round schedlab starts a job when it arrives or "
    "when GPUs free up, Blox only at its 300 s round boundaries (an arrival waits up to "
    "300 s, freed GPUs idle until the boundary), so no launch falls at the same time "
    "and schedlab's mean JCT is lower; with decision_round=300 the same jobs agree "
    "exactly (the rounds rows)")
_MULTI_GPU_SRTF = (
    "Blox's victim rule for jobs of several GPUs, which schedlab's srtf does not have "
    "(placement/placement.py JobPlacement.place): a waiting job that does not fit "
    "suspends running jobs one at a time from the end of the SRTF order, retrying "
    "_scattered_placement after each (with its exact count, freeing more GPUs can make "
    "a job not fit), keeps them suspended even when the job still does not fit and then "
    "stops the walk (head-of-line blocking), and may relaunch a job it just suspended in "
    "the same round on GPUs left over (a move). schedlab's srtf asks its placer what-if "
    "for the fewest lowest-priority victims as a set and skips a job that does not fit. "
    "First divergence at 81,300 s: Blox suspends jobs 7 (4 GPUs) and 16, starts the "
    "8-GPU job 17 and restarts 16; schedlab starts 17 at 82,200 s. With 1-GPU jobs "
    "(the srtf-1gpu rows) the rules coincide and every job agrees, and with srtf's "
    "authors' mode admit=blox (Blox's walk, the 'admit=blox' rows) every launched job "
    "agrees here too: this rule is the whole difference")
CAUSES: dict[Any, str] = {
    ("fifo", "no rounds"): _NO_ROUNDS,
    ("srtf", "no rounds"): _NO_ROUNDS + "; plus the multi-GPU victim rule of the srtf "
                                        "rounds rows",
    ("srtf-1gpu", "no rounds"): _NO_ROUNDS,
    ("srtf", "rounds"): _MULTI_GPU_SRTF,
}
"""Why a check differs, keyed (run, setup) or (run, setup, metric)."""


class BloxScatter:
    """Blox's `JobPlacement._scattered_placement`: nodes in order, up to n free GPUs each.

    It extends the GPUs taken by at most n free GPUs of each node in turn (lowest first)
    and succeeds only when the count reaches n exactly: once it passes n it never comes
    back, so a job can be refused with enough free GPUs (8 GPUs with 2 + 4 + 3 + 4 free).
    """

    name = "blox-scatter"

    def place(self, job: Any, cluster: Any) -> Any:
        """GPU indices in node order, or Unschedulable where Blox finds none."""
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

    topo = uniform_topology(4, gpus_per_switch=4, name="blox16")
    name = PEER_RUNS[policy][0]
    params = {**ENGINE, **RUNS[setup]}
    if setup == LOOP:  # Blox's walk: srtf's authors' mode
        params["admit"] = "blox"
    return Simulation(trace(policy), topo, name, seed=0, params=params).run()


def to_round(t: float) -> float:
    """The first round boundary at or after t (where Blox sees a job done)."""
    return math.ceil(t / ROUND - 1e-9) * ROUND


def _events(text: str) -> list[str]:
    """'L600;S59100' -> ['L600', 'S59100'] (launches and suspensions, in order)."""
    return [e for e in text.split(";") if e]


def schedlab_events(result: Any, horizon: float) -> dict[str, list[str]]:
    """Per job: its starts and resumes (L) and suspensions (S) up to `horizon`, as Blox's."""
    ev = result.events
    ev = ev[ev["kind"].isin(("start", "resume", "suspend")) & (ev["time"] <= horizon)]
    out: dict[str, list[str]] = {}
    for jid, kind, t in zip(ev["job_id"], ev["kind"], ev["time"], strict=True):
        out.setdefault(str(jid), []).append(f"{'S' if kind == 'suspend' else 'L'}{t:.0f}")
    return out


@cache
def compare(policy: str, setup: str) -> dict[str, Any]:
    """Blox's run beside schedlab's: per job its launches and suspensions up to the last
    round Blox logged, and per tracked job its end (schedlab's rounded up to the round)."""
    peer = peer_jobs(policy)
    horizon = float(peer[0]["horizon"])
    result = run(policy, setup)
    ours = schedlab_events(result, horizon)
    ends = result.jobs.set_index("job_id")["end_time"]
    # the jobs launched before the horizon, in Blox or in schedlab (not those both kept
    # waiting all along)
    launched = [r for r in peer if r["blox_events"] or ours.get(r["job_id"])]
    same_events = sum(_events(r["blox_events"]) == ours.get(r["job_id"], [])
                      for r in launched)
    tracked = [r for r in peer if r["tracked"] == "1"]
    out: list[tuple[str, float, str, str, float, float]] = []
    for r in tracked:
        jid = r["job_id"]
        be = float(r["blox_end"]) if r["blox_end"] else math.nan
        out.append((jid, float(r["submit_time"]), r["blox_events"],
                    ";".join(ours.get(jid, [])), be, float(ends.at[jid])))
    done = all(not math.isnan(be) for *_, be, _ in out)
    same_end = sum(abs(be - to_round(e)) < 1e-6 for *_, be, e in out)
    res: dict[str, Any] = {
        "jobs": out, "n_all": len(launched), "same_events": same_events, "n": len(out),
        "same_end": same_end, "horizon": horizon, "done": done}
    if done:
        res["jct_blox"] = sum(be - sub for _, sub, _, _, be, _ in out) / len(out)
        res["jct"] = sum(e - sub for _, sub, _, _, _, e in out) / len(out)
        res["jct_rounded"] = sum(to_round(e) - sub for _, sub, *_, e in out) / len(out)
    return res


def rows() -> list[dict[str, Any]]:
    """Blox's FIFO and SRTF beside schedlab's, with and without its rounds."""
    out = []
    for policy in POLICIES:
        ours, sched, flags = PEER_RUNS[policy]
        for setup in RUNS:
            if setup == LOOP and ours != "srtf":
                continue
            c = compare(policy, setup)
            jobs = "1-GPU jobs" if flags else "jobs"
            how = {"rounds": "decision_round=300", "no rounds": "no rounds",
                   LOOP: "decision_round=300, authors' mode admit=blox"}
            vs = ours
            check = (f"Blox {sched} vs {vs}, its generator{' (1 GPU)' if flags else ''}, "
                     f"{how[setup]}")
            src = SOURCE.format(sched=sched, policy=policy, flags=flags)
            out.append(row("blox", check,
                           f"{jobs} launched whose launches and suspensions match, to "
                           f"{c['horizon']:,.0f} s", c["n_all"], c["same_events"], src,
                           cause_of_check(policy, setup, "events")))
            if c["done"]:
                out.append(row("blox", check, "tracked jobs with the same end", c["n"],
                               c["same_end"], src, cause_of_check(policy, setup, "ends")))
                out.append(row("blox", check, "jct_mean of the tracked jobs", c["jct_blox"],
                               c["jct_rounded"] if RUNS[setup] else c["jct"], src,
                               cause_of_check(policy, setup, "jct_mean")))
    return out


def cause_of_check(policy: str, setup: str, metric: str) -> str:
    """Why a row differs (CAUSES, keyed by (policy, setup, metric) or (policy, setup))."""
    return CAUSES.get((policy, setup, metric), CAUSES.get((policy, setup), ""))


def job_table(policy: str, setup: str) -> str:
    """Every tracked job: submit, launches and suspensions, end, in Blox and schedlab."""
    c = compare(policy, setup)
    head = (f"{policy}, {setup}: {c['same_events']}/{c['n_all']} jobs launched with the "
            f"same launches and suspensions up to {c['horizon']:,.0f} s; tracked jobs: "
            f"{c['same_end']}/{c['n']} same end (schedlab's rounded up to the round)")
    if c["done"]:
        head += (f"; mean JCT Blox {c['jct_blox']:,.0f} s, schedlab {c['jct']:,.0f} s "
                 f"({c['jct_rounded']:,.0f} s rounded)")
    lines = [head, "job | submit | Blox: launches (L) and suspensions (S) | schedlab | "
                   "end Blox | end schedlab"]
    for jid, sub, bev, sev, be, e in c["jobs"]:
        mark = "" if bev == sev and abs(be - to_round(e)) < 1e-6 else "  <- differs"
        def cut(x):
            return (x if len(x) < 60 else x[:57] + "...")
        lines.append(f"{jid} | {sub:.0f} | {cut(bev)} | {cut(sev)} | {be:.0f} | "
                     f"{e:.1f}{mark}")
    return "\n".join(lines)


def import_run(folder: Path, policy: str) -> Path:
    """data/blox_<policy>.csv from a Blox run's folder (`_blox_run.py`'s output); a run
    still going gives the rounds logged so far (no ends)."""
    sched = PEER_RUNS[policy][1]
    found = list(folder.glob(f"*_{sched}_*_job_stats.json"))
    stats = json.loads(found[0].read_text()) if found else {}
    events: dict[str, list[str]] = {}
    horizon = 0.0
    for line in (folder / "rounds.jsonl").read_text().splitlines():
        r = json.loads(line)
        horizon = float(r["t"])
        for j in r["suspend"]:
            events.setdefault(str(j), []).append(f"S{r['t']}")
        for j in r["launch"]:
            events.setdefault(str(j), []).append(f"L{r['t']}")
    DATA.mkdir(exist_ok=True)
    out = DATA / f"blox_{policy}.csv"
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for line in (folder / "jobs.jsonl").read_text().splitlines():
            j = json.loads(line)
            if float(j["job_arrival_time"]) > horizon:
                continue  # arrived after Blox's last round: never seen
            jid = str(j["job_id"])
            dur = float(j["job_iteration_time"]) * float(j["job_total_iteration"])
            w.writerow((jid, j["job_arrival_time"], repr(dur), j["job_gpu_demand"],
                        int(int(jid) < TRACKED), ";".join(events.get(jid, [])),
                        stats.get(jid, [None, ""])[1], f"{horizon:.0f}"))
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
                if s == LOOP and PEER_RUNS[p][0] != "srtf":
                    continue
                print()
                print(job_table(p, s))
