"""The engine's parameters and the one function that splits a run's parameters.

The Python API, the CLI and sweeps all call `split_params`: engine keys go to the engine,
the policy's own keys to the policy, and a key neither knows is an error naming the
closest known key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from schedlab.sim.errors import InvalidParameter, did_you_mean
from schedlab.sim.model import Level
from schedlab.sim.params import (
    Param,
    as_bool,
    as_choice,
    as_float,
    as_int,
    as_level_map,
    as_optional,
    as_path,
    resolve,
)
from schedlab.sim.perf.agent import AGENTS
from schedlab.sim.perf.run import parse_perf_model
from schedlab.sim.registry import FAILURE_MODELS, PLACERS, POLICIES, SPEED_FACTORS, Registry


def as_registered(registry: Registry) -> Callable[[Any], str]:
    """A registered name (plugins included) or an importable 'module:Class' path."""

    def parse(v: Any) -> str:
        t = str(v).strip()
        if ":" in t or t in registry:
            return t
        known = registry.names()
        raise ValueError(f"expected one of {', '.join(known)}{did_you_mean(t, known)} "
                         "or module:Class")

    return parse


def as_name_list(registry: Registry) -> Callable[[Any], tuple[str, ...]]:
    """Comma-separated registered names or paths (a list or tuple is taken as it is)."""
    one = as_registered(registry)

    def parse(v: Any) -> tuple[str, ...]:
        items = v if isinstance(v, list | tuple) else str(v).split(",")
        return tuple(one(x) for x in items if str(x).strip())

    return parse


DEFAULT_LOCALITY: dict[Level | str, float] = {
    Level.GPU: 1.0, Level.SWITCH: 1.0, Level.SOCKET: 1.4, Level.NODE: 1.7,
    Level.RACK: 5.0, Level.CLUSTER: 5.0,
}
NODE_ETHERNET = "node_ethernet"
"""Key of `locality_factors`: the factor of a placement spanning nodes when any of them
is on ethernet (instead of the rack/cluster factor of infiniband nodes)."""
DEFAULT_LOCALITY[NODE_ETHERNET] = 12.5  # 2.5 x the cross-node 5.0 of infiniband


def _locality(v: Any) -> dict[Level | str, float]:
    """Defaults overlaid with per-level factors and `node_ethernet`."""
    out = dict(DEFAULT_LOCALITY)
    if isinstance(v, Mapping):
        items = dict(v)
        eth = [k for k in items if str(k).strip().lower() == NODE_ETHERNET]
        if eth:
            out[NODE_ETHERNET] = as_float(1.0)(items.pop(eth[-1]))
        levels: Any = items
    else:
        kept = []
        for part in str(v).replace(";", ",").split(","):
            k, eq, x = part.partition("=")
            if eq and k.strip().lower() == NODE_ETHERNET:
                out[NODE_ETHERNET] = as_float(1.0)(x)
            else:
                kept.append(part)
        levels = ",".join(kept)
    try:
        for lv, f in as_level_map(levels).items():
            out[lv] = f
    except ValueError as e:
        raise ValueError(f"{e} (or {NODE_ETHERNET})") from None
    return out


def _failure_model(v: Any) -> str:
    """A registered failure model or the path of a YAML/JSON rates file (made absolute)."""
    t = str(v).strip()
    if t in FAILURE_MODELS or ":" in t and not t.lower().endswith((".yaml", ".yml", ".json")):
        return t
    if t.lower().endswith((".yaml", ".yml", ".json")):
        return as_path(t)
    known = FAILURE_MODELS.names()
    raise ValueError(f"expected one of {', '.join(known)}{did_you_mean(t, known)}, a "
                     "module:function or a .yaml/.json rates file")


def _interval(v: Any) -> float | str:
    """auto, or seconds > 0."""
    if str(v).strip().lower() == "auto":
        return "auto"
    x = as_float(0.0, lo_open=True)(v)
    if not math.isfinite(x):
        raise ValueError("expected auto or a finite number of seconds > 0")
    return x


def _timeline(v: Any) -> str:
    """full, off, coarse or coarse:N (N seconds > 0)."""
    t = str(v).strip().lower()
    mode, colon, every = t.partition(":")
    if mode in ("full", "off") and not colon:
        return mode
    if mode == "coarse":
        if not colon:
            return mode
        try:
            n = float(every)
        except ValueError:
            n = math.nan
        if n > 0 and math.isfinite(n):
            return f"coarse:{n:g}"
        raise ValueError(f"coarse:N needs N seconds > 0, got {every!r}")
    hint = did_you_mean(t, ("full", "coarse", "off"))
    raise ValueError(f"expected full, coarse, coarse:N (seconds) or off{hint}")


ENGINE_PARAMS: dict[str, Param] = {
    "placer": Param(
        "consolidated", as_registered(PLACERS),
        "where jobs go: consolidated, pack, first-fit, fgd, a registered plugin or "
        "module:Class (consolidated waits rather than spread a job over more nodes than "
        "it needs)",
    ),
    "locality_factors": Param(
        dict(DEFAULT_LOCALITY), _locality,
        "slowdown by lowest common level, relative to the best level for the job's size "
        "(switch=1.0,socket=1.4,node=1.7,rack=5.0,cluster=5.0), scaled by "
        "locality_sensitivity; node_ethernet=12.5 replaces the rack/cluster factor when a "
        "job spans nodes and any of them is on ethernet",
    ),
    "restore_overhead": Param(30.0, as_float(0.0),
                              "seconds of no progress when a job resumes with progress to "
                              "restore (none after losing all of it), and on every "
                              "migration and resize"),
    "checkpoint_on_suspend": Param(
        True, as_bool, "a Suspend checkpoints first (no lost work); Preempt never does"
    ),
    "retry_delay": Param(0.0, as_float(0.0), "seconds before a failed attempt is retried"),
    "node_failure_retries": Param(
        10, as_int(0),
        "node-failure restarts a job survives in a row without checkpointed progress "
        "between them; one more and it fails (a job that cannot progress between failures "
        "must end)",
    ),
    "stop_retries": Param(
        100, as_int(0),
        "policy stops (preempt/suspend) a job survives in a row without checkpointed "
        "progress between them (node-failure restarts count in the same row); one more "
        "and it fails: lossy stops that come faster than a job can checkpoint must end",
    ),
    "failure_rate": Param(
        0.0, as_float(0.0), "random attempt failures per job-hour of run time (seeded)"
    ),
    "failures": Param(
        None, as_optional(as_path),
        "CSV of node failures: node,fail_time,repair_time (node name or index; times in s)",
    ),
    "mtbf": Param(None, as_optional(as_float(0.0, lo_open=True)),
                  "mean time between failures per node (s, exponential, seeded)"),
    "mttr": Param(3600.0, as_float(0.0, lo_open=True), "mean time to repair a node (s)"),
    "failure_model": Param(
        None, as_optional(_failure_model),
        "component failure model (docs/failures.md): llama3, meta-rsc1, meta-rsc2, a "
        "registered plugin or a YAML/JSON rates file; replaces mtbf/mttr",
    ),
    "checkpoint_cost": Param(0.0, as_float(0.0),
                             "seconds a job spends writing each checkpoint (no progress)"),
    "checkpoint_interval": Param(
        None, as_optional(_interval),
        "checkpoint every N s of progress for every job, or auto (Daly's optimum for the "
        "job's expected failure rate; needs checkpoint_cost > 0); none: the trace's",
    ),
    "spare_nodes": Param(0, as_int(0), "hot-spare nodes held out of service (the last "
                         "nodes of the topology; with failure_model)"),
    "spare_swap_time": Param(600.0, as_float(0.0),
                             "seconds for a hot spare to replace a failed node"),
    "technicians": Param(0, as_int(0), "repairs mended at once (0: unlimited; with "
                         "failure_model); the others wait in order of detection"),
    "elastic_scaling": Param(
        "linear", as_choice("linear", "amdahl"),
        "speed of an elastic job on k GPUs relative to num_gpus: linear k/n, or Amdahl",
    ),
    "serial_fraction": Param(0.05, as_float(0.0, 1.0),
                             "Amdahl's serial fraction for elastic_scaling=amdahl"),
    "timeline": Param(
        "full", _timeline,
        "timeline.parquet rows: full (every change), coarse (the state every "
        "timeline_interval s; coarse:N sets N) or off; the summary integrates every change "
        "either way, so no summary number depends on it",
    ),
    "timeline_interval": Param(3600.0, as_float(0.0, lo_open=True),
                               "seconds of simulated time between rows of timeline=coarse"),
    "events": Param(True, as_bool,
                    "write events.parquet rows (off: none, for sweeps; the summary does not "
                    "depend on it)"),
    "perf_model": Param(
        (), parse_perf_model,
        "performance models of jobs that name a `model`: NAME=PATH entries (gavel=FILE.json, "
        "table=FILE.csv, pollux=FOLDER, a registered backend or module:Class) or bare paths, "
        "comma-separated; asked in order",
    ),
    "adaptive_batch": Param(
        True, as_bool,
        "jobs with `adaptive` re-tune their batch size for goodput (false: every job keeps "
        "its batch_size, as Pollux's +TunedJobs baselines)",
    ),
    "perf_agent": Param(
        "oracle", as_choice(*AGENTS),
        "what a job of a model with step times (Pollux's profiles) and its scheduler know: "
        "oracle (default) the model itself; fitted: Pollux's agent, a model fitted to the "
        "step times of the configurations the job has run at (its batch and ctx.perf's "
        "goodput come from the fit; authors' mode of Pollux)",
    ),
    "decision_round": Param(
        0.0, as_float(0.0),
        "seconds of a decision round: the policy decides only at multiples of it and "
        "arrivals are held to the next multiple, as round-based schedulers run (Blox: "
        "300); 0 (default): at every event",
    ),
    "speed_factors": Param(
        (), as_name_list(SPEED_FACTORS),
        "extra speed factors after the built-in chain (gpu_type, locality, elastic, "
        "colocation): registered names or module:Class, comma-separated",
    ),
}


def policy_params(policy: Any) -> Mapping[str, Param]:
    """The declared parameters of a policy given by name, path, class or instance."""
    if isinstance(policy, str):
        return POLICIES.get(policy).params
    return policy.params


def split_params(policy: Any, given: Mapping[str, Any], *, others: Iterable[Any] = ()
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(engine keys, the policy's keys) of `given`; a key no one knows raises.

    `others`: the other policies of the same command or sweep; their keys are accepted
    and left out (`--param k=v` given once to several policies).
    """
    mine = policy_params(policy)
    known = set(ENGINE_PARAMS) | set(mine)
    everyone = set(known)
    for o in others:
        everyone |= set(policy_params(o))
    for key in given:
        if key not in everyone:
            names = sorted(everyone)
            pname = policy if isinstance(policy, str) else getattr(policy, "name", policy)
            raise InvalidParameter(
                f"unknown parameter {key!r} for policy {pname!r}{did_you_mean(key, names)}; "
                f"known: {', '.join(names)}")
    engine = {k: v for k, v in given.items() if k in ENGINE_PARAMS}
    own = {k: v for k, v in given.items() if k in mine and k not in ENGINE_PARAMS}
    return engine, own


def check_params(policy: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    """Split and parse every value with its declared parser; return the resolved engine part."""
    engine, own = split_params(policy, given)
    pname = policy if isinstance(policy, str) else getattr(policy, "name", "policy")
    resolve(own, policy_params(policy), f"policy {pname!r}")
    return resolve(engine, ENGINE_PARAMS, "the engine")
