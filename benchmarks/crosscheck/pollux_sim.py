"""Pollux's own simulator (petuum/adaptdl, osdi21-artifact) run unmodified on workload-6.

Records the average JCTs its README reports for workload-6 (Pollux 2446 s,
Optimus+Oracle+TunedJobs 5302 s, Tiresias+TunedJobs 3470 s) beside the ones a run here
gives, in RESULTS_pollux.md. schedlab's own numbers join once its pollux / optimus
policies exist; this module defines no `rows()` yet, so run_all.py skips it (a Pollux
run takes 30+ minutes).

Setup (outside the repository; nothing of it is committed):

    git --git-dir=<adaptdl mirror> archive osdi21-artifact simulator | tar -x -C /work/pollux-sim
    python3 -m venv /work/venv-pollux-sim
    /work/venv-pollux-sim/bin/pip install numpy==1.23.5 pandas==1.5.3 scipy==1.10.1 \
        autograd pymoo==0.4.2.2

(Python 3.11: numpy < 1.24 keeps `np.int`, pandas < 2 keeps `DataFrame.append`, pymoo
0.4.2.x keeps `pymoo.model`, which the simulator uses.)

Run: `python benchmarks/crosscheck/pollux_sim.py [--policies tiresias optimus pollux]`
starts the runs in parallel (logs in --log-dir) and rewrites RESULTS_pollux.md as each
ends; `--report` only rewrites it from the logs (a run still going shows its simulated
time and finished jobs).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
README_JCT = {"pollux": 2446.13125, "optimus": 5301.875, "tiresias": 3469.69375}
"""Average JCT (s) on workload-6, from simulator/README.md of the osdi21-artifact branch."""
POLICIES = ("tiresias", "optimus", "pollux")
_AVG = re.compile(r"^Average JCT: ([0-9.eE+-]+)\s*$")
_TIME = re.compile(r"SIMULATOR TIME: (\d+)")
_DONE = re.compile(r"^\{.*\}$")


def parse_log(path: Path) -> dict[str, float | int | bool | None]:
    """Last average JCT, simulated time and finished-job count of a simulator log."""
    out: dict[str, float | int | bool | None] = {"avg_jct": None, "sim_time": None,
                                                 "finished": None, "done": False}
    if not path.is_file():
        return out
    last_avg = None
    with path.open(errors="replace") as fh:
        for line in fh:
            m = _TIME.search(line)
            if m:
                out["sim_time"] = int(m.group(1))
                continue
            m = _AVG.match(line.strip())
            if m:
                last_avg = float(m.group(1))
                continue
            if _DONE.match(line.strip()):
                out["finished"] = line.count(":")
    out["avg_jct"] = last_avg
    return out


def write_results(log_dir: Path, policies: tuple[str, ...], status: dict[str, str],
                  wall: dict[str, float], out: Path, num_jobs: int) -> None:
    """RESULTS_pollux.md from the logs."""
    lines = [
        "# Pollux's simulator on workload-6: its README beside a run here",
        "",
        "Pollux's own simulator (petuum/adaptdl, branch osdi21-artifact, `simulator/`) run",
        "unmodified: `python3 simulator.py --policy P workloads/workload-6.csv` (16 nodes x 4",
        "GPUs, 60 s interval; defaults), Python 3.11, numpy 1.23.5, pandas 1.5.3, scipy 1.10.1,",
        "pymoo 0.4.2.2, autograd (benchmarks/crosscheck/pollux_sim.py says how to set it up).",
        f"Written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        "| policy | README avg JCT (s) | this run (s) | diff | status | wall (min) |",
        "| --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for pol in policies:
        got = parse_log(log_dir / f"{pol}.log")
        ref = README_JCT[pol]
        st = status.get(pol, "")
        if st == "finished" and got["avg_jct"] is not None:
            val = float(got["avg_jct"])
            ours, diff = f"{val:.1f}", f"{(val - ref) / ref:+.2%}"
        else:
            t = got["sim_time"]
            ours, diff = "-", "-"
            if st in ("running", "") and t is not None:
                st = (f"running: simulated {t} s, {got['finished'] or 0} of {num_jobs} "
                      "jobs done")
        mins = f"{wall[pol] / 60:.1f}" if pol in wall else "-"
        lines.append(f"| {pol} | {ref:.1f} | {ours} | {diff} | {st or 'not run'} | {mins} |")
    lines += [
        "",
        "Pollux's policy searches with a genetic algorithm (pymoo NSGA-II) seeded from",
        "numpy's global random state, which the simulator does not seed: its README says a",
        "run's average JCT may differ slightly from 2446 s. Tiresias and Optimus are",
        "deterministic.",
        "",
    ]
    if any(_status(log_dir, p).startswith("stopped") for p in policies):
        lines += [
            "A stopped run was ended by hand before it finished (on a machine whose 2 cores",
            "were shared by several sessions it had too little CPU: the Pollux run of 2026-12-07",
            "got about 6 CPU minutes in its first 45 minutes). Rerun it alone on a free machine:",
            "`python benchmarks/crosscheck/pollux_sim.py --policies pollux` (its README: up",
            "to 30 minutes).",
            "",
        ]
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim-dir", type=Path, default=Path("/work/pollux-sim/simulator"))
    ap.add_argument("--python", default="/work/venv-pollux-sim/bin/python")
    ap.add_argument("--workload", default="workloads/workload-6.csv")
    ap.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    ap.add_argument("--log-dir", type=Path, default=Path("/work/pollux-sim/logs"))
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS_pollux.md")
    ap.add_argument("--report", action="store_true", help="only rewrite the results file")
    args = ap.parse_args(argv)
    policies = tuple(args.policies)
    workload = args.sim_dir / args.workload
    if not workload.is_file():
        print(f"{workload}: not found (see this module's docstring for the setup)",
              file=sys.stderr)
        return 2
    num_jobs = max(0, sum(1 for _ in workload.open()) - 1)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    if args.report:
        status = {p: _status(args.log_dir, p) for p in policies}
        write_results(args.log_dir, policies, status, _walls(args.log_dir), args.out,
                      num_jobs)
        return 0
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    procs: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    for pol in policies:
        log = (args.log_dir / f"{pol}.log").open("wb")
        cmd = [args.python, "simulator.py", "--policy", pol, args.workload]
        procs[pol] = (subprocess.Popen(cmd, cwd=args.sim_dir, stdout=log,
                                       stderr=subprocess.STDOUT, env=env),
                      time.monotonic())
    status = dict.fromkeys(policies, "running")
    wall: dict[str, float] = {}
    while any(s == "running" for s in status.values()):
        time.sleep(10)
        for pol, (proc, t0) in procs.items():
            if status[pol] == "running" and proc.poll() is not None:
                wall[pol] = time.monotonic() - t0
                status[pol] = "finished" if proc.returncode == 0 else \
                    f"failed (exit {proc.returncode})"
                (args.log_dir / f"{pol}.end").write_text(f"{proc.returncode} {wall[pol]}\n")
                write_results(args.log_dir, policies, status, wall, args.out, num_jobs)
    return 0


def _status(log_dir: Path, pol: str) -> str:
    """finished (exit 0), stopped (a signal), failed, or running (no end file yet)."""
    end = log_dir / f"{pol}.end"
    if not end.is_file():
        return "running"
    rc = int(end.read_text().split()[0])
    if rc == 0:
        return "finished"
    if rc < 0:
        got = parse_log(log_dir / f"{pol}.log")
        return (f"stopped (signal {-rc}) at simulated {got['sim_time']} s, "
                f"{got['finished'] or 0} jobs done")
    return f"failed (exit {rc})"


def _walls(log_dir: Path) -> dict[str, float]:
    out = {}
    for p in POLICIES:
        end = log_dir / f"{p}.end"
        if end.is_file():
            out[p] = float(end.read_text().split()[1])
    return out


if __name__ == "__main__":
    raise SystemExit(main())
