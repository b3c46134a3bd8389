"""Every registered policy keeps the invariants, with every placer, deterministically."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import PLACERS, registered_policies
from policies.conformance import ConformanceError, check_invariants, check_policy
from sim.engine import Simulation
from sim.model import JobSpec, Start
from topologies.build import uniform_topology
from traces.base import Trace


@pytest.mark.parametrize("name", registered_policies())
@pytest.mark.parametrize("placer", sorted(PLACERS))
def test_check_policy_over_registered(name, placer):
    check_policy(name, params={"placer": placer})


def test_check_policy_catches_a_broken_policy():
    from policies.base import Policy

    class Broken(Policy):
        name = "broken"

        def schedule(self, ctx):
            for job in list(ctx.pending()):
                if job.spec.num_gpus:
                    # claims GPUs without asking the placer: collides sooner or later
                    yield Start(job.job_id, tuple(range(job.spec.num_gpus)))

    with pytest.raises(Exception, match="GPU 0|has 0 free|not conserved|over-committed"):
        check_policy(Broken)


@st.composite
def cluster_and_trace(draw):
    nodes = draw(st.integers(1, 4))
    sockets = draw(st.integers(1, 2))
    switches = draw(st.integers(1, 2))
    per_switch = draw(st.integers(1, 2))
    racks = draw(st.sampled_from([0, 2]))
    topo = uniform_topology(nodes, sockets=sockets, switches_per_socket=switches,
                            gpus_per_switch=per_switch, nodes_per_rack=racks)
    n = draw(st.integers(1, 25))
    jobs = []
    for i in range(n):
        g = draw(st.integers(0, topo.num_gpus + 2))
        share = draw(st.sampled_from([1.0, 1.0, 0.5, 0.3])) if g == 1 else 1.0
        tasks = draw(st.sampled_from([d for d in (1, 2, 4) if g and g % d == 0] or [1]))
        jobs.append(JobSpec(
            f"j{i}", float(draw(st.integers(0, 200))), g, float(draw(st.integers(1, 300))),
            user=f"u{draw(st.integers(0, 2))}", gpu_share=share,
            gpus_per_task=g // tasks if g else 0,
            checkpoint_interval=draw(st.sampled_from([None, 30.0])),
            locality_sensitivity=draw(st.sampled_from([0.0, 0.5, 1.0])),
        ))
    return topo, Trace("hyp", tuple(jobs))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=cluster_and_trace(), policy=st.sampled_from(registered_policies()),
       placer=st.sampled_from(sorted(PLACERS)))
def test_invariants_hold_on_random_clusters(data, policy, placer):
    topo, trace = data
    result = Simulation(trace, topo, policy, params={"placer": placer}).run()
    check_invariants(result, topo, trace)
    # every job is accounted for exactly once
    assert sorted(result.jobs.job_id) == sorted(j.job_id for j in trace.jobs)


def test_conformance_error_is_an_assertion():
    assert issubclass(ConformanceError, AssertionError)
