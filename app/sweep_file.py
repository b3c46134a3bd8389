"""Sweep files (contract.md#sec-1, #sec-7): parsing and expansion into validated, distinct runs.

A sweep file names a base run and the axes to vary (`grid:` cartesian, `zip:` paired,
`seeds:` repeats, `replicas:` shaken copies of the trace, `schedlab.traces.shake`). Each
run is a frozen `RunPoint` whose folder is named by its policy and a hash of its full
config. Every run is checked before any runs: policy names or
'module:Class' / 'file.py:Class' paths, parameters (split and parsed by
`schedlab.sim.engine_params`, the one splitting path), traces, topologies and shaping values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.app.common import is_path, policy_label
from schedlab.app.sweep_values import (
    check_inputs,
    int_value,
    portable_path,
    positive_value,
    resolve_path,
    seconds_value,
    text_value,
    window_value,
)
from schedlab.sim.engine_params import check_params, split_params
from schedlab.sim.errors import InvalidParameter, SimError, did_you_mean
from schedlab.sim.registry import POLICIES
from schedlab.traces.shake import SHAKE_KEYS, Shaking, shaking_from

TOP_KEYS = ("base", "grid", "zip", "seeds", "replicas")
"""Keys allowed at the top of a sweep file."""

POINT_KEYS = ("policy", "trace", "topology", "seed", "load_scale", "max_jobs", "trace_window",
              "until")
"""Keys of a run besides `params`; each may be an axis of `grid:` or `zip:`."""

BASE_DEFAULTS: dict[str, Any] = {
    "policy": "fifo", "trace": "default", "topology": "default", "seed": 0,
    "load_scale": None, "max_jobs": None, "trace_window": None, "until": None,
}

@dataclass(frozen=True)
class RunPoint:
    """One run of a sweep: everything that determines its result, and nothing else.

    Files (a policy's `file.py`, a trace, a topology, a parameter's file) are named
    relative to the sweep file's folder, `root`, which is not part of the run's identity:
    the same sweep gives the same run ids, folders and labels in any checkout
    (`resolved` turns them back into paths to run with).
    """

    policy: str
    trace: str
    topology: str
    seed: int
    params: tuple[tuple[str, Any], ...] = ()
    load_scale: float | None = None
    max_jobs: int | None = None
    trace_window: str | None = None
    until: float | None = None
    replica: int | None = None
    replica_seed: int | None = None
    shaking: tuple[tuple[str, float], ...] = ()
    root: str = field(default="", compare=False, repr=False)

    def resolved(self) -> RunPoint:
        """The point with its relative file names made absolute against `root`, to run."""
        if not self.root:
            return self
        root = Path(self.root)
        policy = self.policy
        module, colon, attr = policy.rpartition(":")
        if colon and module.endswith(".py") and not Path(module).is_absolute():
            policy = f"{(root / module).resolve()}:{attr}"
        return RunPoint(
            policy=policy, trace=resolve_path(self.trace, root),
            topology=resolve_path(self.topology, root), seed=self.seed,
            params=tuple((k, resolve_path(v, root)) for k, v in self.params),
            load_scale=self.load_scale, max_jobs=self.max_jobs,
            trace_window=self.trace_window, until=self.until, replica=self.replica,
            replica_seed=self.replica_seed, shaking=self.shaking, root=self.root)

    def config(self) -> dict[str, Any]:
        """The run's full config as plain JSON data (the input of its hash).

        A replica adds `replica` (its index, seed and shaking); a point without one has
        exactly the keys it always had, so its run id does not change.
        """
        out: dict[str, Any] = {
            "policy": self.policy, "trace": self.trace, "topology": self.topology,
            "seed": self.seed, "params": dict(self.params), "load_scale": self.load_scale,
            "max_jobs": self.max_jobs, "trace_window": self.trace_window, "until": self.until,
        }
        if self.replica is not None:
            out["replica"] = {"index": self.replica, "seed": self.replica_seed,
                              **dict(self.shaking)}
        return out

    def configuration(self) -> dict[str, Any]:
        """The config without the replica: what the replicas of one configuration share."""
        out = self.config()
        out.pop("replica", None)
        return out

    @property
    def run_id(self) -> str:
        """First 12 hex digits of the SHA-256 of the canonical JSON of `config()`."""
        text = json.dumps(self.config(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def folder(self) -> str:
        """The run's folder name inside the sweep folder: policy, then the hash.

        A policy given as 'module:Class' or 'file.py:Class' is named by its class
        (`schedlab.app.common.policy_label`).
        """
        return f"{policy_label(self.resolved().policy)}-{self.run_id}"

    def columns(self) -> dict[str, Any]:
        """The run's parameters as summary columns (`params.KEY` for each parameter)."""
        cols = {k: getattr(self, k) for k in POINT_KEYS}
        if self.replica is not None:
            cols.update(replica=self.replica, replica_seed=self.replica_seed)
        cols.update({f"params.{k}": _scalar(v) for k, v in self.params})
        return cols


