"""The victim searches' scans answer as their plain definitions do.

`_one_node_victims` keeps only a count per node as it reads the victims and reads the
winner's victims again (`_on_node`); it is checked against a straightforward statement
of what it computes, on random clusters (free GPUs per node, victims spread over one or
more nodes, whole and shared GPUs). `_nodes_could_hold`, which lets `find_victims` skip a
what-if, is checked to be a necessary condition for the consolidated placer.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.victims import Spans, _one_node_victims
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import MILLI, JobSpec

NODES = 5


def _running(idx: int, milli: int, gpus: tuple[int, ...] = ()) -> JobState:
    """A running job's state (a real one: the searches are compiled and check their types)."""
    job = JobState(idx, JobSpec(f"r{idx}", 0.0, max(1, len(gpus)), 10.0))
    job.milli, job.gpus = milli, gpus
    return job


def _picked_first(cell_free: list[int], need: int, whole: bool,
                  victims: list[tuple[Any, Spans]]) -> list[Any] | None:
    """The first node whose free plus freed capacity covers `need`, with its victims so far.

    Victims are added in turn (lowest priority first) to each node they run on, in the
    order of their spans; a node starts at its free GPUs (whole: all of them; a fraction:
    one free GPU is enough) when a victim is first added there.
    """
    have: dict[int, int] = {}
    picked: dict[int, list[Any]] = {}
    for v, spans in victims:
        for node, held in spans:
            if node not in have:
                have[node] = cell_free[node] * MILLI if whole else (
                    MILLI if cell_free[node] else 0)
                picked[node] = []
            picked[node].append(v)
            have[node] += held * v.milli if whole else v.milli
            if have[node] >= need:
                return picked[node]
    return None


@st.composite
def cases(draw: Any) -> tuple[list[int], int, float, list[tuple[Any, Spans]]]:
    """Free GPUs per node, a job's GPUs and share, and victims with their spans."""
    cell_free = [draw(st.integers(0, 4)) for _ in range(NODES)]
    gpus = draw(st.integers(1, 8))
    share = draw(st.sampled_from([1.0, 1.0, 0.5])) if gpus == 1 else 1.0
    victims = []
    for i in range(draw(st.integers(0, 12))):
        nodes = draw(st.lists(st.integers(0, NODES - 1), min_size=1, max_size=3, unique=True))
        spans = tuple((n, draw(st.integers(1, 4))) for n in nodes)
        milli = draw(st.sampled_from([MILLI, MILLI, 500, 250]))
        victims.append((_running(i, milli), spans))
    return cell_free, gpus, share, victims


@settings(max_examples=400, deadline=None)
@given(cases())
def test_one_node_victims_matches_its_definition(case: Any) -> None:
    cell_free, gpus, share, victims = case
    ctx = SimpleNamespace(cluster=SimpleNamespace(cell_free=cell_free), topology=SimpleNamespace(
        nodes=tuple(SimpleNamespace(cell=n) for n in range(NODES))))  # node n's cell: cell n
    job = JobState(0, JobSpec("j", 0.0, gpus, 10.0, gpu_share=share))
    whole = share == 1.0
    need = gpus * MILLI if whole else int(share * MILLI)
    got = _one_node_victims(ctx, job, lambda: iter(victims))  # type: ignore[arg-type]
    assert got == _picked_first(cell_free, need, whole, victims)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([1, 1, 2, 4, 8]), min_size=1, max_size=30),
       st.integers(9, 32), st.data())
def test_few_whole_nodes_means_the_what_if_fails(sizes: list[int], big: int,
                                                 data: Any) -> None:
    """`_nodes_could_hold` is a necessary condition for the consolidated placer.

    `find_victims` skips the what-if of any candidate set (every lower-priority job, or
    only the ones counted) for which it is False: on a random cluster, that set released,
    the placer must then find no place for the job larger than a node.
    """
    from schedlab.policies.victims import _nodes_could_hold, gpu_spans
    from schedlab.sim.cluster import ClusterState
    from schedlab.sim.model import Unschedulable
    from schedlab.sim.registry import PLACERS
    from schedlab.topologies.build import uniform_topology

    topo = uniform_topology(6, sockets=2, switches_per_socket=2, gpus_per_switch=2)
    cluster = ClusterState(topo)
    placer = PLACERS["consolidated"]()
    running = []
    for i, n in enumerate(sizes):
        got = placer.place(JobSpec(f"r{i}", 0.0, n, 10.0), cluster)
        if isinstance(got, Unschedulable):
            continue
        cluster.allocate(i, got, MILLI)
        running.append(_running(i, MILLI, tuple(got)))
    chosen = [v for v in running if data.draw(st.booleans())]
    job = JobState(len(sizes), JobSpec("big", 0.0, big, 10.0))
    ctx = SimpleNamespace(cluster=cluster, topology=topo)
    spans = [(v, gpu_spans(topo.gpu_node, v.gpus)) for v in chosen]
    if _nodes_could_hold(ctx, job, spans):  # type: ignore[arg-type]
        return
    with cluster.sandbox() as scratch:
        for v in chosen:
            scratch.release(v.idx, v.gpus, v.milli)
        assert isinstance(placer.place(job.spec, scratch), Unschedulable)
