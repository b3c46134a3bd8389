"""The `schedlab` command line (SPEC sec. 1, 5): outputs, error messages, progress, rerun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from sim.app.cli import main
from sim.engine import Simulation

SUMMARY_KEYS = """
jobs_submitted jobs_completed jobs_failed jobs_killed jobs_rejected jobs_unfinished makespan
queueing_delay_mean queueing_delay_p50 queueing_delay_p95 queueing_delay_p99 jct_mean jct_p50
jct_p95 jct_p99 slowdown_mean utilization_mean fragmentation_mean fragmentation_fgd_mean
idle_while_blocked_gpu_hours preemptions migrations lost_gpu_hours fairness_jain
throughput_jobs_per_hour policy trace topology seed params schedlab_version wall_seconds
events_processed
""".split()

RESULT_FILES = ("jobs.parquet", "events.parquet", "timeline.parquet", "nodes.parquet",
                "summary.json",
                "config.json")

BAD_CSV = (
    "job_id,submit_time,num_gpus,duration\n"
    "a,0,1,10\n"
    "b,5,2,20\n"
    "c,7,1,-3\n"   # data row 3 (file line 4): duration must be > 0
    "d,9,1,4\n"
)


def cli(*args: str):
    """Invoke `schedlab ARGS` in-process; stdout and stderr are kept apart."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run_module(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m sim ARGS` in a fresh interpreter, output captured (so not a terminal)."""
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout, check=False)


def load_summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def load_config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def rerun_from_config(config: dict) -> pd.DataFrame:
    """Rerun a result folder's config through the Python API; return its jobs table."""
    sim = Simulation(config["trace"], config["topology"], config["policy"],
                     seed=config["seed"], params=config["params"],
                     max_jobs=config["max_jobs"])
    return sim.run(until=config["until"]).jobs


@pytest.fixture
def bad_csv(tmp_path: Path) -> Path:
    path = tmp_path / "bad.csv"
    path.write_text(BAD_CSV, encoding="utf-8")
    return path


# --- python -m sim, result files, SPEC sec. 5 ------------------------------------------


