"""`--trace philly` and `--topology uniform:N[:TYPE]`: the names the benchmarks use, in the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from schedlab.app.cli import main
from schedlab.app.inputs import PHILLY_FILE, load_named_topology, load_named_trace
from schedlab.sim.errors import InvalidTopology, InvalidTrace


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared folder whose 'full' Philly table is the bundled sample of the same format."""
    dest = tmp_path / "shared" / PHILLY_FILE
    dest.parent.mkdir(parents=True)
    shutil.copy(SAMPLES / "philly_pollux_sample.csv", dest)
    monkeypatch.setenv("SCHEDLAB_SHARED", str(tmp_path / "shared"))
    return tmp_path / "shared"


def test_philly_names_the_shared_table_and_results_record_the_name(shared: Path,
                                                                   tmp_path: Path) -> None:
    trace = load_named_trace("philly")
    assert trace.name == "philly" and trace.source == "philly" and len(trace.jobs) > 0
    r = CliRunner().invoke(main, ["run", "--trace", "philly", "--topology", "uniform:2",
                                  "--policy", "fifo", "--max-jobs", "20", "--quiet",
                                  "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    config = json.loads((tmp_path / "out" / "fifo" / "config.json").read_text())
    assert config["trace"] == "philly" and config["topology"] == "uniform:2"


def test_philly_without_the_shared_folder_is_one_line_saying_how(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDLAB_SHARED", str(tmp_path / "none"))
    with pytest.raises(InvalidTrace) as e:
        load_named_trace("philly")
    assert "\n" not in str(e.value)
    assert str(tmp_path / "none" / PHILLY_FILE) in str(e.value)
    assert "SCHEDLAB_SHARED" in str(e.value) and "--trace default" in str(e.value)


def test_uniform_n_builds_dgx_like_nodes_of_a_type() -> None:
    topo = load_named_topology("uniform:3")
    assert topo.num_gpus == 24 and len(topo.nodes) == 3 and topo.source == "uniform:3"
    a100 = load_named_topology("uniform:1:A100")
    assert {n.gpu_type for n in a100.nodes} == {"A100"}
    for bad in ("uniform:0", "uniform:x", "uniform:"):
        with pytest.raises(InvalidTopology, match="uniform:N"):
            load_named_topology(bad)
    assert load_named_topology("default").source == "default"
