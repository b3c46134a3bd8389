"""Jobs that name a model run at the table's throughput: exact end times by hand."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Pin, make_trace

from schedlab.policies.base import Policy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec, Start
from schedlab.topologies.build import uniform_topology

# two nodes of 4 V100: GPUs 0-3 on node 0, 4-7 on node 1
TOPO = uniform_topology(2, gpus_per_switch=4, name="two-by-four")

TABLE = """model,gpu_type,num_gpus,nodes,throughput
m,V100,1,,10
m,V100,2,1,18
m,V100,2,2,12
m,V100,4,1,30
m,V100,4,2,20
"""


@pytest.fixture
def table(tmp_path: Path) -> Path:
    p = tmp_path / "m.csv"
    p.write_text(TABLE)
    return p


def run(trace, where, params):  # type: ignore[no-untyped-def]
    res = Simulation(trace, TOPO, Pin(where), params=params).run()
    return res.jobs.set_index("job_id").end_time.to_dict()


@pytest.mark.parametrize(("gpus", "end"), [
    ((0,), 1800 / 10),              # 1 GPU: 10 steps/s
    ((0, 1), 1800 / 18),            # 2 GPUs on one node
    ((0, 4), 1800 / 12),            # 2 GPUs over two nodes
    ((0, 1, 2, 3), 1800 / 30),      # 4 consolidated
    ((0, 1, 4, 5), 1800 / 20),      # 4 spread
])
def test_table_job_ends_at_work_over_throughput(table: Path, gpus, end) -> None:  # type: ignore[no-untyped-def]
    job = JobSpec("j", 0.0, len(gpus), math.nan, model="m", num_steps=1800)
    got = run(make_trace(job), {"j": gpus}, {"perf_model": f"table={table}",
                                             "restore_overhead": 0})
    assert got["j"] == pytest.approx(end, rel=1e-12)


def test_samples_convert_by_batch_size(table: Path) -> None:
    job = JobSpec("j", 0.0, 1, math.nan, model="m", samples=1800 * 32, batch_size=32)
    assert run(make_trace(job), {"j": (0,)}, {"perf_model": str(table)})["j"] == \
        pytest.approx(180.0)


def test_duration_wins_over_work(table: Path) -> None:
    # duration is the run time at the reference (2 GPUs on one node here): 100 s there,
    # so 1800 steps of work, which take 150 s over two nodes
    job = JobSpec("j", 0.0, 2, 100.0, model="m", num_steps=99)
    assert run(make_trace(job), {"j": (0, 4)}, {"perf_model": str(table)})["j"] == \
        pytest.approx(150.0)


def test_trace_without_models_ignores_perf_model(table: Path) -> None:
    plain = make_trace(("j", 0.0, 2, 100.0))
    assert run(plain, {"j": (0, 1)}, {"perf_model": str(table)})["j"] == 100.0


def test_unknown_model_names_job_and_known_models(table: Path) -> None:
    job = JobSpec("j7", 0.0, 1, math.nan, model="nope", num_steps=10)
    with pytest.raises(InvalidParameter, match=r"j7.*'nope'.*known: m"):
        Simulation(make_trace(job), TOPO, Pin({}), params={"perf_model": str(table)})


def test_model_without_perf_model_is_one_clear_error() -> None:
    job = JobSpec("j", 0.0, 1, math.nan, model="m", num_steps=10)
    with pytest.raises(InvalidParameter, match="no performance model"):
        Simulation(make_trace(job), TOPO, Pin({}))


def _gavel_file(tmp_path: Path) -> Path:
    a, b = "('A', 1)", "('B', 1)"
    data = {
        "v100": {a: {"null": 4.0, b: [3.0, 1.5], a: [2.0, 2.0]},
                 b: {"null": 2.0, a: [1.5, 3.0], b: [1.0, 1.0]}},
        "k80": {a: {"null": 1.0}, b: {"null": 0.5}},
    }
    p = tmp_path / "simulation_throughputs.json"
    p.write_text(json.dumps(data))
    return p


class PackSecond(Policy):
    """Starts `a` on GPU 0, then `b` packed with it on the same GPU."""

    name = "pack-second"

    def schedule(self, ctx) -> Iterator[Start]:  # type: ignore[no-untyped-def]
        for job in list(ctx.pending()):
            yield Start(job.job_id, (0,), share="pack" if job.job_id == "b" else "")


def test_gavel_packed_pair_runs_at_pair_throughputs(tmp_path: Path) -> None:
    # a alone 4 steps/s, b alone 2; packed: a 3, b 1.5. a: 600 steps, b: 300 steps, both
    # at t=0 -> packed from 0: a ends at 600/3 = 200 s, b has done 300 steps at 1.5/s by
    # 200 s: it ends at 200 s too
    p = _gavel_file(tmp_path)
    jobs = make_trace(JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=600),
                      JobSpec("b", 0.0, 1, math.nan, model="B", num_steps=450))
    res = Simulation(jobs, uniform_topology(1, name="one"), PackSecond(),
                     params={"perf_model": f"gavel={p}", "restore_overhead": 0}).run()
    ends = res.jobs.set_index("job_id").end_time.to_dict()
    assert ends["a"] == pytest.approx(200.0)
    # b: 300 steps packed by 200 s, then 150 alone at 2/s: 75 s more
    assert ends["b"] == pytest.approx(275.0)


def test_gavel_type_from_table(tmp_path: Path) -> None:
    p = _gavel_file(tmp_path)
    topo = uniform_topology(1, gpu_type="K80", name="k80")
    job = JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=100)
    res = Simulation(make_trace(job), topo, Pin({"a": (0,)}),
                     params={"perf_model": f"gavel={p}"}).run()
    assert res.jobs.end_time.iloc[0] == pytest.approx(100.0)  # 1 step/s on a K80


def test_model_with_duration_and_no_perf_model_runs_on_duration() -> None:
    job = JobSpec("j", 0.0, 1, 50.0, model="m", num_steps=10)
    assert run(make_trace(job), {"j": (0,)}, {})["j"] == 50.0


def _v100_and_k80():  # type: ignore[no-untyped-def]
    from schedlab.sim.model import Level
    from schedlab.topologies.native import node_cell
    from schedlab.topologies.tree import CellSpec, Topology
    nodes = [node_cell("k0", {"gpu_type": "K80"}, 1, 1, 1),
             node_cell("v0", {"gpu_type": "V100"}, 1, 1, 1)]
    return Topology("het", CellSpec(Level.CLUSTER, "het", nodes))


def test_placers_see_the_models_type_speeds(tmp_path: Path) -> None:
    # A runs 4x faster on the V100: the placer puts it there (not on the first node, a
    # K80), through the gpu_speeds the run derives from the model; 100 steps at 4/s
    p = _gavel_file(tmp_path)
    job = JobSpec("a", 0.0, 1, math.nan, model="A", num_steps=100)
    res = Simulation(make_trace(job), _v100_and_k80(), "fifo",
                     params={"perf_model": f"gavel={p}"}).run()
    assert res.jobs.end_time.iloc[0] == pytest.approx(25.0)
