"""What writing your own policy costs: the README's example and a naive policy vs fifo-backfill.

The README's "Adding a policy" example (executed from README.md itself, so the benchmark
measures exactly what users copy) subclasses `PriorityPolicy`. The naive policy asks
`ctx.place` for every pending job on every pass, as a first-time author would. Both run
on the bundled default (3,000 jobs on 288 GPUs, a long queue) and on the first 20,000
jobs of the Philly table on the `philly` topology, beside fifo-backfill.

    python benchmarks/bench_extend.py [--philly-jobs 20000] [--repeat 3]

Targets: the README example within 2x fifo-backfill's wall time, the naive one within 5x.
Each number is the best of `--repeat` runs (the machine's noise goes one way).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

from schedlab.policies.base import Policy
from schedlab.sim.model import Start, Unschedulable

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SCHEDLAB_SHARED", ROOT.parent / "shared"))
PHILLY = SHARED / "traces" / "philly" / "philly_jobs_pollux.csv"


class NaivePolicy(Policy):
    """Place every pending job, in arrival order, on every pass."""

    name = "naive"

    def schedule(self, ctx):
        for job in list(ctx.pending()):
            gpus = ctx.place(job)
            if not isinstance(gpus, Unschedulable):
                yield Start(job.job_id, gpus)


def readme_policy() -> type[Policy]:
    """The class defined by README.md's "Adding a policy" example."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)
                 if "class SmallestFirst" in b)
    ns: dict = {}
    exec(compile(block.replace('register("smallest-first", SmallestFirst)', ""),
                 "README-example", "exec"), ns)
    return ns["SmallestFirst"]


def best(make, trace, topo, repeat: int) -> tuple[float, dict]:
    from schedlab.sim.engine import Simulation

    walls, summary = [], {}
    for _ in range(repeat):
        t = time.perf_counter()
        summary = Simulation(trace, topo, make()).run().summary
        walls.append(time.perf_counter() - t)
    return min(walls), summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--philly-jobs", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from schedlab.policies import make_policy
    from schedlab.topologies import load_topology
    from schedlab.traces import load_trace

    cases = [("default", load_trace("default"), load_topology("default"))]
    if PHILLY.exists():
        from schedlab.traces.canonical import frame_to_trace
        from schedlab.traces.make_default import convert_philly

        full = frame_to_trace(convert_philly(PHILLY), label=PHILLY.name, name="philly",
                              source=str(PHILLY))
        jobs = tuple(sorted(full.jobs, key=lambda s: s.submit_time))[: args.philly_jobs]
        cases.append((f"philly-{len(jobs)}", type(full)(full.name, jobs),
                      load_topology("philly")))
    readme = readme_policy()
    makers = {"fifo-backfill": lambda: make_policy("fifo-backfill"),
              "readme-example": readme, "naive": NaivePolicy}
    print(f"{'case':<14} {'policy':<15} {'wall s':>8} {'x fifo-bf':>9} {'jct mean':>12}")
    for name, trace, topo in cases:
        base = None
        for pol, make in makers.items():
            wall, s = best(make, trace, topo, args.repeat)
            base = base or wall
            print(f"{name:<14} {pol:<15} {wall:8.2f} {wall / base:9.2f} "
                  f"{s['jct_mean']:12.0f}")


if __name__ == "__main__":
    main()
