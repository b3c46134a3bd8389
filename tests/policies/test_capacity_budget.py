"""capacity: YARN's round budget can forbid every preemption; the run then says so once."""

from __future__ import annotations

from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology

TOPO = uniform_topology(1, sockets=2, switches_per_socket=2, gpus_per_switch=2)  # 8 GPUs
# queue a fills the cluster with long jobs; queue b (guaranteed half) sends one short job
JOBS = [*(JobSpec(f"a{i}", 0.0, 1, 1000.0, vc="a") for i in range(8)),
        JobSpec("b", 10.0, 1, 10.0, vc="b")]


def test_a_budget_below_one_gpu_preempts_nothing_and_warns_once() -> None:
    r = Simulation(make_trace(*JOBS), TOPO, "capacity").run()
    assert r.summary["preemptions"] == 0
    assert r.jobs.set_index("job_id")["start_time"]["b"] == 1000.0  # waits for a job to end
    said = [w for w in r.summary["warnings"] if "can ever be preempted" in w]
    assert len(said) == 1
    assert "0.125 of the cluster (8 GPUs)" in said[0]
    assert "total_preemption_per_round=0.1" in said[0]


def test_a_budget_of_one_gpu_preempts_and_says_nothing() -> None:
    r = Simulation(make_trace(*JOBS), TOPO, "capacity",
                   params={"total_preemption_per_round": 0.125}).run()
    assert r.summary["preemptions"] == 1
    assert r.jobs.set_index("job_id")["start_time"]["b"] < 100.0
    assert not [w for w in r.summary["warnings"] if "preempted" in w]


def test_no_warning_without_preemption() -> None:
    r = Simulation(make_trace(*JOBS), TOPO, "capacity", params={"preempt": False}).run()
    assert not [w for w in r.summary["warnings"] if "preempted" in w]
