"""Hash one run's jobs, events and timeline frames and its summary, to check a speed-up.

    python benchmarks/hash_run.py --policy srtf [--trace philly] [--topology uniform:56]
        [--param KEY=VALUE ...]

Prints one JSON line: a SHA-256 of each frame (values, column names and dtypes) and of
the summary (sorted keys), with the run's CPU seconds. Two commits that make the same
decisions print the same hashes; run it on both and compare the lines (`cpu_s` aside).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from typing import Any

import pandas as pd
from profile_run import load, parse_params, topology

VOLATILE = frozenset({"wall_seconds"})  # summary keys that differ between identical runs


def frame_hash(df: pd.DataFrame) -> str:
    """SHA-256 of a frame's columns, dtypes and values (row order kept)."""
    h = hashlib.sha256()
    h.update(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())
    return h.hexdigest()[:16]


def summary_hash(summary: dict[str, Any]) -> str:
    """SHA-256 of the summary, keys sorted, floats by repr (exact)."""
    text = json.dumps({k: repr(v) for k, v in sorted(summary.items()) if k not in VOLATILE})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--trace", default="philly")
    ap.add_argument("--topology", default="philly")
    ap.add_argument("--param", action="append", default=[])
    args = ap.parse_args()

    from schedlab.sim.engine import Simulation
    params = parse_params(args.param)
    topo = topology(args.topology)
    trace = load(args.trace, topo, params)
    sim = Simulation(trace, topo, args.policy, params=params)
    c0 = time.process_time()
    result = sim.run()
    cpu = time.process_time() - c0
    print(json.dumps({
        "policy": args.policy, "trace": args.trace, "topology": args.topology,
        "params": params, "jobs": frame_hash(result.jobs), "events": frame_hash(result.events),
        "timeline": frame_hash(result.timeline), "summary": summary_hash(result.summary),
        "cpu_s": round(cpu, 2),
    }))


if __name__ == "__main__":
    main()
