"""kueue topology-aware scheduling: rows of Kueue's TAS tests, by hand.

Two kinds of rows:
- the algorithm on Kueue's own trees (`TestFindTopologyAssignments` in
  pkg/cache/scheduler/tas_cache_test.go): `tas.assign` on the same domains, levels and
  capacities, the same expected domains and counts, or the same failure message;
- the policy end to end (`TestFindTopologyAssignments` rows whose tree schedlab's cells
  can hold, and rows of `TestScheduleForTAS` / `TestScheduleForTASPreemption` in
  pkg/scheduler/scheduler_tas_test.go): Kueue's nodes of N CPUs are nodes of N GPUs, a
  pod of 1 CPU a pod of 1 GPU (a job of N GPUs without `gpus_per_task` is N pods).
  Kueue's blocks above racks map to schedlab's one `cluster` cell; a row with two
  blocks of one rack each keeps its blocks as racks (same choices: the tie-breaks go by
  the same names).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedlab.policies.kueue.config import load_config
from schedlab.policies.kueue.tas import (
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    Tree,
    assign,
    label_level,
)
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec, Level
from schedlab.topologies.tree import CellSpec, Topology
from schedlab.traces.base import Trace

API = "kueue.x-k8s.io/v1beta2"
BLOCK, RACK, HOST = ("cloud.com/topology-block", "cloud.com/topology-rack",
                     "kubernetes.io/hostname")

# --- the algorithm on Kueue's trees ---


def tree(depth: int, leaves: dict[tuple[str, ...], int]) -> tuple[Tree, dict[int, int]]:
    """A Tree of leaves given by their level values, and each leaf's pod capacity."""
    items = list(leaves.items())
    t = Tree("default", depth, [(names, names, i) for i, (names, _) in enumerate(items)])
    return t, {i: cap for i, (_, cap) in enumerate(items)}


def run_assign(leaves: dict[tuple[str, ...], int], depth: int, count: int, mode: str,
               level: int) -> dict[str, int] | str:
    t, caps = tree(depth, leaves)
    got = assign(t, count, mode, level, caps.__getitem__)
    if isinstance(got, str):
        return got
    names = {i: "/".join(n) for i, (n, _) in enumerate(leaves.items())}
    return {names[i]: k for i, k in got.items()}


# defaultNodes of tas_cache_test.go: b1{r1: x3:1, r2: x5:1 x1:1 x6:1}, b2{r1: x2:1, r2: x4:2}
DEFAULT = {("b1", "r1", "x3"): 1, ("b1", "r2", "x5"): 1, ("b1", "r2", "x1"): 1,
           ("b1", "r2", "x6"): 1, ("b2", "r1", "x2"): 1, ("b2", "r2", "x4"): 2}
# the same as Kueue's defaultTwoLevels (block, rack): racks are the leaves
DEFAULT_TWO = {("b1", "r1"): 1, ("b1", "r2"): 3, ("b2", "r1"): 1, ("b2", "r2"): 2}
# binaryTreesNodes: two blocks of two racks of two 1-CPU hosts
BINARY = {("b1", "r1", "x3"): 1, ("b1", "r1", "x5"): 1, ("b1", "r2", "x1"): 1,
          ("b1", "r2", "x6"): 1, ("b2", "r1", "x2"): 1, ("b2", "r1", "x4"): 1,
          ("b2", "r2", "x7"): 1, ("b2", "r2", "x8"): 1}
# scatteredNodes: b1{r1: x3:4, x5:1, x1:1}, b2{r1: x6:2, x2:1}
SCATTERED = {("b1", "r1", "x3"): 4, ("b1", "r1", "x5"): 1, ("b1", "r1", "x1"): 1,
             ("b2", "r1", "x6"): 2, ("b2", "r1", "x2"): 1}


