"""Fuzz campaign: random small valid cases under every policy and composition.

Each run draws a case (topology, trace, engine parameters) and a target (a registered
policy or hived composed with an ordering, with random policy parameters) from one seed,
runs it on a process pool with a per-run timeout and checks it with `run_case` of
`tests/fuzzing.py`: no exception, the invariants of
`schedlab.policies.conformance.check_invariants`, the run terminates, and (every
`--determinism-every`-th run) the same seed twice gives the same jobs and events tables.

    python benchmarks/fuzz_campaign.py --runs 1000 --seed 0 --jobs 2 --timeout 60
    python benchmarks/fuzz_campaign.py --repro 17 [--minimize]   # one run, as a script

Prints a summary (runs, passes, failures by kind with the first repro lines, wall time),
writes it to benchmarks/RESULTS_fuzz.md and exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:  # the fuzzing helpers live with the tests
    sys.path.insert(0, str(ROOT / "tests"))

RESULTS = ROOT / "benchmarks" / "RESULTS_fuzz.md"
SEED_STRIDE = 1_000_000  # run i of campaign seed s uses case seed s * SEED_STRIDE + i


def run_seed(campaign_seed: int, i: int) -> int:
    return campaign_seed * SEED_STRIDE + i


def one_run(seed: int, determinism: bool, timeout: float) -> dict[str, Any]:
    """Worker: draw the case and target of `seed`, run and check it."""
    from fuzzing import fuzz_target, run_case

    t0 = time.perf_counter()
    try:
        case, policy, params = fuzz_target(seed)
    except Exception as e:  # the generator itself broke: a finding too
        return {"seed": seed, "policy": "-", "params": {}, "kind": "generator",
                "detail": f"{type(e).__name__}: {e}", "wall": time.perf_counter() - t0,
                "error_type": "generator"}
    out = run_case(case, policy, params, determinism=determinism, time_limit=timeout)
    return {"seed": seed, "policy": policy, "params": params, "kind": out.kind,
            "detail": out.detail, "wall": time.perf_counter() - t0,
            "error_type": out.error_type, "jobs": len(case.trace.jobs),
            "determinism": determinism}


def _warm() -> None:
    import fuzzing  # noqa: F401 - import once per worker, not per run


def _kill(ex: ProcessPoolExecutor) -> None:
    """Stop a pool whose worker is stuck past the hard deadline."""
    for p in list(getattr(ex, "_processes", {}).values()):
        p.kill()
    ex.shutdown(wait=False, cancel_futures=True)


def campaign(runs: int, seed: int, jobs: int, timeout: float, every: int,
             progress: bool) -> list[dict[str, Any]]:
    """Run the campaign on a pool of `jobs` processes; one result dict per run."""
    todo = [(run_seed(seed, i), every > 0 and i % every == 0) for i in range(runs)]
    todo.reverse()
    results: list[dict[str, Any]] = []
    hard = 2 * timeout + 30  # the SIGALRM guard in the worker should fire long before
    ex = ProcessPoolExecutor(max_workers=jobs, initializer=_warm)
    inflight: dict[Future, tuple[int, bool, float]] = {}
    last_print = time.perf_counter()
    try:
        while todo or inflight:
            while todo and len(inflight) < jobs:  # a window: a task starts when submitted
                s, det = todo.pop()
                inflight[ex.submit(one_run, s, det, timeout)] = (s, det, time.perf_counter())
            done, _ = wait(list(inflight), timeout=5.0, return_when=FIRST_COMPLETED)
            for f in done:
                s, det, _t = inflight.pop(f)
                try:
                    results.append(f.result())
                except Exception as e:  # a worker died (memory, signal)
                    results.append({"seed": s, "policy": "?", "params": {}, "kind": "crash",
                                    "detail": f"{type(e).__name__}: {e}", "wall": 0.0,
                                    "error_type": "crash"})
            now = time.perf_counter()
            stuck = [f for f, (_s, _d, t) in inflight.items() if now - t > hard]
            if stuck:
                for f in stuck:
                    s, _det, t = inflight.pop(f)
                    results.append({"seed": s, "policy": "?", "params": {}, "kind": "timeout",
                                    "detail": f"no answer after {now - t:.0f} s (hard)",
                                    "wall": now - t, "error_type": "timeout"})
                todo.extend((s, d) for s, d, _t in inflight.values())  # rerun the others
                inflight.clear()
                _kill(ex)
                ex = ProcessPoolExecutor(max_workers=jobs, initializer=_warm)
            if progress and now - last_print > 30:
                last_print = now
                bad = sum(r["kind"] not in ("pass", "documented") for r in results)
                print(f"  ... {len(results)}/{runs} runs, {bad} failures", flush=True)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    results.sort(key=lambda r: r["seed"])
    return results


def signature(r: dict[str, Any]) -> str:
    """The failure without its numbers and ids: one line per distinct failure."""
    text = re.sub(r"'j\d+'|\bj\d+\b", "<job>", r["detail"])
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return f"{r['kind']} | {r['policy']} | {text[:160]}"


def repro_line(r: dict[str, Any]) -> str:
    params = json.dumps(r["params"], sort_keys=True)
    return (f"seed={r['seed']} policy={r['policy']} params={params}: "
            f"`python benchmarks/fuzz_campaign.py --repro {r['seed']}`")


def revision() -> str:
    """The code's git revision (with "+changes" for a dirty tree), or "unknown"."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + (" + uncommitted changes" if dirty else "")) if head else "unknown"


