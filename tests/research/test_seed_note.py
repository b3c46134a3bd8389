"""Figures claim a mean over seeds with error bars only when the seeds changed something
(issue 49: a deterministic policy on a fixed trace gave "mean over 2 seeds", zero spread)."""

from __future__ import annotations

import math

import pandas as pd

from schedlab.app.plots import seed_note, sweep_figure


def test_seed_note():
    assert seed_note([1.0], 1) == ""
    assert seed_note([0.0, math.nan], 3).startswith("3 seeds, identical results")
    assert seed_note([0.0, 2.5], 2) == "mean over 2 seeds, error bars: std"


def test_a_sweep_whose_seeds_change_nothing_says_so():
    table = pd.DataFrame({"policy": ["fifo"] * 4, "seed": [0, 1, 0, 1],
                          "load_scale": [1.0, 1.0, 2.0, 2.0],
                          "jct_mean": [3600.0, 3600.0, 7200.0, 7200.0]})
    title = sweep_figure(table, "load_scale", "jct_mean").axes[0].get_title()
    assert "identical results" in title and "mean over" not in title
    varied = table.assign(jct_mean=[3600.0, 3700.0, 7200.0, 7200.0])
    assert "mean over 2 seeds" in sweep_figure(varied, "load_scale").axes[0].get_title()
