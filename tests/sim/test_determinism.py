"""Same inputs and seed, same results: in one process, across processes, via the Python API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from schedlab.app.cli import main
from schedlab.policies import registered_policies

SUMMARY_KEYS = """
jobs_submitted jobs_completed jobs_failed jobs_killed jobs_rejected jobs_unfinished makespan
queueing_delay_mean queueing_delay_p50 queueing_delay_p95 queueing_delay_p99 jct_mean jct_p50
jct_p95 jct_p99 slowdown_mean utilization_mean fragmentation_mean fragmentation_fgd_mean
idle_while_blocked_gpu_hours preemptions migrations lost_gpu_hours fairness_jain
throughput_jobs_per_hour
""".split()


def read_run(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    """The jobs, events and timeline tables and the summary without wall_seconds."""
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert isinstance(summary.pop("wall_seconds"), float)
    return (pd.read_parquet(folder / "jobs.parquet"), pd.read_parquet(folder / "events.parquet"),
            pd.read_parquet(folder / "timeline.parquet"), summary)


def assert_same_run(a: Path, b: Path) -> None:
    jobs_a, events_a, timeline_a, summary_a = read_run(a)
    jobs_b, events_b, timeline_b, summary_b = read_run(b)
    pd.testing.assert_frame_equal(jobs_a, jobs_b, check_exact=True)
    pd.testing.assert_frame_equal(events_a, events_b, check_exact=True)
    pd.testing.assert_frame_equal(timeline_a, timeline_b, check_exact=True)
    assert summary_a == summary_b


@pytest.mark.parametrize("policy", registered_policies())
def test_same_seed_same_results_for_every_policy(tmp_path, policy):
    runner = CliRunner()
    for out in ("first", "second"):
        r = runner.invoke(main, ["run", "--policy", policy, "--max-jobs", "500", "--seed", "7",
                                 "--out", str(tmp_path / out), "--quiet"],
                          catch_exceptions=False)
        assert r.exit_code == 0, r.output
    jobs = pd.read_parquet(tmp_path / "first" / policy / "jobs.parquet")
    assert len(jobs) == 500
    assert_same_run(tmp_path / "first" / policy, tmp_path / "second" / policy)


def test_same_results_across_processes_with_different_hash_seeds(tmp_path):
    policies = ("fifo", "fifo-backfill")
    procs = {}
    for hash_seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        cmd = [sys.executable, "-m", "schedlab", "run", "--max-jobs", "400",
               *(a for p in policies for a in ("--policy", p)),
               "--quiet", "--out", str(tmp_path / hash_seed)]
        procs[hash_seed] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)
    for hash_seed, p in procs.items():
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"PYTHONHASHSEED={hash_seed}: {out}{err}"
    for policy in policies:
        assert_same_run(tmp_path / "1" / policy, tmp_path / "12345" / policy)


def test_python_api_of_spec_section_4():
    from schedlab.policies import make_policy
    from schedlab.policies import registered_policies as listed
    from schedlab.sim import Simulation, load_topology, load_trace

    assert {"fifo", "fifo-backfill"} <= set(listed())
    assert listed() == sorted(listed())
    trace = load_trace("default")
    topology = load_topology("default")
    policy = make_policy("fifo")
    result = Simulation(trace, topology, policy, seed=0,
                        params={"placer": "pack"}).run(until=None)
    for frame in (result.jobs, result.events, result.timeline):
        assert isinstance(frame, pd.DataFrame)
        assert len(frame) > 0
    assert len(result.jobs) == len(trace)
    assert result.jobs.job_id.is_unique
    assert set(result.jobs.status) == {"completed"}
    assert {"time", "job_id", "kind"} <= set(result.events.columns)
    assert {"time", "utilization", "pending_jobs"} <= set(result.timeline.columns)
    summary = result.summary
    assert isinstance(summary, dict)
    for key in SUMMARY_KEYS:
        assert isinstance(summary[key], int | float), key
    assert summary["jobs_submitted"] == len(trace)
    assert summary["policy"] == "fifo"
    assert summary["params"]["placer"] == "pack"

    # a policy given by name, inputs given by name: the same run
    again = Simulation("default", "default", "fifo", seed=0, params={"placer": "pack"}).run()
    pd.testing.assert_frame_equal(again.jobs, result.jobs, check_exact=True)
    pd.testing.assert_frame_equal(again.events, result.events, check_exact=True)


def test_python_api_errors_name_the_culprit():
    from schedlab.policies import make_policy
    from schedlab.sim import Simulation, load_topology
    from schedlab.sim.errors import InvalidParameter, UnknownName

    with pytest.raises(UnknownName, match=r"'fifoo'.*did you mean 'fifo'.*known: .*fifo"):
        make_policy("fifoo")
    with pytest.raises(InvalidParameter, match=r"'nosuch'.*known: .*placer"):
        Simulation("default", "default", "fifo", params={"nosuch": 1})
    with pytest.raises(UnknownName, match="'nosuchtopo'"):
        load_topology("nosuchtopo")
