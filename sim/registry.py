"""Registries of extension points: policies, placers and speed factors, by name.

One style for all three: lazy `module:attr` entries (nothing is imported until used),
did-you-mean errors, plugins found through package entry points (groups
`schedlab.policies`, `schedlab.placers`, `schedlab.speed_factors`), and importable
paths (`my_module:MyPolicy`, or `path/to/file.py:MyPolicy`) accepted wherever a name is.
This module imports nothing of schedlab's but the errors, so every layer can use it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from schedlab.sim.errors import SimError, UnknownName, UnknownPolicy, unknown_name_message


class Registry:
    """Names -> classes of one kind of extension, resolved lazily."""

    def __init__(self, kind: str, group: str, builtins: Mapping[str, str],
                 error: type[UnknownName] = UnknownName) -> None:
        self.kind = kind
        self.group = group
        self._entries: dict[str, Any] = dict(builtins)
        self._error = error
        self._plugins_loaded = False

    def register(self, name: str, entry: Any, *, replace: bool = False) -> None:
        """Register a class (or a lazy 'module:Class' string) under a lowercase name."""
        if not name or name != name.lower():
            raise SimError(f"{self.kind} name {name!r} must be non-empty lowercase")
        self._load_plugins()
        if name in self._entries and not replace:
            raise SimError(
                f"{self.kind} {name!r} is registered already (pass replace=True to override)")
        self._entries[name] = entry

    def unregister(self, name: str) -> None:
        """Forget a name (tests and plugins)."""
        self._entries.pop(name, None)

    def names(self) -> list[str]:
        """Every registered name, sorted (plugins included)."""
        self._load_plugins()
        return sorted(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._entries

    def get(self, name: str) -> Any:
        """The class behind a name or an importable 'module:attr' / 'file.py:attr' path."""
        self._load_plugins()
        entry = self._entries.get(name)
        if entry is None:
            if ":" in name:
                return load_path(name, self.kind)
            raise self._error(unknown_name_message(self.kind, name, self._entries))
        if isinstance(entry, str):
            entry = load_path(entry, self.kind)
            self._entries[name] = entry
        return entry

    def module_of(self, name: str) -> str | None:
        """The module a registered name lives in, without importing it (None: unknown)."""
        self._load_plugins()
        entry = self._entries.get(name)
        if entry is None:
            return None
        if isinstance(entry, str):
            return entry.rpartition(":")[0] or None
        return getattr(entry, "__module__", None)

    def _load_plugins(self) -> None:
        """Add the entry points of installed packages once (built-in names win)."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            found = metadata.entry_points(group=self.group)
        except Exception:  # broken metadata of an unrelated package must not stop a run
            return
        for ep in sorted(found, key=lambda e: e.name):
            self._entries.setdefault(ep.name.lower(), ep.value)


def load_path(path: str, kind: str = "object") -> Any:
    """Import 'module:attr' or 'file.py:attr', with an error that says what failed."""
    module, sep, attr = path.rpartition(":")
    if not sep or not module or not attr:
        raise UnknownName(f"{kind} {path!r}: expected a name or 'module:Class'")
    try:
        if module.endswith(".py"):
            file = Path(module)
            if not file.is_file():
                raise UnknownName(f"{kind} {path!r}: no file {module}")
            key = f"schedlab_plugin_{file.stem}_{abs(hash(str(file.resolve())))}"
            mod = sys.modules.get(key)
            if mod is None:
                spec = importlib.util.spec_from_file_location(key, file)
                assert spec is not None and spec.loader is not None
                mod = importlib.util.module_from_spec(spec)
                sys.modules[key] = mod
                spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(module)
    except ImportError as e:
        raise UnknownName(f"{kind} {path!r}: cannot import {module!r} ({e})") from e
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise UnknownName(f"{kind} {path!r}: module {module!r} has no {attr!r}") from None


