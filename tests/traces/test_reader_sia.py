"""Sia workload CSV reader: mapping, detection, bad rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.traces.readers import detect_format, read_trace

WORKLOAD = """name,time,application,num_replicas,batch_size
cifar10-0,107,cifar10,6,2048
deepspeech2-1,110.5,deepspeech2,12,320
"""


def test_mapping(tmp_path: Path) -> None:
    p = tmp_path / "workload-1.csv"
    p.write_text(WORKLOAD)
    # Sia's header is Pollux's unless it has `category`: the format is named
    assert detect_format(p) == "pollux"
    a, b = read_trace(p, "sia").jobs
    assert (a.job_id, a.submit_time, a.num_gpus, a.model, a.batch_size) == \
        ("cifar10-0", 107.0, 6, "cifar10", 2048)
    assert a.adaptive and (a.min_gpus, a.max_gpus) == (1, 64)
    assert b.submit_time == 110.5 and b.num_gpus == 12
    assert a.num_steps is None and a.samples is None  # work: the model's epochs


def test_categories(tmp_path: Path) -> None:
    p = tmp_path / "w.csv"
    p.write_text("name,time,application,num_replicas,batch_size,category\n"
                 "a,0,bert,4,384,rigid\nb,1,bert,4,384,scale-gpus\nc,2,bert,4,384,adaptive\n")
    a, b, c = read_trace(p, "sia").jobs
    assert not a.adaptive and a.min_gpus is None and a.max_gpus is None
    assert not b.adaptive and b.max_gpus == 64
    assert c.adaptive


def test_bad_row(tmp_path: Path) -> None:
    p = tmp_path / "w.csv"
    p.write_text("name,time,application,num_replicas,batch_size\na,0,bert,zero,384\n")
    with pytest.raises(InvalidTrace, match="num_replicas"):
        read_trace(p, "sia")
