"""The `schedlab` command line (contract.md#sec-1, #sec-5): outputs, errors, progress, rerun."""

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
from schedlab.sim.engine import Simulation

SUMMARY_KEYS = """
jobs_submitted jobs_completed jobs_failed jobs_killed jobs_rejected jobs_unfinished makespan
queueing_delay_mean queueing_delay_p50 queueing_delay_p95 queueing_delay_p99 jct_mean jct_p50
jct_p95 jct_p99 slowdown_mean utilization_mean fragmentation_mean fragmentation_fgd_mean
idle_while_blocked_gpu_hours preemptions migrations lost_gpu_hours fairness_jain
throughput_jobs_per_hour policy trace topology seed params schedlab_version wall_seconds
events_processed
""".split()

RESULT_FILES = ("jobs.parquet", "events.parquet", "timeline.parquet", "nodes.parquet",
                "tenants.parquet", "summary.json",
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
    """`python -m schedlab ARGS` in a fresh interpreter, output captured (so not a terminal)."""
    return subprocess.run([sys.executable, "-m", "schedlab", *args], capture_output=True, text=True,
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


# --- python -m schedlab, result files, contract.md#sec-5 ------------------------------------------


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
    from schedlab import __version__

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
            p = subprocess.Popen([sys.executable, "-m", "schedlab", "run", "--policy", "fifo",
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
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert "%|" in shown
    # the bar counts jobs that ended (not the submissions), with the simulated time
    assert "/300 jobs final" in shown and "simulated t=" in shown
    assert "done: 300/300 jobs final" in shown  # one closing line per policy


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


# --- run: the output folder ------------------------------------------------------------


@pytest.mark.parametrize("where", ["somefile/sub", "somefile"], ids=["under-a-file", "a-file"])
def test_an_unwritable_out_fails_before_any_simulation_in_one_line(tmp_path, monkeypatch,
                                                                   where):
    # tests run as root, for whom a read-only folder is writable: a path under a regular
    # file cannot be created by anyone
    (tmp_path / "somefile").write_text("x", encoding="utf-8")
    out = tmp_path / where
    import schedlab.app.cli as cli_module

    def no_simulation(*_a, **_k):
        raise AssertionError("simulated before checking --out")

    monkeypatch.setattr(cli_module, "run_tasks", no_simulation)
    r = cli("run", "--policy", "fifo", "--max-jobs", "20", "--out", str(out), "--quiet")
    if where == "somefile":  # click's own check of an existing path: also exit 2
        assert r.exit_code == 2 and "is a file" in r.stderr
        return
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: --out: cannot write to ")
    assert str(out) in r.stderr and f"{str(tmp_path / 'somefile')!r} is a file" in r.stderr


def test_an_unwritable_out_in_a_fresh_interpreter_leaks_no_traceback(tmp_path):
    (tmp_path / "somefile").write_text("x", encoding="utf-8")
    p = run_module("run", "--policy", "fifo", "--max-jobs", "20", "--out",
                   str(tmp_path / "somefile" / "sub"))
    assert p.returncode == 2
    assert p.stderr.startswith("error: --out: cannot write to ") and "Traceback" not in p.stderr
    assert p.stdout == ""


def test_a_write_failing_after_the_run_is_a_clean_error(tmp_path, monkeypatch):
    from schedlab.sim.results import SimResult

    def full_disk(self, out_dir, extra=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SimResult, "write", full_disk)
    r = cli("run", "--policy", "fifo", "--max-jobs", "20", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert r.stderr == (f"error: cannot write results to {str(tmp_path / 'fifo')!r}: "
                        "No space left on device\n")


def test_a_rerun_replaces_a_result_folder_whole(tmp_path):
    folder = tmp_path / "fifo"
    folder.mkdir()
    (folder / "stale.txt").write_text("from an older version", encoding="utf-8")
    (folder / "summary.json").write_text("{}", encoding="utf-8")  # an earlier result
    (tmp_path / ".fifo.tmp-0123456789ab").mkdir()  # left by a killed write long ago
    old = 1_000_000_000
    os.utime(tmp_path / ".fifo.tmp-0123456789ab", (old, old))
    r = cli("run", "--policy", "fifo", "--max-jobs", "20", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in folder.iterdir()) == sorted(RESULT_FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


# --- run: warnings of a summary --------------------------------------------------------


def test_warnings_of_a_summary_are_printed_under_the_table_and_kept(tmp_path, monkeypatch):
    real = Simulation.run
    notes = {"fifo": ["trace ends before 3 jobs finished", "placer fell back to first-fit"],
             "fifo-backfill": []}

    def with_warnings(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        result.summary["warnings"] = list(notes[result.summary["policy"]])
        return result

    monkeypatch.setattr(Simulation, "run", with_warnings)
    for quiet in ([], ["--quiet"]):  # -j 1: the runs (and the patch) stay in this process
        r = cli("run", "--policy", "fifo", "--policy", "fifo-backfill", "--max-jobs", "30",
                "-j", "1", "--out", str(tmp_path), *quiet)
        assert r.exit_code == 0, r.output
        assert r.stderr.splitlines() == [
            "warning: fifo: trace ends before 3 jobs finished",
            "warning: fifo: placer fell back to first-fit",
        ]
        assert ("fifo-backfill" in r.stdout) is not bool(quiet)
    assert load_summary(tmp_path / "fifo")["warnings"] == notes["fifo"]
    assert load_summary(tmp_path / "fifo-backfill")["warnings"] == []
    # check reads such folders: the list is not a metric
    from schedlab.app.check import collect_runs, compare_all, make_baseline

    runs = collect_runs(tmp_path)
    baseline = make_baseline(runs)
    assert "warnings" not in baseline["runs"]["fifo"]["metrics"]
    assert not [row for row in compare_all(baseline, runs) if row.failed]


def test_warning_lines_take_a_single_string_and_skip_missing_ones():
    from schedlab.app.cli import format_table, warning_lines

    summaries = [{"policy": "a", "warnings": "only one"}, {"policy": "b"},
                 {"policy": "c", "warnings": None}, {"policy": "d", "warnings": ["x", "y"]}]
    assert warning_lines(summaries) == ["warning: a: only one", "warning: d: x",
                                        "warning: d: y"]
    table = format_table([{"policy": "a", "jobs_completed": 1, "jobs_rejected": 0,
                           "jobs_unfinished": 0, "queueing_delay_mean": 1.0,
                           "queueing_delay_p95": 2.0, "jct_mean": 3.0, "jct_p95": 4.0,
                           "makespan": 3600.0, "utilization_mean": 0.5,
                           "fragmentation_mean": 0.1, "preemptions": 0, "wall_seconds": 0.1,
                           "warnings": ["x"]}])
    assert table.splitlines()[2].startswith("a ")


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
    from schedlab.traces import load_trace

    trace = load_trace(config["trace"], skip_bad_rows=config.get("skip_bad_rows", False))
    sim = Simulation(trace, config["topology"], config["policy"], seed=config["seed"],
                     params=config["params"], max_jobs=config["max_jobs"])
    pd.testing.assert_frame_equal(sim.run(until=config["until"]).jobs,
                                  pd.read_parquet(folder / "jobs.parquet"))


def test_a_run_never_replaces_a_folder_of_other_files(tmp_path):
    folder = tmp_path / "fifo"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    r = cli("run", "--policy", "fifo", "--max-jobs", "20", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "refusing to replace it" in r.stderr and "Traceback" not in r.stderr
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "mine"
