"""Sweep files: expansion (grid x zip x seeds), hashing, paths, and every error path."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner
from research_helpers import write_inputs

from schedlab.app.cli_research import sweep as sweep_cmd
from schedlab.app.sweep import RunPoint, load_sweep, parse_sweep
from schedlab.policies import register
from schedlab.policies.fifo import FifoPolicy
from schedlab.policies.registry import unregister
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.params import Param, as_int


def parse(text: str, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_sweep(path)


def test_grid_zip_and_seeds_expand_in_file_order(tmp_path):
    s = parse("""
        base: {trace: "synthetic:20", topology: dgx1-v100}
        grid: {policy: [fifo, fifo-backfill], params.placer: [pack, first-fit]}
        zip: {load_scale: [0.5, 1.0], max_jobs: [10, 20]}
        seeds: 2
    """, tmp_path)
    assert len(s.points) == 2 * 2 * 2 * 2
    assert s.axes == ("policy", "params.placer", "load_scale", "max_jobs", "seed")
    first = [(p.policy, dict(p.params)["placer"], p.load_scale, p.max_jobs, p.seed)
             for p in s.points[:5]]
    assert first == [("fifo", "pack", 0.5, 10, 0), ("fifo", "pack", 0.5, 10, 1),
                     ("fifo", "pack", 1.0, 20, 0), ("fifo", "pack", 1.0, 20, 1),
                     ("fifo", "first-fit", 0.5, 10, 0)]
    assert len({p.run_id for p in s.points}) == len(s.points)
    assert all(p.folder == f"{p.policy}-{p.run_id}" for p in s.points)


def test_an_empty_base_is_the_single_default_run(tmp_path):
    # (an empty file is an error: test_an_empty_sweep_file_is_an_error_...)
    s = parse("base: {}\n", tmp_path)
    assert [(p.policy, p.trace, p.topology, p.seed) for p in s.points] == [
        ("fifo", "default", "default", 0)]


def test_hyphenated_keys_and_window_lists_are_accepted(tmp_path):
    s = parse("""
        base: {trace: "synthetic:20", trace-window: [0, 3600], max-jobs: 5}
        grid: {load-scale: [1, 2]}
    """, tmp_path)
    assert [p.load_scale for p in s.points] == [1.0, 2.0]
    assert {p.trace_window for p in s.points} == {"0..3600"}
    assert {p.max_jobs for p in s.points} == {5}


def test_run_id_is_a_hash_of_the_full_config():
    a = RunPoint("fifo", "default", "default", 0, (("placer", "pack"),))
    assert a.run_id == RunPoint("fifo", "default", "default", 0, (("placer", "pack"),)).run_id
    for other in (RunPoint("fifo", "default", "default", 1, (("placer", "pack"),)),
                  RunPoint("fifo", "default", "default", 0, (("placer", "first-fit"),)),
                  RunPoint("fifo", "default", "default", 0, (("placer", "pack"),), 2.0),
                  RunPoint("fifo", "default", "default", 0, (("placer", "pack"),),
                           until=5.0)):
        assert other.run_id != a.run_id
    assert len(a.run_id) == 12 and int(a.run_id, 16) >= 0


def test_relative_paths_resolve_against_the_sweep_file(tmp_path, monkeypatch):
    path = write_inputs(tmp_path / "in")
    monkeypatch.chdir(tmp_path)
    s = load_sweep(path)
    # named relative to the sweep file (portable run ids), resolved against it to run
    assert {p.trace for p in s.points} == {"trace.csv"}
    assert {p.topology for p in s.points} == {"topo.yaml"}
    runs = [p.resolved() for p in s.points]
    assert {p.trace for p in runs} == {str((tmp_path / "in" / "trace.csv").resolve())}
    assert {p.topology for p in runs} == {str((tmp_path / "in" / "topo.yaml").resolve())}


@pytest.fixture
def tunable():
    class Tunable(FifoPolicy):
        """FIFO with a knob, to test parameters known to only some policies."""

        name = "tunable"
        params = {"knob": Param(1, as_int(0), "a knob")}

    register("tunable", Tunable, replace=True)
    yield
    unregister("tunable")


def test_a_parameter_of_another_policy_is_left_out_and_duplicates_merge(tmp_path, tunable):
    s = parse("""
        base: {trace: "synthetic:20"}
        grid: {policy: [fifo, tunable], params.knob: [1, 2]}
    """, tmp_path)
    assert [(p.policy, dict(p.params)) for p in s.points] == [
        ("fifo", {}), ("tunable", {"knob": 1}), ("tunable", {"knob": 2})]
    assert s.duplicates == 1
    assert s.param_columns == ("params.knob",)


ERRORS = [
    ("- a\n- b\n", "expected a mapping with keys base, grid, zip, seeds"),
    ("gird: {policy: [fifo]}\n", "unknown key 'gird' (did you mean 'grid'?); allowed: base, "
                                 "grid, zip, seeds"),
    ("base: [fifo]\n", "base must be a mapping"),
    ("base: {polcy: fifo}\n", "unknown key 'polcy' (did you mean 'policy'?)"),
    ("base: {params: [placer]}\n", "base.params must map parameter names to values"),
    ("grid: [policy]\n", "grid must be a mapping of axis -> list of values"),
    ("grid: {policy: fifo}\n", "grid.policy: expected a list of values, got 'fifo'"),
    ("grid: {policy: []}\n", "grid.policy: the list of values is empty"),
    ("grid: {load: [1]}\n", "unknown key 'load' (did you mean 'load_scale'?)"),
    ("grid: {placer: [pack]}\n", "a policy or engine parameter is written params.KEY"),
    ("grid: {params: [pack]}\n", "unknown key 'params'"),
    ("grid: {params.: [pack]}\n", "empty parameter name"),
    ("zip: {load_scale: [1, 2], seed: [0]}\n", "lists must have equal lengths to be paired, "
                                               "got load_scale: 2, seed: 1"),
    ("grid: {seed: [0]}\nzip: {seed: [1]}\n", "axis 'seed' is in both grid and zip"),
    ("seeds: 0\n", "seeds: 0: expected a count >= 1"),
    ("seeds: []\n", "expected a count >= 1 or a non-empty list"),
    ("seeds: abc\n", "seeds: 'abc'"),
    ("seeds: [0, -1]\n", "seeds: -1 is not an integer >= 0"),
    ("seeds: [true]\n", "seeds: True is not an integer >= 0"),
    ("seeds: [1, 1]\n", "has duplicates"),
    ("seeds: [0]\ngrid: {seed: [1, 2]}\n", "'seeds' and a 'seed' axis both vary the seed"),
    ("grid: {policy: [fifo, [drf]]}\n", "policy ['drf'] is not a name"),
    ("grid: {policy: [fifo, ffo]}\n", "unknown policy 'ffo' (did you mean 'fifo'?); known:"),
    ("base: {params: {placr: pack}}\n", "unknown parameter 'placr' for policy 'fifo' "
                                         "(did you mean 'placer'?)"),
    ("grid: {params.placer: [pack, pak]}\n", "parameter placer='pak' for the engine: expected "
                                             "one of"),
    ("grid: {load_scale: [1, 0]}\n", "load_scale 0: expected a number > 0"),
    ("base: {load_scale: x}\n", "load_scale 'x': expected a number > 0"),
    ("base: {max_jobs: -1}\n", "max_jobs -1: expected an integer >= 0"),
    ("base: {max_jobs: 1.5}\n", "max_jobs 1.5: expected an integer >= 0"),
    ("base: {seed: x}\n", "seed 'x': expected an integer >= 0"),
    ("base: {until: -5}\n", "until -5: expected seconds >= 0"),
    ("base: {trace_window: 5}\n", "trace_window 5: expected 'START:END'"),
    ("base: {trace: 5}\n", "trace 5: expected a bundled name or a file path"),
    ("base: {trace: defualt}\n", "unknown trace 'defualt' (did you mean 'default'?)"),
    ("base: {trace: missing/trace.csv}\n", "trace file 'missing/trace.csv' not found"),
    ("base: {topology: dgx9}\n", "unknown topology 'dgx9'"),
    ("grid: {policy: [fifo\n", "is not valid YAML"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[m[:40] for _, m in ERRORS])
def test_every_error_names_the_culprit(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidParameter) as err:
        load_sweep(path)
    assert message in str(err.value)


def test_errors_say_which_run_is_bad(tmp_path):
    with pytest.raises(InvalidParameter, match=r"run load_scale=-1"):
        parse("grid: {load_scale: [1, -1]}\n", tmp_path)


def test_missing_sweep_file():
    with pytest.raises(InvalidParameter, match="sweep file 'nope.yaml' not found"):
        load_sweep("nope.yaml")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n", "{}\n",
                                  "null\n", "~\n"],
                         ids=["empty", "blank", "comments", "empty-mapping", "null", "tilde"])
def test_an_empty_sweep_file_is_an_error_saying_what_a_sweep_needs(tmp_path, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidParameter) as err:
        load_sweep(path)
    message = str(err.value)
    assert message.startswith(f"sweep file {str(path)!r} ")
    assert "needs at least one of base, grid, zip, seeds" in message and "grid: {" in message
    res = CliRunner().invoke(sweep_cmd, [str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and res.stderr == f"error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_an_empty_mapping_from_python_is_an_error_too():
    with pytest.raises(InvalidParameter, match="the sweep is an empty mapping"):
        parse_sweep({})
    with pytest.raises(InvalidParameter, match="the sweep has no content"):
        parse_sweep(None)
    assert len(parse_sweep({"base": {"policy": "fifo"}}).points) == 1  # one explicit run

def test_parse_sweep_takes_a_mapping():
    s = parse_sweep({"grid": {"policy": ["fifo", "fifo-backfill"]}})
    assert [p.policy for p in s.points] == ["fifo", "fifo-backfill"]


def test_cli_error_exits_2_and_dry_run_lists_without_running(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("grid: {polcy: [fifo]}\n", encoding="utf-8")
    res = CliRunner().invoke(sweep_cmd, [str(bad)])
    assert res.exit_code == 2
    assert "error: " in res.stderr and "unknown key 'polcy'" in res.stderr

    path = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    res = CliRunner().invoke(sweep_cmd, [str(path), "--dry-run", "--out", str(out)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.strip().splitlines()
    assert lines[-1] == "12 runs: 12 to run, 0 finished"
    assert lines[0].split() == ["#", "folder", "status", "policy", "load_scale", "seed"]
    assert len(lines) == 12 + 2
    assert not out.exists()


def test_a_bad_window_is_caught_before_any_run(tmp_path):
    with pytest.raises(InvalidParameter, match="trace window start 'abc' is neither seconds"):
        parse("base: {trace_window: 'abc:def'}\n", tmp_path)
    s = parse("base: {trace_window: ['2017-10-03 12:00:00', null]}\n", tmp_path)
    assert s.points[0].trace_window == "2017-10-03 12:00:00.."
