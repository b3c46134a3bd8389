"""The two builds: pure Python by default, an opt-in compiled one that runs the same code.

`.ci/run` builds the compiled wheel in a second environment and runs the golden baselines
and the engine tests on it with SCHEDLAB_EXPECT_COMPILED=1, so a build that silently
came out pure would fail here.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import schedlab
from schedlab.sim.registry import PLACERS

ROOT = Path(__file__).resolve().parents[2]


def _listed() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    paths = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", "") == "COMPILED" for t in n.targets))
    return sorted(p.removesuffix(".py").replace("/", ".") for p in paths)


@pytest.mark.skipif(not os.environ.get("SCHEDLAB_EXPECT_COMPILED"),
                    reason="the compiled build's own run (.ci/run) only")
def test_the_compiled_build_runs_compiled() -> None:
    # every module setup.py compiles is loaded from its extension, not its source
    assert schedlab.compiled_modules() == _listed()
    import schedlab.sim.engine as engine

    assert not engine.__file__.endswith(".py"), engine.__file__


@pytest.mark.skipif(bool(os.environ.get("SCHEDLAB_EXPECT_COMPILED")),
                    reason="the pure build only")
def test_the_development_build_is_the_source() -> None:
    assert schedlab.compiled_modules() == []
    import schedlab.policies.fifo as fifo

    assert Path(fifo.__file__).resolve() == (ROOT / "policies" / "fifo.py").resolve()


def test_every_compiled_module_exists() -> None:
    for module in _listed():
        assert (ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py")).is_file(), module


def test_an_interpreted_placer_subclass_keeps_its_own_class_attributes() -> None:
    # compiled, BasePlacer would read an instance default of `spread` unless it is a
    # ClassVar: the interpreted subclass's False must be what the search sees
    consolidated = PLACERS.get("consolidated")()
    first_fit = PLACERS.get("first-fit")()
    assert (consolidated.spread, first_fit.spread) == (False, True)
    assert (consolidated.name, first_fit.name) == ("consolidated", "first-fit")


def _fake_build(tmp_path: Path, source: str) -> Path:
    """A copy of the root package whose 'compiled' module is a Python file in disguise."""
    pkg = tmp_path / "schedlab"
    (pkg / "sim").mkdir(parents=True)
    for name in ("__init__.py", "_native.py"):
        (pkg / name).write_text((ROOT / "schedlab" / name).read_text())
    (pkg / "sim" / "__init__.py").write_text("")
    py = pkg / "sim" / "hot.py"
    py.write_text(source)
    from importlib.machinery import EXTENSION_SUFFIXES

    (pkg / "sim" / f"hot{EXTENSION_SUFFIXES[0]}").write_bytes(b"not really compiled")
    digest = hashlib.sha256(py.read_bytes()).hexdigest()
    (pkg / "_native_build.json").write_text(json.dumps(
        {"modules": ["schedlab.sim.hot"], "sources": {"sim/hot.py": digest}}))
    return py


def _run(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(tmp_path), **env})


def test_a_stale_compiled_build_runs_the_source_with_a_warning(tmp_path: Path) -> None:
    py = _fake_build(tmp_path, "WHO = 'source'\n")
    probe = ("import schedlab; print(schedlab.compiled_modules()); "
             "import schedlab.sim.hot as h; print(h.WHO)")
    py.write_text("WHO = 'edited source'\n")  # an edit after the build
    run = _run(tmp_path, probe)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == ["[]", "edited source"]
    assert "sim/hot.py changed since the compiled build" in run.stderr
    assert "SCHEDLAB_COMPILE=1 pip install -e ." in run.stderr


def test_schedlab_pure_skips_a_compiled_build_silently(tmp_path: Path) -> None:
    _fake_build(tmp_path, "WHO = 'source'\n")
    run = _run(tmp_path, "import schedlab.sim.hot as h, schedlab; "
                         "print(h.WHO, schedlab.compiled_modules())", SCHEDLAB_PURE="1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "source []"
    assert run.stderr == ""


def test_an_unchanged_compiled_build_is_used(tmp_path: Path) -> None:
    _fake_build(tmp_path, "WHO = 'source'\n")
    # the fake extension cannot load: that it is tried proves the build is in use
    run = _run(tmp_path, "import schedlab; print(schedlab.compiled_modules()); "
                         "import schedlab.sim.hot")
    assert run.stdout.split("\n")[0] == "['schedlab.sim.hot']"
    assert run.returncode != 0  # ImportError from the bogus extension file


def test_every_compiled_module_and_its_classes_keep_their_docstrings() -> None:
    # mypyc drops docstrings; schedlab._native gives them back (help(), the docs site)
    import importlib

    for name in _listed():
        module = importlib.import_module(name)
        assert module.__doc__, name
        for attr, value in vars(module).items():
            if isinstance(value, type) and value.__module__ == name \
                    and not attr.startswith("_"):
                assert value.__doc__, f"{name}.{attr}"
