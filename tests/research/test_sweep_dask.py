"""Sweeps on Dask: a real LocalCluster (2 worker processes), tcp:// and a killed worker."""

from __future__ import annotations

import os
import signal

import pandas as pd
import pytest
from click.testing import CliRunner
from research_helpers import write_inputs

from schedlab.app.cli_research import sweep as sweep_cmd
from schedlab.app.sweep import load_sweep, open_executor, run_sweep

distributed = pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as c:
        yield c


def invoke(*args: str):
    return CliRunner().invoke(sweep_cmd, list(args), catch_exceptions=False)


def test_dask_local_and_the_process_pool_give_identical_summaries(tmp_path):
    path = write_inputs(tmp_path / "in")
    pool, dask = tmp_path / "pool", tmp_path / "dask"
    res = invoke(str(path), "--out", str(pool), "-j", "2")
    assert res.exit_code == 0, res.output
    res = invoke(str(path), "--out", str(dask), "-j", "2", "--scheduler", "dask-local")
    assert res.exit_code == 0, res.output
    assert "12 runs: 12 ran, 0 finished before, 0 failed" in res.stdout
    a = pd.read_parquet(pool / "summary.parquet").drop(columns="wall_seconds")
    b = pd.read_parquet(dask / "summary.parquet").drop(columns="wall_seconds")
    assert len(a) == 12
    pd.testing.assert_frame_equal(a, b)
    for folder in a["folder"]:
        pd.testing.assert_frame_equal(pd.read_parquet(pool / folder / "jobs.parquet"),
                                      pd.read_parquet(dask / folder / "jobs.parquet"))


def test_an_existing_cluster_by_address(cluster, tmp_path):
    path = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    res = invoke(str(path), "--out", str(out), "--scheduler", cluster.scheduler_address)
    assert res.exit_code == 0, res.output
    table = pd.read_parquet(out / "summary.parquet")
    assert len(table) == 12 and set(table["status"]) == {"ok"}


def test_a_worker_killed_mid_sweep_still_yields_every_row_once(cluster, tmp_path):
    spec = load_sweep(write_inputs(tmp_path / "in", jobs=300))
    out = tmp_path / "out"
    killed: list[str] = []
    with distributed.Client(cluster.scheduler_address) as client:
        pids = client.run(os.getpid)

        def kill_a_busy_worker(outcome):
            if killed:
                return
            busy = [w for w, keys in sorted(client.processing().items()) if keys]
            if busy:  # SIGKILL the worker process while it runs a task
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])

        with open_executor(cluster.scheduler_address) as executor:
            report = run_sweep(spec, out, executor, on_outcome=kill_a_busy_worker)
        assert killed, "no worker was busy after the first run finished"
        assert report.failed == () and report.ran + report.skipped == len(spec.points)
        client.wait_for_workers(2, timeout=30)  # the nanny restarted it
        assert pids[killed[0]] not in client.run(os.getpid).values()
    table = pd.read_parquet(out / "summary.parquet")
    assert sorted(table["folder"]) == sorted(p.folder for p in spec.points)
    assert table["folder"].is_unique and set(table["status"]) == {"ok"}
