"""`schedlab.sim.model.request_class` is looked up by the spec's shared record of rare fields.

The lookup must give what reading every field gives: specs alike share one class, specs
that differ in any field of the class (GPUs, their type, share, CPUs, memory, disk, task
size, roles) get their own, and a subclass of JobSpec (which may read its fields
otherwise) is never looked up.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from schedlab.sim import model
from schedlab.sim.model import JobSpec, TaskRole, _request_class, request_class


def _spec(**kw: Any) -> JobSpec:
    base: dict[str, Any] = dict(job_id="j", submit_time=0.0, num_gpus=2, duration=10.0)
    return JobSpec(**{**base, **kw})


VARIANTS = [
    {}, {"num_gpus": 4}, {"gpu_type": "V100"}, {"gpu_share": 0.5, "num_gpus": 1},
    {"num_cpus": 8.0}, {"mem_gb": 16.0}, {"disk_gb": 5.0}, {"gpus_per_task": 1},
    {"tasks": (TaskRole("worker", count=2, gpus=1),)},
    {"num_cpus": 8.0, "mem_gb": 16.0},
]


@pytest.mark.parametrize("kw", VARIANTS)
def test_looked_up_class_is_the_read_one(kw: dict[str, Any]) -> None:
    a, b = _spec(**kw), _spec(job_id="other", submit_time=5.0, **kw)
    assert request_class(a) == _request_class(a)
    assert request_class(b) == _request_class(b) == request_class(a)  # asked again: memo


def test_specs_that_differ_get_their_own_class() -> None:
    classes = {request_class(_spec(**kw)) for kw in VARIANTS}
    assert len(classes) == len(VARIANTS)


def test_replaced_spec_reads_its_own_fields() -> None:
    a = _spec()
    request_class(a)
    b = replace(a, num_cpus=3.0)
    assert request_class(b) == _request_class(b) != request_class(a)


def test_subclass_is_read_field_by_field() -> None:
    class Wide(JobSpec):
        @property
        def task_gpus(self) -> int:  # reads its task size otherwise
            return 1

    plain = _spec()
    request_class(plain)
    w = Wide(job_id="w", submit_time=0.0, num_gpus=2, duration=10.0)
    assert request_class(w)[1] == 1
    assert request_class(plain)[1] == 2


def test_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_CLASSES", {})
    monkeypatch.setattr(model, "_CLASSES_MAX", 3)
    specs = [_spec(num_cpus=float(k + 1)) for k in range(10)]
    assert [request_class(s) for s in specs] == [_request_class(s) for s in specs]
    assert len(model._CLASSES) == 3
