"""Hypothesis invariants of slurm on random configurations and traces: no GPU twice, gangs
whole, GPU time conserved (the shared `check_invariants`), and a QOS with a GrpTRES GPU
limit never holds more GPUs than it (with limits enforced)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab import Simulation, load_topology
from schedlab.policies.conformance import check_invariants
from schedlab.traces import from_records

NODES = ("NodeName=n[1-2] Gres=gpu:4 Sockets=1 CoresPerSocket=8 RealMemory=64000\n")
ACCOUNTS = """Cluster - 't':Fairshare=1:QOS='normal'
QOS - 'normal'
QOS - 'limited':GrpTRES=gres/gpu={limit}
Parent - 'root'
Account - 'a':Fairshare=1
Account - 'b':Fairshare=3
Parent - 'a'
User - 'u1':DefaultAccount='a':Fairshare=1:QOS='normal,limited'
Parent - 'b'
User - 'u2':DefaultAccount='b':Fairshare=1:QOS='normal,limited'
"""


@st.composite
def case(draw: Any) -> tuple[str, int, list[dict[str, Any]]]:
    sched = draw(st.sampled_from(["sched/backfill", "sched/builtin"]))
    bf = draw(st.sampled_from([10, 30, 60]))
    conf = (f"SchedulerType={sched}\nSchedulerParameters=bf_interval={bf}\n"
            "AccountingStorageEnforce=associations,limits,qos\n"
            f"PriorityWeightAge={draw(st.sampled_from([0, 1000]))}\n"
            f"PriorityWeightFairshare={draw(st.sampled_from([0, 10000]))}\n"
            f"PriorityWeightJobSize={draw(st.sampled_from([0, 500]))}\n"
            "PartitionName=low Nodes=ALL Default=YES PriorityTier=1\n"
            "PartitionName=high Nodes=ALL PriorityTier=2\n")
    limit = draw(st.integers(1, 6))
    jobs = []
    t = 0.0
    for i in range(draw(st.integers(1, 12))):
        t += draw(st.sampled_from([0.0, 5.0, 40.0]))
        dur = draw(st.sampled_from([10.0, 50.0, 200.0]))
        rec: dict[str, Any] = {
            "job_id": f"j{i}", "submit_time": t, "num_gpus": draw(st.sampled_from([1, 2, 4, 8])),
            "duration": dur, "user": draw(st.sampled_from(["u1", "u2"])),
            "time_limit": dur * draw(st.sampled_from([0.5, 1.0, 3.0])),
            "partition": draw(st.sampled_from(["low", "high"])),
            "qos": draw(st.sampled_from(["normal", "limited"]))}
        jobs.append(rec)
    return conf, limit, jobs


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=case())
def test_slurm_invariants(tmp_path: Path, data: tuple[str, int, list[dict[str, Any]]]
                          ) -> None:
    conf, limit, jobs = data
    cfg = tmp_path / "slurm.conf"
    cfg.write_text("ClusterName=t\nSelectType=select/cons_tres\nGresTypes=gpu\n" + NODES + conf)
    acc = tmp_path / "accounts.txt"
    acc.write_text(ACCOUNTS.format(limit=limit))
    trace = from_records(jobs, name="t")
    topo = load_topology(cfg)
    result = Simulation(trace, topo, "slurm",
                        params={"config": str(cfg), "accounts": str(acc)}).run()
    check_invariants(result, topo, trace)
    qos = {j["job_id"]: j["qos"] for j in jobs}
    held: dict[str, int] = {}
    use = 0
    ev = result.events
    for time in sorted(set(ev.time)):
        for e in ev[ev.time == time].itertuples():
            if qos[e.job_id] != "limited":
                continue
            if e.kind in ("start", "resume"):
                held[e.job_id] = e.num_gpus
                use += e.num_gpus
            elif e.kind in ("preempt", "suspend", "finish", "fail", "kill") \
                    and e.job_id in held:
                use -= held.pop(e.job_id)
        assert use <= limit, (time, use, limit)
    # every job ends: completed, killed at its limit, or rejected (a QOS it cannot fit)
    assert set(result.jobs.status) <= {"completed", "killed", "rejected"}