@pytest.mark.parametrize(("row", "leaves", "depth", "count", "mode", "level", "want"), [
    ("rack required; single Pod fits in a rack; BestFit",
     DEFAULT_TWO, 2, 1, REQUIRED, 1, {"b1/r1": 1}),
    ("rack required; multiple Pods fit in a rack; BestFit",
     DEFAULT_TWO, 2, 3, REQUIRED, 1, {"b1/r2": 3}),
    ("rack required; multiple Pods fit in some racks; BestFit",
     DEFAULT_TWO, 2, 2, REQUIRED, 1, {"b2/r2": 2}),
    ("rack required; too many pods to fit in any rack; BestFit",
     DEFAULT_TWO, 2, 4, REQUIRED, 1,
     'topology "default" allows to fit only 3 out of 4 pod(s)'),
    ("block required; single Pod fits in a block and a single rack; BestFit",
     DEFAULT_TWO, 2, 1, REQUIRED, 0, {"b2/r1": 1}),
    ("block required; Pods fit in a block spread across two racks; BestFit",
     DEFAULT_TWO, 2, 4, REQUIRED, 0, {"b1/r1": 1, "b1/r2": 3}),
    ("block required; too many Pods to fit requested; BestFit",
     DEFAULT_TWO, 2, 5, REQUIRED, 0,
     'topology "default" allows to fit only 4 out of 5 pod(s)'),
    ("rack preferred; but only block can accommodate the workload; BestFit",
     DEFAULT_TWO, 2, 4, PREFERRED, 1, {"b1/r1": 1, "b1/r2": 3}),
    ("rack preferred; but only multiple blocks can accommodate the workload; BestFit",
     DEFAULT_TWO, 2, 6, PREFERRED, 1, {"b1/r1": 1, "b1/r2": 3, "b2/r2": 2}),
    ("block preferred; but only multiple blocks can accommodate the workload; BestFit",
     DEFAULT_TWO, 2, 6, PREFERRED, 0, {"b1/r1": 1, "b1/r2": 3, "b2/r2": 2}),
    ("block preferred; but the workload cannot be accommodate in entire topology; BestFit",
     DEFAULT_TWO, 2, 10, PREFERRED, 0,
     'topology "default" allows to fit only 7 out of 10 pod(s)'),
    ("block preferred; Pods fit in 2 blocks; BestFit",
     {("b1",): 2, ("b2",): 1, ("b3",): 4}, 1, 5, PREFERRED, 0, {"b2": 1, "b3": 4}),
    ("host required; single Pod fits in the host; BestFit",
     DEFAULT, 3, 1, REQUIRED, 2, {"b1/r1/x3": 1}),
    ("unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed",
     DEFAULT, 3, 1, UNCONSTRAINED, 0, {"b1/r1/x3": 1}),
    ("block required; 4 pods fit into one host each; BestFit",
     BINARY, 3, 4, REQUIRED, 0,
     {"b1/r1/x3": 1, "b1/r1/x5": 1, "b1/r2/x1": 1, "b1/r2/x6": 1}),
    ("unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they "
     "could fit into single rack; BestFit",
     SCATTERED, 3, 6, UNCONSTRAINED, 0,
     {"b1/r1/x1": 1, "b1/r1/x3": 1, "b1/r1/x5": 1, "b2/r1/x2": 1, "b2/r1/x6": 2}),
    ("minimize the number of used racks before optimizing the number of nodes; BestFit",
     {("b1", "r1", "x3"): 2, ("b1", "r2", "x5"): 2, ("b1", "r3", "x1"): 1,
      ("b1", "r3", "x6"): 1, ("b1", "r3", "x2"): 1, ("b1", "r3", "x4"): 1}, 3, 4,
     REQUIRED, 0, {"b1/r3/x1": 1, "b1/r3/x6": 1, "b1/r3/x2": 1, "b1/r3/x4": 1}),
    ("choose the node that can accommodate all Pods",
     {("b1", "r1", "x3"): 2, ("b1", "r1", "x5"): 1, ("b1", "r1", "x1"): 1}, 3, 2,
     REQUIRED, 0, {"b1/r1/x3": 2}),
])
def test_find_topology_assignments_rows(row, leaves, depth, count, mode, level, want):
    """Rows of Kueue's TestFindTopologyAssignments (Kueue's name in `row`): the same
    domains and pod counts, or the same failure message. Kueue runs with TASProfileMixed
    on by default (since 0.15): its unconstrained rows take the least free hosts."""
    assert run_assign(leaves, depth, count, mode, level) == want


