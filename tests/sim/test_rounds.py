"""Decision rounds (engine parameter `decision_round`, schedlab.sim.rounds): the policy
decides only at round boundaries and arrivals are held to the next one."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_trace

from schedlab.sim import Simulation
from schedlab.sim.rounds import Rounds

# (job_id, submit, gpus, duration) on one GPU, fifo
JOBS = (("a", 0, 1, 30), ("b", 0, 1, 10), ("c", 10, 1, 50), ("d", 150, 1, 20))


def _times(result) -> dict[str, tuple[float, float]]:
    jobs = result.jobs.set_index("job_id")
    return {j: (float(jobs.at[j, "start_time"]), float(jobs.at[j, "end_time"]))
            for j in jobs.index}


def test_a_hand_computed_run_with_100_s_rounds(one_gpu):
    """By hand: a runs 0-30; b waits for the boundary at 100 (the GPU is free from 30)
    and runs 100-110; c, held from 10 to 100, waits for b and starts at the next boundary
    (200); d, submitted at 150, is held to 200, then waits for c (ends 250) until 300."""
    trace = make_trace(*JOBS)
    got = Simulation(trace, one_gpu, "fifo", seed=0,
                     params={"decision_round": 100, "restore_overhead": 0}).run()
    assert _times(got) == {"a": (0, 30), "b": (100, 110), "c": (200, 250), "d": (300, 320)}
    # submit times are kept: the JCT includes the hold (30 + 110 + 240 + 170) / 4
    assert got.summary["jct_mean"] == pytest.approx(550 / 4)


def test_without_rounds_nothing_changes(one_gpu):
    trace = make_trace(*JOBS)
    plain = Simulation(trace, one_gpu, "fifo", seed=0).run()
    zero = Simulation(trace, one_gpu, "fifo", seed=0, params={"decision_round": 0}).run()
    assert _times(plain) == _times(zero) == {"a": (0, 30), "b": (30, 40), "c": (40, 90),
                                             "d": (150, 170)}


def test_boundaries():
    r = Rounds(300)
    assert (r.next_boundary(0), r.next_boundary(1), r.next_boundary(300)) == (0, 300, 300)
    assert r.at_boundary(600) and not r.at_boundary(601)
    armed: list[float] = []

    class Armed:  # only `schedule` is used (a compiled Agenda's methods cannot be patched)
        def schedule(self, t: float, kind: object, *a: object) -> None:
            armed.append(t)

    agenda: Any = Armed()
    assert not r.open(301, agenda) and not r.open(450, agenda)
    assert armed == [600] and r.waiting(450) and r.open(600, agenda)
    with pytest.raises(ValueError, match="decision_round"):
        Rounds(0)
