"""Policies sharing by user take a job without a user under its vc (the default trace has none)."""

from __future__ import annotations

from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology

TOPO = uniform_topology(1, gpus_per_switch=2)


def _jobs(vc_of_late: str) -> list[JobSpec]:
    """vc a fills the 2 GPUs and queues two more jobs; a job of `vc_of_late` comes just after.

    At 100 a0 ends while a1 runs to 150: a holds half the cluster, so a tenant of its own
    holding nothing goes first; the same tenant waits behind a2 and a3.
    """
    early = [JobSpec(f"a{i}", 0.0, 1, d, vc="a") for i, d in enumerate((100.0, 150.0, 100.0,
                                                                        100.0))]
    return [*early, JobSpec("late", 1.0, 1, 100.0, vc=vc_of_late)]


def test_drf_shares_by_vc_when_jobs_have_no_user() -> None:
    r = Simulation(make_trace(*_jobs("b")), TOPO, "drf").run()
    starts = r.jobs.set_index("job_id")["start_time"]
    assert starts["late"] == 100.0  # b's first job goes before a's backlog
    assert starts["a2"] == 150.0
    assert r.summary["warnings"] == []
    assert r.summary["notes"] == ["the trace has no users: each job's vc is its tenant"]


def test_one_vc_and_no_users_still_warns_that_drf_equals_a_tenant_blind_policy() -> None:
    r = Simulation(make_trace(*_jobs("a")), TOPO, "drf").run()
    assert r.jobs.set_index("job_id")["start_time"]["late"] == 200.0
    assert any("tenant-blind" in w for w in r.summary["warnings"])


def test_users_when_given_are_the_tenants_and_no_note_is_made() -> None:
    jobs = [JobSpec(j.job_id, j.submit_time, j.num_gpus, j.duration, user="u", vc=j.vc)
            for j in _jobs("b")]
    r = Simulation(make_trace(*jobs), TOPO, "drf").run()
    assert r.jobs.set_index("job_id")["start_time"]["late"] == 200.0
    assert r.summary["notes"] == []


def test_hai_keys_jobs_without_users_by_vc() -> None:
    from schedlab.policies import make_policy

    pol = make_policy("hai")
    assert pol.tenant_key(JobSpec("x", 0.0, 1, 1.0, vc="v")) == "v"
    assert pol.tenant_key(JobSpec("x", 0.0, 1, 1.0, user="u", vc="v")) == "u"
    r = Simulation(make_trace(*_jobs("b")), TOPO, "hai").run()
    assert not any("tenant-blind" in w for w in r.summary["warnings"])
