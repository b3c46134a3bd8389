"""The jobs table is built column by column (scale); row by row it must read the same.

The row-by-row builder below is the reference (the dtypes pandas infers from the rows'
Python values). Covers what the columns must special-case: container jobs (totals over
their task runs, no rows for the runs), jobs of roles with a running non-gang task (its
GPU time), jobs open when the run is cut short, SLAs, times given as ints only (int64
columns) and pass-through columns of mixed values.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
import pytest

from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import FINAL, PENDING, RETRYING, RUNNING, WAITING
from schedlab.sim.metrics import sla_violated
from schedlab.sim.model import JobSpec, JobStatus
from schedlab.sim.results import JOB_COLUMNS, JOB_EXTRA_COLUMNS, _jobs_frame
from schedlab.sim.roles import side_gpu_seconds
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace
from schedlab.traces.synthetic import from_records

TF = [{"role": "ps", "count": 1, "gpus": 0, "cpus": 4},
      {"role": "worker", "count": 2, "gpus": 2, "cpus": 4},
      {"role": "evaluator", "count": 1, "gpus": 1, "gang": False}]


def records() -> list[dict]:
    return [
        {"job_id": "tf", "submit_time": 0.5, "num_gpus": 4, "duration": 100.25,
         "tasks": json.dumps(TF)},
        {"job_id": "c", "submit_time": 1.5, "num_gpus": 1, "duration": 30.5,
         "completions": 5, "parallelism": 2, "restart_policy": "Never", "fail_at": 10.25,
         "failed_runs": 1},
        {"job_id": "plain", "submit_time": 2.5, "num_gpus": 2, "duration": 50.75,
         "deadline": 40.0, "failed_runs": None},
        {"job_id": "big", "submit_time": 3.5, "num_gpus": 16, "duration": 20.0,
         "max_wait_hours": 0.01, "failed_runs": 2},
    ]


def rows_reference(run: Any, end: float) -> pd.DataFrame:
    """The jobs table row by row: each row's Python values, typed by pandas."""
    topo = run.topo
    own = {*JOB_COLUMNS, *JOB_EXTRA_COLUMNS}
    extra_names = [c for c in run.sim.trace.extra_columns if c not in own]
    level_names = {lv.value: lv.label for lv in topo.levels}
    nan = math.nan
    rows = []
    containers = run.containers
    for j in run.jobs[:run.num_trace]:
        if j.status == WAITING:
            continue
        s = j.spec
        censored = j.status not in FINAL or j.status == JobStatus.UNFINISHED
        status = str(j.status) if not censored else "unfinished"
        queue, run_time, gpu_seconds = j.queue_time, j.run_time, j.gpu_seconds
        counts = (j.preemptions, j.migrations, j.restarts, j.lost_work)
        if containers is not None and s.completions is not None:
            queue, run_time, gpu_seconds = containers.totals(j, end)
            counts = containers.counts(j)
        elif j.status in (PENDING, RETRYING):
            queue += end - j.queued_since
        elif j.status == RUNNING:
            held = end - j.held_since
            run_time += held
            gpu_seconds += held * len(j.gpus) * j.milli / 1000
            if j.side:
                gpu_seconds += side_gpu_seconds(j, end)
        ended = status in ("completed", "failed", "killed")
        end_time = j.end_time if not censored else nan
        jct = end_time - s.submit_time if ended else nan
        deadline = nan if s.deadline is None else float(s.deadline)
        row: tuple[Any, ...] = (
            s.job_id, s.user, s.vc, s.num_gpus, s.submit_time, j.first_start,
            end_time, queue, jct, s.duration, run_time, status, *counts,
            level_names.get(j.locality_level, ""), jct / s.duration if ended else nan,
            j.first_start - s.submit_time, censored,
            deadline, sla_violated(status, s.submit_time, j.first_start, end_time, deadline,
                                   s.max_wait_hours, end),
            j.reason, gpu_seconds, s.gpu_time * (s.completions or 1),
        )
        if extra_names:
            ex = dict(s.extra)
            row += tuple(ex.get(c) for c in extra_names)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*JOB_COLUMNS, *JOB_EXTRA_COLUMNS, *extra_names])


def same(sim: Simulation, until: float | None) -> pd.DataFrame:
    """Run `sim` to `until`; the columns and the rows must read the same."""
    run = sim.start(until=until)
    run.env.run()
    cols = _jobs_frame(run, run.env.now)
    pd.testing.assert_frame_equal(cols, rows_reference(run, run.env.now), check_exact=True)
    return cols


def dgx() -> Any:
    return uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            num_cpus=32, name="dgx")


@pytest.mark.parametrize("until", [None, 25.0, 60.0])
def test_columns_and_rows_read_the_same(until: float | None) -> None:
    cols = same(Simulation(from_records(records()), dgx(), "fifo", seed=0), until)
    assert list(cols.job_id) == ["tf", "c", "plain", "big"]
    c = cols.set_index("job_id").loc["c"]
    assert c.gpu_time == pytest.approx(5 * 30.5)
    assert c.gpu_seconds > 0


@pytest.mark.parametrize("until", [None, 30])
def test_int_times_give_int_columns(until: float | None) -> None:
    # a hand-made trace of int times: pandas types such columns int64, as the rows
    trace = Trace("ints", tuple(JobSpec(f"j{i}", i * 7, 1 + i % 4, 10 + 3 * i)
                                for i in range(12)))
    cols = same(Simulation(trace, dgx(), "fifo", seed=0), until)
    assert cols.submit_time.dtype == "int64" and cols.duration.dtype == "int64"


def test_pass_through_columns_of_mixed_values() -> None:
    recs = [dict(job_id=f"e{i}", submit_time=i * 1.5, num_gpus=1 + i % 3, duration=20.0 + i,
                 tag=("x" if i % 3 else None), n=(i if i % 2 else None), b=bool(i % 2),
                 mix=(i if i % 2 else "t")) for i in range(9)]
    cols = same(Simulation(from_records(recs), dgx(), "fifo", seed=0), None)
    assert cols.tag.dtype == "str" and cols.num_gpus.dtype == "int64"
