"""`schedlab.sim.jobstate.plain_spec`: a spec whose rare fields are all at their defaults.

The engine and the placer skip their checks of roles, shares, host asks, speeds,
elasticity, checkpoints, failures, lifetimes and containers for such a spec; so it must
never say plain of a spec that sets any of them, however the spec was made.
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.compact import layout
from schedlab.sim.jobstate import plain_spec
from schedlab.sim.model import JobSpec, RestartPolicy, TaskRole, spec_builder

RARE = layout(JobSpec).rare
DEFAULTS = dict(zip(RARE, layout(JobSpec).defaults, strict=True))
BASE: dict[str, Any] = dict(job_id="j", submit_time=0.0, num_gpus=2, duration=10.0)

SET = {  # a non-default value of each rare field
    "priority": 1, "num_cpus": 2.0, "mem_gb": 4.0, "gpus_per_task": 1,
    "checkpoint_interval": 60.0, "max_retries": 1, "fail_at": 5.0, "max_lifetime": 9.0,
    "min_gpus": 1, "max_gpus": 4, "target_util": 0.5, "scale_interval": 30.0,
    "depends_on": ("x",), "locality_sensitivity": 0.5, "gpu_speeds": (("V100", 1.0),),
    "gpu_share": 0.5, "gpu_util": 0.5, "gpu_mem_gb": 8.0, "max_wait_hours": 1.0,
    "deadline": 100.0, "disk_gb": 1.0, "lazy_preemption": True,
    "tasks": (TaskRole("worker", count=2, gpus=1),), "completions": 2, "parallelism": 2,
    "active_deadline": 50.0, "backoff_limit": 3, "restart_policy": RestartPolicy.ON_FAILURE,
    "model": "resnet", "num_steps": 100.0, "samples": 6400.0, "batch_size": 64,
    "adaptive": True,
}


def test_every_rare_field_is_covered() -> None:
    missing = [f for f in RARE if f not in SET]
    assert not missing, missing


def test_a_spec_of_defaults_is_plain_however_made() -> None:
    s = JobSpec(**BASE)
    assert plain_spec(s)
    assert plain_spec(pickle.loads(pickle.dumps(s)))
    assert plain_spec(replace(s, num_gpus=8, duration=3.0))  # hot fields only
    build = spec_builder(("job_id", "submit_time", "num_gpus", "duration"))
    assert plain_spec(build("b", 1.0, 4, 2.0))


@pytest.mark.parametrize("field", list(SET))
def test_a_spec_that_sets_a_rare_field_is_not_plain(field: str) -> None:
    s = JobSpec(**{**BASE, field: SET[field]})
    assert not plain_spec(s)
    assert plain_spec(replace(s, **{field: DEFAULTS[field]}))  # set back: plain again


def test_a_subclass_is_never_plain() -> None:
    class Mine(JobSpec):
        pass

    assert not plain_spec(Mine(**BASE))
    assert not plain_spec(object())


@given(st.dictionaries(st.sampled_from(list(SET)), st.just(None),
                       max_size=4))
@settings(max_examples=60, deadline=None)
def test_plain_means_every_rare_field_at_its_default(chosen: dict) -> None:
    s = JobSpec(**BASE, **{f: SET[f] for f in chosen})
    if plain_spec(s):
        assert all(getattr(s, f) == DEFAULTS[f] for f in RARE)
    else:
        assert chosen
