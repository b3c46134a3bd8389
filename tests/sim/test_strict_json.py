"""Every JSON file a run or sweep writes is strict JSON: a metric without a value is null."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import make_trace

from schedlab.app.check import RunRecord, collect_runs, compare_run, make_baseline
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.sim.writing import json_text, null_non_finite
from schedlab.topologies.build import uniform_topology


def _strict(text: str) -> object:
    def no_constant(name: str) -> object:
        raise ValueError(f"bare {name} in JSON")
    return json.loads(text, parse_constant=no_constant)


def test_a_run_whose_only_job_is_rejected_writes_null_not_nan(tmp_path: Path) -> None:
    topo = uniform_topology(1, gpus_per_switch=2)
    result = Simulation(make_trace(JobSpec("big", 0.0, 8, 10.0)), topo, "gandiva").run()
    folder = result.write(tmp_path / "run")
    for name in ("summary.json", "config.json"):
        _strict((folder / name).read_text(encoding="utf-8"))
    summary = _strict((folder / "summary.json").read_text(encoding="utf-8"))
    assert isinstance(summary, dict)
    assert summary["utilization_mean"] is None and summary["fragmentation_mean"] is None
    assert summary["jct_mean"] is None
    reason = [w for w in summary["warnings"] if "null in summary.json" in w]
    assert len(reason) == 1 and "utilization_mean" in reason[0] and "no job ever started" \
        in reason[0]
    # a baseline of such a run holds null, and the same run checks clean against it
    runs = collect_runs(tmp_path)
    base = make_baseline(runs)
    _strict(json_text(base))
    rows = compare_run("run", base["runs"]["run"], RunRecord("run", summary, {}), base)
    assert not [r for r in rows if r.failed]


def test_null_non_finite_reaches_numpy_and_nested_values() -> None:
    import numpy as np

    got = null_non_finite({"a": [float("inf"), np.float32("nan"), 1.5], "b": (np.nan,)})
    assert got == {"a": [None, None, 1.5], "b": [None]}
    assert json_text({"x": float("nan")}, indent=None) == '{"x": null}'
