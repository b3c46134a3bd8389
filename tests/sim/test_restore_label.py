"""restore_overhead is paid, and labelled `restore=`, only when there is progress to restore."""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology

TOPO = uniform_topology(1, sockets=2, switches_per_socket=2, gpus_per_switch=2)  # 8 GPUs


@pytest.mark.parametrize("checkpoint, detail, end", [
    (None, "", 10.0 + 1000.0),          # preempted with nothing kept: restarts from zero
    (5.0, "restore=30", None),          # resumes from a checkpoint: pays the overhead
])
def test_a_preempted_job_pays_restore_only_with_a_checkpoint(checkpoint, detail, end):
    jobs = [*(JobSpec(f"a{i}", 0.0, 1, 1000.0, vc="a", checkpoint_interval=checkpoint)
              for i in range(8)), JobSpec("b", 10.0, 1, 10.0, vc="b")]
    r = Simulation(make_trace(*jobs), TOPO, "capacity",
                   params={"total_preemption_per_round": 0.125}).run()
    ev = r.events
    victim = ev[ev.kind == "preempt"].job_id.tolist()
    assert len(victim) == 1
    again = ev[(ev.job_id == victim[0]) & (ev.kind == "resume")]
    assert len(again) == 1 and again.detail.iloc[0] == detail
    if end is not None:  # nothing kept, nothing paid: the full duration after restarting
        row = r.jobs.set_index("job_id").loc[victim[0]]
        assert row.end_time == pytest.approx(float(again.time.iloc[0]) + 1000.0)
