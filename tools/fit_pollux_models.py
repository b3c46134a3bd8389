"""Fit a `pollux-fit` model file from Pollux's profiles (petuum/adaptdl simulator/traces).

For each profile folder: the seven step-time parameters fitted to its measured step times
(`fit_perf_params`, Pollux's fit), and the gradient statistics of its validation file at
the initial batch size, averaged over at most `--segments` equal groups of epochs (the
first group from 0). Work = the profile's progress at its last epoch x the initial batch
size, as the `pollux` backend counts it; restart cost 30 s (Pollux's rescale time).

    python tools/fit_pollux_models.py PATH/simulator/traces -o examples/pollux-models.yaml
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import yaml

from schedlab.sim.perf.pollux import RESCALE_TIME
from schedlab.sim.perf.pollux_goodput import fit_perf_params
from schedlab.sim.perf.pollux_profiles import PolluxProfile, load_profile


def fit_entry(p: PolluxProfile, segments: int) -> dict[str, object]:
    """One model's entry of the file."""
    nodes, replicas, bsz, accum, optim = [], [], [], [], []
    for key, (local, times) in p.measured.items():
        for b, (step, sync) in zip(local, times, strict=True):
            nodes.append(len(key))
            replicas.append(sum(key))
            bsz.append(float(b))
            accum.append(float(step - sync))
            optim.append(float(step))
    perf = fit_perf_params(np.array(nodes), np.array(replicas), np.array(bsz),
                           np.array(accum), np.array(optim))
    curve = p.curves[0]  # the initial batch size's validation file
    epochs = p.max_epochs
    size = max(1, math.ceil(epochs / segments))
    grads = []
    for first in range(0, epochs, size):
        rows = slice(first, min(epochs, first + size))
        grads.append({"from": round(p.progress(first) * p.init_batch_size, 3),
                      "sqr": float(np.mean(curve.grad_sqr[rows])),
                      "var": float(np.mean(curve.grad_var[rows]))})
    return {
        "perf_params": {k: float(f"{v:.6g}") for k, v in perf.__dict__.items()},
        "gradient": [{k: float(f"{v:.6g}") for k, v in g.items()} for g in grads],
        "init_batch_size": p.init_batch_size,
        "max_batch_size": p.max_batch_size,
        "local_bsz_bounds": [p.min_local_bsz, p.max_local_bsz],
        "accumulation": True,
        "work": float(f"{p.progress(epochs) * p.init_batch_size:.6g}"),
        "restart_cost": RESCALE_TIME,
    }


def main() -> None:
    """Write the file for every profile folder under the given path."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", type=Path, help="Pollux's simulator/traces folder")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--segments", type=int, default=8)
    args = ap.parse_args()
    dirs = sorted(d for d in args.traces.iterdir() if (d / "placements.csv").is_file())
    models = {d.name: fit_entry(load_profile(d), args.segments) for d in dirs}
    head = ("# Pollux's analytic goodput model per application, fitted by schedlab's\n"
            "# tools/fit_pollux_models.py to the profiles of petuum/adaptdl\n"
            "# (osdi21-artifact, simulator/traces; Apache-2.0). Backend: pollux-fit.\n")
    args.out.write_text(head + yaml.safe_dump({"models": models}, sort_keys=False))
    print(f"{len(models)} models -> {args.out}")


if __name__ == "__main__":
    main()
