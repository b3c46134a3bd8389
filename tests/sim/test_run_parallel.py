"""`schedlab run -j N`: policies on a process pool give the numbers of a sequential run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from schedlab.app.cli import main
from schedlab.app.run_pool import ProgressBoard
from schedlab.sim.engine import Simulation

POLICIES = ("fifo", "tiresias-las", "drf", "gandiva")
TABLES = ("jobs", "events", "timeline", "tenants", "nodes")


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[Path, Path, str]:
    """The same four policies run with -j 1 and with -j 2."""
    root = tmp_path_factory.mktemp("parallel")
    outputs = []
    for j in ("1", "2"):
        args = ["run", "--max-jobs", "400", "-j", j, "--out", str(root / f"j{j}")]
        for p in POLICIES:
            args += ["--policy", p]
        r = cli(*args)
        assert r.exit_code == 0, r.output
        outputs.append(r.stdout)
    return root / "j1", root / "j2", outputs[1]


def test_parallel_summaries_equal_sequential_except_wall_seconds(both) -> None:
    seq, par, _ = both
    for p in POLICIES:
        a, b = summary(seq / p), summary(par / p)
        assert a.pop("wall_seconds") >= 0 and b.pop("wall_seconds") >= 0
        assert a == b, p


def test_parallel_tables_equal_sequential(both) -> None:
    seq, par, _ = both
    for p in POLICIES:
        for t in TABLES:
            pd.testing.assert_frame_equal(pd.read_parquet(seq / p / f"{t}.parquet"),
                                          pd.read_parquet(par / p / f"{t}.parquet"))


def test_table_keeps_the_order_of_the_policies_and_ends_with_a_total(both) -> None:
    _, _, out = both
    lines = out.splitlines()
    rows = [line.split()[0] for line in lines[2:2 + len(POLICIES)]]
    assert rows == list(POLICIES)
    total = [line for line in lines if line.startswith("total: ")]
    assert len(total) == 1
    assert "4 run(s), 1600 jobs simulated in" in total[0] and "s wall" in total[0]
    assert "on 2 process(es)" in total[0]


def test_a_failing_policy_fails_the_command_cleanly(tmp_path) -> None:
    r = cli("run", "--policy", "fifo", "--policy", "sjf", "--param", "nope=1",
            "-j", "2", "--out", str(tmp_path))
    assert r.exit_code == 2 and r.stderr.startswith("error: ")


def test_progress_is_jobs_final_out_of_jobs_total() -> None:
    """The engine reports (now, jobs final, jobs total); the last report is total/total."""
    from schedlab.topologies.build import uniform_topology
    from schedlab.traces import load_trace

    seen: list[tuple[float, int, int]] = []
    Simulation(load_trace("default"), uniform_topology(4), "fifo",
               max_jobs=60).run(progress=lambda *a: seen.append(a))
    assert seen[-1][1] == seen[-1][2] == 60
    dones = [d for _, d, _ in seen]
    assert dones == sorted(dones)
    times = [t for t, _, _ in seen]
    assert times == sorted(times)
    # the last submission is well before the end: the bar is not full while jobs still run
    last_submit = max(s.submit_time for s in load_trace("default").jobs[:60])
    assert any(t >= last_submit and d < 60 for t, d, _ in seen)


def test_progress_board_lines(capsys) -> None:
    board = ProgressBoard(["fifo", "tiresias-las"])
    board.update("fifo", 0.0, 0, -1)
    board.update("fifo", 7200.0, 10, 40)
    board.finish("fifo", {"jobs_completed": 38, "jobs_rejected": 2, "jobs_submitted": 40,
                          "wall_seconds": 1.25})
    board.update("fifo", 9000.0, 40, 40)  # a late report after the end draws nothing
    board.finish("tiresias-las", None, "boom")
    board.close()
    err = capsys.readouterr().err
    assert "fifo          done: 40/40 jobs final in 1.2 s" in err
    assert "tiresias-las  failed: boom" in err
    assert "10/40 jobs final, simulated t=2.0 h" in err


def test_previous_wall_orders_a_rerun_longest_first(both) -> None:
    from schedlab.app.run_pool import previous_wall

    seq, _, _ = both
    assert previous_wall(seq / "gandiva") == summary(seq / "gandiva")["wall_seconds"]
    assert previous_wall(seq / "nosuch") == float("inf")
