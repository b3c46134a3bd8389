"""Every registered policy keeps the invariants under the placers, deterministically."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.policies import PLACERS, registered_policies
from schedlab.policies.conformance import (
    ConformanceError,
    check_invariants,
    check_policy,
    compositions,
)
from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec, Start
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace


def policy_placer_pairs() -> list[tuple[str, str]]:
    """Every policy with the default placer and one more (rotating through the placers),
    and fifo with every placer: each policy under two placers, each placer under several
    policies. SCHEDLAB_FULL_CONFORMANCE=1 runs every pair (29 x 7; minutes of CPU)."""
    policies, placers = registered_policies(), sorted(PLACERS)
    if os.environ.get("SCHEDLAB_FULL_CONFORMANCE"):
        return [(n, p) for n in policies for p in placers]
    pairs = {("fifo", p) for p in placers}
    others = [p for p in placers if p != "consolidated"]
    for i, name in enumerate(policies):
        pairs.add((name, "consolidated"))
        pairs.add((name, others[i % len(others)]))
    return sorted(pairs)


@pytest.mark.parametrize(("name", "placer"), policy_placer_pairs())
def test_check_policy_over_registered(name, placer):
    # same seed, same result: each policy under the default placer, each placer under fifo
    # (tests/sim/test_determinism.py and the fuzz tests check more)
    check_policy(name, params={"placer": placer},
                 repeat=placer == "consolidated" or name == "fifo")


@pytest.mark.parametrize(("name", "params"), compositions(),
                         ids=[f"{n}-{next(iter(p.values()))}" for n, p in compositions()])
def test_check_policy_over_compositions(name, params):
    """hived composed with every ordering keeps the invariants; every job ends with a reason.

    (Same seed, same result: the fuzz tests' compositions check it.)
    """
    check_policy(name, params=params, repeat=False)


def test_compositions_cover_every_ordering():
    from schedlab.policies.registry import orderings

    assert len(compositions()) == len(orderings()) >= 15
    assert "gandiva" not in orderings() and "tiresias-las" in orderings()


def test_check_policy_catches_a_broken_policy():
    from schedlab.policies.base import Policy

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


@st.composite
def lifecycle_case(draw):
    topo = uniform_topology(draw(st.integers(1, 3)), switches_per_socket=2,
                            gpus_per_switch=draw(st.integers(1, 2)))
    n = draw(st.integers(1, 20))
    jobs = []
    for i in range(n):
        g = draw(st.integers(0, topo.num_gpus))
        deps = tuple(sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=2))))) \
            if i else ()
        elastic = g >= 2 and draw(st.booleans())
        jobs.append(JobSpec(
            f"j{i}", float(draw(st.integers(0, 100))), g, float(draw(st.integers(1, 200))),
            depends_on=tuple(f"j{d}" for d in deps),
            min_gpus=1 if elastic else None,
            max_gpus=min(topo.num_gpus, g + 2) if elastic else None,
            # utilization-driven elastic jobs (target_util) in the mix for every policy
            target_util=draw(st.sampled_from([None, 0.5])) if elastic else None,
            gpu_util=draw(st.sampled_from([0.6, 1.0])),
            scale_interval=draw(st.sampled_from([15.0, 60.0])),
            fail_at=draw(st.sampled_from([None, None, 15.0, 60.0])),
            max_retries=draw(st.integers(0, 2)),
            max_lifetime=draw(st.sampled_from([None, None, 150.0])),
            checkpoint_interval=draw(st.sampled_from([None, 20.0])),
        ))
    # node failures: a few (node, fail, repair) intervals
    failures = draw(st.lists(
        st.tuples(st.integers(0, len(topo.nodes) - 1), st.integers(0, 300),
                  st.integers(1, 200)), max_size=4))
    return topo, Trace("hyp-life", tuple(jobs)), failures


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=lifecycle_case(), policy=st.sampled_from(registered_policies()))
def test_lifecycle_invariants_with_node_failures(case, policy):
    import tempfile
    from pathlib import Path

    topo, trace, failures = case
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "failures.csv"
        f.write_text("node,fail_time,repair_time\n" + "".join(
            f"{n},{t},{t + dt}\n" for n, t, dt in failures))
        result = Simulation(trace, topo, policy,
                            params={"failures": str(f), "retry_delay": 3.0}).run()
    check_invariants(result, topo, trace)
    assert sorted(result.jobs.job_id) == sorted(j.job_id for j in trace.jobs)
