"""Cross-check of `slurm` against a real slurmctld + slurmd (Debian's slurm-wlm), not in CI.

Starts a 3-node cluster on this machine (one slurmd per node, `slurmd -N`, each on its own
port; 4 GPUs a node as GRES on character devices made with mknod, no real GPUs; auth/none,
no slurmdbd; job records from jobcomp/filetxt), submits the workload below with `sbatch`
(`sleep` jobs of seconds, time limits of 1-3 minutes, two partitions of different
PriorityTier, a few jobs that outlive their limit), waits for all to end and reads each
job's submit, start and end time. Then runs schedlab's `slurm` on the same slurm.conf and
the same jobs (submit times as measured; duration = the sleep; time_limit = the limit)
and compares start order and start times. Writes RESULTS_slurm.md beside this file.

    apt-get install -y slurmctld slurmd slurm-client      # as root
    python benchmarks/crosscheck/slurm.py                 # about 5 minutes

`rows()` (for run_all.py) runs it only when SCHEDLAB_SLURM_LIVE=1 is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _common import ROOT, MissingInput

WORK = Path("/tmp/schedlab-slurm-xc")
NODES = 3
GPUS = 4
INTERVAL = 5  # sched_interval and bf_interval (s)
RELEASE = 1.0  # s from a job's end to the start it allows, median measured (see RESULTS)

CONF = """ClusterName=xc
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=16817
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool/%n
SlurmctldPidFile={w}/slurmctld.pid
SlurmdPidFile={w}/slurmd.%n.pid
SlurmctldLogFile={w}/slurmctld.log
SlurmdLogFile={w}/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/filetxt
JobCompLoc={w}/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
KillWait=2
DefMemPerCPU=100
SchedulerType=sched/backfill
SchedulerParameters=bf_interval={i},bf_resolution=1,sched_interval={i}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
PriorityType=priority/multifactor
PriorityWeightPartition=1000
PriorityWeightJobSize=0
PriorityWeightAge=0
NodeName=n[1-{n}] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[16821-{last}] \\
  Gres=gpu:{g} CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=8000
