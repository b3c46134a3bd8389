"""The compiled build (setup.py): it is what CI tests, and a stale one is refused."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import sim
from sim.registry import PLACERS

ROOT = Path(__file__).resolve().parents[2]
COMPILER = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0])


@pytest.mark.skipif(not os.environ.get("CI") or os.environ.get("SCHEDLAB_PURE")
                    or COMPILER is None, reason="CI with a C compiler only")
def test_ci_runs_the_compiled_engine() -> None:
    # a silent fallback to pure Python (a build-time type error, a missing build
    # requirement) would leave the compiled build untested
    tree = ast.parse((ROOT / "setup.py").read_text())
    listed = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                  and any(getattr(t, "id", "") == "COMPILED" for t in n.targets))
    # every module setup.py compiles, and sim/__init__ finds each (its folders)
    assert sorted(p.removesuffix(".py").replace("/", ".") for p in listed) \
        == sim.compiled_modules()


def test_an_interpreted_placer_subclass_keeps_its_own_class_attributes() -> None:
    # compiled, BasePlacer would read an instance default of `spread` unless it is a
    # ClassVar: the interpreted subclass's False must be what the search sees
    consolidated = PLACERS.get("consolidated")()
    first_fit = PLACERS.get("first-fit")()
    assert (consolidated.spread, first_fit.spread) == (False, True)
    assert (consolidated.name, first_fit.name) == ("consolidated", "first-fit")


def test_a_compiled_module_older_than_its_source_is_refused(tmp_path: Path) -> None:
    # a copy of the package layout with a fake compiled module older than its source
    (tmp_path / "pyproject.toml").write_text("")
    pkg = tmp_path / "sim"
    pkg.mkdir()
    (tmp_path / "policies" / "placement").mkdir(parents=True)
    (pkg / "__init__.py").write_text((ROOT / "sim" / "__init__.py").read_text())
    so = pkg / "cluster.cpython-311-x86_64-linux-gnu.so"
    so.write_bytes(b"")
    py = pkg / "cluster.py"
    py.write_text("")
    os.utime(so, (1_000_000, 1_000_000))
    code = "import sim"
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode != 0
    assert "cluster.py changed after its compiled module" in run.stderr
    assert "pip install -e ." in run.stderr
    os.utime(so)  # rebuilt: newer than its source
    ok = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                        text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert ok.returncode == 0, ok.stderr
