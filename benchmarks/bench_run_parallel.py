"""Wall time of the default `schedlab run` (20 policies) sequential vs on a process pool.

Runs `schedlab run --quiet -j 1` and `-j N` alternately (so a change of the machine's load
hits both alike), ROUNDS times, with the monotonic clock, and prints each wall time, the
1-minute load average beside it, and the ratio of the medians. A pure-CPU control (the
same busy loop split over N processes) shows what the machine itself gives at that load:
on a busy shared machine the pool cannot do better than the control. With psutil (the
`dask` extra), a CPU view follows: the CPU seconds of the main process and of each pool
process, from which the wall time on an otherwise idle machine is estimated as the main
process's CPU plus the busiest worker's (the main process only waits while they run).

    python benchmarks/bench_run_parallel.py [--rounds 2] [-j 2] [--max-jobs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _burn(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def control(jobs: int, n: int = 30_000_000) -> float:
    """Wall ratio of a busy loop split over `jobs` processes to the same loop in one."""
    t = time.monotonic()
    _burn(n)
    one = time.monotonic() - t
    t = time.monotonic()
    with ProcessPoolExecutor(jobs) as pool:
        list(pool.map(_burn, [n // jobs] * jobs))
    return (time.monotonic() - t) / one


def _command(jobs: int, out: Path, extra: list[str]) -> list[str]:
    exe = Path(sys.executable).with_name("schedlab")
    return [str(exe) if exe.exists() else "schedlab", "run", "--quiet", "-j", str(jobs),
            "--out", str(out), *extra]


def cpu_view(jobs: int, out: Path, extra: list[str]) -> tuple[float, list[float]]:
    """CPU seconds of the main process and of each other process of one run (psutil)."""
    import psutil

    proc = psutil.Popen(_command(jobs, out, extra), stdout=subprocess.DEVNULL)
    seen: dict[int, float] = {}
    while proc.poll() is None:
        try:
            procs = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            break
        for q in procs:
            try:
                t = q.cpu_times()
                seen[q.pid] = t.user + t.system
            except psutil.Error:
                pass
        time.sleep(0.05)
    main_cpu = seen.pop(proc.pid, 0.0)
    return main_cpu, sorted(seen.values(), reverse=True)


def timed_run(jobs: int, out: Path, extra: list[str]) -> float:
    """Wall seconds of one `schedlab run --quiet -j JOBS` into OUT."""
    cmd = _command(jobs, out, extra)
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def main() -> None:
    """Alternate -j 1 and -j N; print every wall time, the load, and the median ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--max-jobs", type=int, default=None)
    args = ap.parse_args()
    extra = [] if args.max_jobs is None else ["--max-jobs", str(args.max_jobs)]
    walls: dict[int, list[float]] = {1: [], args.jobs: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for j in (1, args.jobs):
                w = timed_run(j, Path(tmp) / f"j{j}", extra)
                walls[j].append(w)
                print(f"round {r + 1}  -j {j}: {w:6.1f} s wall  (load {os.getloadavg()[0]:.1f})",
                      flush=True)
        seq, par = statistics.median(walls[1]), statistics.median(walls[args.jobs])
        print(f"median -j 1: {seq:.1f} s, -j {args.jobs}: {par:.1f} s, ratio {par / seq:.2f}")
        try:
            import psutil  # noqa: F401
        except ImportError:
            psutil = None
        if psutil is not None:
            one, _ = cpu_view(1, Path(tmp) / "c1", extra)
            main_cpu, others = cpu_view(args.jobs, Path(tmp) / "cj", extra)
            idle = main_cpu + (others[0] if others else 0.0)
            print(f"CPU view: -j 1 {one:.1f} CPU-s; -j {args.jobs} main {main_cpu:.1f} + "
                  f"pool processes {', '.join(f'{c:.1f}' for c in others)} CPU-s; "
                  f"idle-machine estimate {idle:.1f} s vs {one:.1f} s: ratio {idle / one:.2f}")
    print(f"pure-CPU control at this load: ratio {control(args.jobs):.2f} "
          f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
