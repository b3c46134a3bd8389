"""Kueue's own objects, read from a multi-document YAML as `kubectl apply -f` takes it.

Kinds: ResourceFlavor, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, Topology
(topology-aware scheduling, `tas.py`) and Kueue's `Configuration` (only its
`fairSharing`). Every field that schedlab does not model is an error naming the file, the
object (kind/name), the field, the value and what is
allowed; nothing is silently ignored (metadata labels and annotations aside).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from schedlab.policies.kueue.tas import HOSTNAME, LEVEL_WORDS, TopologySpec, label_level
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import Level

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"
RESOURCES = (GPU, CPU, MEMORY)
"""Resource names a quota may name: GPUs (`num_gpus`), CPUs (`num_cpus`, in millicores)
and memory (`mem_gb`, GiB, in bytes)."""

GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
              "schedlab.io/gpu-type")
"""ResourceFlavor nodeLabels keys that select nodes by GPU type (the topology's
`gpu_type`); schedlab's topologies carry no other node labels."""

KUEUE_API = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1alpha1")
CONFIG_API = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")
KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass",
         "Configuration", "Topology")

UNLIMITED = math.inf


@dataclass(frozen=True, slots=True)
class Quota:
    """One flavor's quota of one resource (internal units), limits None when unset."""

    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    """A flavor in a resource group with its quota per covered resource."""

    flavor: str
    quotas: tuple[tuple[str, Quota], ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """Resources that take their flavor together, and the flavors in preference order."""

    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class Flavor:
    """A ResourceFlavor: the GPU type its nodes have (None: any node), its Topology."""

    name: str
    gpu_type: str | None
    topology: str | None = None  # spec.topologyName: a TAS flavor (policies/kueue/tas.py)


@dataclass(frozen=True, slots=True)
class Preemption:
    """A ClusterQueue's `spec.preemption` (Kueue's defaults)."""

    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class Fungibility:
    """A ClusterQueue's `spec.flavorFungibility` (Kueue's defaults)."""

    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    """A ClusterQueue: quotas, cohort, queueing strategy, preemption, fungibility."""

    name: str
    cohort: str | None
    groups: tuple[ResourceGroup, ...]
    strategy: str = "BestEffortFIFO"
    preemption: Preemption = Preemption()
    fungibility: Fungibility = Fungibility()
    weight: float = 1.0
    stop_policy: str = "None"


@dataclass(frozen=True, slots=True)
class Cohort:
    """A Cohort: its parent cohort, its own quotas and its fair-sharing weight."""

    name: str
    parent: str | None
    groups: tuple[ResourceGroup, ...] = ()
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class KueueConfig:
    """Everything one config file declares."""

    path: str
    flavors: tuple[Flavor, ...]
    cluster_queues: tuple[ClusterQueue, ...]
    cohorts: tuple[Cohort, ...]
    local_queues: tuple[tuple[str, str], ...]  # ("namespace/name", ClusterQueue name)
    priority_classes: tuple[tuple[str, int], ...]
    fair_sharing: bool = False
    strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    topologies: tuple[TopologySpec, ...] = ()


DEFAULT_STRATEGIES: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
"""Kueue's default fair-sharing preemption strategies (S2-a, then S2-b)."""


class _Where:
    """Builds the one-line errors: file, object, field, value, what is allowed."""

    def __init__(self, path: str, kind: str, name: str) -> None:
        self.path, self.kind, self.name = path, kind, name

    def error(self, field: str, value: Any, allowed: str) -> InvalidParameter:
        return InvalidParameter(f"{self.path}: {self.kind}/{self.name}: {field}: got "
                                f"{value!r}; allowed: {allowed}")

    def mapping(self, v: Any, field: str) -> dict[str, Any]:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self.error(field, v, "a mapping")
        return v

    def keys(self, d: dict[str, Any], field: str, allowed: tuple[str, ...]) -> None:
        for k in d:
            if k not in allowed:
                what = f"{field}.{k}" if field else str(k)
                raise self.error(what, d[k], f"fields {', '.join(allowed)} (others are "
                                             "not modelled by schedlab)")

    def choice(self, d: dict[str, Any], key: str, field: str, choices: tuple[str, ...],
               default: str) -> str:
        v = d.get(key, default)
        if v not in choices:
            raise self.error(f"{field}.{key}", v, " | ".join(choices))
        return str(v)


_QTY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
                  r"(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "E": 1e18, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
           "Pi": 2.0**50, "Ei": 2.0**60}