def test_label_levels():
    """Level label keys: hostname is a node, Kueue's rack and block keys a rack and the
    cluster, schedlab.io/<level> any level; others are unknown (an error in a config)."""
    assert [label_level(k) for k in (HOST, RACK, BLOCK, "schedlab.io/rack",
                                     "cloud.google.com/gce-topology-subblock", "foo/bar")
            ] == [Level.NODE, Level.RACK, Level.CLUSTER, Level.RACK, Level.RACK, None]


# --- the policy end to end ---


def cluster(racks: dict[str, dict[str, int]], gpu: str = "A100") -> Topology:
    """cluster > racks > nodes of the given GPUs, each node named as in Kueue's row."""
    kids = []
    for rack, nodes in racks.items():
        ns = [CellSpec(Level.NODE, node, [CellSpec(Level.GPU, f"{node}/gpu{i}")
                                          for i in range(g)],
                       node={"gpu_type": gpu, "num_cpus": 0, "mem_gb": 0})
              for node, g in nodes.items()]
        kids.append(CellSpec(Level.RACK, rack, ns))
    return Topology("tas-test", CellSpec(Level.CLUSTER, "b1", kids))


def doc(kind: str, name: str, spec: Any = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"apiVersion": API, "kind": kind, "metadata": {"name": name}}
    if spec is not None:
        d["spec"] = spec
    d.update(extra)
    return d


def topology(name: str, *labels: str) -> dict[str, Any]:
    return doc("Topology", name, {"levels": [{"nodeLabel": k} for k in labels]})


def flavor(name: str, topo: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {"schedlab.io/gpu-type": "A100"}}
    if topo:
        spec["topologyName"] = topo
    return doc("ResourceFlavor", name, spec)


def cq(name: str, *flavors: str, gpus: int = 50, **spec: Any) -> dict[str, Any]:
    return doc("ClusterQueue", name, {"resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}
                    for f in flavors]}], **spec})


def write(tmp_path: Path, *docs: dict[str, Any]) -> str:
    lqs = [{"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": d["metadata"]["name"]},
            "spec": {"clusterQueue": d["metadata"]["name"]}}
           for d in docs if d["kind"] == "ClusterQueue"]
    p = tmp_path / "kueue.yaml"
    p.write_text(yaml.safe_dump_all([*docs, *lqs], sort_keys=False))
    return str(p)


def job(jid: str, t: float, gpus: int, dur: float, queue: str = "tas-main",
        required: str = "", preferred: str = "", prio: int = 0, **kw: Any) -> JobSpec:
    extra: tuple[tuple[str, Any], ...] = (("queue", queue),)
    if required:
        extra += (("topology_required", required),)
    if preferred:
        extra += (("topology_preferred", preferred),)
    return JobSpec(jid, t, gpus, dur, priority=prio, extra=extra, **kw)


def run(cfg: str, topo: Topology, *jobs: JobSpec):
    """A kueue run with the default placer: TAS jobs are placed by Kueue's rules (the
    engine does not ask the placer whether they could ever fit: `places_itself`)."""
    return Simulation(Trace("tas", tuple(jobs)), topo, "kueue", params={"config": cfg}).run()


def placed(result, jid: str) -> dict[str, int]:
    """The job's GPUs per node (its first placement)."""
    gpus = result.jobs.set_index("job_id").loc[jid, "gpus"]
    return dict(Counter(g.split("/")[0] for g in gpus.split(";") if g))


def starts(result) -> dict[str, float]:
    return dict(zip(result.jobs.job_id, result.jobs.start_time, strict=True))


