"""The engine at scale: calibrated philly-like traces of 10k/100k/1M jobs, and Philly.

    python benchmarks/bench_scale.py [--sizes 10000,100000,1000000]
        [--policies fifo,fifo-backfill,tiresias-las] [--philly] [--all-policies]
        [--philly-topology philly|uniform:56] [--cpu-limit S] [--timeout S] [--lean]
        [--system-malloc] [--out FILE.md] [--check]

Part 1 (`--sizes`): `philly-like:N` at load 0.8 on the `philly` preset (552 machines,
2,490 GPUs) under each of `--policies`, plus the bare-SimPy FIFO floor on the same jobs:
CPU seconds (the trace's generation apart from the run: engine loop and result build),
engine events per job, peak RSS and CPU per job. Part 2 (`--philly`): the full Philly
table (82,247 jobs, shared folder) under fifo and the floor, and with `--all-policies`
every registered policy, each with its CPU ratio to fifo (`x_fifo`) and the ratio of its
CPU per engine event to fifo's (`x_fifo_event`: what an event costs, apart from how many
events a policy's behaviour makes, e.g. Gavel's rounds of suspensions). `--lean` runs with
`timeline=off, events=off` (no summary number changes). Every measurement runs in a
fresh, niced subprocess (its own peak RSS) and is cut after `--cpu-limit` CPU seconds
(a loaded machine stretches wall time, not CPU time) or `--timeout` wall seconds.
The report ends with a verdict on each of issue 18's targets that its rows speak to
(`scale_targets.py`); `--check` makes a failed one the exit status, for a guard.
Each subprocess settles its C allocator as the `schedlab` command does
(`schedlab.app.allocator`: freed memory goes back to the system); `--system-malloc` leaves
glibc's defaults, as a Python process that does not call it has them (the peaks are
then 0.06-0.09 GiB higher at a million jobs, the CPU the same).

Two floors, what a SimPy FIFO of this trace pays with no topology, placement, recording
or metrics (GPUs are a counter): `floor-procs`, idiomatic SimPy (a process per job on a
`simpy.Container`, whose gets are served in order: the issue's "bare SimPy FIFO", the
`x_floor` ratio's base), and `floor`, one SimPy process over a FIFO deque and a heap of
completions (the engine's own shape, the least any SimPy loop pays).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from scale_targets import philly_verdicts, size_verdicts

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"
HERE = Path(__file__).resolve().parent


def load(trace: str, topology: str) -> tuple[Any, Any]:
    """(trace, topology): `philly` is the shared full table, else `philly-like:N`."""
    from schedlab.topologies import load_topology
    from schedlab.traces import load_trace

    topo = load_topology("philly") if topology == "philly" else _uniform(topology)
    if trace == "philly":
        from schedlab.traces.canonical import frame_to_trace
        from schedlab.traces.make_default import convert_philly

        return frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full",
                              source=str(PHILLY)), topo
    return load_trace(trace, topology=topo, load=0.8, seed=0), topo


def _uniform(spec: str) -> Any:
    from schedlab.topologies.build import uniform_topology

    n = int(spec.partition(":")[2])
    return uniform_topology(n, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            name=f"uniform-{n}x8")


def floor(jobs: list[tuple[float, int, float]], gpus: int) -> int:
    """Bare SimPy FIFO over (submit, gpus, duration), in submit order; returns events."""
    import simpy

    env = simpy.Environment()
    done: list[tuple[float, int]] = []
    queue: deque[tuple[int, float]] = deque()
    state = {"free": gpus, "events": 0}

    def loop() -> Any:
        i, n = 0, len(jobs)
        while i < n or done or queue:
            t = min(jobs[i][0] if i < n else float("inf"), done[0][0] if done else float("inf"))
            if t == float("inf"):
                break  # only jobs too large for the cluster are left
            if t > env.now:
                yield env.timeout(t - env.now)
            while done and done[0][0] <= t:
                state["free"] += heapq.heappop(done)[1]
                state["events"] += 1
            while i < n and jobs[i][0] <= t:
                queue.append((jobs[i][1], jobs[i][2]))
                i += 1
                state["events"] += 1
            while queue and queue[0][0] <= state["free"]:
                g, d = queue.popleft()
                state["free"] -= g
                heapq.heappush(done, (t + d, g))
                state["events"] += 1

    env.process(loop())
    env.run()
    return state["events"]


def floor_procs(jobs: list[tuple[float, int, float]], gpus: int) -> int:
    """Idiomatic SimPy FIFO: one process per job on a Container of GPUs; returns events."""
    import simpy

    env = simpy.Environment()
    pool = simpy.Container(env, capacity=gpus, init=gpus)  # gets are served in order
    count = [0]

    def job(submit: float, g: int, d: float) -> Any:
        yield env.timeout(submit)
        count[0] += 1
        yield pool.get(g)
        count[0] += 1
        yield env.timeout(d)
        count[0] += 1
        yield pool.put(g)

    for submit, g, d in jobs:
        if g <= gpus:
            env.process(job(submit, g, d))
    env.run()
    return count[0]


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this process."""
    import contextlib

    from schedlab.sim import engine

    # an older engine (to measure before/after) has no quiet collector
    collector = getattr(engine, "quiet_collector", contextlib.nullcontext)
    if not args.system_malloc:
        from schedlab.app.allocator import settle_allocator

        settle_allocator()  # as the `schedlab` command does
    c0 = time.process_time()
    with collector():
        trace, topo = load(args.trace, args.philly_topology)
    c1 = time.process_time()
    n = len(trace.jobs)
    row: dict[str, Any] = {"trace": args.trace, "jobs": n, "policy": args.policy,
                           "trace_cpu_s": round(c1 - c0, 2)}
    if args.policy in ("floor", "floor-procs"):
        jobs = sorted((s.submit_time, s.num_gpus, s.duration) for s in trace.jobs)
        gc_freeze()
        ev = (floor if args.policy == "floor" else floor_procs)(jobs, topo.num_gpus)
        cpu = time.process_time() - c1
    else:
        from schedlab.sim.engine import Simulation

        params = {"timeline": "off", "events": "off"} if args.lean else {}
        s = Simulation(trace, topo, args.policy, params=params).run().summary
        cpu = time.process_time() - c1
        ev = s["events_processed"]
        row.update(completed=s["jobs_completed"], rejected=s["jobs_rejected"],
                   queueing_delay_mean=round(s["queueing_delay_mean"], 1))
    row.update(run_cpu_s=round(cpu, 2), events=ev, events_per_job=round(ev / n, 2),
               us_per_event=round(1e6 * cpu / max(ev, 1), 1),
               ms_per_job=round(1e3 * cpu / n, 3),
               peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2))
    return row


