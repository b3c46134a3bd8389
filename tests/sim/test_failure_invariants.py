"""Invariants of the failure layer over random small runs (hypothesis).

Work is conserved (a completed job's productive time is its duration; productive plus
lost time is its wall time), no GPU is held by two jobs or on a failed node, and a job
restarts from its last checkpoint, which never moves back.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.sim.engine import Run, Simulation
from schedlab.sim.failure_models import Component, FailureModel, Maintenance, Software
from schedlab.sim.model import JobSpec
from schedlab.sim.registry import FAILURE_MODELS
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace

FLAT = "switch=1,socket=1,node=1,rack=1,cluster=1"  # every placement at full speed


@st.composite
def cases(draw):
    nodes = draw(st.integers(2, 4))
    jobs = tuple(JobSpec(f"j{i}", draw(st.floats(0, 300)), draw(st.sampled_from((1, 2, 4))),
                         draw(st.floats(50, 800)))
                 for i in range(draw(st.integers(1, 5))))
    model = FailureModel("h", (
        Component("gpu", "gpu", per_day=draw(st.floats(0, 20)),
                  shape=draw(st.sampled_from((1.0, 0.7))),
                  repair_s=draw(st.floats(10, 500)), detect_s=draw(st.floats(0, 30))),
        Component("psu", "node", per_day=draw(st.floats(0, 10)), repair_s=200.0,
                  correlated=draw(st.floats(0, 1)), domain="rack"),
    ), (Software("bug", per_job_hour=draw(st.floats(0, 5))),),
        (Maintenance(draw(st.floats(0, 500)), 100.0, "node0",
                     drain_s=draw(st.sampled_from((0.0, 200.0)))),))
    params = {"checkpoint_interval": draw(st.sampled_from((None, 40.0, 100.0))),
              "checkpoint_cost": draw(st.sampled_from((0.0, 5.0))),
              "spare_nodes": draw(st.integers(0, 1)),
              "technicians": draw(st.integers(0, 2)),
              "restore_overhead": draw(st.sampled_from((0.0, 7.0))),
              "retry_delay": draw(st.sampled_from((0.0, 3.0))),
              "node_failure_retries": 1000, "locality_factors": FLAT}
    return nodes, jobs, model, params, draw(st.integers(0, 3))


class CheckedRun(Run):
    """A run that checks the invariants after every event and decision."""

    def __init__(self, *a, **k) -> None:
        super().__init__(*a, **k)
        self.ckpt_seen: dict[int, float] = {}

    def interrupt(self, job, why, counts_retry):
        out = super().interrupt(job, why, counts_retry)
        # restarts from its last checkpoint, which never moves back
        assert job.work == job.ckpt_work
        assert job.ckpt_work >= self.ckpt_seen.get(job.idx, 0.0)
        self.ckpt_seen[job.idx] = job.ckpt_work
        return out

    def check(self) -> None:
        """No GPU held twice, none on a failed node."""
        held: set[int] = set()
        for j in self.running.values():
            g = set(j.gpus)
            assert not g & held
            held |= g
            assert all(self.cluster.node_up[self.topo.gpu_node[x]] for x in g)

    def apply(self, d):
        super().apply(d)
        self.check()

    def on_entry(self, entry):
        super().on_entry(entry)
        self.check()


class CheckedSimulation(Simulation):
    def _prepare(self, until, progress):
        run = CheckedRun(self, until, progress)
        self.policy.attach(run.ctx)
        return run


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_failure_layer_invariants(case):
    nodes, jobs, model, params, seed = case
    FAILURE_MODELS.register("test-inv", lambda: model, replace=True)
    try:
        topo = uniform_topology(nodes, gpus_per_switch=4, nodes_per_rack=2, name="inv")
        res = CheckedSimulation(Trace("t", jobs), topo, "fifo", seed=seed,
                                params={"failure_model": "test-inv", **params}).run(8000.0)
    finally:
        FAILURE_MODELS.unregister("test-inv")
    df = res.jobs
    for j in df.itertuples():
        if j.status == "completed":  # work conserved
            assert j.productive_gpu_hours == pytest.approx(j.duration * j.num_gpus / 3600)
        if j.status in ("completed", "failed"):
            lost = (j.lost_recompute_gpu_hours + j.lost_checkpoint_gpu_hours
                    + j.lost_restart_gpu_hours + j.lost_wait_gpu_hours)
            wall = (j.end_time - j.start_time) * j.num_gpus / 3600
            assert lost + j.productive_gpu_hours == pytest.approx(wall, abs=1e-6)
            assert min(j.lost_recompute_gpu_hours, j.lost_wait_gpu_hours) >= -1e-9
