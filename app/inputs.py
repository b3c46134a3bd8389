"""Trace and topology names of the commands beyond the loaders': `philly`, `uniform:N`.

What everyone runs after the default, as the benchmarks do: `--trace philly`, the full
Philly job table (`philly_jobs_pollux.csv` of the shared data folder, converted as the
bundled default window is), and `--topology uniform:N` (N DGX-1-like nodes of 8 GPUs: 2
sockets x 2 switches x 2 GPUs, V100 unless `uniform:N:TYPE`). Anything else goes to
`schedlab.traces.load_trace` / `schedlab.topologies.load_topology` unchanged.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from schedlab.sim.errors import InvalidTopology, InvalidTrace

__all__ = ["PHILLY_FILE", "load_named_topology", "load_named_trace", "philly_table",
           "shared_dir", "topology_shorthands", "trace_shorthands"]

PHILLY_FILE = Path("traces") / "philly" / "philly_jobs_pollux.csv"
"""The full Philly table, relative to the shared data folder."""

_UNIFORM = re.compile(r"^uniform:(\d+)(?::([A-Za-z0-9_.-]+))?$")


def trace_shorthands() -> list[str]:
    """Trace names the commands take besides `schedlab.traces.bundled_traces()`."""
    return ["philly"]


def topology_shorthands() -> list[str]:
    """Topology name forms the commands take besides the presets."""
    return ["uniform:N", "uniform:N:TYPE"]


def shared_dir() -> Path:
    """The shared data folder: `$SCHEDLAB_SHARED`, else `shared/` beside the checkout."""
    env = os.environ.get("SCHEDLAB_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared"


def philly_table() -> Path:
    """The full Philly table's path, or one line saying where it was looked for and how.

    Raises:
        InvalidTrace: The file is not there.
    """
    path = shared_dir() / PHILLY_FILE
    if not path.is_file():
        raise InvalidTrace(
            f"trace 'philly': the full Philly table is not at {path}; put the shared data "
            "folder beside the checkout (../shared) or set SCHEDLAB_SHARED to it "
            f"(it needs {PHILLY_FILE.as_posix()}; see docs/traces.md), or run the bundled "
            "3,000-job window: --trace default")
    return path


def load_named_trace(source: str, **options: Any) -> Any:
    """`philly` (the full table, named `philly` in results) or whatever `load_trace` takes."""
    from schedlab.traces import load_trace

    if isinstance(source, str) and source.strip() == "philly":
        if options.get("trace_format") not in (None, "canonical"):
            raise InvalidTrace("trace 'philly' is converted to the canonical schema; "
                               "--trace-format applies to files only")
        if options.get("load") is not None:
            raise InvalidTrace("load= applies to the calibrated generators, not to 'philly'; "
                               "use load_scale")
        from schedlab.traces.canonical import frame_to_trace
        from schedlab.traces.make_default import convert_philly

        path = philly_table()
        # source 'philly': results record the name, which loads the same trace again
        return frame_to_trace(convert_philly(path), label=path.name, name="philly",
                              source="philly")
    return load_trace(source, **options)


def load_named_topology(source: str) -> Any:
    """`uniform:N[:TYPE]` (N 8-GPU nodes) or whatever `load_topology` takes."""
    from schedlab.topologies import load_topology

    m = _UNIFORM.match(source.strip()) if isinstance(source, str) else None
    if m is None:
        if isinstance(source, str) and source.strip().startswith("uniform:"):
            raise InvalidTopology(
                f"topology {source!r}: expected uniform:N or uniform:N:TYPE (N nodes >= 1 "
                "of 8 GPUs, TYPE a GPU type, V100 by default), e.g. uniform:56")
        return load_topology(source)
    from schedlab.topologies.build import uniform_topology

    n = int(m.group(1))
    if n < 1:
        raise InvalidTopology(f"topology {source!r}: N = {n}; allowed: uniform:N with N >= 1 nodes")
    name = source.strip()
    topo = uniform_topology(n, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            gpu_type=m.group(2) or "V100", name=name)
    topo.source = name  # results record the name, which builds the same cluster again
    return topo
