"""A compact memory layout for frozen dataclasses of millions of instances (job specs).

`compact(hot)` keeps only the `hot` fields in an instance's own slots; the others, which
nearly every instance leaves at their defaults, live in one shared record of slots (the
rest of a trace's job specs: checkpoints, elasticity, roles, container-job settings).
An instance that sets one of them gets a record of its own, or a shared one equal to
it. The class stays an ordinary frozen dataclass to its users (`fields`, `replace`,
`asdict`, equality, hashing, pickling, keyword and positional construction); a rare
field is read through a property whose getter is C code (`operator.attrgetter`), so it
costs about what a slot read costs. At a million jobs a spec of 38 fields takes 88
bytes instead of 320.

This module imports nothing of schedlab's own (`schedlab.sim.model` builds on it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import MISSING, fields
from enum import Enum
from operator import attrgetter
from typing import Any, TypeVar

_T = TypeVar("_T")

_SHARED_MAX = 4096  # records of non-default values shared (a bounded table per class)
_EXACT = (type(None), bool, int, str)
"""Types whose equal values of the same type are indistinguishable (floats: but zeros)."""


class Layout:
    """How a compact class stores its fields: the hot ones, the record of the rest."""

    def __init__(self, hot: tuple[str, ...], rare: tuple[str, ...],
                 defaults: tuple[Any, ...], record: type) -> None:
        self.hot = hot
        self.rare = rare
        self.defaults = defaults  # the rare fields' defaults, in field order
        self.types = tuple(map(type, defaults))
        self.zeros = tuple(i for i, d in enumerate(defaults) if type(d) is float and d == 0)
        self.record = record
        self.default_record = self._new(defaults)
        self.shared: dict[tuple[Any, ...], Any] = {}
        self.sharable: set[Any] = {self.default_record}  # the records handed out shared

    def _new(self, values: tuple[Any, ...]) -> Any:
        return self.record(*values)

    def record_of(self, values: tuple[Any, ...]) -> Any:
        """The record of these rare values (in field order): a shared one when it can be.

        Shared only when the values cannot be told apart from the shared record's (same
        types and values, no signed zero), so an instance reads back exactly what it got.
        """
        if (values == self.defaults and tuple(map(type, values)) == self.types
                and all(math.copysign(1.0, values[i]) > 0 for i in self.zeros)):
            return self.default_record
        if not all(map(_exact, values, self.defaults)):
            return self._new(values)  # tuples, zeros given: an own record, as given
        key = (values, tuple(map(type, values)))
        rec = self.shared.get(key)
        if rec is None:
            rec = self._new(values)
            if len(self.shared) < _SHARED_MAX:  # past the bound: own records
                self.shared[key] = rec
                self.sharable.add(rec)
        return rec


def _exact(v: Any, default: Any) -> bool:
    """Whether any value equal to `v` and of its type is `v` to every reader.

    The default object itself counts as exact (a record holding it shares the default).
    """
    if v is default:
        return True
    t = type(v)
    if t is float:
        return v != 0  # 0.0 == -0.0
    return t in _EXACT or isinstance(v, Enum) or (t is tuple and not v)


def exactly(values: tuple[Any, ...]) -> bool:
    """Whether values equal to these (and of their types) are these to every reader."""
    return all(_exact(v, None) for v in values)


def layout(cls: type) -> Layout:
    """The layout of a class made by `compact`."""
    lay: Layout = cls.__dict__["__compact__"]
    return lay


def record(obj: Any) -> Any:
    """The record holding an instance's rare fields (shared with its look-alikes)."""
    return obj._rest


def hot_replacer(cls: type[_T], name: str) -> Callable[[_T, Any], _T]:
    """A fast `dataclasses.replace(obj, <name>=value)` for a hot field of a compact class.

    The copy keeps the original's record of rare fields (records never change once
    made), so it reads back every field as `replace` would give it, without checking
    the rare values again: one object and a slot store per hot field (a tenth of
    `replace`'s cost; Gavel makes a typed copy of a spec per job it starts).
    """
    lay = layout(cls)
    if name not in lay.hot:
        raise ValueError(f"{cls.__name__}.{name} is not a hot field (hot: {lay.hot})")
    env: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__}
    body = [f"    _set(new, {h!r}, {'value' if h == name else 'obj.' + h})"
            for h in (*lay.hot, "_rest")]
    src = ("def replace_hot(obj, value):\n    new = _new(obj.__class__)\n"
           + "\n".join(body) + "\n    return new\n")
    exec(src, env)  # noqa: S102 - generated from the dataclass fields, no outside text
    fn: Callable[[_T, Any], _T] = env["replace_hot"]
    fn.__qualname__ = f"replace_{name}"
    return fn


