"""The compact JobSpec layout (`schedlab.sim.compact`): an ordinary frozen dataclass to its users.

A spec keeps the fields every trace gives in its own slots and shares one record of the
rest with the specs that leave them alike; whatever a spec was given, it reads back
exactly (type, value, sign of a zero), and it pickles, copies, compares and hashes as
before.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.compact import _SHARED_MAX, compact, hot_replacer, layout, record
from schedlab.sim.model import JobSpec, RestartPolicy, TaskRole, spec_builder

RARE = layout(JobSpec).rare


def _same(a: object, b: object) -> bool:
    """Equal, of one type, and (for floats) of one sign: indistinguishable to a reader."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    return a == b


def test_specs_leaving_the_rest_at_defaults_share_one_record() -> None:
    a = JobSpec("a", 0.0, 1, 10.0)
    b = JobSpec("b", 5.0, 8, 20.0, user="u", vc="v")
    assert record(a) is record(b) is layout(JobSpec).default_record
    assert not hasattr(a, "__dict__")
    assert sys.getsizeof(a) < 120  # the hot slots and one pointer (320 bytes before)
    assert a.priority == 0 and a.checkpoint_interval is None and a.tasks == ()


def test_equal_rare_values_share_and_read_back() -> None:
    a = JobSpec("a", 0.0, 1, 10.0, priority=2, max_retries=3)
    b = JobSpec("b", 0.0, 1, 10.0, priority=2, max_retries=3)
    c = JobSpec("c", 0.0, 1, 10.0, priority=2, max_retries=4)
    assert record(a) is record(b)
    assert record(c) is not record(a)
    assert (a.priority, a.max_retries, c.max_retries) == (2, 3, 4)


def test_a_signed_zero_and_a_bool_read_back_as_given() -> None:
    neg = JobSpec("a", 0.0, 1, 10.0, num_cpus=-0.0)
    assert math.copysign(1.0, neg.num_cpus) < 0
    assert math.copysign(1.0, JobSpec("b", 0.0, 1, 10.0).num_cpus) > 0
    flag = JobSpec("c", 0.0, 1, 10.0, priority=True)
    one = JobSpec("d", 0.0, 1, 10.0, priority=1)
    assert flag.priority is True and type(one.priority) is int
    assert record(flag) is not record(one)
    # the default values of another type do not share the default record
    assert record(JobSpec("e", 0.0, 1, 10.0, gpu_share=1)) is not layout(JobSpec).default_record


def test_tuples_and_enums_read_back() -> None:
    roles = (TaskRole("ps", 1, 0, cpus=4.0), TaskRole("worker", 2, 4))
    s = JobSpec("a", 0.0, 8, 10.0, tasks=roles, depends_on=("x", "y"),
                gpu_speeds=(("V100", 1.0), ("K80", 0.4)),
                restart_policy=RestartPolicy.ON_FAILURE, completions=3)
    assert s.tasks is roles and s.depends_on == ("x", "y")
    assert s.speed_on("K80") == 0.4 and s.is_container
    assert s.restart_policy is RestartPolicy.ON_FAILURE


def test_a_compact_spec_is_an_ordinary_frozen_dataclass() -> None:
    s = JobSpec("a", 1.0, 4, 10.0, user="u", priority=3, deadline=99.0,
                extra=(("note", "x"),))
    assert [f.name for f in dataclasses.fields(s)][:4] == ["job_id", "submit_time",
                                                            "num_gpus", "duration"]
    assert dataclasses.asdict(s)["priority"] == 3
    r = dataclasses.replace(s, priority=0, deadline=None)
    assert record(r) is layout(JobSpec).default_record and r.user == "u"
    assert dataclasses.replace(r, priority=3, deadline=99.0) == s
    for other in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s), copy.copy(s)):
        assert other == s and hash(other) == hash(s) and other.extra == s.extra
    back = pickle.loads(pickle.dumps(JobSpec("b", 0, 1, 1.0)))
    assert record(back) is layout(JobSpec).default_record
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.user = "v"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        s.priority = 1  # type: ignore[misc]
    assert s != dataclasses.replace(s, priority=4)
    assert s == dataclasses.replace(s, extra=())  # extra is not compared
    assert "priority=3" in repr(s)


def test_the_builder_with_rare_fields_given_matches_the_constructor() -> None:
    given_ = ("job_id", "submit_time", "num_gpus", "duration", "priority", "num_cpus",
              "checkpoint_interval", "depends_on")
    build = spec_builder(given_)
    rows = [("a", 0.0, 1, 5.0, 1, 2.0, None, ()),
            ("b", 1.0, 2, 6.0, 1, 2.0, None, ()),
            ("c", 2.0, 4, 7.0, 0, -0.0, 60.0, ("a",)),
            ("d", 3.0, 4, 7.0, 0, 0.0, None, ())]
    specs = [build(*row) for row in rows]
    for row, spec in zip(rows, specs, strict=True):
        want = JobSpec(**dict(zip(given_, row, strict=True)))  # type: ignore[arg-type]
        assert spec == want and type(spec) is JobSpec
        for name in given_:
            assert _same(getattr(spec, name), getattr(want, name)), name
    assert record(specs[0]) is record(specs[1])  # equal rare values: one record
    assert record(specs[3]) is layout(JobSpec).default_record
    assert math.copysign(1.0, specs[2].num_cpus) < 0


