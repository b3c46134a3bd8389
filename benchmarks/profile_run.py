"""Profile one run with cProfile: phases (trace, engine, result build) and top functions.

    python benchmarks/profile_run.py [--policy fifo] [--trace philly-like:100000]
        [--topology philly|uniform:56] [--param load=0.8] [--top 30] [--sort cumulative|tottime]
        [--pstats OUT.prof] [--no-profile]

`--trace philly` is the full Philly table of the shared folder (82,247 jobs). The phases
are CPU seconds (`time.process_time`, also the profiler's clock: on a shared machine wall
time would count other processes); `--no-profile` gives them without the profiler's
overhead. Memory: the resident set after each phase and the peak so far (MB), which
tells the phase that set the run's peak. The top functions are printed by cumulative
and by own time, so both the callers and the hot leaves show.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import inspect
import io
import os
import pstats
import resource
import time
from pathlib import Path
from typing import Any

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"


def load(trace: str, topo: Any, params: dict[str, Any]) -> Any:
    """The trace: `philly` (the shared full table), a bundled name, a generator or a file.

    A calibrated generator (`philly-like:N`) takes `load` from the params (default 0.8).
    """
    if trace == "philly":
        from schedlab.traces.canonical import frame_to_trace
        from schedlab.traces.make_default import convert_philly

        return frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly-full",
                              source=str(PHILLY))
    from schedlab.traces import load_trace

    if trace.partition(":")[0] in ("philly-like", "helios-like"):
        return load_trace(trace, topology=topo, load=float(params.pop("load", 0.8)))
    return load_trace(trace)


def memory() -> tuple[float, float]:
    """(resident MB now, peak MB so far); now is NaN where /proc is missing."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        with open("/proc/self/statm") as f:
            now = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        now = float("nan")
    return now, peak


def topology(spec: str) -> Any:
    """A preset or topology file, or `uniform:N` (N 8-GPU nodes, as bench_scale builds it)."""
    if spec.startswith("uniform:"):
        from bench_scale import _uniform

        return _uniform(spec)
    from schedlab.topologies import load_topology

    return load_topology(spec)


def parse_params(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs (values stay strings; the engine parses them)."""
    out: dict[str, Any] = {}
    for it in items:
        k, _, v = it.partition("=")
        out[k.strip()] = v.strip()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--trace", default="philly")
    ap.add_argument("--topology", default="philly")
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--sort", choices=("cumulative", "tottime", "both"), default="both")
    ap.add_argument("--pstats", default=None, help="also dump the raw profile here")
    ap.add_argument("--no-profile", action="store_true", help="phases only, no cProfile")
    args = ap.parse_args()

    from schedlab.sim import engine
    from schedlab.sim.engine import Run, Simulation
    from schedlab.sim.results import build_result
    # the phases of `schedlab run` and Simulation.run, measured apart, as they run them
    # (inside the engine's quiet garbage collector, where it has one)
    collector = getattr(engine, "quiet_collector", contextlib.nullcontext)
    params = parse_params(args.param)
    # CPU time, not wall time: the machine is shared, so wall time counts other processes
    prof = None if args.no_profile else cProfile.Profile(time.process_time)
    with collector():
        c0 = time.process_time()
        topo = topology(args.topology)
        trace = load(args.trace, topo, params)
        c1 = time.process_time()
    mem = {"trace": memory()}
    sim = Simulation(trace, topo, args.policy, params=params)
    with collector():
        c2 = time.process_time()
        run = Run(sim, None, None)
        sim.policy.attach(run.ctx)
        # as Simulation.run drives it: the loop directly where it can (no SimPy timeouts)
        direct = "direct" in inspect.signature(run.process).parameters
        if not direct:
            run.env.process(run.process())
        gc.freeze()
        mem["setup"] = memory()
        if prof is not None:
            prof.enable()
        c3 = time.process_time()
        if direct:
            next(run.process(direct=True), None)
        else:
            run.env.run()
        c4 = time.process_time()
        mem["engine"] = memory()
        result = build_result(sim, run, run.env.now, 0.0)
        c5 = time.process_time()
        mem["result"] = memory()
        if prof is not None:
            prof.disable()
    import schedlab as sim_pkg

    phases = {"trace": c1 - c0, "setup": c3 - c2, "engine": c4 - c3, "result": c5 - c4}
    n = len(sim.jobs)
    ev = result.summary["events_processed"]
    print(f"{args.policy} on {args.trace} ({n} jobs, {ev} events, "
          f"{len(result.timeline)} timeline rows, {len(result.events)} event rows)")
    print("CPU s: " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
          + f"; engine {1e6 * phases['engine'] / max(ev, 1):.1f} us/event; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
          + (" (profiled: times inflated)" if prof is not None else "")
          + f"; {len(sim_pkg.compiled_modules())} engine modules compiled")
    print("RSS MB now/peak after: " + ", ".join(f"{k} {now:.0f}/{peak:.0f}"
                                                for k, (now, peak) in mem.items()))
    if prof is None:
        return
    if args.pstats:
        prof.dump_stats(args.pstats)
    for key in (("cumulative", "tottime") if args.sort == "both" else (args.sort,)):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
        print(f"\n=== top {args.top} by {key} ===")
        print(buf.getvalue().split("\n\n", 2)[-1].rstrip())


if __name__ == "__main__":
    main()
