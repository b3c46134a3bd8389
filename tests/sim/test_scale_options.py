"""Options for runs at scale: timeline full/coarse/off, events on/off, honest event count.

No summary number may depend on what a run writes: the summary integrates every change
of the cluster whatever timeline.parquet gets, and events.parquet rows are only output.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_trace

from schedlab.app.cli import main
from schedlab.app.sweep_file import parse_sweep
from schedlab.policies.base import Policy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec, Start, Suspend
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace

OPTIONS = ("timeline", "timeline_interval", "events")


def _numbers(summary: dict) -> dict:
    """The summary without the run's wall time and the output options it records."""
    out = {k: v for k, v in summary.items() if k not in ("wall_seconds", "params")}
    out["params"] = {k: v for k, v in summary["params"].items() if k not in OPTIONS}
    return out


@pytest.fixture(scope="module")
def inputs():
    return load_trace("default"), load_topology("default")


@pytest.mark.parametrize("policy", ["fifo-backfill", "tiresias-las", "gavel-mmf"])
def test_summary_is_identical_whatever_the_run_writes(policy, inputs):
    trace, topo = inputs
    runs = {opts: Simulation(trace, topo, policy, max_jobs=600,
                             params=dict(zip(("timeline", "events"), opts, strict=True))
                             ).run()
            for opts in (("full", "on"), ("coarse:3600", "on"), ("off", "off"),
                         ("coarse", "off"))}
    full = runs[("full", "on")]
    want = json.dumps(_numbers(full.summary), sort_keys=True, default=str)
    for opts, r in runs.items():
        assert json.dumps(_numbers(r.summary), sort_keys=True, default=str) == want, opts
        assert r.jobs.equals(full.jobs), opts
        assert r.nodes.equals(full.nodes), opts
    off = runs[("off", "off")]
    assert len(off.timeline) == 0 and list(off.timeline.columns) == list(full.timeline.columns)
    assert len(off.events) == 0 and list(off.events.columns) == list(full.events.columns)
    assert runs[("coarse:3600", "on")].events.equals(full.events)
    assert off.summary["params"]["timeline"] == "off" and off.summary["params"]["events"] is False


def test_coarse_timeline_is_the_state_in_effect_every_interval(inputs):
    trace, topo = inputs
    full = Simulation(trace, topo, "fifo", max_jobs=400).run()
    coarse = Simulation(trace, topo, "fifo", max_jobs=400,
                        params={"timeline": "coarse", "timeline_interval": 1800}).run()
    ft, ct = full.timeline, coarse.timeline
    t0, t1 = ft.time.iloc[0], ft.time.iloc[-1]
    grid = np.arange(t0, t1, 1800.0)
    assert list(ct.time) == [*grid, t1]  # every interval from the first row, then the last
    for _, row in ct.iloc[:-1].iterrows():
        at = ft[ft.time <= row.time].iloc[-1]  # the full timeline's row in effect then
        assert row.drop("time").equals(at.drop("time")), row.time
    assert ct.iloc[-1].equals(ft.iloc[-1])
    assert ct.dtypes.equals(ft.dtypes)
    assert len(ct) < len(ft)


def test_options_are_recorded_in_config_and_parsed_with_clear_errors(tmp_path):
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["run", "--policy", "fifo", "--max-jobs", "200", "--quiet",
                                    "--timeline", "coarse:600", "--events", "off",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    config = json.loads((out / "fifo" / "config.json").read_text())
    assert config["params"] == {"timeline": "coarse:600", "events": "off"}
    assert config["resolved_params"]["timeline"] == "coarse:600"
    assert config["resolved_params"]["events"] is False
    assert len(pd.read_parquet(out / "fifo" / "events.parquet")) == 0
    times = pd.read_parquet(out / "fifo" / "timeline.parquet").time
    assert (np.diff(times.to_numpy())[:-1] == 600.0).all()
    for bad, words in (("coarse:0", "N seconds > 0"), ("coarse:x", "N seconds > 0"),
                       ("ful", "full")):
        with pytest.raises(InvalidParameter, match="timeline") as e:
            Simulation(make_trace(("a", 0.0, 1, 10.0)), uniform_topology(1), "fifo",
                       params={"timeline": bad})
        assert words in str(e.value)
    with pytest.raises(InvalidParameter, match="timeline_interval"):
        Simulation(make_trace(("a", 0.0, 1, 10.0)), uniform_topology(1), "fifo",
                   params={"timeline_interval": 0})


def test_a_sweep_file_takes_the_options_as_parameters():
    sweep = parse_sweep({"base": {"policy": "fifo", "max_jobs": 10,
                                  "params": {"timeline": "off", "events": "off"}},
                         "grid": {"params.timeline": ["off", "coarse:3600"]}})
    assert {dict(p.params)["timeline"] for p in sweep.points} == {"off", "coarse:3600"}
    assert all(dict(p.params)["events"] == "off" for p in sweep.points)


class _SuspendRounds(Policy):
    """Starts every job, then suspends and resumes each running one every 100 s."""

    name = "suspend-rounds"
    period = 100.0

    def schedule(self, ctx):
        if ctx.now > 0:
            for job in list(ctx.running().values()):
                yield Suspend(job.job_id, reason="round")
        for job in list(ctx.pending()):
            got = ctx.place(job)
            if isinstance(got, tuple):
                yield Start(job.job_id, got)


def test_events_processed_counts_every_engine_event_including_round_suspensions():
    topo = uniform_topology(1, gpus_per_switch=4)
    trace = make_trace(JobSpec("a", 0.0, 2, 250.0), JobSpec("b", 0.0, 2, 250.0))
    r = Simulation(trace, topo, _SuspendRounds(),
                   params={"restore_overhead": 0.0}).run()
    ev = r.events
    kinds = ev.kind.value_counts().to_dict()
    assert kinds["suspend"] >= 4 and kinds["resume"] == kinds["suspend"]
    ticks = r.summary["events_processed"] - len(ev)  # every row is one event, plus ticks
    assert 0 < ticks <= math.ceil(r.summary["makespan"] / 100.0) + 1
    fifo = Simulation(trace, topo, "fifo").run()  # no timers: exactly one event per row
    assert fifo.summary["events_processed"] == len(fifo.events) == 6