THREE = (BLOCK, RACK, HOST)


def test_minimize_racks_before_nodes(tmp_path):
    """TestFindTopologyAssignments "minimize the number of used racks before optimizing
    the number of nodes; BestFit": block b1 of racks r1 (x3: 2), r2 (x5: 2), r3 (x1, x6,
    x2, x4: 1 each); 4 pods required in a block: r3 alone holds them, one pod a node."""
    topo = cluster({"r1": {"x3": 2}, "r2": {"x5": 2},
                    "r3": {"x1": 1, "x6": 1, "x2": 1, "x4": 1}})
    cfg = write(tmp_path, topology("default", *THREE), flavor("tas", "default"),
                cq("tas-main", "tas"))
    r = run(cfg, topo, job("j", 0, 4, 10, required=BLOCK))
    assert placed(r, "j") == {"x1": 1, "x6": 1, "x2": 1, "x4": 1}


def test_choose_node_for_all_pods(tmp_path):
    """"choose the node that can accommodate all Pods": x3 (2), x5 (1), x1 (1) in one
    rack; 2 pods required in the block: best fit at each level down, x3 takes both."""
    topo = cluster({"r1": {"x3": 2, "x5": 1, "x1": 1}})
    cfg = write(tmp_path, topology("default", *THREE), flavor("tas", "default"),
                cq("tas-main", "tas"))
    r = run(cfg, topo, job("j", 0, 2, 10, required=BLOCK))
    assert placed(r, "j") == {"x3": 2}


SCATTER = {"b1": {"x3": 4, "x5": 1, "x1": 1}, "b2": {"x6": 2, "x2": 1}}


@pytest.mark.parametrize("explicit", [True, False])
def test_unconstrained_scattered(tmp_path, explicit):
    """"unconstrained; 6 pods fit into hosts scattered across the whole datacenter even
    they could fit into single rack" and its "no annotation; implied default to
    unconstrained" twin (a ClusterQueue of TAS flavors only): the least free hosts first,
    x1, x5, x2 (1 each), x6 (2), then 1 of x3's 4. Kueue's blocks (one rack each) are the
    racks b1, b2 here."""
    cfg = write(tmp_path, topology("default", RACK, HOST), flavor("tas", "default"),
                cq("tas-main", "tas"))
    extra = (("queue", "tas-main"),) + ((("topology_unconstrained", "true"),)
                                        if explicit else ())
    r = run(cfg, cluster(SCATTER), JobSpec("j", 0, 6, 10, extra=extra))
    assert placed(r, "j") == {"x1": 1, "x3": 1, "x5": 1, "x2": 1, "x6": 2}


# Kueue's defaultTwoLevels rows (block, rack; racks the leaves) with its blocks as
# schedlab racks and its racks as nodes of as many GPUs as the rack's CPUs
TWO = {"b1": {"b1-r1": 1, "b1-r2": 3}, "b2": {"b2-r1": 1, "b2-r2": 2}}


@pytest.mark.parametrize(("row", "count", "req", "pref", "want"), [
    ("rack required; multiple Pods fit in some racks; BestFit", 2, HOST, "",
     {"b2-r2": 2}),
    ("block required; Pods fit in a block spread across two racks; BestFit", 4, RACK, "",
     {"b1-r1": 1, "b1-r2": 3}),
    ("rack preferred; but only multiple blocks can accommodate the workload; BestFit", 6,
     "", HOST, {"b1-r1": 1, "b1-r2": 3, "b2-r2": 2}),
])
def test_two_level_rows(tmp_path, row, count, req, pref, want):
    """Kueue's two-level rows (named in `row`) end to end, levels one down."""
    cfg = write(tmp_path, topology("default", RACK, HOST), flavor("tas", "default"),
                cq("tas-main", "tas"))
    r = run(cfg, cluster(TWO), job("j", 0, count, 10, required=req, preferred=pref))
    assert placed(r, "j") == want


