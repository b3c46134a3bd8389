"""The `target_util` and `scale_interval` columns (utilization-driven elastic jobs, issue
16): parsing, every rule with its exact message, round trips, `trace inspect`, the
bundled example."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedlab.policies.conformance import check_invariants
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.traces import load_trace, read_canonical, write_canonical
from schedlab.traces.inspect import format_stats, trace_stats
from schedlab.traces.synthetic import from_records

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elastic.csv"


def write(tmp_path: Path, header: str, *rows: str) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


def error_of(p: Path) -> str:
    with pytest.raises(InvalidTrace) as e:
        load_trace(p)
    return str(e.value)


def test_values_and_defaults(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,min_gpus,max_gpus,target_util,"
                        "scale_interval",
              "a,0,2,10,1,4,0.5,30", "b,0,2,10,1,4,0.7,", "c,0,2,10,1,4,,", "d,0,2,10,,,,60")
    a, b, c, d = load_trace(p).jobs
    assert (a.target_util, a.scale_interval) == (0.5, 30.0)
    assert (b.target_util, b.scale_interval) == (0.7, 60.0)
    assert (c.target_util, c.scale_interval) == (None, 60.0)
    assert d == JobSpec("d", 0.0, 2, 10.0)  # the default interval alone is no setting


@pytest.mark.parametrize(("cols", "vals", "column", "value", "rule"), [
    ("min_gpus,target_util", "1,0", "target_util", "0", "is not a number in (0, 1]"),
    ("min_gpus,target_util", "1,1.5", "target_util", "1.5", "is not a number in (0, 1]"),
    ("min_gpus,target_util", "1,x", "target_util", "x", "is not a number in (0, 1]"),
    ("min_gpus,target_util,scale_interval", "1,0.5,0", "scale_interval", "0",
     "is not a number of seconds > 0 and <= 1e12"),
    ("target_util", "0.5", "target_util", "0.5",
     "is set but the job has no elastic range; give min_gpus and/or max_gpus (a "
     "utilization-driven job is resized within them)"),
    ("scale_interval", "30", "scale_interval", "30",
     "is set but target_util is empty; scale_interval applies only to utilization-driven "
     "jobs (target_util in (0, 1])"),
])
def test_bad_cell(tmp_path: Path, cols: str, vals: str, column: str, value: str,
                  rule: str) -> None:
    p = write(tmp_path, f"job_id,submit_time,num_gpus,duration,{cols}",
              "a,0,2,10" + "," * cols.count(",") + ",", f"b,0,2,10,{vals}")
    msg = error_of(p)
    assert msg.startswith(f"t.csv, row 2 (line 3), column {column}: value '{value}' {rule}"), msg


def test_target_util_needs_gpus(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,max_gpus,target_util",
              "a,0,0,10,0,0.5")
    assert error_of(p).startswith(
        "t.csv, row 1 (line 2), column target_util: value '0.5' is set on a job with "
        "num_gpus 0; utilization-driven scaling needs num_gpus >= 1")


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_round_trip_csv_and_parquet(tmp_path: Path, suffix: str) -> None:
    t = from_records([
        {"job_id": "e", "submit_time": 0, "num_gpus": 2, "duration": 100, "min_gpus": 1,
         "max_gpus": 8, "gpu_util": 0.9, "target_util": 0.5, "scale_interval": 45},
        {"job_id": "f", "submit_time": 1, "num_gpus": 2, "duration": 100, "max_gpus": 4,
         "target_util": 0.25},
        {"job_id": "plain", "submit_time": 3, "num_gpus": 2, "duration": 30},
    ])
    out = write_canonical(t, tmp_path / f"out.{suffix}")
    back = read_canonical(out)
    assert back.jobs == t.jobs
    assert [(j.target_util, j.scale_interval) for j in back.jobs] == [
        (0.5, 45.0), (0.25, 60.0), (None, 60.0)]


def test_writer_leaves_the_columns_out_when_unused(tmp_path: Path) -> None:
    t = from_records([{"job_id": "a", "submit_time": 0, "num_gpus": 1, "duration": 5}])
    text = write_canonical(t, tmp_path / "o.csv").read_text()
    assert "target_util" not in text and "scale_interval" not in text


def test_inspect_counts_elastic_and_utilization_driven_jobs() -> None:
    s = trace_stats(load_trace(EXAMPLE))
    assert (s.elastic_jobs, s.util_scaled_jobs) == (4, 3)
    assert "elastic jobs: 4 (3 scale on utilization: target_util)" in format_stats(s)
    plain = trace_stats(from_records([{"job_id": "a", "submit_time": 0, "num_gpus": 1,
                                       "duration": 5}]))
    assert "elastic jobs" not in format_stats(plain)


@pytest.mark.parametrize("policy", ["fifo-elastic", "gandiva"])
def test_the_example_runs(policy: str) -> None:
    # on one DGX-1: pytorch-elastic (0.9 -> 0.5) steps 2 -> 3 -> 4 at 60 and 120;
    # at-target (0.4 <= 0.5) never grows past its nominal 2
    from schedlab.topologies import load_topology

    topo = load_topology("dgx1-v100")
    trace = load_trace(EXAMPLE)
    r = Simulation(trace, topo, policy).run()
    check_invariants(r, topo, trace)
    assert set(r.jobs.status) == {"completed"}
    ev = r.events[r.events.kind.isin(["start", "resize"])]
    sizes = {j: [int(c.split(":")[1]) for c in g.cells] for j, g in ev.groupby("job_id")}
    assert sizes["pytorch-elastic"][:3] == [2, 3, 4]
    assert list(ev[ev.job_id == "pytorch-elastic"].time[:3]) == [0.0, 60.0, 120.0]
    assert max(sizes["at-target"]) == 2
    if policy == "fifo-elastic":  # the rigid arrival at 1200 takes GPUs back at once
        assert sizes["pytorch-elastic"][3] == 1