def quantity(resource: str, v: Any, where: _Where, field: str) -> float:
    """A Kubernetes quantity in schedlab's internal unit of `resource`.

    GPUs, millicores or bytes, rounded up to an integer as Kueue's int64 arithmetic.
    """
    m = _QTY.match(str(v).strip()) if isinstance(v, (int, float, str)) and not isinstance(
        v, bool) else None
    if m is None:
        raise where.error(field, v, "a Kubernetes quantity >= 0 (e.g. 8, 500m, 64Gi)")
    x = float(m.group(1)) * _SUFFIX[m.group(2)]
    if x < 0:
        raise where.error(field, v, "a quantity >= 0")
    if resource == CPU:
        return float(math.ceil(x * 1000 - 1e-9))
    if resource == GPU and abs(x - round(x)) > 1e-9:
        raise where.error(field, v, "a whole number of GPUs")
    return float(math.ceil(x - 1e-9))


def _groups(where: _Where, spec: dict[str, Any], flavors: dict[str, Flavor],
            cohort: bool) -> tuple[ResourceGroup, ...]:
    raw = spec.get("resourceGroups") or []
    if not isinstance(raw, list):
        raise where.error("spec.resourceGroups", raw, "a list of resource groups")
    groups = []
    seen_res: set[str] = set()
    for gi, g in enumerate(raw):
        f = f"spec.resourceGroups[{gi}]"
        g = where.mapping(g, f)
        where.keys(g, f, ("coveredResources", "flavors"))
        covered = g.get("coveredResources")
        if not isinstance(covered, list) or not covered:
            raise where.error(f"{f}.coveredResources", covered, "a non-empty list of "
                              f"resources among {', '.join(RESOURCES)}")
        for r in covered:
            if r not in RESOURCES:
                raise where.error(f"{f}.coveredResources", r, ", ".join(RESOURCES))
            if r in seen_res:
                raise where.error(f"{f}.coveredResources", r,
                                  "a resource in one resource group only")
            seen_res.add(r)
        fl_raw = g.get("flavors")
        if not isinstance(fl_raw, list) or not fl_raw:
            raise where.error(f"{f}.flavors", fl_raw, "a non-empty list of flavors")
        fqs = []
        for fi, fq in enumerate(fl_raw):
            ff = f"{f}.flavors[{fi}]"
            fq = where.mapping(fq, ff)
            where.keys(fq, ff, ("name", "resources"))
            fname = fq.get("name")
            if fname not in flavors:
                raise where.error(f"{ff}.name", fname, "a ResourceFlavor of the file: "
                                  + (", ".join(sorted(flavors)) or "(none declared)"))
            res = fq.get("resources")
            if not isinstance(res, list):
                raise where.error(f"{ff}.resources", res, "a list of resource quotas")
            quotas: dict[str, Quota] = {}
            for ri, rq in enumerate(res):
                rf = f"{ff}.resources[{ri}]"
                rq = where.mapping(rq, rf)
                where.keys(rq, rf, ("name", "nominalQuota", "borrowingLimit",
                                    "lendingLimit"))
                rname = str(rq.get("name"))
                if rname not in covered:
                    raise where.error(f"{rf}.name", rname, "one of the group's "
                                      f"coveredResources: {', '.join(covered)}")
                if "nominalQuota" not in rq:
                    raise where.error(f"{rf}.nominalQuota", None, "a quantity (required)")
                nominal = quantity(rname, rq["nominalQuota"], where, f"{rf}.nominalQuota")
                bl = (quantity(rname, rq["borrowingLimit"], where, f"{rf}.borrowingLimit")
                      if rq.get("borrowingLimit") is not None else None)
                ll = (quantity(rname, rq["lendingLimit"], where, f"{rf}.lendingLimit")
                      if rq.get("lendingLimit") is not None else None)
                if ll is not None and not cohort and ll > nominal:
                    raise where.error(f"{rf}.lendingLimit", rq["lendingLimit"],
                                      "at most nominalQuota")
                quotas[rname] = Quota(nominal, bl, ll)
            if sorted(quotas) != sorted(covered):
                raise where.error(f"{ff}.resources", sorted(quotas),
                                  f"one quota for each covered resource: {', '.join(covered)}")
            fqs.append(FlavorQuotas(str(fname), tuple((r, quotas[r]) for r in covered)))
        groups.append(ResourceGroup(tuple(covered), tuple(fqs)))
    names = [fq.flavor for g in groups for fq in g.flavors]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise where.error("spec.resourceGroups", sorted(dup)[0],
                          "a flavor in one resource group only")
    return tuple(groups)


