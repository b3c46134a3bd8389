"""One import root: schedlab works beside a user's own `sim.py`, `policies.py`, ..."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import schedlab

ROOT = Path(__file__).resolve().parents[1]
GENERIC = ("sim", "policies", "traces", "topologies", "app")


def _env() -> dict[str, str]:
    # nothing of the repository on the path: only what the install provides
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          env=_env(), timeout=300)


def test_a_users_own_modules_do_not_shadow_schedlab(tmp_path: Path) -> None:
    for name in ("policies", "traces", "topologies", "sim"):
        (tmp_path / f"{name}.py").write_text(f"WHO = 'the user\\'s {name}'\n")
    script = tmp_path / "analysis.py"
    script.write_text(
        "import schedlab\n"
        "import policies, traces\n"
        "from schedlab import Simulation, load_topology, load_trace\n"
        "from schedlab.traces.shaping import shape\n"
        "trace = shape(load_trace('default'), max_jobs=50)\n"
        "r = Simulation(trace, load_topology('default'), 'fifo', seed=0).run()\n"
        "print(policies.WHO, traces.WHO, r.summary['jobs_completed'])\n")
    run = _python(tmp_path, str(script))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "the user's policies the user's traces 50"
    cli = _python(tmp_path, "-m", "schedlab", "run", "--policy", "fifo", "--max-jobs", "30",
                  "--quiet", "--out", str(tmp_path / "out"))
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "out" / "fifo" / "summary.json").is_file()


def test_nothing_generic_is_installed(tmp_path: Path) -> None:
    for name in GENERIC:
        run = _python(tmp_path, "-c", f"import {name}")
        assert run.returncode != 0 and "ModuleNotFoundError" in run.stderr, (name, run.stderr)


def test_the_public_api_is_the_root_package() -> None:
    for name in schedlab.__all__:
        assert getattr(schedlab, name) is not None, name
    assert schedlab.Simulation.__module__ == "schedlab.sim.engine"
    assert "fifo" in schedlab.registered_policies()


def test_python_dash_m_schedlab_is_the_cli(tmp_path: Path) -> None:
    run = _python(tmp_path, "-m", "schedlab", "--version")
    assert run.returncode == 0, run.stderr
    assert schedlab.__version__ in run.stdout


def test_every_subpackage_is_listed_for_installs() -> None:
    """A folder with an __init__.py that pyproject.toml does not list is left out of a
    wheel (the compiled build and any `pip install .`): listed packages = the folders."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {"schedlab"}
    for top in ("sim", "policies", "topologies", "traces", "app"):
        for init in (root / top).rglob("__init__.py"):
            parts = init.parent.relative_to(root).parts
            found.add(".".join(("schedlab", *parts)))
    assert found - listed == set(), f"add to pyproject.toml packages: {sorted(found - listed)}"