def test_too_many_pods_for_any_rack_is_rejected(tmp_path):
    """"rack required; too many pods to fit in any rack": 4 pods, the largest node holds
    3: never admitted; when nothing can change the job is rejected with Kueue's words."""
    cfg = write(tmp_path, topology("default", RACK, HOST), flavor("tas", "default"),
                cq("tas-main", "tas"))
    r = run(cfg, cluster(TWO), job("j", 0, 4, 10, required=HOST))
    row = r.jobs.set_index("job_id").loc["j"]
    assert row.status == "rejected"
    assert 'topology "default" allows to fit only 3 out of 4 pod(s)' in row.reason


SINGLE = {"r": {"x1": 8}}


def test_required_tas_skips_non_tas_flavor(tmp_path):
    """TestScheduleForTAS "workload requiring TAS skips the non-TAS flavor": flavors
    default (no topology) then tas-default; the job asks hostname: it takes tas-default,
    and the first flavor's reason is Kueue's."""
    cfg = write(tmp_path, topology("tas-single-level", HOST), flavor("default"),
                flavor("tas-default", "tas-single-level"),
                cq("tas-main", "default", "tas-default"))
    r = run(cfg, cluster(SINGLE), job("j", 0, 1, 10, required=HOST))
    assert placed(r, "j") == {"x1": 1}
    from schedlab.policies.kueue import KueuePolicy
    from schedlab.policies.kueue.tas import Request
    from schedlab.policies.kueue.workload import Workload
    p = KueuePolicy(config=cfg)
    p.cfg = load_config(cfg)
    p.topos = {t.name: t for t in p.cfg.topologies}
    fl = {f.name: f for f in p.cfg.flavors}
    w = Workload(0, "j", None, 0, 0.0, {}, "")  # type: ignore[arg-type]
    w.tas = Request(REQUIRED, HOST)
    assert p._tas_check(w, fl["default"]) == (
        'Flavor "default" does not support TopologyAwareScheduling')
    w.tas = None
    assert p._tas_check(w, fl["tas-default"]) == (
        'Flavor "tas-default" supports only TopologyAwareScheduling')


def test_non_tas_workload_skips_tas_flavor(tmp_path):
    """"workload which does not need TAS skips the TAS flavor": flavors tas-default then
    default; a job without a request takes default (placed by the run's placer)."""
    cfg = write(tmp_path, topology("tas-single-level", HOST),
                flavor("tas-default", "tas-single-level"), flavor("default"),
                cq("tas-main", "tas-default", "default"))
    r = run(cfg, cluster(SINGLE), job("j", 0, 1, 10))
    assert starts(r) == {"j": 0.0}
    assert "supports only TopologyAwareScheduling" not in str(r.jobs.reason.iloc[0])


def test_requested_level_not_in_topology(tmp_path):
    """"workload requests topology level which is not present in topology": no flavor
    fits; the job waits, then is rejected with Kueue's reason."""
    cfg = write(tmp_path, topology("tas-single-level", HOST),
                flavor("tas-default", "tas-single-level"), cq("tas-main", "tas-default"))
    r = run(cfg, cluster(SINGLE), job("j", 0, 1, 10, required="cloud.com/non-existing"))
    row = r.jobs.set_index("job_id").loc["j"]
    assert row.status == "rejected"
    assert 'Flavor "tas-default" does not contain the requested level' in row.reason


def test_node_capacity_used_by_another_tas_workload(tmp_path):
    """"workload does not get scheduled as the node capacity is already used by another
    TAS workload": one node; bar holds it until 100; foo (required hostname) waits for
    it, although its quota fits, and starts at 100."""
    cfg = write(tmp_path, topology("tas-single-level", HOST),
                flavor("tas-default", "tas-single-level"), cq("tas-main", "tas-default"))
    r = run(cfg, cluster({"r": {"x1": 1}}), job("bar", 0, 1, 100, required=HOST),
            job("foo", 1, 1, 10, required=HOST))
    assert starts(r) == {"bar": 0.0, "foo": 100.0}


