"""A sweep's run ids, folders, labels and baselines do not depend on where the checkout is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from research_helpers import write_inputs

from schedlab.app.cli import main

POLICY = '''\
from schedlab.policies.fifo import FifoPolicy


class Mine(FifoPolicy):
    """fifo under a name of its own."""

    name = "mine"
'''

SWEEP = """\
base: {trace: trace.csv, topology: topo.yaml, seed: 0, max_jobs: 12}
grid: {policy: [fifo, POLICY], params.mine.placer: [pack]}
"""


def _checkout(folder: Path, policy_spelling: str) -> Path:
    """A sweep folder with its own policy file; the sweep names it as given."""
    (folder / "plugins").mkdir(parents=True)
    (folder / "plugins" / "mine.py").write_text(POLICY, encoding="utf-8")
    return write_inputs(folder, jobs=12, sweep=SWEEP.replace("POLICY", policy_spelling))


def _sweep(sweep: Path, out: Path) -> None:
    r = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(out), "-j", "1"])
    assert r.exit_code == 0, r.output


def test_the_same_sweep_moved_elsewhere_checks_clean_against_its_baseline(tmp_path: Path):
    first = tmp_path / "home" / "me" / "exp"
    # an absolute path to the policy file: still named relative to the sweep file
    sweep_a = _checkout(first, str(first / "plugins" / "mine.py") + ":Mine")
    _sweep(sweep_a, first / "out")
    baseline = tmp_path / "baseline.json"
    r = CliRunner().invoke(main, ["check", str(first / "out"), "--baseline", str(baseline),
                                  "--update"])
    assert r.exit_code == 0, r.output
    runs = json.loads(baseline.read_text(encoding="utf-8"))["runs"]
    assert not [k for k in runs if str(tmp_path) in k]
    assert str(tmp_path) not in json.dumps([r["config"]["sweep_point"] for r in runs.values()])
    points = [json.loads(p.read_text()) for p in (first / "out").glob("*/point.json")]
    assert sorted(p["policy"] for p in points) == ["fifo", "plugins/mine.py:Mine"]
    assert all(p["trace"] == "trace.csv" and p["topology"] == "topo.yaml" for p in points)

    moved = tmp_path / "ci" / "checkout" / "exp"
    shutil.copytree(first, moved, ignore=shutil.ignore_patterns("out"))
    # the moved copy names the file relatively: the same runs either way
    (moved / "sweep.yaml").write_text(SWEEP.replace("POLICY", "plugins/mine.py:Mine"))
    shutil.rmtree(first)  # nothing may still read the old place
    _sweep(moved / "sweep.yaml", moved / "out")
    r = CliRunner().invoke(main, ["check", str(moved / "out"), "--baseline", str(baseline)])
    assert r.exit_code == 0, r.output
    assert "missing run" not in r.output and "no baseline" not in r.output
