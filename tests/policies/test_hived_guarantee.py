"""HiveD's guarantee as a property: a VC's unused cells are its own, whatever others do.

Four 4-GPU nodes; VC `a` owns two nodes, `b` one node, `c` two switches. Other VCs run
random guaranteed work (inside their quota or waiting beyond it) and anyone runs random
opportunistic gangs; a job of `a` that fits in `a`'s unused cells starts the moment it
arrives, preempting opportunistic gangs when its cells need them.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.policies.hived import HivedPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace


def _topology():
    topo = uniform_topology(4, switches_per_socket=2, gpus_per_switch=2, name="guarantee")
    topo.vcs.update({"a": {"node": 2}, "b": {"node": 1}, "c": {"switch": 2}})
    return topo


@st.composite
def other_job(draw, i):
    opp = draw(st.booleans())
    gpus, per_task = draw(st.sampled_from([(1, 0), (2, 0), (4, 0), (4, 1), (8, 4)]))
    return JobSpec(
        f"o{i}", float(draw(st.integers(0, 200))), gpus, float(draw(st.integers(1, 300))),
        vc=draw(st.sampled_from(["a", "b", "c"])) if opp else draw(st.sampled_from(["b", "c"])),
        priority=-1 if opp else draw(st.integers(0, 3)), gpus_per_task=per_task,
        checkpoint_interval=draw(st.sampled_from([None, 50.0])))


@st.composite
def case(draw):
    n = draw(st.integers(0, 25))
    others = [draw(other_job(i)) for i in range(n)]
    gpus, per_task = draw(st.sampled_from([(1, 0), (2, 0), (4, 0), (3, 1), (8, 4)]))
    probe = JobSpec("probe", float(draw(st.integers(0, 250))), gpus, 100.0, vc="a",
                    priority=draw(st.integers(0, 3)), gpus_per_task=per_task)
    return others, probe


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=case(), lazy=st.booleans(), order=st.sampled_from(["fifo", "fifo-backfill"]),
       delay=st.sampled_from([0.0, 30.0]))
def test_a_job_that_fits_its_vcs_unused_cells_starts_at_once(data, lazy, order, delay):
    """At once, or once the preemption delay let its (opportunistic) victims go."""
    others, probe = data
    trace = Trace("guarantee", (*others, probe))
    pol = HivedPolicy(lazy_preemption=lazy, order=order, preemption_delay=delay)
    result = Simulation(trace, _topology(), pol).run(until=probe.submit_time + delay)
    ev = result.events
    start = ev[(ev.job_id == "probe") & (ev.kind == "start")]
    assert len(start) == 1
    t = start.time.iloc[0]
    # only opportunistic gangs (or ones lazily downgraded to it) are preempted for it
    pre = ev[ev.kind == "preempt"]
    victims = set(pre[pre.detail.str.contains("job probe ", regex=False)].job_id)
    assert probe.submit_time <= t <= probe.submit_time + delay  # victims leave by then
    assert all(s.priority == -1 or s.job_id in pol.downgraded
               for s in others if s.job_id in victims)
