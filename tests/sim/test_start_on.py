"""`start_on`: the hot paths' Start, made without the dataclass's Python __init__."""

from __future__ import annotations

import dataclasses

from schedlab.sim.context import start_on
from schedlab.sim.model import HostPlacement, Start


def test_a_start_on_gpus_is_the_dataclass_one():
    got = start_on("j1", (3, 5))
    want = Start("j1", (3, 5))
    assert type(got) is Start and got == want and hash(got) == hash(want)
    # every field is set (a field added to Start without a value here would be missing)
    assert dataclasses.astuple(got) == dataclasses.astuple(want)
    assert dataclasses.replace(got, share="timeshare").share == "timeshare"


def test_other_placements_go_through_the_dataclass():
    got = start_on("cpu", HostPlacement(7))
    assert got == Start("cpu", HostPlacement(7)) and got.node == 7 and got.gpus == ()