def _weight(where: _Where, spec: dict[str, Any]) -> float:
    fs = where.mapping(spec.get("fairSharing"), "spec.fairSharing")
    where.keys(fs, "spec.fairSharing", ("weight",))
    if "weight" not in fs:
        return 1.0
    w = fs["weight"]
    try:
        x = quantity(CPU, w, where, "spec.fairSharing.weight") / 1000.0
    except InvalidParameter:
        raise where.error("spec.fairSharing.weight", w, "a quantity >= 0") from None
    return x


def _flavor(where: _Where, spec: dict[str, Any],
            topologies: dict[str, TopologySpec]) -> Flavor:
    where.keys(spec, "spec", ("nodeLabels", "topologyName"))
    labels = where.mapping(spec.get("nodeLabels"), "spec.nodeLabels")
    gpu_type = None
    for k, v in labels.items():
        if k not in GPU_LABELS:
            raise where.error(f"spec.nodeLabels.{k}", v, "labels naming the GPU type, "
                              f"keys {', '.join(GPU_LABELS)} (schedlab nodes carry no "
                              "other labels)")
        if gpu_type is not None and str(v) != gpu_type:
            raise where.error(f"spec.nodeLabels.{k}", v, f"the same GPU type as {gpu_type}")
        gpu_type = str(v)
    topo = spec.get("topologyName")
    if topo is not None:
        if topo not in topologies:
            raise where.error("spec.topologyName", topo, "a Topology of the file: " + (
                ", ".join(sorted(topologies)) or "(none declared)"))
        if not labels:
            raise where.error("spec.nodeLabels", labels, "at least one nodeLabel when "
                              "topologyName is set (as Kueue validates)")
    return Flavor(where.name, gpu_type, topo)


def _topology(where: _Where, spec: dict[str, Any]) -> TopologySpec:
    """A Topology's levels: label keys, top first, each standing for a schedlab level."""
    where.keys(spec, "spec", ("levels",))
    levels = spec.get("levels")
    if not isinstance(levels, list) or not 1 <= len(levels) <= 16:
        raise where.error("spec.levels", levels, "a list of 1 to 16 {nodeLabel: KEY}")
    labels: list[str] = []
    mapped: list[Level] = []
    for i, lv in enumerate(levels):
        field = f"spec.levels[{i}]"
        d = where.mapping(lv, field)
        where.keys(d, field, ("nodeLabel",))
        key = d.get("nodeLabel")
        level = label_level(key) if isinstance(key, str) else None
        if level is None:
            raise where.error(f"{field}.nodeLabel", key, f"{HOSTNAME}, schedlab.io/<level> "
                              "or a key ending in a level word (" +
                              ", ".join(sorted(LEVEL_WORDS)) + ")")
        if key in labels:
            raise where.error(f"{field}.nodeLabel", key, "labels used once (must be unique)")
        if mapped and level >= mapped[-1]:
            raise where.error(f"{field}.nodeLabel", key, f"a level below "
                              f"{mapped[-1].label} (levels go from the top down)")
        labels.append(str(key))
        mapped.append(level)
    if mapped[-1] != Level.NODE:
        raise where.error(f"spec.levels[{len(levels) - 1}].nodeLabel", labels[-1],
                          f"{HOSTNAME} (or a label of the node level) as the lowest level: "
                          "schedlab assigns pods to nodes")
    return TopologySpec(where.name, tuple(labels), tuple(mapped))


