"""Issue 49's must-hold on the whole default trace: shaken replicas give intervals for
every policy, and `check --tolerance replicas` passes on other replica seeds and fails on
a changed policy parameter.

Runs three sweeps of the default trace and topology (every registered policy unless
--policy is given): replicas seed 0 (the baseline), replicas seed 1 (a rerun), and
replicas seed 1 with one policy parameter changed (tiresias-las num_queues=1). Prints
per policy the mean and 95% half-width of jct_mean, queueing_delay_mean and
utilization_mean, the smallest relative half-width, and the check's verdicts.

    python benchmarks/bench_replicas.py [--count 5] [-j 2] [--max-jobs N] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from schedlab.app.check import REPLICA_WIDEN, collect_runs, compare_replicas, make_baseline
from schedlab.app.sweep import open_executor, parse_sweep, run_sweep
from schedlab.policies import registered_policies

CHANGED = ("tiresias-las", "num_queues", 1)
"""The real change: a policy, its parameter and the new value."""


def sweep(policies: list[str], count: int, seed: int, max_jobs: int | None,
          changed: bool = False):
    base: dict = {"trace": "default", "topology": "default", "max_jobs": max_jobs,
                  "params": {"events": "off"}}
    if changed:
        base["params"][f"{CHANGED[0]}.{CHANGED[1]}"] = CHANGED[2]
    return parse_sweep({"base": base, "grid": {"policy": policies},
                        "replicas": {"count": count, "seed": seed}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("-j", "--jobs", type=int, default=None)
    ap.add_argument("--max-jobs", type=int, default=None)
    ap.add_argument("--policy", action="append", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--analyse", action="store_true",
                    help="Only analyse the sweeps already in --out.")
    args = ap.parse_args()
    policies = args.policy or list(registered_policies())
    out = Path(args.out or tempfile.mkdtemp(prefix="replicas-"))
    if not args.analyse:
        t0 = time.monotonic()
        with open_executor(None, args.jobs) as pool:
            run_sweep(sweep(policies, args.count, 0, args.max_jobs), out / "seed0", pool)
            run_sweep(sweep(policies, args.count, 1, args.max_jobs), out / "seed1", pool)
            run_sweep(sweep([CHANGED[0]], args.count, 1, args.max_jobs, changed=True),
                      out / "changed", pool)
        print(f"3 sweeps of {args.count} replicas x {len(policies)} policies: "
              f"{time.monotonic() - t0:.0f} s wall, results in {out}")
    analyse(out)


def ratios(rows: list) -> list[tuple[float, str, str]]:
    """|now - baseline| / tolerance of the rows with a replica tolerance, largest first,
    the tolerance taken at --widen 1 (so the ratio is the least widen that fails)."""
    out = []
    for r in rows:
        if r.tolerance and r.now is not None and r.baseline is not None:
            out.append((abs(float(r.now) - float(r.baseline)) / (r.tolerance / WIDEN),
                        r.run, r.metric))
    return sorted(out, reverse=True)


WIDEN = REPLICA_WIDEN


def analyse(out: Path) -> None:
    """Print the intervals and the check's verdicts for the sweeps in `out`."""
    table = pd.read_parquet(out / "seed0" / "replicas.parquet")
    cols = ["jct_mean", "queueing_delay_mean", "utilization_mean"]
    print(f"\n{'policy':<22}" + "".join(f"{c + ' (mean +- 95%)':>36}" for c in cols)
          + f"{'min rel. width':>16}")
    zero = []
    for _, row in table.iterrows():
        widths = [row[f"{c}_ci95"] / abs(row[f"{c}_mean"]) if row[f"{c}_mean"] else 0.0
                  for c in cols]
        if not row["jct_mean_ci95"] > 0:
            zero.append(row["policy"])
        print(f"{row['policy']:<22}" + "".join(
            f"{row[c + '_mean']:>22.5g} +- {row[c + '_ci95']:<10.3g}" for c in cols)
            + f"{min(widths):>16.2%}")
    print(f"\npolicies whose jct_mean interval has zero width: {zero or 'none'}")
    baseline = make_baseline(collect_runs(out / "seed0"))
    rerun = collect_runs(out / "seed1")
    rows = compare_replicas(baseline, rerun)
    bad = [r for r in rows if r.failed]
    top = ratios(rows)
    print("rerun: largest |now - baseline| / sqrt(h^2 + h_now^2): "
          + ", ".join(f"{x:.2f} ({run} {m})" for x, run, m in top[:5])
          + f"; rows above 1: {sum(1 for x, *_ in top if x > 1)} of {len(top)}")
    print(f"check --tolerance replicas (widen {WIDEN:g}), rerun with replica seed 1: "
          f"{len(rows)} rows, {len(bad)} failed" + "".join(f"\n  {r.run} {r.metric}: {r.verdict} "
                                         f"({r.baseline} -> {r.now}, tol {r.tolerance})"
                                         for r in bad))
    changed = {k: r for k, r in rerun.items() if not k.startswith(CHANGED[0] + "-")}
    changed.update(collect_runs(out / "changed"))
    rows = compare_replicas(baseline, changed)
    bad = [r for r in rows if r.failed]
    drift = [f"{m} ({x:.1f})" for x, run, m in ratios(rows)
             if run == CHANGED[0] and x > WIDEN]
    print(f"check --tolerance replicas, {CHANGED[0]} {CHANGED[1]}={CHANGED[2]}: "
          f"{len(bad)} failed rows ({', '.join(sorted({r.verdict for r in bad}))}); "
          f"metrics out of tolerance (ratio): {', '.join(drift)}")


if __name__ == "__main__":
    main()
