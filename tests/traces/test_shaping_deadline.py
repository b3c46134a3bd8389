"""Shaping moves a job's deadline with its submission (the slack after submit is kept)."""

from __future__ import annotations

from schedlab.sim.model import JobSpec
from schedlab.traces.base import Trace
from schedlab.traces.shaping import shape


def test_window_and_load_scale_keep_deadline_slack() -> None:
    t = Trace("t", (JobSpec("a", 100.0, 1, 10.0, deadline=400.0),
                    JobSpec("b", 200.0, 1, 10.0)))
    w = shape(t, window="100:")
    assert [(j.submit_time, j.deadline) for j in w.jobs] == [(0.0, 300.0), (100.0, None)]
    s = shape(t, load_scale=2.0)
    assert [(j.submit_time, j.deadline) for j in s.jobs] == [(50.0, 350.0), (100.0, None)]