def _cluster_queue(where: _Where, spec: dict[str, Any],
                   flavors: dict[str, Flavor]) -> ClusterQueue:
    where.keys(spec, "spec", ("cohort", "cohortName", "resourceGroups", "queueingStrategy",
                              "preemption", "flavorFungibility", "fairSharing",
                              "namespaceSelector", "stopPolicy"))
    ns = spec.get("namespaceSelector")
    if ns not in (None, {}):
        raise where.error("spec.namespaceSelector", ns, "{} (namespaces carry no labels "
                          "in schedlab)")
    cohort = spec.get("cohortName", spec.get("cohort"))
    if cohort is not None and (not isinstance(cohort, str) or not cohort):
        raise where.error("spec.cohortName", cohort, "a cohort name")
    p = where.mapping(spec.get("preemption"), "spec.preemption")
    where.keys(p, "spec.preemption", ("reclaimWithinCohort", "withinClusterQueue",
                                      "borrowWithinCohort"))
    bwc = where.mapping(p.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    where.keys(bwc, "spec.preemption.borrowWithinCohort", ("policy", "maxPriorityThreshold"))
    thr = bwc.get("maxPriorityThreshold")
    if thr is not None and (not isinstance(thr, int) or isinstance(thr, bool)):
        raise where.error("spec.preemption.borrowWithinCohort.maxPriorityThreshold", thr,
                          "an integer priority")
    preemption = Preemption(
        where.choice(p, "reclaimWithinCohort", "spec.preemption",
                     ("Never", "LowerPriority", "Any"), "Never"),
        where.choice(p, "withinClusterQueue", "spec.preemption",
                     ("Never", "LowerPriority", "LowerOrNewerEqualPriority"), "Never"),
        where.choice(bwc, "policy", "spec.preemption.borrowWithinCohort",
                     ("Never", "LowerPriority"), "Never"), thr)
    ff = where.mapping(spec.get("flavorFungibility"), "spec.flavorFungibility")
    where.keys(ff, "spec.flavorFungibility", ("whenCanBorrow", "whenCanPreempt",
                                              "preference"))
    wcb = where.choice(ff, "whenCanBorrow", "spec.flavorFungibility",
                       ("MayStopSearch", "Borrow", "TryNextFlavor"), "MayStopSearch")
    wcp = where.choice(ff, "whenCanPreempt", "spec.flavorFungibility",
                       ("MayStopSearch", "Preempt", "TryNextFlavor"), "TryNextFlavor")
    pref = ff.get("preference")
    if pref is not None and pref not in ("BorrowingOverPreemption", "PreemptionOverBorrowing"):
        raise where.error("spec.flavorFungibility.preference", pref,
                          "BorrowingOverPreemption | PreemptionOverBorrowing")
    fungibility = Fungibility("MayStopSearch" if wcb == "Borrow" else wcb,
                              "MayStopSearch" if wcp == "Preempt" else wcp, pref)
    return ClusterQueue(
        where.name, cohort, _groups(where, spec, flavors, False),
        where.choice(spec, "queueingStrategy", "spec", ("StrictFIFO", "BestEffortFIFO"),
                     "BestEffortFIFO"),
        preemption, fungibility, _weight(where, spec),
        where.choice(spec, "stopPolicy", "spec", ("None", "Hold", "HoldAndDrain"), "None"))


def _fair_sharing(where: _Where, doc: dict[str, Any]) -> tuple[bool, tuple[str, ...]]:
    for k in doc:
        if k not in ("apiVersion", "kind", "metadata", "fairSharing"):
            raise where.error(k, doc[k], "fairSharing (the only part of Kueue's "
                              "Configuration schedlab models)")
    fs = where.mapping(doc.get("fairSharing"), "fairSharing")
    where.keys(fs, "fairSharing", ("enable", "preemptionStrategies"))
    if "fairSharing" not in doc or fs.get("enable") is False:
        return False, DEFAULT_STRATEGIES
    strategies = fs.get("preemptionStrategies") or list(DEFAULT_STRATEGIES)
    ok = (["LessThanOrEqualToFinalShare"], ["LessThanInitialShare"],
          ["LessThanOrEqualToFinalShare", "LessThanInitialShare"])
    if strategies not in ok:
        raise where.error("fairSharing.preemptionStrategies", strategies,
                          " | ".join(str(s) for s in ok))
    return True, tuple(strategies)


def load_config(path: str | Path) -> KueueConfig:
    """Parse and check a Kueue config file (multi-document YAML)."""
    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidParameter(f"{p}: cannot read the Kueue config: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise InvalidParameter(f"{p}: {where}not valid YAML: "
                               f"{getattr(e, 'problem', None) or e}") from None
    by_kind: dict[str, list[tuple[_Where, dict[str, Any]]]] = {k: [] for k in KINDS}
    for i, doc in enumerate(docs):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            docs.extend(doc.get("items") or [])
            continue
        w = _Where(p, "document", str(i + 1))
        if not isinstance(doc, dict):
            raise w.error("(document)", doc, "a Kubernetes object (a mapping)")
        kind = doc.get("kind")
        if kind not in KINDS:
            raise w.error("kind", kind, ", ".join(KINDS))
        api = doc.get("apiVersion")
        apis = CONFIG_API if kind == "Configuration" else KUEUE_API
        if api not in apis:
            raise w.error("apiVersion", api, " | ".join(apis))
        meta = w.mapping(doc.get("metadata"), "metadata")
        name = meta.get("name", "" if kind == "Configuration" else None)
        if not isinstance(name, str) or (kind != "Configuration" and not name):
            raise w.error("metadata.name", name, "a non-empty name")
        w = _Where(p, str(kind), name)
        w.keys(meta, "metadata", ("name", "namespace", "labels", "annotations"))
        if kind != "Configuration":
            w.keys(doc, "", ("apiVersion", "kind", "metadata", "spec", "value",
                             "description"))
        by_kind[str(kind)].append((w, doc))

    topologies: dict[str, TopologySpec] = {}
    for w, doc in by_kind["Topology"]:
        if w.name in topologies:
            raise w.error("metadata.name", w.name, "a name used once per kind")
        topologies[w.name] = _topology(w, w.mapping(doc.get("spec"), "spec"))
    flavors: dict[str, Flavor] = {}
    for w, doc in by_kind["ResourceFlavor"]:
        if w.name in flavors:
            raise w.error("metadata.name", w.name, "a name used once per kind")
        flavors[w.name] = _flavor(w, w.mapping(doc.get("spec"), "spec"), topologies)
    cqs: dict[str, ClusterQueue] = {}
    for w, doc in by_kind["ClusterQueue"]:
        if w.name in cqs:
            raise w.error("metadata.name", w.name, "a name used once per kind")
        cqs[w.name] = _cluster_queue(w, w.mapping(doc.get("spec"), "spec"), flavors)
    cohorts: dict[str, Cohort] = {}
    for w, doc in by_kind["Cohort"]:
        if w.name in cohorts:
            raise w.error("metadata.name", w.name, "a name used once per kind")
        spec = w.mapping(doc.get("spec"), "spec")
        w.keys(spec, "spec", ("parent", "parentName", "resourceGroups", "fairSharing"))
        parent = spec.get("parentName", spec.get("parent"))
        if parent is not None and (not isinstance(parent, str) or not parent):
            raise w.error("spec.parentName", parent, "a cohort name")
        cohorts[w.name] = Cohort(w.name, parent, _groups(w, spec, flavors, True),
                                 _weight(w, spec))
    # implicit cohorts: named by a ClusterQueue or a Cohort's parent, never declared
    for name in [cq.cohort for cq in cqs.values()] + [c.parent for c in cohorts.values()]:
        if name is not None and name not in cohorts:
            cohorts[name] = Cohort(name, None)
    for c in cohorts.values():
        seen = {c.name}
        up = c.parent
        while up is not None:
            if up in seen:
                raise _Where(p, "Cohort", c.name).error("spec.parentName", c.parent,
                                                        "a parent chain without cycles")
            seen.add(up)
            up = cohorts[up].parent
    lqs: dict[str, str] = {}
    for w, doc in by_kind["LocalQueue"]:
        spec = w.mapping(doc.get("spec"), "spec")
        w.keys(spec, "spec", ("clusterQueue",))
        ns = doc["metadata"].get("namespace") or "default"
        key = f"{ns}/{w.name}"
        if key in lqs:
            raise w.error("metadata.name", key, "a LocalQueue name used once per namespace")
        if spec.get("clusterQueue") not in cqs:
            raise w.error("spec.clusterQueue", spec.get("clusterQueue"),
                          "a ClusterQueue of the file: " + (", ".join(sorted(cqs)) or
                                                            "(none declared)"))
        lqs[key] = str(spec["clusterQueue"])
    pcs: dict[str, int] = {}
    for w, doc in by_kind["WorkloadPriorityClass"]:
        v = doc.get("value")
        if not isinstance(v, int) or isinstance(v, bool):
            raise w.error("value", v, "an integer priority")
        if "spec" in doc:
            raise w.error("spec", doc["spec"], "value and description (no spec)")
        pcs[w.name] = v
    fair, strategies = False, DEFAULT_STRATEGIES
    for w, doc in by_kind["Configuration"]:
        fair, strategies = _fair_sharing(w, doc)
    if not cqs:
        raise InvalidParameter(f"{p}: no ClusterQueue; allowed: a file declaring at least "
                               "one ClusterQueue (and LocalQueues pointing to it)")
    return KueueConfig(p, tuple(flavors.values()), tuple(cqs.values()),
                       tuple(cohorts.values()), tuple(lqs.items()), tuple(pcs.items()),
                       fair, strategies, tuple(topologies.values()))