PartitionName=batch Nodes=ALL Default=YES MaxTime=10 PriorityTier=1
PartitionName=high Nodes=ALL MaxTime=10 PriorityTier=2 PriorityJobFactor=2
"""

# (submit offset s, GPUs, nodes, sleep s, limit minutes, partition)
WORKLOAD: list[tuple[float, int, int, int, int, str]] = [
    (0, 4, 1, 40, 1, "batch"), (0, 4, 1, 30, 1, "batch"), (1, 4, 1, 50, 2, "batch"),
    (2, 8, 2, 20, 1, "batch"),  # waits: reserves two nodes
    (3, 2, 1, 10, 1, "batch"), (3, 1, 1, 15, 1, "batch"),
    (4, 4, 1, 20, 1, "high"),  # higher tier: ahead of every batch job
    (6, 2, 1, 25, 2, "batch"), (8, 1, 1, 8, 1, "batch"), (10, 3, 1, 12, 1, "batch"),
    (12, 2, 1, 100, 1, "batch"),  # outlives its 1-minute limit: TIMEOUT
    (14, 4, 1, 10, 1, "high"), (16, 1, 1, 20, 3, "batch"), (18, 2, 1, 6, 1, "batch"),
    (20, 8, 2, 15, 1, "high"), (22, 1, 1, 30, 1, "batch"), (24, 4, 1, 20, 2, "batch"),
    (26, 2, 1, 10, 1, "batch"), (28, 1, 1, 90, 1, "batch"),  # TIMEOUT
    (30, 2, 1, 8, 1, "high"), (32, 4, 1, 15, 1, "batch"), (34, 1, 1, 5, 1, "batch"),
    (36, 2, 1, 20, 1, "batch"), (38, 3, 1, 10, 1, "batch"), (40, 4, 1, 25, 2, "high"),
    (42, 1, 1, 12, 1, "batch"), (44, 2, 1, 18, 1, "batch"), (46, 8, 2, 10, 1, "batch"),
    (48, 1, 1, 6, 1, "batch"), (50, 2, 1, 14, 1, "batch"),
]


def _run(*cmd: str, check: bool = True) -> str:
    env = {**os.environ, "SLURM_CONF": str(WORK / "slurm.conf")}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if check and out.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def start_cluster() -> None:
    """Fresh state, config, fake GPU devices; slurmctld then one slurmd a node."""
    if not shutil.which("slurmctld") and not Path("/usr/sbin/slurmctld").exists():
        raise MissingInput("slurmctld not installed (apt-get install slurmctld slurmd "
                           "slurm-client)")
    stop_cluster()
    if WORK.exists():
        shutil.rmtree(WORK)
    for d in ("state", "out", *(f"spool/n{k}" for k in range(1, NODES + 1))):
        (WORK / d).mkdir(parents=True)
    for k in range(GPUS):
        os.mknod(WORK / f"gpu{k}", 0o666 | 0o020000, os.makedev(1, 3))  # like /dev/null
    (WORK / "slurm.conf").write_text(CONF.format(w=WORK, i=INTERVAL, n=NODES, g=GPUS,
                                                 last=16820 + NODES))
    (WORK / "gres.conf").write_text(
        f"NodeName=n[1-{NODES}] Name=gpu File={WORK}/gpu[0-{GPUS - 1}]\n")
    _run("/usr/sbin/slurmctld", "-f", str(WORK / "slurm.conf"), "-i")
    time.sleep(2)
    for k in range(1, NODES + 1):
        _run("/usr/sbin/slurmd", "-f", str(WORK / "slurm.conf"), "-N", f"n{k}")
    states: dict[str, str] = {}
    for _ in range(30):
        time.sleep(1)
        states = dict(line.split() for line in _run("sinfo", "-h", "-N", "-o",
                                                    "%N %T").splitlines())
        if len(states) == NODES and all(s == "idle" for s in states.values()):
            return
    raise RuntimeError(f"nodes not idle: {states}; see {WORK}/slurmctld.log")


def stop_cluster() -> None:
    """Stop the daemons this script started (by their pid files)."""
    for pid_file in sorted(WORK.glob("*.pid")) if WORK.exists() else []:
        try:
            os.kill(int(pid_file.read_text().split()[0]), 15)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    time.sleep(1)


def submit_all() -> dict[str, dict[str, Any]]:
    """sbatch every job at its offset; job id -> what was asked."""
    t0 = time.time()
    asked: dict[str, dict[str, Any]] = {}
    for k, (at, gpus, nodes, sleep, limit, part) in enumerate(WORKLOAD):
        time.sleep(max(0.0, t0 + at - time.time()))
        out = _run("sbatch", "--parsable", "-o", str(WORK / "out" / "%j.out"),
                   "-p", part, "-N", str(nodes), f"--gres=gpu:{gpus // nodes}",
                   "-t", str(limit), "-J", f"j{k}", "--wrap", f"sleep {sleep}")
        asked[out.strip().split(";")[0]] = {"k": k, "gpus": gpus, "nodes": nodes,
                                            "sleep": sleep, "limit": limit * 60.0,
                                            "partition": part}
    return asked


def read_jobcomp(n: int, timeout: float = 600) -> dict[str, dict[str, Any]]:
    """Wait for n job records in jobcomp/filetxt; job id -> state, submit, start, end (s)."""
    path = WORK / "jobcomp.txt"
    deadline = time.time() + timeout
    while time.time() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            break
        time.sleep(2)
    out = {}
    for line in path.read_text().splitlines():
        kv = dict(re.findall(r"(\w+)=(\S*)", line))

        def ts(key: str, kv: dict[str, str] = kv) -> float:
            return datetime.fromisoformat(kv[key]).timestamp()

        out[kv["JobId"]] = {"state": kv["JobState"], "submit": ts("SubmitTime"),
                            "start": ts("StartTime"), "end": ts("EndTime"),
                            "nodes": kv["NodeList"]}
    return out


def simulate(asked: dict[str, dict[str, Any]], real: dict[str, dict[str, Any]],
             calibrated: bool = False) -> dict[str, tuple[float, float, str]]:
    """schedlab's `slurm` on the same slurm.conf and jobs (times from the first submit).

    `calibrated`: each job runs as long as it held its GPUs in the real cluster plus the
    measured release latency (`RELEASE`), and a TIMEOUT job's limit is its real run
    (Slurm kills at its 30-s time-limit check, not at the limit): what is left to
    compare is the schedulers' decisions.
    """
    sys.path.insert(0, str(ROOT))
    from schedlab import Simulation, load_topology
    from schedlab.traces import from_records

    t0 = min(r["submit"] for r in real.values())
    recs = []
    for jid, a in asked.items():
        r = real[jid]
        dur, limit = float(a["sleep"]), a["limit"]
        if calibrated:
            dur = r["end"] - r["start"] + RELEASE
            if r["state"] == "TIMEOUT":
                limit = dur
                dur += 1000.0
        recs.append({"job_id": jid, "submit_time": r["submit"] - t0, "num_gpus": a["gpus"],
                     "gpus_per_task": a["gpus"] // a["nodes"], "duration": dur,
                     "time_limit": limit, "partition": a["partition"], "user": "root"})
    conf = WORK / "slurm.conf"
    res = Simulation(from_records(recs, name="xc"), load_topology(conf), "slurm",
                     params={"config": str(conf)}).run()
    return {r.job_id: (r.start_time + t0, r.end_time + t0, r.status)
            for r in res.jobs.itertuples()}


def compare(asked: dict[str, dict[str, Any]], real: dict[str, dict[str, Any]],
            sim: dict[str, tuple[float, float, str]]) -> dict[str, Any]:
    """Per job: real and simulated start; rank agreement and the largest gap."""
    ids = sorted(asked, key=int)
    t0 = min(r["submit"] for r in real.values())
    table = []
    for jid in ids:
        r, s, a = real[jid], sim[jid], asked[jid]
        table.append((jid, a, r["submit"] - t0, r["start"] - t0, s[0] - t0, r["state"],
                      s[2], r["end"] - t0, s[1] - t0))
    real_order = [j for j in sorted(ids, key=lambda j: (real[j]["start"], int(j)))]
    sim_order = [j for j in sorted(ids, key=lambda j: (sim[j][0], int(j)))]
    gaps = [abs(row[3] - row[4]) for row in table]
    # order "agrees" when no pair of jobs whose real starts differ by more than one
    # cycle is swapped in the simulation
    swapped = [(a, b) for i, a in enumerate(real_order) for b in real_order[i + 1:]
               if real[b]["start"] - real[a]["start"] > INTERVAL and sim[b][0] < sim[a][0]]
    return {"table": table, "real_order": real_order, "sim_order": sim_order,
            "max_gap": max(gaps), "mean_gap": sum(gaps) / len(gaps),
            "within": sum(g <= INTERVAL for g in gaps), "swapped": swapped}


def _summary(name: str, cmp: dict[str, Any]) -> list[str]:
    return [
        f"- {name}: start within one cycle ({INTERVAL} s) of the real one: "
        f"{cmp['within']} of {len(cmp['table'])} jobs; largest gap {cmp['max_gap']:.1f} s, "
        f"mean {cmp['mean_gap']:.2f} s; pairs started in the other order although their "
        f"real starts are more than one cycle apart: {len(cmp['swapped'])} "
        f"{cmp['swapped'][:5]}",
    ]


def _table(cmp: dict[str, Any]) -> list[str]:
    lines = [
        "| job | part | GPUs | sleep s | limit s | submit | real start | sim start | "
        "real state | sim status | real end | sim end |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for jid, a, sub, rs, ss, rst, sst, re_, se in cmp["table"]:
        lines.append(f"| {jid} | {a['partition']} | {a['gpus']} | {a['sleep']} | "
                     f"{a['limit']:.0f} | {sub:.0f} | {rs:.0f} | {ss:.0f} | {rst} | {sst} | "
                     f"{re_:.0f} | {se:.0f} |")
    return lines


def write_results(raw: dict[str, Any], calibrated: dict[str, Any]) -> Path:
    """RESULTS_slurm.md beside this file (the notes below the tables are kept by hand)."""
    path = Path(__file__).with_name("RESULTS_slurm.md")
    notes = ""
    if path.exists() and "\n## Notes" in path.read_text():
        notes = path.read_text().split("\n## Notes", 1)[1]
    lines = [
        "# Cross-check: schedlab `slurm` against a real slurmctld/slurmd",
        "",
        f"Measured {datetime.now().strftime('%Y-%m-%d %H:%M')} by `python "
        "benchmarks/crosscheck/slurm.py` (Debian "
        f"{_run('sinfo', '-V', check=False).strip() or 'slurm-wlm'}, {NODES} nodes x "
        f"{GPUS} GPUs as GRES on fake devices, sched_interval = bf_interval = {INTERVAL} s, "
        "bf_resolution = 1 s, two partitions of PriorityTier 1 and 2, multifactor priority "
        "by partition only, 30 `sleep` jobs of 5-100 s with limits of 1-3 minutes).",
        "",
        *_summary("as submitted (duration = the sleep, limit = the asked limit)", raw),
        *_summary(f"calibrated (duration = the real run + {RELEASE:g} s release latency; a "
                  "TIMEOUT job's limit = its real run)", calibrated),
        "",
        "## As submitted",
        "",
        *_table(raw),
        "",
        "## Calibrated",
        "",
        *_table(calibrated),
        "",
        "## Notes" + (notes if notes else "\n"),
    ]
    path.write_text("\n".join(lines).rstrip("\n") + "\n")
    return path


def live(replay: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the real cluster (or reuse its last records) and both simulations."""
    records = WORK / "records.json"
    if replay:
        data = json.loads(records.read_text())
        asked, real = data["asked"], data["real"]
    else:
        try:
            start_cluster()
            asked = submit_all()
            real = read_jobcomp(len(asked))
        finally:
            stop_cluster()
        records.write_text(json.dumps({"asked": asked, "real": real}))
    return (compare(asked, real, simulate(asked, real)),
            compare(asked, real, simulate(asked, real, calibrated=True)))


def rows() -> list[dict[str, Any]]:
    """run_all.py rows: only with SCHEDLAB_SLURM_LIVE=1 (it takes minutes and root)."""
    if os.environ.get("SCHEDLAB_SLURM_LIVE") != "1":
        raise MissingInput("set SCHEDLAB_SLURM_LIVE=1 to start a real Slurm cluster")
    cmp = live()[1]
    src = "real slurmctld/slurmd (Debian slurm-wlm) on this machine"
    return [{"peer": "slurm", "check": "30 sleep jobs, 3x4 GPUs", "metric": "max start gap s",
             "peer_value": 0.0, "schedlab": cmp["max_gap"], "source": src},
            {"peer": "slurm", "check": "30 sleep jobs, 3x4 GPUs",
             "metric": "order swaps > 1 cycle", "peer_value": 0, "schedlab": len(cmp["swapped"]),
             "source": src}]


if __name__ == "__main__":
    raw, calibrated = live(replay="--replay" in sys.argv)
    print(write_results(raw, calibrated).read_text())