@dataclass(frozen=True)
class Sweep:
    """An expanded sweep: its runs in file order (duplicates merged) and what varies."""

    points: tuple[RunPoint, ...]
    axes: tuple[str, ...]
    source: str = "<sweep>"
    duplicates: int = 0
    param_columns: tuple[str, ...] = ()
    replicas: int = 0
    """Shaken replicas of each configuration (0: none asked)."""


# --------------------------------------------------------------------------- parsing


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    """Read and expand a sweep YAML file; relative paths in it are relative to the file."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InvalidParameter(f"sweep file {str(path)!r} not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise InvalidParameter(f"sweep file {str(path)!r} is not valid YAML: {e}") from None
    return parse_sweep(data, base_dir=p.resolve().parent, source=str(path))


def parse_sweep(data: Any, base_dir: str | os.PathLike[str] | None = None,
                source: str = "<sweep>") -> Sweep:
    """Expand a sweep mapping (the YAML of docs/contract.md#sec-7) into validated, distinct runs.

    An empty sweep (None: an empty file or only comments; an empty mapping) is an error,
    not the default run: a sweep names at least one of `base`, `grid`, `zip`, `seeds`,
    `replicas`. With `replicas`, every point is run once per replica (index 0..count-1).
    """
    where = f"sweep {source}"
    if data is None or (isinstance(data, Mapping) and not data):
        what = "has no content (empty, only comments, or null)" if data is None \
            else "is an empty mapping ({})"
        name = "the sweep" if source == "<sweep>" else f"sweep file {source!r}"
        raise InvalidParameter(
            f"{name} {what}: a sweep file needs at least one of "
            f"{', '.join(TOP_KEYS)}, e.g. 'base: {{policy: fifo}}' for one run or "
            "'grid: {policy: [fifo, drf], load_scale: [0.8, 1.0]}' (docs/contract.md#sec-7)")
    if not isinstance(data, Mapping):
        raise InvalidParameter(f"{where}: expected a mapping with keys {', '.join(TOP_KEYS)}, "
                               f"got {type(data).__name__}")
    for key in data:
        if key not in TOP_KEYS:
            raise InvalidParameter(f"{where}: unknown key {key!r}{did_you_mean(str(key), TOP_KEYS)}"
                                   f"; allowed: {', '.join(TOP_KEYS)}")
    root = Path(base_dir) if base_dir is not None else Path.cwd()
    base = _parse_base(data.get("base"), where)
    grid = _parse_axes(data.get("grid"), f"{where}: grid", paired=False)
    zipped = _parse_axes(data.get("zip"), f"{where}: zip", paired=True)
    for key in grid:
        if key in zipped:
            raise InvalidParameter(f"{where}: axis {key!r} is in both grid and zip; "
                                   "vary it in one of them")
    seeds = _parse_seeds(data.get("seeds"), where)
    if seeds is not None and "seed" in {**grid, **zipped}:
        raise InvalidParameter(f"{where}: 'seeds' and a 'seed' axis both vary the seed; "
                               "keep one of them")
    replicas = _parse_replicas(data.get("replicas"), where)
    combos = _combinations(grid, zipped, seeds)
    axes = tuple(dict.fromkeys([*grid, *zipped, *(["seed"] if seeds is not None else []),
                                *(["replica"] if replicas is not None else [])]))
    overrides = [dict(c) for c in combos]
    named = [o.get("policy", base["policy"]) for o in overrides]
    for name in named:
        if not isinstance(name, str):
            raise InvalidParameter(f"{where}: policy {name!r} is not a name")
    policies = {name: _policy(name, root, where) for name in dict.fromkeys(named)}
    points: list[RunPoint] = []
    seen: set[str] = set()
    duplicates = 0
    checked: set[tuple[str, str]] = set()
    for combo in overrides:
        point = _make_point(base, combo, policies, root, where, checked)
        copies = [point] if replicas is None else [
            dataclasses.replace(point, replica=i, replica_seed=replicas.seed,
                                shaking=tuple(replicas.shaking.as_dict().items()))
            for i in range(replicas.count)]
        for p in copies:
            if p.run_id in seen:
                duplicates += 1
                continue
            seen.add(p.run_id)
            points.append(p)
    cols = tuple(sorted({f"params.{k}" for p in points for k, _ in p.params}))
    return Sweep(tuple(points), axes, source, duplicates, cols,
                 replicas.count if replicas is not None else 0)


@dataclass(frozen=True)
class Replicas:
    """The `replicas:` of a sweep file: how many shaken copies, their seed and shaking."""

    count: int
    seed: int
    shaking: Shaking


REPLICA_KEYS = ("count", "seed", *SHAKE_KEYS)
"""Keys of `replicas:` (the shaking keys of `schedlab.traces.shake`)."""


def _parse_replicas(raw: Any, where: str) -> Replicas | None:
    """`replicas: N` or `replicas: {count: N, seed: S, jitter: .., ...}` (count >= 2)."""
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = {"count": raw}
    if not isinstance(raw, Mapping):
        raise InvalidParameter(f"{where}: replicas: {raw!r}: expected a count >= 2 or a "
                               f"mapping of {', '.join(REPLICA_KEYS)}")
    for key in raw:
        if key not in REPLICA_KEYS:
            raise InvalidParameter(f"{where}: replicas: unknown key {key!r}"
                                   f"{did_you_mean(str(key), REPLICA_KEYS)}; allowed: "
                                   f"{', '.join(REPLICA_KEYS)}")
    count, seed = raw.get("count"), raw.get("seed", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 2:
        raise InvalidParameter(f"{where}: replicas: count {count!r}: expected an integer "
                               ">= 2 (a confidence interval needs two replicas)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidParameter(f"{where}: replicas: seed {seed!r}: expected an integer >= 0")
    shaking = shaking_from({k: v for k, v in raw.items() if k in SHAKE_KEYS},
                           f"{where}: replicas")
    return Replicas(count, seed, shaking)


def _norm_key(key: Any, where: str, allowed_extra: tuple[str, ...]) -> str:
    """A point key with '-' read as '_' (`load-scale` = `load_scale`), or an error."""
    if not isinstance(key, str):
        raise InvalidParameter(f"{where}: key {key!r} is not a string")
    if key.startswith("params."):
        if not key[len("params."):]:
            raise InvalidParameter(f"{where}: empty parameter name in {key!r}")
        return key
    k = key.replace("-", "_")
    allowed = (*POINT_KEYS, *allowed_extra)
    if k not in allowed:
        hint = " (a policy or engine parameter is written params.KEY)" if k != "params" else ""
        raise InvalidParameter(
            f"{where}: unknown key {key!r}{did_you_mean(k, allowed)}; allowed: "
            f"{', '.join(allowed)}{'' if allowed_extra else ', params.KEY'}{hint}"
        )
    return k


def _parse_base(raw: Any, where: str) -> dict[str, Any]:
    base = dict(BASE_DEFAULTS, params={})
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        raise InvalidParameter(f"{where}: base must be a mapping of "
                               f"{', '.join([*POINT_KEYS, 'params'])}, got {raw!r}")
    for key, value in raw.items():
        if isinstance(key, str) and key.startswith("params."):
            base["params"][key[len("params."):]] = value
            continue
        k = _norm_key(key, f"{where}: base", ("params",))
        if k == "params":
            if value is None:
                continue
            if not isinstance(value, Mapping) or not all(isinstance(x, str) for x in value):
                raise InvalidParameter(f"{where}: base.params must map parameter names to "
                                       f"values, got {value!r}")
            base["params"].update(value)
        else:
            base[k] = value
    return base


def _parse_axes(raw: Any, where: str, *, paired: bool) -> dict[str, list[Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidParameter(f"{where} must be a mapping of axis -> list of values, "
                               f"got {raw!r}")
    axes: dict[str, list[Any]] = {}
    for key, values in raw.items():
        k = _norm_key(key, where, ())
        if k in axes:
            raise InvalidParameter(f"{where}: axis {key!r} given twice")
        if not isinstance(values, list):
            raise InvalidParameter(f"{where}.{key}: expected a list of values, got {values!r}")
        if not values:
            raise InvalidParameter(f"{where}.{key}: the list of values is empty")
        axes[k] = values
    if paired and axes:
        lengths = {k: len(v) for k, v in axes.items()}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise InvalidParameter(f"{where}: lists must have equal lengths to be paired, "
                                   f"got {shown}")
    return axes


def _parse_seeds(raw: Any, where: str) -> list[int] | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise InvalidParameter(f"{where}: seeds: {raw!r}: expected a count >= 1 or a "
                                   "list of integers >= 0")
        return list(range(raw))
    if not isinstance(raw, list) or not raw:
        raise InvalidParameter(f"{where}: seeds: {raw!r}: expected a count >= 1 or a "
                               "non-empty list of integers >= 0")
    for s in raw:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise InvalidParameter(f"{where}: seeds: {s!r} is not an integer >= 0")
    if len(set(raw)) != len(raw):
        raise InvalidParameter(f"{where}: seeds: {raw!r} has duplicates")
    return list(raw)


def _combinations(grid: dict[str, list[Any]], zipped: dict[str, list[Any]],
                  seeds: list[int] | None) -> list[list[tuple[str, Any]]]:
    """Grid (file order, last key fastest) x zip rows x seeds, as (key, value) lists."""
    grid_rows = [list(zip(grid, vals, strict=True))
                 for vals in itertools.product(*grid.values())] if grid else [[]]
    n = len(next(iter(zipped.values()))) if zipped else 0
    zip_rows = [[(k, zipped[k][i]) for k in zipped] for i in range(n)] if zipped else [[]]
    seed_rows = [[("seed", s)] for s in seeds] if seeds is not None else [[]]
    return [g + z + s for g in grid_rows for z in zip_rows for s in seed_rows]


def _policy(name: str, root: Path, where: str) -> str:
    """A policy name as a run keeps it; unknown names and paths that do not import fail.

    A 'file.py:Class' path is resolved against the sweep file's folder.
    """
    text = name.strip()
    if is_path(text):
        module, _, attr = text.rpartition(":")
        file = Path(module)
        if module.endswith(".py") and not file.is_absolute() and (root / file).is_file():
            text = f"{(root / file).resolve()}:{attr}"
    try:
        POLICIES.get(text)
        policy_label(text)
    except SimError as e:
        raise InvalidParameter(f"{where}: {e}") from None
    return text


def _portable_policy(policy: str, root: Path) -> str:
    """A 'file.py:Class' policy with its file named relative to the sweep file's folder."""
    module, colon, attr = policy.rpartition(":")
    if colon and module.endswith(".py") and Path(module).is_absolute():
        rel = Path(os.path.relpath(module, root.resolve())).as_posix()
        return f"{rel}:{attr}"
    return policy


def _make_point(base: dict[str, Any], combo: dict[str, Any], policies: Mapping[str, str],
                root: Path, where: str, checked: set[tuple[str, str]]) -> RunPoint:
    values = {k: v for k, v in base.items() if k != "params"}
    params = dict(base["params"])
    for k, v in combo.items():
        if k.startswith("params."):
            params[k[len("params."):]] = v
        else:
            values[k] = v
    shown = ", ".join(f"{k}={v!r}" for k, v in combo.items()) or "base"
    at = f"{where} (run {shown})"
    loadable = policies[values["policy"]]
    params = _scoped_params(params, values["policy"], policies, where)
    others = [p for p in policies.values() if p != loadable]
    try:
        # another policy's parameter is left out of this run: a grid may cross policies
        # with one policy's parameter (the duplicates merge); params.POLICY.KEY scopes it
        engine, own = split_params(loadable, params, others=others)
        mine = {k: resolve_path(v, root) for k, v in sorted({**engine, **own}.items())}
        check_params(loadable, mine)
    except SimError as e:
        raise InvalidParameter(f"{at}: {e}") from None
    trace = text_value(values["trace"], "trace", at)
    topology = text_value(values["topology"], "topology", at)
    trace = resolve_path(trace, root)
    topology = resolve_path(topology, root)
    check_inputs(trace, topology, at, checked)
    return RunPoint(
        policy=_portable_policy(loadable, root), trace=portable_path(trace, root),
        topology=portable_path(topology, root),
        seed=int(int_value(values["seed"], "seed", at, allow_none=False) or 0),
        params=tuple((k, portable_path(v, root)) for k, v in mine.items()),
        load_scale=positive_value(values["load_scale"], "load_scale", at),
        max_jobs=int_value(values["max_jobs"], "max_jobs", at),
        trace_window=window_value(values["trace_window"], at),
        until=seconds_value(values["until"], "until", at),
        root=str(root),
    )


def _scoped_params(params: dict[str, Any], written: str, policies: Mapping[str, str],
                   where: str) -> dict[str, Any]:
    """This run's parameters: `POLICY.KEY` ones kept (as KEY) only for the run of POLICY.

    POLICY is a policy of the sweep as written, or its results label; anything else
    before the dot is an error.
    """
    out: dict[str, Any] = {}
    scoped: dict[str, Any] = {}
    for key, value in params.items():
        scope, dot, name = key.rpartition(".")
        if not dot:
            out[key] = value
            continue
        owner = next((w for w, p in policies.items() if scope in (w, p, policy_label(p))),
                     None)
        if owner is None or not name:
            raise InvalidParameter(
                f"{where}: parameter {key!r}: {scope!r} is not a policy of the sweep "
                f"({', '.join(policies)}); a parameter for one policy is written "
                "params.POLICY.KEY")
        if owner == written:
            scoped[name] = value
    return {**out, **scoped}


def _scalar(v: Any) -> Any:
    """A parameter value as a summary cell: lists and mappings become text."""
    if isinstance(v, list | tuple | dict):
        return json.dumps(v, sort_keys=True)
    return v