def test_the_builder_takes_unhashable_values_without_sharing_them() -> None:
    build = spec_builder(("job_id", "submit_time", "num_gpus", "duration", "depends_on"))
    a = build("a", 0.0, 1, 1.0, ["x"])
    b = build("b", 0.0, 1, 1.0, ["x"])
    assert a.depends_on == ["x"] and record(a) is not record(b)


def test_the_builder_without_rare_fields_shares_the_default_record() -> None:
    build = spec_builder(("job_id", "submit_time", "num_gpus", "duration", "user", "vc"))
    s = build("a", 0.0, 1, 1.0, "u", "v")
    assert record(s) is layout(JobSpec).default_record and s == JobSpec("a", 0.0, 1, 1.0,
                                                                     "u", "v")


_VALUES = {
    "priority": st.one_of(st.integers(-3, 3), st.booleans()),
    "num_cpus": st.floats(allow_nan=False, width=32),
    "checkpoint_interval": st.one_of(st.none(), st.floats(0, 1e6)),
    "depends_on": st.lists(st.sampled_from("abc"), max_size=2).map(tuple),
    "lazy_preemption": st.one_of(st.none(), st.booleans()),
    "restart_policy": st.sampled_from(list(RestartPolicy)),
}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional=_VALUES), min_size=1, max_size=6))
def test_every_spec_reads_back_what_it_was_given(rows: list[dict[str, object]]) -> None:
    names = ("job_id", "submit_time", "num_gpus", "duration", *_VALUES)
    build = spec_builder(tuple(n for n in names if n in RARE or n in names[:4]))
    defaults = {f.name: f.default for f in dataclasses.fields(JobSpec)}
    specs = []
    for i, row in enumerate(rows):
        full = {n: row.get(n, defaults[n]) for n in _VALUES}
        built = build(str(i), 0.0, 1, 1.0, *full.values())
        made = JobSpec(str(i), 0.0, 1, 1.0, **row)  # type: ignore[arg-type]
        specs.append((full, built, made))
    for full, built, made in specs:  # after all were made: no record changed under one
        assert built == made
        for name, value in full.items():
            assert _same(getattr(built, name), value), name
            assert _same(getattr(made, name), value), name


def test_compact_rejects_what_it_cannot_keep() -> None:
    with pytest.raises(TypeError, match="not fields"):
        @compact(hot=("nope",))
        @dataclasses.dataclass(frozen=True)
        class A:
            x: int = 0
    with pytest.raises(TypeError, match="__post_init__"):
        @compact(hot=("x",))
        @dataclasses.dataclass(frozen=True)
        class B:
            x: int = 0

            def __post_init__(self) -> None:
                pass
    with pytest.raises(TypeError, match="needs a default"):
        @compact(hot=("x",))
        @dataclasses.dataclass(frozen=True)
        class C:
            y: int
            x: int = 0


def test_the_shared_table_is_bounded() -> None:
    @compact(hot=("k",))
    @dataclasses.dataclass(frozen=True)
    class Small:
        k: int
        v: int = 0

    many = [Small(i, v=i + 1) for i in range(_SHARED_MAX + 10)]
    assert len(layout(Small).shared) == _SHARED_MAX
    assert all(s.v == s.k + 1 for s in many)
    assert record(Small(0, v=1)) is record(many[0])


def test_a_dataclass_subclass_is_refused_with_a_reason() -> None:
    @dataclasses.dataclass(frozen=True)
    class Mine(JobSpec):
        mine: int = 0

    with pytest.raises(TypeError, match=r"JobSpec.priority is kept in a shared record"):
        Mine("a", 0.0, 1, 1.0)

    class Plain(JobSpec):  # methods only: the compact constructor is inherited
        def twice(self) -> float:
            return 2 * self.duration

    p = Plain("a", 0.0, 1, 1.5, priority=2)
    assert p.twice() == 3.0 and p.priority == 2


@settings(max_examples=40, deadline=None)
@given(st.fixed_dictionaries({}, optional=_VALUES), st.sampled_from(["", "K80", "V100"]))
def test_a_hot_replacer_gives_what_replace_gives(row: dict[str, object], gpu_type: str
                                                  ) -> None:
    spec = JobSpec("a", 1.0, 2, 3.0, user="u", **row)  # type: ignore[arg-type]
    fast = hot_replacer(JobSpec, "gpu_type")(spec, gpu_type)
    slow = dataclasses.replace(spec, gpu_type=gpu_type)
    assert type(fast) is JobSpec and fast == slow and hash(fast) == hash(slow)
    for f in dataclasses.fields(JobSpec):
        assert _same(getattr(fast, f.name), getattr(slow, f.name)), f.name
    assert record(fast) is record(spec)  # the rare fields are shared, not re-checked
    assert spec.gpu_type == ""  # the original is untouched


def test_a_hot_replacer_takes_only_hot_fields() -> None:
    with pytest.raises(ValueError, match="priority is not a hot field"):
        hot_replacer(JobSpec, "priority")
