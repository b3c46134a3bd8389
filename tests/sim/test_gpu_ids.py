"""Results name the GPUs a job ran on; a placement's event says the size it gave."""

from __future__ import annotations

from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def test_an_elastic_job_s_start_and_resize_carry_its_actual_gpus() -> None:
    topo = uniform_topology(1, gpus_per_switch=4)
    jobs = make_trace(JobSpec("e", 0.0, 2, 1000.0, min_gpus=1, max_gpus=4),
                      JobSpec("f", 100.0, 3, 100.0))
    for events in ("on", "off"):
        r = Simulation(jobs, topo, "fifo-elastic", params={"events": events}).run()
        gpus = r.jobs.set_index("job_id")["gpus"]
        assert gpus["e"] == "node0/gpu0;node0/gpu1;node0/gpu2;node0/gpu3"
        assert gpus["f"] == "node0/gpu1;node0/gpu2;node0/gpu3"
    ev = Simulation(jobs, topo, "fifo-elastic").run().events
    rows = {(k, j): (n, g) for k, j, n, g in
            ev[["kind", "job_id", "num_gpus", "gpus"]].itertuples(index=False)}
    assert rows[("start", "e")] == (4, "node0/gpu0;node0/gpu1;node0/gpu2;node0/gpu3")
    assert rows[("resize", "e")] == (1, "node0/gpu0")  # the new size, not the request (2)
    assert rows[("submit", "f")] == (3, "")
    assert rows[("finish", "f")] == (3, "")
