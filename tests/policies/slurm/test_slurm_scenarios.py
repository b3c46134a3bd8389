"""`slurm` scenarios with hand-computed start times (time limits in s, one 4-GPU node)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedlab import Simulation, load_topology
from schedlab.traces import from_records

NODE = "NodeName=n1 Gres=gpu:4 Sockets=1 CoresPerSocket=8 RealMemory=64000\n"


def run(tmp_path: Path, conf: str, jobs: list[dict[str, Any]], accounts: str = "",
        **engine: Any) -> tuple[dict[str, tuple[float, float, str]], dict[str, Any]]:
    """Run `slurm` on a slurm.conf text and job records; job -> (start, end, status)."""
    cfg = tmp_path / "slurm.conf"
    cfg.write_text("ClusterName=t\nSelectType=select/cons_tres\nGresTypes=gpu\n" + NODE + conf)
    params: dict[str, Any] = {"config": str(cfg), **engine}
    if accounts:
        (tmp_path / "accounts.txt").write_text(accounts)
        params["accounts"] = str(tmp_path / "accounts.txt")
    res = Simulation(from_records(jobs, name="t"), load_topology(cfg), "slurm",
                     params=params).run()
    rows = {r.job_id: (r.start_time, r.end_time, r.status) for r in res.jobs.itertuples()}
    return rows, res.summary


def job(jid: str, t: float, gpus: int, dur: float, limit: float | None = None,
        **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"job_id": jid, "submit_time": t, "num_gpus": gpus,
                           "duration": dur, "user": extra.pop("user", "u1")}
    if limit is not None:
        rec["time_limit"] = limit
    rec.update(extra)
    return rec


def test_backfill_plans_with_the_time_limit(tmp_path: Path) -> None:
    # A holds 2 GPUs, limit 300: B (4 GPUs) reserves the node from 300 (A's limit, not its
    # real end 100). At the backfill pass at 30, C (limit 200: ends by 230) fits before
    # that reservation; D (real 50 s, but limit 400) would overlap it and waits. A ends
    # at 100 -> B 100..200, then D.
    rows, summary = run(tmp_path, "SchedulerParameters=bf_interval=30\n"
                        "PartitionName=p Nodes=ALL Default=YES\n", [
                            job("A", 0, 2, 100, 300), job("B", 1, 4, 100, 500),
                            job("C", 2, 2, 50, 200), job("D", 3, 2, 50, 400)])
    assert {k: v[0] for k, v in rows.items()} == {"A": 0, "B": 100, "C": 30, "D": 200}
    assert summary["policy_backfill_starts"] == 1


def test_builtin_scheduler_does_not_backfill(tmp_path: Path) -> None:
    rows, _ = run(tmp_path, "SchedulerType=sched/builtin\nPartitionName=p Nodes=ALL\n", [
        job("A", 0, 2, 100, 300), job("B", 1, 4, 100, 500), job("C", 2, 2, 50, 200)])
    assert {k: v[0] for k, v in rows.items()} == {"A": 0, "B": 100, "C": 200}


def test_timeout_at_the_limit(tmp_path: Path) -> None:
    # runs 500 s of work with a limit of 100 s: killed at 100 (TIMEOUT); B then starts
    rows, summary = run(tmp_path, "PartitionName=p Nodes=ALL MaxTime=10\n", [
        job("A", 0, 4, 500, 100), job("B", 5, 4, 50)])
    assert rows["A"] == (0, 100, "killed")
    assert rows["B"][:2] == (100, 150) and rows["B"][2] == "completed"
    assert summary["policy_timeouts"] == 1


def test_limit_over_partition_max_time_is_rejected(tmp_path: Path) -> None:
    rows, _ = run(tmp_path, "PartitionName=p Nodes=ALL MaxTime=1\n", [
        job("A", 0, 1, 10, 120)])
    assert rows["A"][2] == "rejected"


def test_partition_priority_tier_first(tmp_path: Path) -> None:
    # B (tier 1) waits since 10, C (tier 2) since 20: C goes first when A ends
    rows, _ = run(tmp_path, "PartitionName=low Nodes=ALL Default=YES PriorityTier=1\n"
                  "PartitionName=high Nodes=ALL PriorityTier=2\n", [
                      job("A", 0, 4, 100), job("B", 10, 4, 100),
                      job("C", 20, 4, 100, partition="high")])
    assert {k: v[0] for k, v in rows.items()} == {"A": 0, "C": 100, "B": 200}


def test_partition_preemption_requeue(tmp_path: Path) -> None:
    # C in the higher tier preempts A at 20 (requeued, from scratch), then A before B
    rows, summary = run(tmp_path, "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n"
                        "PartitionName=low Nodes=ALL Default=YES PriorityTier=1\n"
                        "PartitionName=high Nodes=ALL PriorityTier=2\n", [
                            job("A", 0, 4, 100), job("B", 10, 4, 100),
                            job("C", 20, 4, 100, partition="high")])
    assert rows["C"][:2] == (20, 120)
    assert rows["A"][1] == 220 and rows["B"][:2] == (220, 320)
    assert summary["policy_preemptions"] == 1


QOS_ACCOUNTS = """Cluster - 't':Fairshare=1:QOS='normal'
QOS - 'normal'
QOS - 'limited':GrpTRES=gres/gpu=2
Parent - 'root'
Account - 'a':Fairshare=1
Parent - 'a'
User - 'u1':DefaultAccount='a':Fairshare=1:QOS='normal,limited'
"""


def test_qos_grptres_gpu_limit_skips_without_blocking(tmp_path: Path) -> None:
    # B would take QOS `limited` to 4 GPUs > 2: held (not blocking); C starts at once
    rows, _ = run(tmp_path, "AccountingStorageEnforce=associations,limits,qos\n"
                  "PartitionName=p Nodes=ALL\n", [
                      job("A", 0, 2, 100, qos="limited"), job("B", 1, 2, 100, qos="limited"),
                      job("C", 2, 2, 100)], QOS_ACCOUNTS)
    assert {k: v[0] for k, v in rows.items()} == {"A": 0, "B": 100, "C": 2}


def test_limits_not_enforced_without_accounting_storage_enforce(tmp_path: Path) -> None:
    rows, _ = run(tmp_path, "PartitionName=p Nodes=ALL\n", [
        job("A", 0, 2, 100, qos="limited"), job("B", 1, 2, 100, qos="limited")], QOS_ACCOUNTS)
    assert rows["B"][0] == 1


@pytest.mark.parametrize(("half_life", "first"), [("1", "P1"), ("7-0", "P2")])
def test_fair_share_decay(tmp_path: Path, half_life: str, first: str) -> None:
    # u1 used the GPU over [0, 300), u2 over [600, 660), u3 from 660 (usage in GPU-s,
    # charged at each 60-s calc tick and at a job's end, then decayed by d^60 = 0.498 at
    # each tick, d = 1 - 0.693/60). At the tick at 720, with a 1-minute half-life u1 has
    # 44.6 x 0.498^7 = 0.34 left against u2's 29.9 x 0.498^2 = 7.4, so P1 (u1) goes first
    # at 760; with 7 days, u1's ~1200 outweighs u2's ~240 (all x 4 GPUs billed).
    conf = ("PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n"
            f"PriorityDecayHalfLife={half_life}\nPriorityCalcPeriod=1\n"
            "PartitionName=p Nodes=ALL TRESBillingWeights=GRES/gpu=1\n")
    rows, _ = run(tmp_path, conf, [
        job("X", 0, 4, 300), job("W", 600, 4, 60, user="u2"), job("K", 650, 4, 100, user="u3"),
        job("P1", 700, 4, 10), job("P2", 701, 4, 10, user="u2")])
    assert rows["K"][0] == 660
    assert rows[first][0] == 760
    assert rows["P2" if first == "P1" else "P1"][0] == 770


PREEMPT_ACCOUNTS = """Cluster - 't':Fairshare=1
QOS - 'normal'
QOS - 'high':Priority=10:Preempt='normal'
Parent - 'root'
Account - 'a':Fairshare=1
Parent - 'a'
User - 'u1':DefaultAccount='a':Fairshare=1
"""


def test_qos_preemption_suspends(tmp_path: Path) -> None:
    # B (QOS high) suspends A (normal) at 10; A resumes at 60 with 90 s of work left.
    # The victim's mode decides (`slurm_job_preempt_mode`): its QOS's, else its
    # partition's, else the cluster's PreemptMode; OFF (the default) would protect it.
    # Slurm's suspension (SIGSTOP) keeps progress at no cost: the engine's suspension
    # with `checkpoint_on_suspend` and no restore overhead.
    rows, summary = run(tmp_path, "PreemptType=preempt/qos\nPreemptMode=SUSPEND,GANG\n"
                        "PartitionName=p Nodes=ALL\n", [
        job("A", 0, 4, 100), job("B", 10, 4, 50, qos="high")], PREEMPT_ACCOUNTS,
        checkpoint_on_suspend=True, restore_overhead=0.0)
    assert rows["B"][:2] == (10, 60)
    assert rows["A"][:2] == (0, 150)
    assert summary["policy_preemptions"] == 1
