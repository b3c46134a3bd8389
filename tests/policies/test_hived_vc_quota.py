"""`vc-quota`, the quota-only baseline, and the sharing anomaly HiveD removes."""

from __future__ import annotations

import pytest
from conftest import make_trace

import schedlab.policies as policies
from schedlab.policies.conformance import check_policy
from schedlab.policies.hived import HivedPolicy
from schedlab.policies.hived.vc_quota import VcQuotaPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def two_vcs():
    """Two nodes of 2 switches x 2 GPUs; VC `a` and VC `b` own one node each."""
    topo = uniform_topology(2, switches_per_socket=2, gpus_per_switch=2, name="two")
    topo.vcs.update({"a": {"node": 1}, "b": {"node": 1}})
    return topo


def job(jid, t, gpus, dur, vc, **kw):
    return JobSpec(jid, t, gpus, dur, vc=vc, **kw)


def starts(result):
    ev = result.events
    return {r.job_id: (r.time, r.cells) for r in ev[ev.kind == "start"].itertuples()}


ANOMALY = [
    job("b1", 0, 1, 100, "b"), job("b2", 1, 1, 100, "b"),
    job("a1", 2, 2, 10, "a"), job("a2", 3, 2, 10, "a"),
    job("b3", 4, 1, 100, "b"), job("b4", 5, 1, 100, "b"),
    job("a3", 20, 4, 10, "a"),  # `a` holds nothing then: its quota has room for 4
]


def test_sharing_anomaly_under_quotas_not_under_hived():
    """Quota-only: b's GPUs end up on both nodes, so `a` waits with its quota unused."""
    topo = two_vcs()
    quota = starts(Simulation(make_trace(*ANOMALY), topo, VcQuotaPolicy()).run())
    assert quota["b3"][1] == "node1:1"  # b's jobs straddle both nodes
    assert quota["a3"][0] == 101.0  # waits until b1 (100) and b2 (101) free node0
    hived = starts(Simulation(make_trace(*ANOMALY), topo, HivedPolicy()).run())
    assert hived["a3"] == (20.0, "node1:4")  # a's cell is a whole node, whatever b does
    assert {hived[j][1] for j in ("b1", "b2", "b3", "b4")} == {"node0:1"}


def test_quota_is_never_exceeded():
    topo = two_vcs()
    r = Simulation(make_trace(job("x", 0, 4, 10, "a"), job("y", 0, 1, 10, "a"),
                              job("z", 0, 2, 10, "b")), topo, VcQuotaPolicy()).run()
    st = starts(r)
    assert st["x"][0] == 0.0 and st["z"][0] == 0.0
    assert st["y"][0] == 10.0  # a's 4 GPUs are in use until x ends


def test_quotas_file_and_unknown_vc(tmp_path):
    topo = two_vcs()
    f = tmp_path / "q.yaml"
    f.write_text("a: 6\nb: 2\n")
    r = Simulation(make_trace(job("x", 0, 6, 10, "a", gpus_per_task=2),
                              job("y", 0, 2, 10, "b"), job("w", 0, 1, 10, "zzz")),
                   topo, VcQuotaPolicy(quotas=str(f))).run()
    jobs = r.jobs.set_index("job_id")
    assert jobs.loc["x", "start_time"] == 0.0 and jobs.loc["y", "start_time"] == 0.0
    assert jobs.loc["w", "status"] == "rejected" and "unknown VC 'zzz'" in jobs.loc["w", "reason"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: -1\n")
    with pytest.raises(InvalidParameter, match="a: got -1"):
        Simulation(make_trace(job("x", 0, 1, 1, "a")), topo, VcQuotaPolicy(quotas=str(bad))
                   ).run()


def test_no_vcs_means_one_quota_for_the_cluster(dgx2):
    r = Simulation(make_trace(job("x", 0, 16, 10, "whatever", gpus_per_task=8)), dgx2,
                   VcQuotaPolicy()).run()
    assert r.jobs.status.tolist() == ["completed"]


def test_vc_quota_conforms():
    assert policies.policy_class("vc-quota") is VcQuotaPolicy
    check_policy("vc-quota")