def gc_freeze() -> None:
    import gc

    gc.freeze()


def measure(trace: str, policy: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one measurement in a fresh, niced subprocess; a timeout is reported as such."""
    cmd = [sys.executable, __file__, "--child", "--trace", trace, "--policy", policy,
           "--philly-topology", args.philly_topology] + (["--lean"] if args.lean else []) \
        + (["--system-malloc"] if args.system_malloc else [])
    cap = int(args.cpu_limit)

    def limit() -> None:  # in the child: SIGXCPU after `cap` CPU seconds
        os.nice(10)
        resource.setrlimit(resource.RLIMIT_CPU, (cap, cap + 5))

    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             timeout=args.timeout, cwd=HERE.parent,
                             preexec_fn=limit if cap > 0 else None).stdout
        row = json.loads(out.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        row = {"trace": trace, "policy": policy, "run_cpu_s": None,
               "note": f"cut after {args.timeout:g} s wall"}
    except subprocess.CalledProcessError as e:
        note = f"failed: {e.stderr.strip().splitlines()[-1] if e.stderr else e}"
        if cap > 0 and e.returncode in (-24, -9):  # SIGXCPU, SIGKILL at the hard limit
            note = f"cut after {cap} CPU s (trace included)"
        row = {"trace": trace, "policy": policy, "run_cpu_s": None, "note": note}
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(row), flush=True)
    return row


def _fmt(v: Any) -> str:
    return "-" if v is None else str(v)


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--policies", default="fifo,fifo-backfill,tiresias-las")
    ap.add_argument("--philly", action="store_true")
    ap.add_argument("--all-policies", action="store_true")
    ap.add_argument("--philly-topology", default="philly")
    ap.add_argument("--timeout", type=float, default=7200.0, help="wall seconds per run")
    ap.add_argument("--cpu-limit", type=float, default=600.0,
                    help="CPU seconds per run (trace included); 0: none")
    ap.add_argument("--lean", action="store_true")
    ap.add_argument("--system-malloc", action="store_true",
                    help="leave glibc's malloc thresholds as they are (schedlab.app.allocator)")
    ap.add_argument("--out", default=None, help="write a Markdown report here")
    ap.add_argument("--check", action="store_true",
                    help="exit with status 1 when a target of issue 18 fails "
                         "(scale_targets.py; the verdicts are printed either way)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trace", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--policy", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    import schedlab as sim_pkg

    cols = ["trace", "jobs", "policy", "trace_cpu_s", "run_cpu_s", "events_per_job",
            "us_per_event", "ms_per_job", "peak_rss_gb", "wall_s", "note"]
    report = [f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; lean={args.lean}; "
              f"system_malloc={args.system_malloc}; compiled engine modules: "
              f"{len(sim_pkg.compiled_modules())} (0: pure Python)"]
    verdicts: list[tuple[bool, str]] = []
    sizes = [int(x) for x in args.sizes.split(",") if x and int(x) > 0]  # 0: none
    if sizes:
        rows = []
        for n in sizes:
            for p in ["floor", "floor-procs", *args.policies.split(",")]:
                rows.append(measure(f"philly-like:{n}", p, args))
        report += ["", "## philly-like at load 0.8 on philly", "", table(rows, cols)]
        verdicts += size_verdicts(rows)
    if args.philly:
        if not PHILLY.exists():
            sys.exit(f"Philly table not found at {PHILLY} (set SCHEDLAB_SHARED)")
        from schedlab.policies import registered_policies

        names = (registered_policies() if args.all_policies
                 else [p for p in args.policies.split(",") if p])
        names = ["fifo", *[p for p in names if p != "fifo"]]
        rows = [measure("philly", "floor", args), measure("philly", "floor-procs", args)]
        rows += [measure("philly", p, args) for p in names]
        fifo_row = next(r for r in rows if r["policy"] == "fifo")
        fifo, fifo_ev = fifo_row["run_cpu_s"], fifo_row.get("us_per_event")
        floor_cpu = rows[1]["run_cpu_s"]
        for r in rows:
            if r.get("run_cpu_s") and fifo:
                r["x_fifo"] = round(r["run_cpu_s"] / fifo, 2)
            if r.get("run_cpu_s") and floor_cpu:
                r["x_floor"] = round(r["run_cpu_s"] / floor_cpu, 2)
            if r.get("us_per_event") and fifo_ev:  # cost of an event, whatever their number
                r["x_fifo_event"] = round(r["us_per_event"] / fifo_ev, 2)
        report += ["", f"## full Philly on {args.philly_topology}", "",
                   table(rows, [*cols[2:], "x_fifo", "x_fifo_event", "x_floor"])]
        build = "compiled" if sim_pkg.compiled_modules() else "pure"
        verdicts += philly_verdicts(rows, args.philly_topology, build)
    if verdicts:
        report += ["", "## Targets (issue 18; scale_targets.py)", "",
                   *[f"- {line}" for _, line in verdicts]]
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.check and not all(ok for ok, _ in verdicts):
        sys.exit(1)


if __name__ == "__main__":
    main()
