"""tenants.parquet by a policy's own tenants: ClusterQueue and cohort (kueue), account (slurm).

A policy declares `tenant_kinds` and `tenant_names(idx)`; the results add one row per
tenant of each declared kind after the user and vc rows, which stay as they were.
Numbers are hand-computed on one 4-GPU node, jobs of round durations.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from schedlab import Simulation, load_topology
from schedlab.sim.model import JobSpec
from schedlab.sim.tenants import tenants_frame
from schedlab.topologies.native import native_from_dict
from schedlab.traces import from_records
from schedlab.traces.base import Trace

API = "kueue.x-k8s.io/v1beta2"


def _rows(t: pd.DataFrame, kind: str) -> dict[str, tuple[int, float, float]]:
    part = t[t.kind == kind]
    return {r.tenant: (r.jobs, r.gpu_hours_received, r.queueing_delay_mean)
            for r in part.itertuples()}


def _cq(name: str, cohort: str | None) -> dict:
    spec: dict = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec}


def test_kueue_tenants_by_cluster_queue_and_cohort(tmp_path: Path) -> None:
    """ClusterQueues a, b (cohort org) and c (no cohort), 2 GPUs each on a 4-GPU node;
    LocalQueues team-a (ns x) and team-b both to a. a1 (2 GPUs, 3600 s) and a2 (2, 3600 s)
    queue in a: a2 borrows b's idle 2 GPUs at once; b1 (1 GPU, 3600 s, at 10 s) finds
    b's quota lent and waits for a1 at 3600 (3590 s); c1 (1 GPU) has quota but no GPU
    until 3600 too. GPU-hours: a 4, b 1, c 1; cohort org 5, '' (none) 1."""
    docs = [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "f"}},
            _cq("a", "org"), _cq("b", "org"), _cq("c", None),
            *[{"apiVersion": API, "kind": "LocalQueue",
               "metadata": {"name": n, "namespace": ns}, "spec": {"clusterQueue": q}}
              for n, ns, q in (("team-a", "x", "a"), ("team-b", "default", "a"),
                               ("b", "default", "b"), ("c", "default", "c"))]]
    cfg = tmp_path / "kueue.yaml"
    cfg.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    topo = native_from_dict({"name": "t", "nodes": [{
        "count": 1, "gpu_type": "V100", "sockets": 1, "switches_per_socket": 1,
        "gpus_per_switch": 4}]}, "t.yaml")
    jobs = (JobSpec("a1", 0, 2, 3600, extra=(("queue", "x/team-a"),)),
            JobSpec("a2", 0, 2, 3600, extra=(("queue", "team-b"),)),
            JobSpec("b1", 10, 1, 3600, extra=(("queue", "b"),)),
            JobSpec("c1", 10, 1, 3600, extra=(("queue", "c"),)))
    r = Simulation(Trace("t", jobs), topo, "kueue", params={"config": str(cfg)}).run()
    assert dict(zip(r.jobs.job_id, r.jobs.start_time, strict=True)) == {
        "a1": 0.0, "a2": 0.0, "b1": 3600.0, "c1": 3600.0}
    t = r.tenants
    assert list(dict.fromkeys(t.kind)) == ["user", "vc", "clusterqueue", "cohort"]
    assert _rows(t, "clusterqueue") == {"a": (2, 4.0, 0.0), "b": (1, 1.0, 3590.0),
                                        "c": (1, 1.0, 3590.0)}
    assert _rows(t, "cohort") == {"": (1, 1.0, 3590.0), "org": (3, 5.0, 3590.0 / 3)}
    # each kind's shares add up to 1, and the user/vc rows are the table without the hook
    for kind in ("clusterqueue", "cohort"):
        assert abs(t[t.kind == kind].share_received.sum() - 1.0) < 1e-12
    pd.testing.assert_frame_equal(t[t.kind.isin(["user", "vc"])].reset_index(drop=True),
                                  tenants_frame(r.jobs))


def test_slurm_tenants_by_account(tmp_path: Path) -> None:
    """One 4-GPU node, FIFO by submission: p1 (physics, 4 GPUs, 3600 s) runs 0..3600,
    then b1 (bio, 2) and p2 (physics, 2) at 3600. Accounts: physics 2 jobs 6 GPU-hours,
    bio 1 job 2 GPU-hours, both waited 3600 - 1 and 3600 - 2."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSelectType=select/cons_tres\nGresTypes=gpu\n"
                    "NodeName=n1 Gres=gpu:4 Sockets=1 CoresPerSocket=8 RealMemory=64000\n"
                    "PartitionName=p Nodes=ALL Default=YES\n")
    recs = [{"job_id": "p1", "submit_time": 0, "num_gpus": 4, "duration": 3600,
             "user": "ann", "account": "physics", "time_limit": 7200},
            {"job_id": "b1", "submit_time": 1, "num_gpus": 2, "duration": 3600,
             "user": "bob", "account": "bio", "time_limit": 7200},
            {"job_id": "p2", "submit_time": 2, "num_gpus": 2, "duration": 3600,
             "user": "ann", "account": "physics", "time_limit": 7200}]
    r = Simulation(from_records(recs, name="t"), load_topology(conf), "slurm",
                   params={"config": str(conf)}).run()
    assert dict(zip(r.jobs.job_id, r.jobs.start_time, strict=True)) == {
        "p1": 0.0, "b1": 3600.0, "p2": 3600.0}
    t = r.tenants
    assert list(dict.fromkeys(t.kind)) == ["user", "vc", "account"]
    assert _rows(t, "account") == {"bio": (1, 2.0, 3599.0), "physics": (2, 6.0, 1799.0)}


def test_other_policies_declare_no_kind() -> None:
    """fifo declares no tenant kind: its table has user and vc rows only."""
    topo = native_from_dict({"name": "t", "nodes": [{
        "count": 1, "gpu_type": "V100", "sockets": 1, "switches_per_socket": 1,
        "gpus_per_switch": 4}]}, "t.yaml")
    r = Simulation(Trace("t", (JobSpec("j", 0, 1, 10, user="u"),)), topo, "fifo").run()
    assert sorted(set(r.tenants.kind)) == ["user", "vc"]
