"""Sia's per-GPU-type profiles backend: answers against hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.base import Shape
from schedlab.sim.perf.sia import SiaProfiles

PLACEMENTS_A = """placement,local_bsz,step_time,sync_time
1,16,0.1,0.0
1,32,0.16,0.0
2,16,0.12,0.02
"""
PLACEMENTS_B = """placement,local_bsz,step_time,sync_time
1,16,0.05,0.0
"""
VALID_16 = """progress,iteration,metric,grad_sqr,grad_var
100,100,0.5,1.0,1.0
200,200,0.6,1.0,3.0
"""
VALID_32 = """progress,iteration,metric,grad_sqr,grad_var
100,50,0.5,1.0,1.0
200,100,0.6,1.0,3.0
"""


def write_profiles(root: Path) -> Path:
    """A tiny Sia traces folder: model `m` on types `a` and `b`."""
    m = root / "m"
    m.mkdir(parents=True)
    (m / "placements-a.csv").write_text(PLACEMENTS_A)
    (m / "placements-b.csv").write_text(PLACEMENTS_B)
    (m / "validation-16.csv").write_text(VALID_16)
    (m / "validation-32.csv").write_text(VALID_32)
    return root


@pytest.fixture
def sia(tmp_path: Path) -> SiaProfiles:
    return SiaProfiles(write_profiles(tmp_path / "traces"))


def one(t: str, *per_node: int) -> Shape:
    return Shape(t, tuple(per_node))


def test_defaults(sia: SiaProfiles) -> None:
    assert set(sia.models()) == {"m"}
    assert sia.default_batch("m") == 16        # smallest validated batch
    assert sia.max_batch("m") == 32
    assert sia.default_work("m") == 200.0      # progress at the end of its 2 epochs
    assert sia.restart_cost("m") == 30.0       # Sia's default rescale time
    assert sia.restart_cost("imagenet") == 250.0
    assert sia.reference_type("m") == "a"


def test_throughput_and_goodput(sia: SiaProfiles) -> None:
    # 1 GPU, batch 16: 16/16 steps per 0.1 s
    assert sia.throughput("m", one("a", 1), 16) == pytest.approx(10.0)
    assert sia.goodput("m", one("a", 1), 16, 0.0) == pytest.approx(10.0)
    # 2 GPUs of one node, batch 32: 0.12 s, scale 2, gain (1+1)/(1/2+1) = 4/3
    assert sia.goodput("m", one("a", 2), 32, 0.0) == pytest.approx(4 / 3 / 0.12)
    # epoch 1 (progress 150): grad_var 3, gain (3+1)/(3/2+1) = 1.6
    assert sia.goodput("m", one("a", 2), 32, 150.0) == pytest.approx(1.6 / 0.12)
    # 1 GPU, batch 32: Sia accumulates (2 x 16) on one GPU: 0.1 + 0.1 s
    assert sia.throughput("m", one("a", 1), 32) == pytest.approx(2 / 0.2)
    assert sia.goodput("m", one("a", 1), 32, 0.0) == pytest.approx(4 / 3 / 0.2)
    assert sia.throughput("m", one("B", 1), 16) == pytest.approx(20.0)  # type: any case
    assert sia.throughput("m", one("b", 2), 32) == 0.0  # never measured, nothing to interpolate
    assert sia.throughput("m", one("a", 2), 16) == 0.0  # 8 per GPU: below what was measured


def test_best_batch_and_horizon(sia: SiaProfiles) -> None:
    assert sia.best_batch("m", one("a", 2), 16, 150.0) == 32
    assert sia.best_batch("m", one("a", 1), 16, 0.0) == 16  # accumulating costs more
    assert sia.horizon("m", 32, 50.0) == 100.0
    assert math.isinf(sia.horizon("m", 32, 150.0))


def test_bad_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameter, match="no model folder"):
        SiaProfiles(tmp_path)