POLICIES = Registry("policy", "schedlab.policies", {
    "fifo": "schedlab.policies.fifo:FifoPolicy",
    "fifo-backfill": "schedlab.policies.fifo:FifoBackfillPolicy",
    "fifo-elastic": "schedlab.policies.fifo_elastic:FifoElasticPolicy",
    "gandiva": "schedlab.policies.gandiva:GandivaPolicy",
    "hai": "schedlab.policies.hai:HaiPolicy",
    "quota-priority": "schedlab.policies.quota_priority:QuotaPriorityPolicy",
    "hived": "schedlab.policies.hived:HivedPolicy",
    "vc-quota": "schedlab.policies.hived.vc_quota:VcQuotaPolicy",
    "drf": "schedlab.policies.drf:DrfPolicy",
    "capacity": "schedlab.policies.capacity:CapacityPolicy",
    "kueue": "schedlab.policies.kueue:KueuePolicy",
    "sjf": "schedlab.policies.sjf:SjfPolicy",
    "srtf": "schedlab.policies.sjf:SrtfPolicy",
    "qssf": "schedlab.policies.qssf:QssfPolicy",
    "tiresias-las": "schedlab.policies.tiresias:TiresiasLasPolicy",
    "tiresias-gittins": "schedlab.policies.tiresias:TiresiasGittinsPolicy",
    "easy-backfill": "schedlab.policies.backfill:EasyBackfillPolicy",
    "conservative-backfill": "schedlab.policies.backfill:ConservativeBackfillPolicy",
    "themis-ftf": "schedlab.policies.themis:ThemisFtfPolicy",
    "fgd": "schedlab.policies.fgd:FgdPolicy",
    "gavel-mmf": "schedlab.policies.gavel:GavelPolicy",
    "gavel-mmf-agnostic": "schedlab.policies.gavel:GavelAgnosticPolicy",
    "learned": "schedlab.policies.learned:LearnedPolicy",
    "optimus": "schedlab.policies.optimus:OptimusPolicy",
    "pollux": "schedlab.policies.pollux:PolluxPolicy",
    "slurm": "schedlab.policies.slurm:SlurmPolicy",
    "sia": "schedlab.policies.sia:SiaPolicy",
}, UnknownPolicy)
"""Scheduling policies (`Policy` subclasses)."""

PLACERS = Registry("placer", "schedlab.placers", {
    "consolidated": "schedlab.policies.placement.consolidated:ConsolidatedPlacer",
    "pack": "schedlab.policies.placement.pack:PackPlacer",
    "first-fit": "schedlab.policies.placement.first_fit:FirstFitPlacer",
    "fgd": "schedlab.policies.placement.fgd:FgdPlacer",
    "best-fit": "schedlab.policies.placement.best_fit:BestFitPlacer",
    "gpu-packing": "schedlab.policies.placement.gpu_packing:GpuPackingPlacer",
    "dot-product": "schedlab.policies.placement.dot_product:DotProductPlacer",
})
"""Placers (classes following `schedlab.sim.interfaces.Placer`, built with no arguments)."""

SPEED_FACTORS = Registry("speed factor", "schedlab.speed_factors", {})
"""Extra speed factors (`schedlab.sim.interfaces.SpeedFactor`), enabled per run by the
`speed_factors` engine parameter; the built-in chain is in `schedlab.sim.progress`."""

PERF_MODELS = Registry("performance model", "schedlab.perf_models", {
    "table": "schedlab.sim.perf.table:CsvTable",
    "gavel": "schedlab.sim.perf.gavel:GavelTable",
    "pollux": "schedlab.sim.perf.pollux:PolluxModels",
    "pollux-fit": "schedlab.sim.perf.pollux_fit:PolluxFitModels",
    "sia": "schedlab.sim.perf.sia:SiaProfiles",
    "lucid": "schedlab.sim.perf.lucid:LucidTable",
    "shockwave": "schedlab.sim.perf.shockwave:ShockwaveModels",
})
"""Job performance-model backends (`schedlab.sim.perf.base.PerfModel`), each built from
one file or folder (`perf_model` engine parameter); asked for the throughput of jobs that
name a `model`."""

FAILURE_MODELS = Registry("failure model", "schedlab.failure_models", {
    "llama3": "schedlab.sim.failure_models:llama3",
    "meta-rsc1": "schedlab.sim.failure_models:meta_rsc1",
    "meta-rsc2": "schedlab.sim.failure_models:meta_rsc2",
})
"""Failure model presets (callables of no arguments returning a
`schedlab.sim.failure_models.FailureModel`), chosen by the `failure_model` engine parameter
(which also takes a YAML/JSON rates file); docs/failures.md."""
