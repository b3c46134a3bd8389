"""Small inputs shared by the research tests: a trace, a topology and sweep files."""

from __future__ import annotations

import json
from pathlib import Path

from schedlab.traces import generate, write_canonical

TOPOLOGY = """\
name: tiny
nodes:
  - count: 2
    gpu_type: V100
    sockets: 2
    switches_per_socket: 2
    gpus_per_switch: 2
"""

SWEEP = """\
base: {trace: trace.csv, topology: topo.yaml, policy: fifo, seed: 0}
grid: {policy: [fifo, fifo-backfill], load_scale: [0.5, 1.0, 2.0]}
seeds: [0, 1]
"""


def write_inputs(folder: Path, jobs: int = 40, sweep: str = SWEEP) -> Path:
    """Write trace.csv (synthetic, `jobs` jobs), topo.yaml (16 GPUs) and sweep.yaml."""
    folder.mkdir(parents=True, exist_ok=True)
    trace = generate(jobs, seed=3, arrival_rate_per_hour=60.0, size_mix={1: 0.5, 2: 0.2,
                                                                           4: 0.2, 8: 0.1})
    write_canonical(trace, folder / "trace.csv")
    (folder / "topo.yaml").write_text(TOPOLOGY, encoding="utf-8")
    path = folder / "sweep.yaml"
    path.write_text(sweep, encoding="utf-8")
    return path


def summary_json(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path) -> None:
    """A non-empty file that starts with the PNG signature and has an IHDR of size > 0."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert data[12:16] == b"IHDR", path
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    assert width > 100 and height > 100, (path, width, height)
    assert len(data) > 5000, (path, len(data))