def summarize(results: list[dict[str, Any]], wall: float, args: argparse.Namespace) -> str:
    ok = [r for r in results if r["kind"] in ("pass", "documented")]
    bad = [r for r in results if r["kind"] not in ("pass", "documented")]
    kinds: Counter[str] = Counter()
    for r in bad:
        kinds[r["error_type"] if r["kind"] == "exception" else r["kind"]] += 1
    per_kind = {"exception": 0, "invariant": 0, "timeout": 0, "nondeterminism": 0}
    for r in bad:
        per_kind[r["kind"]] = per_kind.get(r["kind"], 0) + 1
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in bad:
        groups[signature(r)].append(r)
    det = sum(bool(r.get("determinism")) for r in results)
    policies = Counter(r["policy"] for r in results)
    lines = [
        "# Fuzz campaign",
        "",
        f"`python benchmarks/fuzz_campaign.py --runs {args.runs} --seed {args.seed} "
        f"--jobs {args.jobs} --timeout {args.timeout:g}` "
        f"({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, code {revision()})",
        "",
        "| runs | passed | exception | invariant | timeout | nondeterminism | "
        "determinism checked | targets | wall (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {len(results)} | {len(ok)} | {per_kind['exception']} | {per_kind['invariant']} | "
        f"{per_kind['timeout']} | {per_kind['nondeterminism']} | {det} | {len(policies)} | "
        f"{wall:.1f} |",
        "",
    ]
    other = {k: v for k, v in per_kind.items()
             if k not in ("exception", "invariant", "timeout", "nondeterminism") and v}
    if other:
        lines += [f"Other failures: {other}", ""]
    documented = sum(r["kind"] == "documented" for r in results)
    if documented:
        lines += [f"Documented refusals (counted as passed): {documented}", ""]
    if kinds:
        lines += ["Failures by kind: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()),
                  ""]
    if groups:
        lines += ["| runs | failure | first repro |", "|---:|---|---|"]
        for sig, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            cell = sig.replace("|", "/")
            lines.append(f"| {len(rs)} | {cell} | {repro_line(rs[0])} |")
        lines.append("")
        lines.append("First repro lines:")
        lines.append("")
        lines += [f"- {repro_line(r)}: {r['detail'][:200]}" for r in bad[:5]]
        lines.append("")
    else:
        lines += ["No failures.", ""]
    walls = sorted(r["wall"] for r in results) or [0.0]
    lines.append(f"Per-run wall: median {walls[len(walls) // 2]:.3f} s, max {walls[-1]:.3f} s; "
                 f"mean jobs per case "
                 f"{sum(r.get('jobs', 0) for r in results) / max(1, len(results)):.1f}.")
    return "\n".join(lines) + "\n"


def repro(args: argparse.Namespace) -> int:
    from fuzzing import fuzz_target, minimize, repro_code, run_case

    case, policy, params = fuzz_target(args.repro)
    if args.policy:
        policy = args.policy
        params = json.loads(args.params or "{}")
    out = run_case(case, policy, params, determinism=True, time_limit=args.timeout)
    print(f"seed={args.repro} policy={policy} params={json.dumps(params)}: {out.kind} "
          f"{out.detail}")
    if args.minimize and not out.ok:
        kind, typ = out.kind, out.error_type

        def fails(c: Any) -> bool:
            o = run_case(c, policy, params, determinism=kind == "nondeterminism",
                         time_limit=args.timeout)
            return o.kind == kind and o.error_type == typ

        case = minimize(case, fails)
        print(f"minimized to {len(case.trace.jobs)} jobs: "
              f"{run_case(case, policy, params).detail}")
    print(repro_code(case, policy, params))
    return 0 if out.ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="wall seconds per run")
    ap.add_argument("--determinism-every", type=int, default=5,
                    help="check same-seed determinism on every N-th run (0: never)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--repro", type=int, help="run one case seed and print it as a script")
    ap.add_argument("--policy", help="with --repro: another policy than the drawn one")
    ap.add_argument("--params", help="with --repro --policy: its params as JSON")
    ap.add_argument("--minimize", action="store_true", help="with --repro: shrink the case")
    args = ap.parse_args(argv)
    if args.repro is not None:
        return repro(args)
    t0 = time.perf_counter()
    results = campaign(args.runs, args.seed, args.jobs, args.timeout,
                       args.determinism_every, not args.quiet)
    wall = time.perf_counter() - t0
    text = summarize(results, wall, args)
    print(text)
    args.out.write_text(text, encoding="utf-8")
    return 1 if any(r["kind"] not in ("pass", "documented") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