def test_python_m_sim_run_writes_every_result_file_following_the_spec(tmp_path, shared_dir):
    out = tmp_path / "out"
    p = run_module("run", "--policy", "fifo", "--max-jobs", "200", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    folder = out / "fifo"
    for name in RESULT_FILES:
        assert (folder / name).is_file(), f"{name} missing; folder holds {os.listdir(folder)}"
    summary = load_summary(folder)
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    assert not missing, f"summary.json lacks {missing}"
    assert summary["policy"] == "fifo"
    assert summary["jobs_submitted"] == 200
    assert summary["jobs_unfinished"] == 0
    assert "%|" not in p.stderr  # output is a pipe: no progress bar
    check = subprocess.run([sys.executable, str(shared_dir / "tools" / "spec_check.py"),
                            str(out)], capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_python_m_sim_help_and_version():
    p = run_module("--help")
    assert p.returncode == 0, p.stderr
    for command in ("run", "policies", "topology"):
        assert command in p.stdout
    v = run_module("--version")
    assert v.returncode == 0, v.stderr
    from sim import __version__

    assert __version__ in v.stdout


def test_no_temporary_files_left_in_the_output_folder(tmp_path):
    out = tmp_path / "out"
    r = cli("run", "--policy", "fifo", "--policy", "fifo-backfill", "--max-jobs", "100",
            "--out", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["fifo", "fifo-backfill"]
    for folder in out.iterdir():
        assert sorted(p.name for p in folder.iterdir()) == sorted(RESULT_FILES)
    hidden = [str(p.relative_to(out)) for p in out.rglob(".*")]
    assert not hidden, f"temporary files left behind: {hidden}"


# --- run: table and parameters ---------------------------------------------------------


def test_run_with_two_policies_prints_a_table_naming_both(tmp_path):
    r = cli("run", "--policy", "fifo", "--policy", "fifo-backfill", "--max-jobs", "100",
            "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    first_cells = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    assert "policy" in first_cells  # the header
    assert "fifo" in first_cells
    assert "fifo-backfill" in first_cells
    assert str(tmp_path.resolve()) in r.stdout
    for name in ("fifo", "fifo-backfill"):
        assert load_summary(tmp_path / name)["policy"] == name


def test_quiet_prints_no_table(tmp_path):
    r = cli("run", "--policy", "fifo", "--max-jobs", "50", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    assert r.stderr == ""


def test_param_placer_first_fit_is_accepted_and_recorded(tmp_path):
    r = cli("run", "--policy", "fifo", "--max-jobs", "100", "--param", "placer=first-fit",
            "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 0, r.output
    assert load_summary(tmp_path / "fifo")["params"]["placer"] == "first-fit"
    assert load_config(tmp_path / "fifo")["params"] == {"placer": "first-fit"}


def test_unknown_param_exits_2_naming_it_and_the_known_keys(tmp_path):
    r = cli("run", "--policy", "fifo", "--max-jobs", "50", "--param", "nosuch=1",
            "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "'nosuch'" in r.stderr
    assert "known:" in r.stderr
    for key in ("placer", "restore_overhead", "locality_factors"):
        assert key in r.stderr
    assert "Traceback" not in r.output
    assert not (tmp_path / "fifo").exists()


def test_bad_placer_value_suggests_pack(tmp_path):
    r = cli("run", "--policy", "fifo", "--max-jobs", "50", "--param", "placer=pak",
            "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "placer" in r.stderr
    assert "'pak'" in r.stderr
    assert "did you mean 'pack'" in r.stderr
    assert "first-fit" in r.stderr  # the allowed values


def test_param_without_equals_exits_2(tmp_path):
    r = cli("run", "--policy", "fifo", "--param", "placer", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "KEY=VALUE" in r.stderr


def test_unknown_policy_exits_2_with_did_you_mean_and_the_known_list(tmp_path):
    r = cli("run", "--policy", "fifoo", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "'fifoo'" in r.stderr
    assert "did you mean 'fifo'" in r.stderr
    assert "known: " in r.stderr and "fifo, fifo-backfill" in r.stderr
    assert not any(tmp_path.iterdir())


# --- run: bad inputs -------------------------------------------------------------------


def test_missing_trace_file_exits_2_naming_it(tmp_path):
    missing = tmp_path / "missing.csv"
    r = cli("run", "--policy", "fifo", "--trace", str(missing), "--out", str(tmp_path / "o"),
            "--quiet")
    assert r.exit_code == 2
    assert str(missing) in r.stderr
    assert "not found" in r.stderr


def test_unknown_trace_name_exits_2_naming_it_and_the_bundled_ones(tmp_path):
    r = cli("run", "--policy", "fifo", "--trace", "defualt", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "'defualt'" in r.stderr
    assert "did you mean 'default'" in r.stderr


def test_unknown_topology_exits_2_naming_it_and_the_presets(tmp_path):
    r = cli("run", "--policy", "fifo", "--topology", "nosuchtopo", "--max-jobs", "10",
            "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "'nosuchtopo'" in r.stderr
    for preset in ("default", "dgx1-v100", "dgx-a100"):
        assert preset in r.stderr


def test_bad_trace_row_exits_2_naming_file_row_column_and_value(tmp_path, bad_csv):
    r = cli("run", "--policy", "fifo", "--trace", str(bad_csv), "--out", str(tmp_path / "o"),
            "--quiet")
    assert r.exit_code == 2
    msg = r.stderr
    assert msg.startswith("error: ")
    assert "bad.csv" in msg
    assert "row 3" in msg
    assert "duration" in msg
    assert "'-3'" in msg
    assert "Traceback" not in r.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("quiet", [False, True], ids=["loud", "quiet"])
def test_skip_bad_rows_succeeds_and_warns_with_the_count(tmp_path, bad_csv, quiet):
    # --quiet drops the bar and the table (its help text), not the warning about lost input
    out = tmp_path / "o"
    r = cli("run", "--policy", "fifo", "--trace", str(bad_csv), "--skip-bad-rows",
            "--out", str(out), *(["--quiet"] if quiet else []))
    assert r.exit_code == 0, r.output
    assert "warning" in r.stderr
    assert "skipped 1 " in r.stderr
    assert "row 3" in r.stderr
    summary = load_summary(out / "fifo")
    assert summary["jobs_submitted"] == 3
    assert summary["jobs_completed"] == 3
    assert summary["jobs_bad_rows"] == 1


# --- run: --until and progress ---------------------------------------------------------


def test_until_leaves_unfinished_jobs(tmp_path):
    r = cli("run", "--policy", "fifo", "--max-jobs", "200", "--until", "3600",
            "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 0, r.output
    folder = tmp_path / "fifo"
    jobs = pd.read_parquet(folder / "jobs.parquet")
    assert (jobs.status == "unfinished").any()
    assert (jobs.submit_time <= 3600).all()
    unfinished = jobs[jobs.status == "unfinished"]
    assert unfinished.end_time.isna().all()
    summary = load_summary(folder)
    assert summary["jobs_unfinished"] > 0
    assert summary["jobs_unfinished"] == len(unfinished)
    assert load_config(folder)["until"] == 3600


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path):
    # no --quiet: only the missing terminal keeps the bar away
    r = cli("run", "--policy", "fifo", "--max-jobs", "300", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "%|" not in r.stderr
    assert "%|" not in r.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_shows_on_a_terminal(tmp_path):
    """The other side of the test above: with stderr on a terminal a bar does appear."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    # a fresh pty is 0 columns wide, and tqdm draws nothing at width 0: make it 24 x 80
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        try:
            p = subprocess.Popen([sys.executable, "-m", "sim", "run", "--policy", "fifo",
                                  "--max-jobs", "300", "--out", str(tmp_path)],
                                 stdout=subprocess.DEVNULL, stderr=follower)
        finally:
            os.close(follower)  # the child holds its own copy
        chunks = []
        while True:  # read while it runs: a full pty buffer would block the child
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO once no process holds the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert p.wait(timeout=60) == 0
    finally:
        os.close(leader)
    assert "%|" in b"".join(chunks).decode("utf-8", "replace")


# --- policies and topology show ---------------------------------------------------------


def test_policies_lists_the_policies_and_the_engine_parameters():
    r = cli("policies")
    assert r.exit_code == 0, r.output
    names = {line.split(":")[0] for line in r.stdout.splitlines()
             if line and not line.startswith(" ")}
    assert {"fifo", "fifo-backfill"} <= names
    params = {line.split()[0] for line in r.stdout.splitlines() if line.startswith("    ")}
    assert "placer" in params
    assert "consolidated" in r.stdout  # placer default
    assert "first-fit" in r.stdout


def test_topology_show_dgx1_prints_levels_and_eight_gpus():
    r = cli("topology", "show", "dgx1-v100")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "dgx1-v100" in out
    assert "8 GPUs" in out
    levels = next(line for line in out.splitlines() if line.startswith("levels:"))
    for level in ("node 1", "socket 2", "switch 4", "gpu 8"):
        assert level in levels
    assert "V100 8" in out


def test_topology_show_unknown_exits_2_naming_it():
    r = cli("topology", "show", "nosuch")
    assert r.exit_code == 2
    assert "'nosuch'" in r.stderr
    assert "dgx1-v100" in r.stderr


# --- config.json reruns the run --------------------------------------------------------


@pytest.mark.parametrize("extra", [[], ["--until", "7200"]], ids=["to-end", "until"])
def test_config_json_reruns_to_identical_jobs(tmp_path, extra):
    r = cli("run", "--policy", "fifo-backfill", "--max-jobs", "150", "--seed", "3",
            "--param", "placer=first-fit", "--param", "restore_overhead=10",
            *extra, "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 0, r.output
    folder = tmp_path / "fifo-backfill"
    config = load_config(folder)
    assert config["policy"] == "fifo-backfill"
    assert config["seed"] == 3
    assert config["params"] == {"placer": "first-fit", "restore_overhead": "10"}
    assert config["max_jobs"] == 150
    expected = pd.read_parquet(folder / "jobs.parquet")
    pd.testing.assert_frame_equal(rerun_from_config(config), expected, check_exact=True)


def test_config_json_reruns_from_another_folder_with_a_relative_trace(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "t.csv").write_text(BAD_CSV.replace("-3", "3"), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "a")
    r = cli("run", "--policy", "fifo", "--trace", "t.csv", "--out", "res", "--quiet")
    assert r.exit_code == 0, r.output
    folder = tmp_path / "a" / "res" / "fifo"
    monkeypatch.chdir(tmp_path)
    pd.testing.assert_frame_equal(rerun_from_config(load_config(folder)),
                                  pd.read_parquet(folder / "jobs.parquet"))


def test_config_json_records_skip_bad_rows(tmp_path, bad_csv):
    r = cli("run", "--policy", "fifo", "--trace", str(bad_csv), "--skip-bad-rows",
            "--out", str(tmp_path / "o"), "--quiet")
    assert r.exit_code == 0, r.output
    folder = tmp_path / "o" / "fifo"
    config = load_config(folder)
    from traces import load_trace

    trace = load_trace(config["trace"], skip_bad_rows=config.get("skip_bad_rows", False))
    sim = Simulation(trace, config["topology"], config["policy"], seed=config["seed"],
                     params=config["params"], max_jobs=config["max_jobs"])
    pd.testing.assert_frame_equal(sim.run(until=config["until"]).jobs,
                                  pd.read_parquet(folder / "jobs.parquet"))