def compact(hot: tuple[str, ...]) -> Callable[[type[_T]], type[_T]]:
    """Rebuild a frozen dataclass (without slots) with `hot` fields in slots, rest shared.

    Apply it above `@dataclass(frozen=True)`. The class must define no `__post_init__`
    (the generated `__init__` stores the values as given) and no method that calls
    `super()` without arguments (the class is re-created, as `slots=True` does). A
    subclass may add methods, not dataclass fields (its `__init__` would set the shared
    ones: that raises a TypeError saying so).
    """

    def wrap(cls: type[_T]) -> type[_T]:
        flds = fields(cls)  # type: ignore[arg-type]
        names = tuple(f.name for f in flds)
        unknown = [h for h in hot if h not in names]
        if unknown:
            raise TypeError(f"{cls.__name__}: hot fields {unknown} are not fields")
        if "__post_init__" in cls.__dict__:
            raise TypeError(f"{cls.__name__}: a compact class cannot have __post_init__")
        rare = tuple(n for n in names if n not in hot)
        hot_ordered = tuple(n for n in names if n in hot)
        for f in flds:
            if f.name in rare and f.default is MISSING:
                raise TypeError(f"{cls.__name__}.{f.name}: a rare field needs a default "
                                "(not a factory)")
        record = _record(cls, rare)
        ns = {k: v for k, v in cls.__dict__.items()
              if k not in names and k not in ("__dict__", "__weakref__")}
        ns["__slots__"] = (*hot_ordered, "_rest")
        for n in rare:
            ns[n] = property(attrgetter(f"_rest.{n}"), _refuse(cls.__name__, n),
                             doc=f"{cls.__name__}.{n} (shared)")
        lay = Layout(hot_ordered, rare, tuple(f.default for f in flds if f.name in rare),
                     record)
        ns["__compact__"] = lay
        ns["__init__"] = _init(cls.__name__, flds, hot_ordered, rare, lay)
        fget = attrgetter(*names)
        ns["__reduce__"] = lambda self: (type(self), fget(self))
        meta: Any = type(cls)
        new: type[_T] = meta(cls.__name__, cls.__bases__, ns)
        new.__qualname__ = cls.__qualname__
        return new

    return wrap


def _refuse(name: str, field: str) -> Callable[[Any, Any], None]:
    """The setter of a shared field: only a dataclass subclass's `__init__` reaches it."""

    def refuse(self: Any, value: Any) -> None:
        raise TypeError(
            f"{name}.{field} is kept in a shared record (schedlab.sim.compact), so a dataclass "
            f"subclass of {name} cannot set it; subclass it without new fields, or keep "
            f"a {name} in a field of your own class")

    return refuse


def _record(cls: type, rare: tuple[str, ...]) -> type:
    """The class of a compact class's shared records: the rare fields' slots, positional."""
    src = (f"class _{cls.__name__}Rest:\n    __slots__ = {rare!r}\n"
           f"    def __init__(self, {', '.join(rare)}):\n"
           + "\n".join(f"        self.{n} = {n}" for n in rare) + "\n")
    env: dict[str, Any] = {}
    exec(src, env)  # noqa: S102 - generated from the dataclass fields, no outside text
    record: type = env[f"_{cls.__name__}Rest"]
    record.__module__ = cls.__module__
    record.__doc__ = f"The fields of a {cls.__name__} that most leave at their defaults."
    return record


def _init(name: str, flds: tuple[Any, ...], hot: tuple[str, ...], rare: tuple[str, ...],
          lay: Layout) -> Callable[..., None]:
    """The class's `__init__`: the dataclass's signature, hot values to slots, a record."""
    env: dict[str, Any] = {"_lay": lay, "_set": object.__setattr__}
    params = []
    for f in flds:
        if f.default is MISSING:
            params.append(f.name)
        else:
            env[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
    body = [f"    _set(self, {h!r}, {h})" for h in hot]
    rest = ", ".join(rare) + ("," if len(rare) == 1 else "")
    body.append(f"    _set(self, '_rest', _lay.record_of(({rest})))")
    src = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(src, env)  # noqa: S102 - generated from the dataclass fields, no outside text
    init: Callable[..., None] = env["__init__"]
    init.__qualname__ = f"{name}.__init__"
    return init
