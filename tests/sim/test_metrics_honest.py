"""Honest metrics (docs/contract.md#sec-5): censored waits, response time, bounded slowdown, SLAs,
and tenants.parquet, each checked on a scenario small enough to compute by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd
import pytest
from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.sim.tenants import TENANT_COLUMNS, tenants_frame


def run(topo, *jobs, policy="fifo", until=None, **params):
    return Simulation(make_trace(*jobs), topo, policy, seed=0, params=params).run(until=until)


def row(result, job_id):
    return result.jobs.set_index("job_id").loc[job_id]


# --- censoring: a wait cut by --until counts up to the end of the run -------------------


def test_a_job_stranded_by_until_counts_its_wait_up_to_the_end(one_gpu):
    # one GPU: a runs 0-100; b arrives at 10 and waits; the run is cut at 50
    r = run(one_gpu, JobSpec("a", 0, 1, 100, user="u1"), JobSpec("b", 10, 1, 50, user="u2"),
            until=50)
    a, b = row(r, "a"), row(r, "b")
    assert b["status"] == "unfinished" and bool(b["censored"])
    assert b["queueing_delay"] == 40.0 and math.isnan(b["start_time"])
    assert math.isnan(b["response_time"]) and math.isnan(b["end_time"])
    assert a["status"] == "unfinished" and bool(a["censored"])
    assert a["queueing_delay"] == 0.0 and a["response_time"] == 0.0 and a["run_time"] == 50.0
    s = r.summary
    assert s["queueing_delay_mean"] == 20.0  # (0 + 40) / 2: b is in the mean, not left out
    assert s["queueing_delay_p50"] == 20.0
    assert s["queueing_delay_p95"] == pytest.approx(38.0)  # 0 + 0.95 * 40
    assert s["queueing_delay_p99"] == pytest.approx(39.6)
    assert s["jobs_never_started"] == 1 and s["jobs_unfinished"] == 2
    assert s["response_time_mean"] == 0.0 and s["response_time_p95"] == 0.0
    assert s["makespan"] == 50.0 and math.isnan(s["bounded_slowdown_mean"])
    # received up to the end / demanded: u1 50/100, u2 0/50 -> Jain (0.5)^2 / (2 * 0.25)
    assert s["fairness_jain"] == pytest.approx(0.5)


def test_a_started_job_waiting_again_at_the_end_counts_that_wait(one_gpu):
    # srtf: b (20 s left) suspends a (90 s left) at 10; a waits until b ends at 30
    jobs = (JobSpec("a", 0, 1, 100), JobSpec("b", 10, 1, 20))
    cut = run(one_gpu, *jobs, policy="srtf", until=25)
    a = row(cut, "a")
    assert a["status"] == "unfinished" and bool(a["censored"]) and a["start_time"] == 0.0
    assert a["queueing_delay"] == 15.0 and a["response_time"] == 0.0  # waiting 10..25
    assert row(cut, "b")["queueing_delay"] == 0.0
    assert cut.summary["queueing_delay_mean"] == 7.5 and cut.summary["jobs_never_started"] == 0
    whole = run(one_gpu, *jobs, policy="srtf")
    a = row(whole, "a")
    assert a["status"] == "completed" and not a["censored"] and a["preemptions"] == 1
    assert a["queueing_delay"] == 20.0 and a["response_time"] == 0.0  # waited 10..30
    assert row(whole, "b")["response_time"] == 0.0


def test_queueing_statistics_leave_out_rejected_jobs_and_keep_killed_ones(one_gpu):
    # x fails at 5 for good, so y (held for it) is killed before it ever started; z needs
    # 2 GPUs of 1 and is rejected; w waits for x's GPU from 1 until 5
    r = run(one_gpu, JobSpec("x", 0, 1, 10, fail_at=5.0), JobSpec("y", 0, 1, 10,
            depends_on=("x",)), JobSpec("z", 0, 2, 10), JobSpec("w", 1, 1, 10))
    status = r.jobs.set_index("job_id")["status"].to_dict()
    assert status == {"x": "failed", "y": "killed", "z": "rejected", "w": "completed"}
    assert not r.jobs["censored"].any()
    assert row(r, "w")["queueing_delay"] == 4.0 and row(r, "y")["queueing_delay"] == 0.0
    s = r.summary
    assert s["jobs_never_started"] == 1  # y; the rejected z is not counted
    assert s["queueing_delay_mean"] == pytest.approx(4.0 / 3)  # x 0, y 0, w 4
    assert s["response_time_mean"] == pytest.approx(2.0)  # x 0, w 4
    assert math.isnan(row(r, "y")["response_time"])


# --- response time and bounded slowdown ------------------------------------------------


def test_response_time_and_bounded_slowdown_of_a_one_second_job(one_gpu):
    # a runs 0-100; b (1 s) waits for it: starts at 100, ends at 101
    r = run(one_gpu, JobSpec("a", 0, 1, 100), JobSpec("b", 0, 1, 1))
    b = row(r, "b")
    assert b["response_time"] == 100.0 and b["jct"] == 101.0 and b["slowdown"] == 101.0
    s = r.summary
    # max(1, jct / max(duration, 10)): a 100/100 = 1, b 101/10 = 10.1
    assert s["bounded_slowdown_mean"] == pytest.approx((1.0 + 10.1) / 2)
    assert s["slowdown_mean"] == pytest.approx((1.0 + 101.0) / 2)
    assert s["response_time_mean"] == 50.0 and s["response_time_p95"] == pytest.approx(95.0)
    alone = run(one_gpu, JobSpec("c", 0, 1, 1)).summary
    assert alone["bounded_slowdown_mean"] == 1.0 and alone["slowdown_mean"] == 1.0


# --- SLAs: deadlines and maximum waits -------------------------------------------------


def test_a_deadline_met_one_missed_and_a_rejected_job_with_one(one_gpu):
    # a ends at 100 = its deadline (met); b ends at 200 > 150 (missed); c cannot run at all
    r = run(one_gpu, JobSpec("a", 0, 1, 100, deadline=100.0),
            JobSpec("b", 0, 1, 100, deadline=150.0), JobSpec("c", 0, 2, 10, deadline=1e6),
            JobSpec("d", 0, 1, 10))
    sla = r.jobs.set_index("job_id")["sla_violated"].to_dict()
    assert sla == {"a": False, "b": True, "c": True, "d": False}
    deadline = r.jobs.set_index("job_id")["deadline"]
    assert deadline[["a", "b", "c"]].tolist() == [100.0, 150.0, 1e6]
    assert math.isnan(deadline["d"])
    assert r.summary["sla_violations"] == 2


def test_an_unfinished_job_misses_its_deadline_only_when_the_run_ended_past_it(one_gpu):
    # cut at 150: a done at 100 (met); b runs 100-200, deadline 150 = the end (can no
    # longer make it); c waits, deadline 1000 still reachable
    r = run(one_gpu, JobSpec("a", 0, 1, 100, deadline=150.0),
            JobSpec("b", 0, 1, 100, deadline=150.0), JobSpec("c", 0, 1, 10, deadline=1000.0),
            until=150)
    sla = r.jobs.set_index("job_id")["sla_violated"].to_dict()
    assert sla == {"a": False, "b": True, "c": False}
    assert r.jobs.set_index("job_id")["censored"].to_dict() == {"a": False, "b": True,
                                                                "c": True}
    assert r.summary["sla_violations"] == 1


def test_max_wait_hours_counts_late_starts_and_waits_past_the_limit(one_gpu):
    # a holds the GPU for an hour: b (limit 1 h) starts at 3600 exactly, c (limit 0.5 h)
    # at 3610, d has no limit
    jobs = (JobSpec("a", 0, 1, 3600), JobSpec("b", 0, 1, 10, max_wait_hours=1.0),
            JobSpec("c", 0, 1, 10, max_wait_hours=0.5), JobSpec("d", 0, 1, 10))
    r = run(one_gpu, *jobs)
    assert row(r, "b")["start_time"] == 3600.0 and row(r, "c")["start_time"] == 3610.0
    sla = r.jobs.set_index("job_id")["sla_violated"].to_dict()
    assert sla == {"a": False, "b": False, "c": True, "d": False}
    assert r.summary["sla_violations"] == 1
    # cut at 1800: c has not started and can no longer start by 1800; b still can
    cut = run(one_gpu, *jobs, until=1800)
    sla = cut.jobs.set_index("job_id")["sla_violated"].to_dict()
    assert sla == {"a": False, "b": False, "c": True, "d": False}
    assert cut.summary["sla_violations"] == 1 and cut.summary["jobs_never_started"] == 3


# --- tenants.parquet -------------------------------------------------------------------


def test_tenants_table_of_a_two_user_run(one_gpu):
    # one GPU, fifo:
    #   a alice/x  0-100                         wait 0
    #   b bob/x    100-150                       wait 100
    #   c alice/y  150-170, deadline 150: missed  wait 140
    #   d bob/y    2 GPUs: rejected at 20 (demands 20 GPU-s, gets nothing)
    #   e bob/y    half a GPU, 170-210: 20 GPU-s  wait 140
    r = run(one_gpu, JobSpec("a", 0, 1, 100, user="alice", vc="x"),
            JobSpec("b", 0, 1, 50, user="bob", vc="x"),
            JobSpec("c", 10, 1, 20, user="alice", vc="y", deadline=150.0),
            JobSpec("d", 20, 2, 10, user="bob", vc="y"),
            JobSpec("e", 30, 1, 40, user="bob", vc="y", gpu_share=0.5))
    ends = r.jobs.set_index("job_id")["end_time"].to_dict()
    assert ends == {"a": 100.0, "b": 150.0, "c": 170.0, "d": 20.0, "e": 210.0}
    t = r.tenants
    assert tuple(t.columns) == TENANT_COLUMNS
    h, total = 3600.0, 190.0  # GPU-s received: 100 + 50 + 20 + 20
    want = pd.DataFrame([
        ("user", "alice", 2, 120 / h, 120 / h, 70.0, 133.0, 130.0, 1, 120 / total),
        ("user", "bob", 3, 90 / h, 70 / h, 120.0, 138.0, 165.0, 0, 70 / total),
        ("vc", "x", 2, 150 / h, 150 / h, 50.0, 95.0, 125.0, 0, 150 / total),
        ("vc", "y", 3, 60 / h, 40 / h, 140.0, 140.0, 170.0, 1, 40 / total),
    ], columns=list(TENANT_COLUMNS))
    pd.testing.assert_frame_equal(t.reset_index(drop=True), want, check_dtype=False)
    assert t["jobs"].dtype == "int64" and t["sla_violations"].dtype == "int64"
    for kind in ("user", "vc"):
        assert t[t["kind"] == kind]["share_received"].sum() == pytest.approx(1.0)
    # Jain over users of received / demanded: alice 1, bob 70/90
    x = [1.0, 70 / 90]
    assert r.summary["fairness_jain"] == pytest.approx(sum(x) ** 2 / (2 * sum(v * v for v in x)))
    assert r.summary["sla_violations"] == 1


def test_tenants_of_a_censored_run_count_waits_and_holds_up_to_the_end(one_gpu):
    r = run(one_gpu, JobSpec("a", 0, 1, 100, user="u1"), JobSpec("b", 10, 1, 50, user="u2"),
            until=50)
    t = r.tenants.set_index(["kind", "tenant"])
    assert t.loc[("user", "u1"), "gpu_hours_received"] == pytest.approx(50 / 3600)
    assert t.loc[("user", "u2"), "queueing_delay_mean"] == 40.0
    assert math.isnan(t.loc[("user", "u2"), "jct_mean"])
    assert t.loc[("vc", "default"), "queueing_delay_mean"] == 20.0
    assert t.loc[("user", "u2"), "share_received"] == 0.0


def test_tenants_of_no_jobs_is_an_empty_table_with_the_columns():
    empty = tenants_frame(pd.DataFrame(columns=["user", "vc", "status", "queueing_delay",
                                                "jct", "duration", "num_gpus",
                                                "gpu_seconds"]))
    assert tuple(empty.columns) == TENANT_COLUMNS and len(empty) == 0


def test_tenants_are_the_same_from_text_object_and_reindexed_columns(one_gpu):
    # tenants are grouped by the name column itself (no numpy copy of it): a jobs table
    # read back with object columns, or with another index, gives the same table
    r = run(one_gpu, JobSpec("a", 0, 1, 100, user="zed", vc="v2"),
            JobSpec("b", 10, 1, 50, user="amy", vc="v1"),
            JobSpec("c", 20, 1, 50, user="zed", vc="v1"))
    assert r.tenants["tenant"].tolist() == ["amy", "zed", "v1", "v2"]
    as_objects = r.jobs.astype({"user": object, "vc": object})
    as_objects.index = as_objects.index + 5
    pd.testing.assert_frame_equal(tenants_frame(as_objects), r.tenants)
    numbered = r.jobs.assign(user=[3, 1, 3])  # not text: named by str()
    assert tenants_frame(numbered)["tenant"].tolist()[:2] == ["1", "3"]


def test_result_folder_has_tenants_and_new_columns_and_follows_the_spec(one_gpu, tmp_path,
                                                                       shared_dir):
    r = run(one_gpu, JobSpec("a", 0, 1, 100, user="u1", deadline=50.0),
            JobSpec("b", 10, 1, 50, user="u2", max_wait_hours=0.001), until=50)
    folder = r.write(tmp_path / "runs" / "fifo")
    pd.testing.assert_frame_equal(pd.read_parquet(folder / "tenants.parquet"), r.tenants,
                                  check_dtype=False)
    jobs = pd.read_parquet(folder / "jobs.parquet")
    for col in ("response_time", "censored", "deadline", "sla_violated"):
        assert col in jobs, col
    assert jobs["censored"].dtype == bool and jobs["sla_violated"].dtype == bool
    assert jobs["sla_violated"].tolist() == [True, True]  # end 50 >= 50; 3.6 s wait > limit
    tool = shared_dir / "tools" / "spec_check.py"
    if not tool.is_file():
        pytest.skip("spec_check.py not available")
    p = subprocess.run([sys.executable, str(tool), str(tmp_path / "runs")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