def test_preempted_for_fragmented_capacity(tmp_path):
    """TestScheduleForTASPreemption "low priority workload is preempted even though there
    is enough capacity, but fragmented": nodes x1, y1 of 5; mid (priority 2) holds 4 of
    x1, low (1) 4 of y1; foo (3) asks 2 pods on one host: its quota fits, 2 GPUs are free
    but one a node, so low is preempted and foo starts on y1 at once."""
    cfg = write(tmp_path, topology("tas-single-level", HOST),
                flavor("tas-default", "tas-single-level"),
                cq("tas-main", "tas-default",
                   preemption={"withinClusterQueue": "LowerPriority"}))
    topo = cluster({"r": {"x1": 5, "y1": 5}})
    r = run(cfg, topo, job("mid", 0, 4, 100, required=HOST, prio=2, gpus_per_task=4),
            job("low", 0, 4, 100, required=HOST, prio=1, gpus_per_task=4),
            job("foo", 1, 2, 10, required=HOST, prio=3))
    ev = r.events
    assert list(ev[ev.kind == "preempt"].job_id) == ["low"]
    assert starts(r)["foo"] == 1.0
    assert placed(r, "foo") == {"y1": 2}


def test_config_errors(tmp_path):
    """Unsupported Topology fields and levels: one line naming file, object, field."""
    bad = write(tmp_path, topology("t", RACK, "foo.io/unknown"), flavor("f", "t"),
                cq("q", "f"))
    with pytest.raises(InvalidParameter, match=r"Topology/t: spec.levels\[1\].nodeLabel"):
        load_config(bad)
    bad = write(tmp_path, topology("t", HOST, RACK), flavor("f", "t"), cq("q", "f"))
    with pytest.raises(InvalidParameter, match="a level below node"):
        load_config(bad)
    bad = write(tmp_path, doc("Topology", "t", {"levels": [{"nodeLabel": HOST}],
                                                "extra": 1}), flavor("f", "t"), cq("q", "f"))
    with pytest.raises(InvalidParameter, match="spec.extra"):
        load_config(bad)
    bad = write(tmp_path, topology("t", HOST), flavor("f", "nope"), cq("q", "f"))
    with pytest.raises(InvalidParameter, match="spec.topologyName: got 'nope'"):
        load_config(bad)
    cfg = write(tmp_path, topology("t", BLOCK, RACK, HOST), flavor("f", "t"), cq("q", "f"))
    flat = Topology("flat", CellSpec(Level.CLUSTER, "c", [CellSpec(
        Level.NODE, "n", [CellSpec(Level.GPU, "n/g0")], node={"gpu_type": "A100"})]))
    with pytest.raises(InvalidParameter, match=r"spec.levels\[1\].nodeLabel.*rack"):
        run(cfg, flat, job("j", 0, 1, 10, queue="q"))


def test_both_required_and_preferred_is_rejected(tmp_path):
    """Kueue's pod-set topology annotations are exclusive: a job giving both is rejected."""
    cfg = write(tmp_path, topology("t", HOST), flavor("f", "t"), cq("q", "f"))
    r = run(cfg, cluster(SINGLE), job("j", 0, 1, 10, queue="q", required=HOST,
                                      preferred=HOST))
    row = r.jobs.set_index("job_id").loc["j"]
    assert row.status == "rejected" and "both given" in row.reason


