"""Hypothesis: jobs of a table model do exactly their work, never faster than the table."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace

TOPO = uniform_topology(2, gpus_per_switch=4, name="two-by-four")
SIZES = (1, 2, 4)
MODELS = ("m0", "m1", "m2")

tables = st.fixed_dictionaries({
    (m, k, nodes): st.floats(0.5, 50.0) for m in MODELS for k in SIZES
    for nodes in ((1,) if k == 1 else (1, 2))})
jobs = st.lists(st.tuples(st.floats(0, 500), st.sampled_from(SIZES), st.sampled_from(MODELS),
                          st.floats(10, 5000)), min_size=1, max_size=12)


def write_table(path: Path, table: dict[tuple[str, int, int], float]) -> None:
    rows = ["model,gpu_type,num_gpus,nodes,throughput"]
    rows += [f"{m},V100,{k},{n},{thr!r}" for (m, k, n), thr in table.items()]
    path.write_text("\n".join(rows) + "\n")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables, specs=jobs, policy=st.sampled_from(["fifo", "tiresias-las", "srtf"]))
def test_work_conserved_and_never_above_table(tmp_path: Path, table, specs, policy) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "t.csv"
    write_table(p, table)
    trace = Trace("h", tuple(JobSpec(f"j{i}", t, k, math.nan, model=m, num_steps=w)
                             for i, (t, k, m, w) in enumerate(specs)))
    res = Simulation(trace, TOPO, policy, params={"perf_model": str(p)}).run()
    df = res.jobs.set_index("job_id")
    for i, (_, k, m, w) in enumerate(specs):
        row = df.loc[f"j{i}"]
        assert row.status == "completed"
        best = max(thr for (mm, kk, _), thr in table.items() if (mm, kk) == (m, k))
        # GPU time held is at least the work at the table's best throughput for its size
        assert row.run_time >= w / best * (1 - 1e-9)
        # the reference is one node: duration = work / that throughput
        assert row.duration == w / table[(m, k, 1)] or math.isclose(
            row.duration, w / table[(m, k, 1)], rel_tol=1e-12)
        if policy == "fifo":  # never stopped, placed on one node: exactly work / thr
            assert math.isclose(row.end_time - row.start_time, w / table[(m, k, 1)],
                                rel_tol=1e-9)
