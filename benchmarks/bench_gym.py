"""Stepping cost of the Gym environment `schedlab/Cluster-v0` on the bundled default trace.

One episode is the whole default trace (3,000 Philly jobs on the default 288-GPU
topology), played by a seeded random agent (uniform over the valid actions) and by the
fifo-backfill advisor; beside them, the plain engine run of fifo-backfill on the same
trace, for the cost the engine has anyway. Steps per second count `env.step` calls
(agent included, result building excluded), in wall time and in CPU time of this
process (on a shared machine the wall clock also counts other processes' turns).

    python benchmarks/bench_gym.py [--repeat 3] [--k 16]

Target: at least 5,000 steps/s. Each number is the best of `--repeat` episodes.
"""

from __future__ import annotations

import argparse
import time

from schedlab.app.rl import ClusterEnv, PolicyAgent, RandomAgent
from schedlab.sim.engine import Simulation


def episode(env: ClusterEnv, agent, options: dict) -> tuple[int, float, float]:
    """Steps, wall seconds and CPU seconds of one episode (reset to termination)."""
    opts = {**getattr(agent, "reset_options", {}), **options}
    w0, c0 = time.perf_counter(), time.process_time()
    obs, info = env.reset(seed=0, options=opts)
    steps = 0
    while True:
        obs, _, terminated, truncated, info = env.step(agent(obs, info))
        steps += 1
        if terminated or truncated:
            break
    return steps, time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--k", type=int, default=16)
    args = ap.parse_args()
    env = ClusterEnv("default", "default", window_jobs=3000, k=args.k)
    print(f"default trace, whole (3,000 jobs), K={args.k}; best of {args.repeat}")
    print(f"{'agent':<22}{'steps':>7}{'wall s':>9}{'cpu s':>8}{'steps/s wall':>14}"
          f"{'steps/s cpu':>13}")
    for name, make in (("random", lambda: RandomAgent(0)),
                       ("fifo-backfill advisor", lambda: PolicyAgent("fifo-backfill"))):
        runs = [episode(env, make(), {"start": 0}) for _ in range(args.repeat)]
        steps = runs[0][0]
        wall = min(r[1] for r in runs)
        cpu = min(r[2] for r in runs)
        print(f"{name:<22}{steps:>7}{wall:>9.2f}{cpu:>8.2f}{steps / wall:>14,.0f}"
              f"{steps / cpu:>13,.0f}")
    walls, cpus = [], []
    for _ in range(args.repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        Simulation("default", "default", "fifo-backfill", seed=0).run()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    print(f"{'engine alone (run)':<22}{'':>7}{min(walls):>9.2f}{min(cpus):>8.2f}"
          "   (fifo-backfill, results included)")


if __name__ == "__main__":
    main()