def test_preemption_search_is_topology_aware(tmp_path):
    """Ours, by hand: nodes x1, y1 of 5. x1 holds a (priority 1, 1 GPU) and m (2, 3
    GPUs), y1 holds b (1, 4 GPUs): 1 GPU free on each. foo (3) asks one pod of 3 GPUs
    on a host. Candidates, lowest priority first: a, then b. Evicting a frees x1 to 2
    GPUs, not 3: the search goes on (Kueue's workloadFits checks the topology); evicting
    b frees y1 to 5: it fits; a is put back (not needed). Only b is preempted; foo starts
    on y1 at 1."""
    cfg = write(tmp_path, topology("t", HOST), flavor("tas", "t"),
                cq("tas-main", "tas", preemption={"withinClusterQueue": "LowerPriority"}))
    topo = cluster({"r": {"x1": 5, "y1": 5}})
    r = run(cfg, topo,
            job("m", 0, 3, 100, required=HOST, prio=2, gpus_per_task=3),
            job("a", 0, 1, 100, required=HOST, prio=1),
            job("b", 0, 4, 100, required=HOST, prio=1, gpus_per_task=4),
            job("foo", 1, 3, 10, required=HOST, prio=3, gpus_per_task=3))
    assert placed(r, "m") == {"x1": 3} and placed(r, "a") == {"x1": 1}
    assert placed(r, "b") == {"y1": 4}
    ev = r.events
    assert list(ev[ev.kind == "preempt"].job_id) == ["b"]
    assert starts(r)["foo"] == 1.0
    assert placed(r, "foo") == {"y1": 3}


def test_request_without_tas_flavor_is_not_ignored(tmp_path):
    """A job asking a topology in a config without any Topology is never silently placed
    anyhow: no flavor supports TAS, it waits and is rejected with Kueue's reason."""
    cfg = write(tmp_path, flavor("default"), cq("q", "default"))
    r = run(cfg, cluster(SINGLE), job("j", 0, 1, 10, queue="q", required=HOST))
    row = r.jobs.set_index("job_id").loc["j"]
    assert row.status == "rejected"
    assert 'Flavor "default" does not support TopologyAwareScheduling' in row.reason


def test_request_columns():
    """The columns as Kueue's annotations: one of required/preferred, unconstrained a
    boolean; anything else is the job's rejection reason."""
    from schedlab.policies.kueue.tas import Request, request_of
    assert request_of({"topology_required": "rack"}) == Request(REQUIRED, "rack")
    assert request_of({"topology_preferred": HOST}) == Request(PREFERRED, HOST)
    assert request_of({"topology_unconstrained": "True"}) == Request(UNCONSTRAINED)
    assert request_of({"topology_unconstrained": "false"}) is None
    assert "allowed: true or false" in str(request_of({"topology_unconstrained": "x"}))


def test_required_levels_hold_on_a_random_trace(tmp_path):
    """Invariant over a seeded random trace (4 racks of 2 nodes of 4 GPUs, 24 jobs): a job
    required on a node runs on one node, one required on a rack on one rack, every job
    with a request on GPUs of the TAS flavor's type; quota (24 GPUs) never exceeded."""
    import numpy as np

    racks = {f"r{i}": {f"r{i}-n{j}": 4 for j in range(2)} for i in range(4)}
    cfg = write(tmp_path, topology("t", RACK, HOST), flavor("tas", "t"),
                cq("tas-main", "tas", gpus=24))
    rng = np.random.default_rng(7)
    jobs, want = [], {}
    for i in range(24):
        g = int(rng.choice([1, 2, 3, 4, 6, 8]))
        kind = str(rng.choice(["node", "rack", "pref", "none"]))
        if kind == "node" and g > 4:
            kind = "rack"
        want[f"j{i}"] = kind
        jobs.append(job(f"j{i}", float(i * 7), g, float(rng.integers(20, 200)),
                        required={"node": HOST, "rack": RACK}.get(kind, ""),
                        preferred=RACK if kind == "pref" else ""))
    r = run(cfg, cluster(racks), *jobs)
    assert set(r.jobs.status) == {"completed"}
    for jid, kind in want.items():
        nodes = placed(r, jid)
        if kind == "node":
            assert len(nodes) == 1, (jid, nodes)
        if kind == "rack":
            assert len({n.split("-")[0] for n in nodes}) == 1, (jid, nodes)
    tl = r.timeline
    assert tl.gpus_busy.max() <= 24
