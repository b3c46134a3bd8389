"""Policies from outside the package: `--policy module:Class`, `file.py:Class`, entry points."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import schedlab.sim.registry
from schedlab.app.cli import main
from schedlab.app.sweep import load_sweep, open_executor, run_sweep

POLICY_MODULE = '''
from schedlab.policies import Policy, Unschedulable
from schedlab.policies.fifo import FifoPolicy
from schedlab.sim.model import Start
from schedlab.sim.params import Param, as_int


class SmallestFirst(Policy):
    """Start the smallest pending jobs first."""

    name = "smallest-first-plugin"
    params = {"max_starts": Param(1000, as_int(1), "most jobs started per pass")}

    def schedule(self, ctx):
        order = sorted(ctx.pending(), key=lambda j: (j.spec.num_gpus, j.spec.submit_time))
        for job in order[: self.p["max_starts"]]:
            gpus = ctx.place(job)
            if not isinstance(gpus, Unschedulable):
                yield Start(job.job_id, gpus)


class Nameless(FifoPolicy):
    """A FIFO without a name of its own but the inherited one."""


class Anonymous(SmallestFirst):
    name = "policy"
'''


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "plugin_policies.py"
    path.write_text(POLICY_MODULE, encoding="utf-8")
    return path


def test_run_policy_from_a_file_path(tmp_path, policy_file):
    out = tmp_path / "out"
    r = cli("run", "--policy", f"{policy_file}:SmallestFirst", "--max-jobs", "60",
            "--param", "max_starts=5", "--out", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    folder = out / "smallest-first-plugin"
    assert summary(folder)["jobs_completed"] == 60
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["params"] == {"max_starts": "5"}


def test_run_policy_from_a_module_path_next_to_a_registered_one(tmp_path, policy_file,
                                                               monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plugin_policies", raising=False)
    out = tmp_path / "out"
    # a key only the plugin takes is scoped to it (unscoped, fifo would refuse it)
    r = cli("run", "--policy", "plugin_policies:SmallestFirst", "--policy", "fifo",
            "--param", "smallest-first-plugin.max_starts=3", "--max-jobs", "40",
            "--out", str(out))
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["fifo", "smallest-first-plugin"]
    assert "smallest-first-plugin" in r.stdout  # the table names it by its class's name
    config = json.loads((out / "fifo" / "config.json").read_text(encoding="utf-8"))
    assert config["params"] == {}  # max_starts is the plugin's alone
    monkeypatch.delitem(sys.modules, "plugin_policies", raising=False)


def test_a_class_without_a_name_of_its_own_is_named_by_its_class(tmp_path, policy_file):
    out = tmp_path / "out"
    r = cli("run", "--policy", f"{policy_file}:Anonymous", "--max-jobs", "20",
            "--out", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    assert [p.name for p in out.iterdir()] == ["Anonymous"]


def test_two_policies_writing_to_the_same_folder_is_an_error(tmp_path, policy_file):
    r = cli("run", "--policy", f"{policy_file}:Nameless", "--policy", "fifo",
            "--max-jobs", "20", "--out", str(tmp_path / "out"), "--quiet")
    assert r.exit_code == 2
    assert "would both write their results to 'fifo'" in r.stderr


@pytest.mark.parametrize(("policy", "fragment"), [
    ("no_such_module_xyz:Policy", "cannot import 'no_such_module_xyz'"),
    ("missing.py:Policy", "no file missing.py"),
])
def test_a_policy_path_that_does_not_import_exits_2(tmp_path, policy, fragment):
    r = cli("run", "--policy", policy, "--max-jobs", "5", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert fragment in r.stderr
    assert "Traceback" not in r.output


def test_unknown_param_for_a_file_policy_names_the_closest_key(tmp_path, policy_file):
    r = cli("run", "--policy", f"{policy_file}:SmallestFirst", "--param", "max_start=2",
            "--max-jobs", "5", "--out", str(tmp_path), "--quiet")
    assert r.exit_code == 2
    assert "'max_start'" in r.stderr and "did you mean 'max_starts'" in r.stderr


def test_sweep_file_names_a_policy_by_a_path_relative_to_it(tmp_path, policy_file):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "base: {trace: 'synthetic:30', topology: dgx1-v100}\n"
        "grid: {policy: [fifo, 'plugin_policies.py:SmallestFirst'], params.max_starts: [2]}\n",
        encoding="utf-8")
    spec = load_sweep(sweep)
    # named relative to the sweep file (portable), found there to run
    assert [p.policy for p in spec.points] == ["fifo", "plugin_policies.py:SmallestFirst"]
    assert spec.points[1].resolved().policy == f"{policy_file.resolve()}:SmallestFirst"
    assert spec.points[0].params == ()  # max_starts belongs to the plugin only
    out = tmp_path / "out"
    with open_executor(jobs=1) as executor:
        report = run_sweep(spec, out, executor)
    assert report.failed == ()
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert [f.rsplit("-", 1)[0] for f in folders] == ["fifo", "smallest-first-plugin"]


# --- an installed plugin, found through its entry point ---------------------------------

PLUGIN_MODULE = '''
from schedlab.policies.fifo import FifoPolicy


class MyPolicy(FifoPolicy):
    """A plugin policy: FIFO under another name."""

    name = "my-plug"
    description = "an installed plugin"
'''


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist = site / "myplug-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n",
                                   encoding="utf-8")
    (dist / "entry_points.txt").write_text(
        "[schedlab.policies]\nmy-plug = myplug_mod:MyPolicy\n", encoding="utf-8")
    (site / "myplug_mod.py").write_text(PLUGIN_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(schedlab.sim.registry.POLICIES, "_plugins_loaded", False)
    try:
        yield site
    finally:
        schedlab.sim.registry.POLICIES.unregister("my-plug")
        sys.modules.pop("myplug_mod", None)


def test_installed_plugin_is_listed_and_runs(tmp_path, installed_plugin):
    r = cli("policies")
    assert r.exit_code == 0, r.output
    assert "my-plug: an installed plugin" in r.stdout.splitlines()
    placers = next(line for line in r.stdout.splitlines() if line.startswith("placers: "))
    assert placers == "placers: " + ", ".join(schedlab.sim.registry.PLACERS.names())
    out = tmp_path / "out"
    r = cli("run", "--policy", "my-plug", "--max-jobs", "50", "--out", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    assert summary(out / "my-plug")["jobs_completed"] == 50
