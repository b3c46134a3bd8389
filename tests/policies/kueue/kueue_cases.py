"""Helpers of the kueue scenario tests: Kueue objects as Python dicts, tiny clusters, runs.

The builders mirror Kueue's test wrappers (`utiltestingapi.MakeClusterQueue(...)
.Cohort(...).ResourceGroup(MakeFlavorQuotas(...).Resource(...))`), so an upstream table
row reads almost the same here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from schedlab.sim.engine import Simulation
from schedlab.sim.model import JobSpec
from schedlab.topologies.native import native_from_dict
from schedlab.traces.base import Trace

API = "kueue.x-k8s.io/v1beta2"


def flavor(name: str, gpu_type: str | None = None) -> dict[str, Any]:
    spec = {"nodeLabels": {"nvidia.com/gpu.product": gpu_type}} if gpu_type else {}
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": spec}


def res(name: str, nominal: Any, borrowing: Any = None, lending: Any = None
        ) -> dict[str, Any]:
    r = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        r["borrowingLimit"] = borrowing
    if lending is not None:
        r["lendingLimit"] = lending
    return r


def group(*flavors: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    covered = [r["name"] for r in flavors[0][1]]
    return {"coveredResources": covered,
            "flavors": [{"name": f, "resources": rs} for f, rs in flavors]}


def gpus(flavor_name: str, nominal: Any, borrowing: Any = None, lending: Any = None
         ) -> dict[str, Any]:
    """A resource group of one flavor covering nvidia.com/gpu."""
    return group((flavor_name, [res("nvidia.com/gpu", nominal, borrowing, lending)]))


def cq(name: str, *groups: dict[str, Any], cohort: str | None = None,
       strategy: str | None = None, preemption: dict[str, Any] | None = None,
       fungibility: dict[str, Any] | None = None, weight: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": list(groups)}
    if cohort:
        spec["cohortName"] = cohort
    if strategy:
        spec["queueingStrategy"] = strategy
    if preemption:
        spec["preemption"] = preemption
    if fungibility:
        spec["flavorFungibility"] = fungibility
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec}


def cohort(name: str, *groups: dict[str, Any], parent: str | None = None,
           weight: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if groups:
        spec["resourceGroups"] = list(groups)
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def lq(name: str, cluster_queue: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def wpc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}


def fair_sharing(*strategies: str) -> dict[str, Any]:
    fs: dict[str, Any] = {}
    if strategies:
        fs["preemptionStrategies"] = list(strategies)
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "fairSharing": fs}


def write(tmp_path: Path, *docs: dict[str, Any], local_queues: bool = True) -> str:
    """The documents as one multi-document file; a LocalQueue named after each
    ClusterQueue is added unless `local_queues` is False."""
    docs_l = list(docs)
    if local_queues:
        docs_l += [lq(d["metadata"]["name"], d["metadata"]["name"]) for d in docs
                   if d["kind"] == "ClusterQueue"]
    p = tmp_path / "kueue.yaml"
    p.write_text(yaml.safe_dump_all(docs_l, sort_keys=False))
    return str(p)


def cluster(*groups: tuple[int, int, str], cpus: int = 64, mem: int = 512):
    """Nodes: (count, GPUs per node, GPU type) groups."""
    nodes = [{"count": c, "gpu_type": t, "sockets": 1, "switches_per_socket": 1,
              "gpus_per_switch": g, "num_cpus": cpus, "mem_gb": mem} for c, g, t in groups]
    return native_from_dict({"name": "kueue-test", "nodes": nodes}, "kueue-test.yaml")


def job(jid: str, t: float, gpus: int, dur: float, queue: str, pc: str | None = None,
        prio: int = 0, **kw: Any) -> JobSpec:
    extra: tuple[tuple[str, Any], ...] = (("queue", queue),)
    if pc:
        extra += (("priority_class", pc),)
    return JobSpec(jid, t, gpus, dur, priority=prio, extra=extra, **kw)


def run(config: str, topo: Any, *jobs: JobSpec, until: float | None = None, **params: Any):
    params = {"config": config, **params}
    return Simulation(Trace("kueue", tuple(jobs)), topo, "kueue", params=params).run(
        until=until)


def starts(result) -> dict[str, float]:
    """Job id -> first start time (NaN never)."""
    return dict(zip(result.jobs.job_id, result.jobs.start_time, strict=True))


def preempted(result) -> list[tuple[float, str]]:
    ev = result.events
    return [(t, j) for t, j in zip(ev[ev.kind == "preempt"].time,
                                   ev[ev.kind == "preempt"].job_id, strict=True)]
