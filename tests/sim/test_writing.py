"""Result files and folders written whole (sim.writing): swap, crash, modes, leftovers, kill."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_trace

import schedlab.sim.writing as writing
from schedlab.app.plots import save_png
from schedlab.app.sweep_file import RunPoint
from schedlab.app.sweep_run import write_error
from schedlab.sim.engine import Simulation
from schedlab.sim.results import SimResult
from schedlab.sim.results import atomic_text as results_atomic_text
from schedlab.sim.results import atomic_write as results_atomic_write
from schedlab.sim.writing import (
    FolderNotWritable,
    atomic_text,
    atomic_write,
    ensure_writable_dir,
    remove_strays,
    text_writer,
    write_folder,
)

RESULT_FILES = {"jobs.parquet", "events.parquet", "timeline.parquet", "nodes.parquet",
                "tenants.parquet", "summary.json", "config.json"}
JOBS = [(f"j{i}", 20.0 * i, (1, 2, 4)[i % 3], 100.0 + 10 * i) for i in range(12)]
HEX12 = "0123456789ab"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def hidden(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def small_result(dgx2, n: int = len(JOBS)) -> SimResult:
    return Simulation(make_trace(*JOBS[:n]), dgx2, "fifo", seed=0).run()


def failing_writer(path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("half a file")
    raise RuntimeError("disk on fire")


def test_the_old_names_stay_importable_from_sim_results():
    assert results_atomic_write is atomic_write and results_atomic_text is atomic_text


# --- the folder swap -------------------------------------------------------------------


def test_write_folder_replaces_the_folder_whole(tmp_path):
    final = tmp_path / "out" / "run"
    write_folder(final, {"a.txt": text_writer("old a"), "b.txt": text_writer("old b")})
    assert snapshot(final) == {"a.txt": b"old a", "b.txt": b"old b"}
    write_folder(final, {"a.txt": text_writer("new a"), "c.txt": text_writer("new c")})
    assert snapshot(final) == {"a.txt": b"new a", "c.txt": b"new c"}  # replaced, not merged
    assert hidden(final.parent) == []


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_writer_raising_midway_leaves_the_old_folder_intact_and_no_temp(
        tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(writing, "_exchange", lambda a, b: False)
    final = tmp_path / "run"
    write_folder(final, {"a.txt": text_writer("old a"), "b.txt": text_writer("old b")})
    before = snapshot(final)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_folder(final, {"a.txt": text_writer("new a"), "b.txt": failing_writer,
                             "c.txt": text_writer("never")})
    assert snapshot(final) == before
    assert hidden(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C in the middle: the same
        write_folder(final, {"a.txt": text_writer("new a"),
                             "b.txt": lambda p: (_ for _ in ()).throw(KeyboardInterrupt)})
    assert snapshot(final) == before and hidden(tmp_path) == []
    write_folder(final, {"a.txt": text_writer("new a")})
    assert snapshot(final) == {"a.txt": b"new a"} and hidden(tmp_path) == []


def test_two_renames_put_the_old_folder_back_when_the_second_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(writing, "_exchange", lambda a, b: False)
    final = tmp_path / "run"
    write_folder(final, {"a.txt": text_writer("old")})
    real_rename = os.rename

    def rename(src, dst):
        if Path(dst) == final and Path(src).name == "run":  # the new folder, not the old
            raise PermissionError(13, "Permission denied", str(dst))
        real_rename(src, dst)

    monkeypatch.setattr(writing.os, "rename", rename)
    with pytest.raises(PermissionError):
        write_folder(final, {"a.txt": text_writer("new")})
    monkeypatch.setattr(writing.os, "rename", real_rename)
    assert snapshot(final) == {"a.txt": b"old"} and hidden(tmp_path) == []


def test_a_result_that_fails_to_serialise_midway_keeps_the_old_result(tmp_path, dgx2):
    folder = tmp_path / "fifo"
    small_result(dgx2).write(folder)
    before = snapshot(folder)
    assert set(before) == RESULT_FILES
    bad = small_result(dgx2, 6)
    # jobs and events are written first, then the timeline cannot be: Parquet has no type
    # for a plain object
    bad.timeline = bad.timeline.assign(junk=[object()] * len(bad.timeline))
    with pytest.raises(Exception):  # noqa: B017 - pyarrow's own error type
        bad.write(folder)
    assert snapshot(folder) == before
    assert hidden(tmp_path) == []


def test_extra_files_go_into_the_folder_and_the_summary_is_written_last(tmp_path, dgx2,
                                                                      monkeypatch):
    order: list[str] = []
    real = writing._fsync_file
    monkeypatch.setattr(writing, "_fsync_file", lambda p: (order.append(p.name), real(p)))
    small_result(dgx2).write(tmp_path / "run", extra={"point.json": '{"seed": 0}'})
    assert (tmp_path / "run" / "point.json").read_text(encoding="utf-8") == '{"seed": 0}\n'
    assert order[-1] == "summary.json" and set(order) == RESULT_FILES | {"point.json"}


def test_a_folder_being_written_does_not_look_finished_to_a_glob(tmp_path):
    seen: list[list[Path]] = []

    def look(path: str) -> None:
        seen.append(sorted(tmp_path.glob("*/summary.json")))
        Path(path).write_text("", encoding="utf-8")

    write_folder(tmp_path / "fifo", {"summary.json": text_writer("{}"), "last": look})
    assert seen == [[]]  # the new summary.json was there, one level further down
    write_folder(tmp_path / "fifo", {"summary.json": text_writer("{}"), "last": look})
    assert seen[1] == [tmp_path / "fifo" / "summary.json"]  # only the old, finished one


def test_a_symlinked_result_folder_keeps_its_link(tmp_path):
    target = tmp_path / "big-disk" / "fifo"
    write_folder(target, {"a.txt": text_writer("old")})
    (tmp_path / "results").mkdir()
    link = tmp_path / "results" / "fifo"
    link.symlink_to(target, target_is_directory=True)
    assert write_folder(link, {"a.txt": text_writer("new")}) == link
    assert link.is_symlink() and snapshot(target) == {"a.txt": b"new"}
    assert hidden(tmp_path / "results") == [] and hidden(target.parent) == []


def test_a_plain_file_in_the_way_and_a_bad_file_name_are_errors(tmp_path):
    (tmp_path / "run").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError, match="not a folder"):
        write_folder(tmp_path / "run", {"a.txt": text_writer("a")})
    with pytest.raises(ValueError, match="not a plain file name"):
        write_folder(tmp_path / "other", {"sub/a.txt": text_writer("a")})
    assert hidden(tmp_path) == []


def test_atomic_write_failure_keeps_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "summary.parquet"
    atomic_text(path, "old")
    with pytest.raises(RuntimeError):
        atomic_write(path, failing_writer)
    assert path.read_text(encoding="utf-8") == "old\n" and hidden(tmp_path) == []


# --- modes -----------------------------------------------------------------------------


@pytest.fixture(params=[0o022, 0o002], ids=["umask022", "umask002"])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_folders_get_the_modes_the_umask_allows(tmp_path, dgx2, umask):
    file_mode, dir_mode = 0o666 & ~umask, 0o777 & ~umask
    result = small_result(dgx2)
    folder = result.write(tmp_path / "results" / "fifo")
    assert mode(folder) == dir_mode and mode(folder.parent) == dir_mode
    assert {p.name: mode(p) for p in folder.iterdir()} == dict.fromkeys(RESULT_FILES,
                                                                        file_mode)
    result.write(folder)  # rewriting an existing folder: the same modes
    assert mode(folder) == dir_mode
    assert {mode(p) for p in folder.iterdir()} == {file_mode}
    assert mode(atomic_text(tmp_path / "baseline.json", "{}")) == file_mode
    frame = pd.DataFrame({"a": [1, 2]})
    assert mode(atomic_write(tmp_path / "summary.parquet",
                             lambda p: frame.to_parquet(p))) == file_mode
    point = RunPoint("fifo", "default", "default", 0)
    write_error(tmp_path / "failed", point, "boom", "traceback")
    assert mode(tmp_path / "failed" / "error.json") == file_mode
    from matplotlib.figure import Figure

    assert mode(save_png(Figure(figsize=(2, 2)), tmp_path / "figures" / "f.png")) == file_mode
    assert mode(tmp_path / "figures") == dir_mode


# --- leftovers of killed writes --------------------------------------------------------


def age(path: Path, seconds: float = 3600) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_leftovers_of_killed_writes_are_removed_and_nothing_else(tmp_path):
    final = tmp_path / "fifo"
    ours = [f".fifo.tmp-{HEX12}", f".fifo.tmp-{HEX12[::-1]}", ".fifo.abcd_123"]
    (tmp_path / ours[0] / "fifo").mkdir(parents=True)
    (tmp_path / ours[0] / "fifo" / "summary.json").write_text("{}", encoding="utf-8")
    (tmp_path / ours[1]).mkdir()
    (tmp_path / ours[2]).write_text("legacy mkstemp name", encoding="utf-8")
    theirs = [".fifo.keep", f".fifo-backfill.tmp-{HEX12}", ".fifo.tmp-notahexnumber",
              "fifo.tmp-0123456789ab", ".fifo.tmp-0123456789abc", f".fifo.old-{HEX12}"]
    for name in theirs:
        (tmp_path / name).write_text("not ours", encoding="utf-8")
    young = f".fifo.tmp-{'f' * 12}"
    (tmp_path / young).write_text("a write that just began", encoding="utf-8")
    for p in tmp_path.iterdir():
        if p.name != young:
            age(p)
    write_folder(final, {"a.txt": text_writer("a")})
    assert sorted(hidden(tmp_path)) == sorted([*(t for t in theirs if t.startswith(".")),
                                               young])
    assert (tmp_path / "fifo.tmp-0123456789ab").exists()

    # the same for single files, next to them
    legacy = tmp_path / ".jobs.parquet.x1y2z3_4"
    legacy.write_bytes(b"PAR1 half")
    new_style = tmp_path / f".jobs.parquet.tmp-{HEX12}"
    new_style.write_bytes(b"PAR1 half")
    age(legacy)
    age(new_style)
    atomic_text(tmp_path / "jobs.parquet", "x")
    assert not legacy.exists() and not new_style.exists()


def test_a_leftover_another_writer_still_locks_is_kept(tmp_path):
    busy = tmp_path / f".summary.parquet.tmp-{HEX12}"
    busy.write_bytes(b"being written")
    age(busy)
    fd = os.open(busy, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert remove_strays(tmp_path, "summary.parquet") == []
        assert busy.exists()
    finally:
        os.close(fd)
    assert remove_strays(tmp_path, "summary.parquet") == [busy]


# --- the output folder check -----------------------------------------------------------


def test_ensure_writable_dir_names_the_path_and_the_reason(tmp_path):
    (tmp_path / "somefile").write_text("x", encoding="utf-8")
    with pytest.raises(FolderNotWritable) as err:
        ensure_writable_dir(tmp_path / "somefile" / "sub" / "deeper")
    assert str(err.value) == (f"cannot write to {str(tmp_path / 'somefile' / 'sub' / 'deeper')!r}"
                              f": {str(tmp_path / 'somefile')!r} is a file, not a folder")
    with pytest.raises(FolderNotWritable, match="it is a file, not a folder"):
        ensure_writable_dir(tmp_path / "somefile")
    import pickle

    again = pickle.loads(pickle.dumps(err.value))  # from a worker process, intact
    assert str(again) == str(err.value) and again.errno == err.value.errno
    made = ensure_writable_dir(tmp_path / "new" / "folder")
    assert made.is_dir() and list(made.iterdir()) == []


# --- SIGKILL during a real rerun -------------------------------------------------------


def folder_state(folder: Path) -> int:
    """The --max-jobs of a complete, self-consistent result folder (fails otherwise)."""
    assert {p.name for p in folder.iterdir()} == RESULT_FILES, sorted(folder.iterdir())
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    jobs = pd.read_parquet(folder / "jobs.parquet")
    assert summary["jobs_submitted"] == len(jobs) == config["max_jobs"], folder
    for name in ("events", "timeline", "nodes"):
        pd.read_parquet(folder / f"{name}.parquet")  # readable, not torn
    return int(config["max_jobs"])


def test_sigkill_at_random_moments_leaves_the_old_or_the_new_folder(tmp_path):
    out = tmp_path / "out"
    folder = out / "fifo"

    def command(n: int) -> list[str]:
        return [sys.executable, "-m", "schedlab", "run", "--policy", "fifo", "--max-jobs", str(n),
                "--out", str(out), "--quiet"]

    subprocess.run(command(30), check=True, capture_output=True, timeout=120)
    state = folder_state(folder)
    rng = random.Random(20240607)
    seen = {state}
    for kill in range(5):
        old = state
        want = 50 if old == 30 else 30
        before = set(os.listdir(out))  # leftovers of earlier kills (too young to go yet)
        proc = subprocess.Popen(command(want), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        if kill == 0:  # once at an arbitrary moment (start-up, simulation, writing)
            time.sleep(rng.uniform(0.2, 2.0))
        else:  # else while the new folder is being written (~50-100 ms) or swapped in
            while proc.poll() is None and time.monotonic() < deadline and not any(
                    n.startswith(".fifo.tmp-") for n in set(os.listdir(out)) - before):
                time.sleep(0.0005)
            time.sleep(rng.uniform(0.0, 0.08))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        state = folder_state(folder)  # never missing, never mixed
        assert state in (old, want)
        seen.add(state)
    assert seen <= {30, 50}
    # the leftovers of the kills (hidden temp folders) go with the next write
    for p in out.iterdir():
        if p.name.startswith("."):
            for q in p.rglob("*"):
                age(q)
            age(p)
    subprocess.run(command(40), check=True, capture_output=True, timeout=120)
    assert folder_state(folder) == 40
    assert hidden(out) == []


def test_a_result_never_replaces_a_folder_of_other_files(tmp_path):
    """A mistyped --out must not delete unrelated files: only result folders are replaced."""
    from schedlab.sim import Simulation
    from schedlab.sim.model import JobSpec
    from schedlab.topologies.build import uniform_topology
    from schedlab.traces.base import Trace

    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    r = Simulation(Trace("t", (JobSpec("a", 0.0, 1, 10.0),)), uniform_topology(1), "fifo").run()
    with pytest.raises(FileExistsError, match="refusing to replace"):
        r.write(home)
    assert (home / "thesis.tex").read_text() == "precious"
    r.write(tmp_path / "run")
    r.write(tmp_path / "run")  # an earlier result folder is replaced whole
    assert (tmp_path / "run" / "summary.json").is_file()
