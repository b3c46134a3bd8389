"""Shared fixtures: a tiny DGX-like topology and helpers to build traces inline."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import settings

from schedlab.policies.base import Policy
from schedlab.sim.model import JobSpec, Start
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace

# CI replays the same examples every run (a red CI always means a real change); locally
# each run draws new ones. Long fuzz campaigns live in benchmarks/, not here.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "traces" / "data" / "samples"
"""Bundled trace samples (traces/data/samples/README.md: sources and licenses)."""
TOPOLOGY_SAMPLES = ROOT / "topologies" / "data" / "samples"
"""Bundled topology samples: `hived-configs/` (verbatim copies of the shared folder's)."""


def shared_or_sample(relative: str, sample: str) -> tuple[Path, bool]:
    """`SHARED/relative` when it is there, else the bundled `SAMPLES/sample`.

    The flag is True for the full shared file, so a test asserts the numbers of the file
    it got: a clone alone still runs every reader test, on the sample.
    """
    full = SHARED / relative
    if full.is_file():
        return full, True
    return SAMPLES / sample, False


def assert_same_run(a: Any, b: Any) -> None:
    """Two results are the same run: every table exactly, the summary but its wall time."""
    for name in ("jobs", "events", "timeline", "nodes"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    sa = {k: v for k, v in a.summary.items() if k != "wall_seconds"}
    sb = {k: v for k, v in b.summary.items() if k != "wall_seconds"}
    assert sa == sb


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The cycles a depth-first walk of an import graph (module -> imports) meets."""
    color: dict[str, int] = {}
    found: list[list[str]] = []

    def dfs(m: str, stack: list[str]) -> None:
        color[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if color.get(d, 0) == 0:
                dfs(d, stack)
            elif color[d] == 1:
                found.append(stack[stack.index(d):] + [d])
        stack.pop()
        color[m] = 2

    for m in sorted(graph):
        if color.get(m, 0) == 0:
            dfs(m, [])
    return found


TWO_MODEL_TABLE = """model,gpu_type,num_gpus,throughput
a,V100,1,10
a,V100,2,19
a,V100,3,27
a,V100,4,34
b,V100,1,10
b,V100,2,12
b,V100,3,13
b,V100,4,13.5
"""
"""A `table` perf model of two jobs: `a` scales well, `b` hardly (optimus and pollux tests)."""


class Pin(Policy):
    """Starts each pending job on the GPUs named for it (a test's placement)."""

    name = "pin"

    def __init__(self, where: dict[str, tuple[int, ...]]) -> None:
        super().__init__()
        self.where = where

    def schedule(self, ctx) -> Iterator[Start]:  # type: ignore[no-untyped-def]
        for job in list(ctx.pending()):
            yield Start(job.job_id, self.where[job.job_id])


def crosscheck_module(name: str) -> Any:
    """Import benchmarks/crosscheck/NAME.py (the folder is not a package; its modules
    import `_common` beside them)."""
    folder = ROOT / "benchmarks" / "crosscheck"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"crosscheck_{name}", folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_trace(*jobs: JobSpec | tuple, name: str = "inline") -> Trace:
    """A Trace from JobSpecs or (job_id, submit, gpus, duration) tuples."""
    specs = tuple(j if isinstance(j, JobSpec) else JobSpec(*j) for j in jobs)
    return Trace(name, specs)


@pytest.fixture
def dgx2():
    """Two DGX-1-like nodes: 2 sockets x 2 switches x 2 GPUs each (16 GPUs)."""
    return uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            name="dgx2")


@pytest.fixture
def one_gpu():
    """A single node with a single GPU."""
    return uniform_topology(1, name="one")


@pytest.fixture
def shared_dir() -> Path:
    """The shared/ folder next to the repo (skips when it is not there or empty)."""
    if not SHARED.is_dir() or not any(SHARED.iterdir()):
        pytest.skip("shared/ folder not available")
    return SHARED


@pytest.fixture
def hived_root() -> Path:
    """A folder whose `hived-configs/` holds the HiveD example configs (bundled copies)."""
    return TOPOLOGY_SAMPLES
