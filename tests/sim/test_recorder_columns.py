"""The recorder's packed columns: what goes in comes out, across packing boundaries.

Event rows are packed every few thousand rows (times and counts into 8-byte arrays,
texts into codes) and handed over once (`take_events`, `take_timeline`); a value of
an unusual type keeps its column as the values given, so pandas types it as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from schedlab.sim.cluster import ClusterState
from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import EventKind, JobSpec
from schedlab.sim.queue import PendingQueue
from schedlab.sim.recorder import _CHUNK, EVENT_COLUMNS, Coded, Recorder
from schedlab.topologies.build import uniform_topology
from schedlab.traces.synthetic import from_records


def recorder() -> tuple[Recorder, list[float]]:
    topo = uniform_topology(2, sockets=1, switches_per_socket=1, gpus_per_switch=2,
                            name="r")
    now = [0.0]
    return Recorder(topo, lambda: now[0]), now


def job(job_id: str, num_gpus: Any, gpus: tuple[int, ...] = ()) -> JobState:
    """A job's state whose spec asks `num_gpus` as given (any type), holding `gpus`."""
    spec = JobSpec(job_id=job_id, submit_time=0.0, duration=1.0, num_gpus=1)
    object.__setattr__(spec, "num_gpus", num_gpus)  # an unusual value, as a reader may give
    state = JobState(0, spec)
    state.gpus = gpus
    return state


def decode(col: Any) -> list[Any]:
    if isinstance(col, Coded):
        return [col.texts[c] for c in col.codes.tolist()]
    return list(col)


def test_event_rows_round_trip_across_packing() -> None:
    rec, now = recorder()
    n = 2 * _CHUNK + 17
    want = []
    for i in range(n):
        now[0] = i * 0.5
        j = job(f"j{i % 7}", i % 3, (0, 1) if i % 2 else (2,))
        kind = (EventKind.START, EventKind.FINISH, EventKind.SUBMIT)[i % 3]
        rec.event(j, kind, f"d{i % 5}" if i % 4 else "")
        # a start says the GPUs it gave; the other kinds the request
        placed = len(j.gpus) if kind is EventKind.START else i % 3
        want.append((i * 0.5, f"j{i % 7}", kind.value, placed, rec.cells(j.gpus),
                     f"d{i % 5}" if i % 4 else "", rec.gpu_names(j.gpus)))
    copy = rec.event_columns()
    cols = rec.take_events()
    for c in (copy, cols):
        assert c["time"].dtype == np.float64 and c["num_gpus"].dtype == np.int64
        got = list(zip(*(decode(c[k]) for k in ("time", "job_id", "kind", "num_gpus",
                                                 "cells", "detail", "gpus")), strict=True))
        assert got == want
    assert rec.event_count == n
    assert len(rec.take_events()["time"]) == 0  # handed over: the recorder forgot them
    rec.event(job("x", 1), EventKind.SUBMIT)
    assert decode(rec.take_events()["job_id"]) == ["x"]  # only the rows since


def test_unusual_values_keep_their_column_as_given() -> None:
    rec, _ = recorder()
    for i in range(_CHUNK + 5):
        rec.event(job("a", 1.5 if i == _CHUNK + 2 else 1), EventKind.SUBMIT,
                  None if i == 3 else "x")  # type: ignore[arg-type]
    cols = rec.take_events()
    assert isinstance(cols["num_gpus"], list) and cols["num_gpus"][_CHUNK + 2] == 1.5
    assert isinstance(cols["detail"], list) and cols["detail"][3] is None
    assert cols["detail"][:3] == ["x"] * 3 and len(cols["detail"]) == _CHUNK + 5


def state(busy: int, c: ClusterState) -> tuple[ClusterState, PendingQueue]:
    """The cluster with its first `busy` GPUs busy (job 0), each call a change."""
    held = tuple(g for g in range(c.total_gpus) if c.gpu_holders[g])
    if held:
        c.release(0, held, 1000)
    if busy:
        c.allocate(0, range(busy), 1000)
    else:
        c.allocate(0, [0], 1000)  # a change even when nothing ends up busy
        c.release(0, [0], 1000)
    return c, PendingQueue()


def test_timeline_rows_across_packing_and_a_change_at_the_same_instant() -> None:
    rec, now = recorder()
    c = ClusterState(rec.topo)
    n = _CHUNK + 3
    for i in range(n):
        now[0] = float(i)
        rec.sample(*state(i % 4, c), running=0)
        rec.sample(*state((i + 1) % 4, c), running=0)  # replaces the row of i
    cols, replaces = rec.take_timeline()
    assert not replaces
    assert cols["time"].tolist() == [float(i) for i in range(n)]
    assert cols["gpus_busy"].tolist() == [float((i + 1) % 4) for i in range(n)]
    assert cols["gpus_total"].dtype == np.int64
    # a change at the instant of the last row handed over replaces that row
    rec.sample(*state(3 if n % 4 != 3 else 2, c), running=0)
    cols, replaces = rec.take_timeline()
    assert replaces and cols["time"].tolist() == [float(n - 1)]


def test_a_result_asked_twice_is_the_same_and_each_is_its_own() -> None:
    topo = uniform_topology(1, gpus_per_switch=4, name="four")
    recs = [{"job_id": f"j{i}", "submit_time": i * 1.5, "num_gpus": 1 + i % 4,
             "duration": 10.0 + i} for i in range(40)]
    sim = Simulation(from_records(recs), topo, "fifo", seed=0)
    run = sim.start()
    run.env.run()
    first = sim.result(run, 0.0)
    events, timeline = first.events.copy(), first.timeline.copy()
    first.events.loc[0, "job_id"] = "changed"
    first.timeline.loc[0, "gpus_busy"] = -1.0
    second = sim.result(run, 0.0)
    pd.testing.assert_frame_equal(second.events, events)
    pd.testing.assert_frame_equal(second.timeline, timeline)
    assert second.summary["utilization_mean"] == first.summary["utilization_mean"]


def test_gpu_names_and_the_gpus_each_job_was_placed_on() -> None:
    rec, _ = recorder()
    assert rec.gpu_names((1, 2)) == "node0/gpu1;node1/gpu0"
    rec.configure(events=False)  # kept whether events are or not
    rec.event(job("a", 2, (0, 1)), EventKind.START)
    rec.event(job("a", 2, ()), EventKind.PREEMPT)
    rec.event(job("a", 2, (2, 1)), EventKind.RESUME)
    rec.event(job("b", 1, (3,)), EventKind.START)
    rec.event(job("b", 1, (3,)), EventKind.FINISH)
    assert rec.gpus_by_job() == {"a": "node0/gpu0;node0/gpu1;node1/gpu0", "b": "node1/gpu1"}


def test_a_non_gang_task_s_start_is_a_row_of_its_own() -> None:
    rec, now = recorder()
    now[0] = 7.0
    rec.task_event(job("j", 4, (0, 1)), "evaluator", 0, 1, (2,))
    cols = rec.take_events()
    assert [decode(cols[k]) for k in EVENT_COLUMNS] == [
        [7.0], ["j"], ["start"], [1], ["node1:1"], ["task=evaluator[0]@node1"],
        ["node1/gpu0"]]
    assert rec.gpus_by_job() == {"j": "node1/gpu0"}
