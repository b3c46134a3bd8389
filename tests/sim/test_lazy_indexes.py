"""Lazily kept indexes read the same as indexes kept eagerly (issue 18, engine cost).

The cluster re-keys its tightest-cell index list by list, when a list is read; the
pending queue builds its request classes on first use. Both must read exactly as if
they had been kept up to date all along: the same keys, and the classes in the same
order (policies iterate them).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from schedlab.sim.cluster import ClusterState
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import JobSpec, request_class
from schedlab.sim.queue import PendingQueue
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology

TOPOS = [uniform_topology(3, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                          name="u3x8"), load_topology("default")]


def fresh_index(c: ClusterState) -> dict:
    """The index a new state holding exactly what `c` holds builds from scratch."""
    return {k: list(v) for k, v in c._clone().level_index.items()}


@settings(max_examples=30, deadline=None)
@given(topo_i=st.integers(0, 1), data=st.data())
def test_index_lists_read_as_if_kept_eagerly(topo_i, data):
    topo = TOPOS[topo_i]
    c = ClusterState(topo)
    held: dict[int, tuple[int, ...]] = {}
    lists = sorted(c.level_index, key=str)
    for job in range(data.draw(st.integers(1, 25))):
        if held and data.draw(st.booleans()):
            victim = data.draw(st.sampled_from(sorted(held)))
            c.release(victim, held.pop(victim), 1000)
        else:
            free = [g for g in range(topo.num_gpus) if c.gpu_free[g] == 1000]
            if free:
                k = data.draw(st.integers(1, min(4, len(free))))
                gpus = tuple(sorted(data.draw(st.permutations(free))[:k]))
                c.allocate(job, gpus, 1000)
                held[job] = gpus
        # read some lists now: the others stay stale until read
        for lk in data.draw(st.lists(st.sampled_from(lists), max_size=3)):
            assert c.index_list(*lk) == fresh_index(c)[lk]
    want = fresh_index(c)
    for lk in lists:
        assert c.index_list(*lk) == want[lk]
    assert {k: list(v) for k, v in c.level_index.items()} == want


def spec(i: int, gpus: int) -> JobSpec:
    return JobSpec(f"j{i}", float(i // 3), gpus, 10.0)


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.booleans()),
                    min_size=1, max_size=40))
def test_request_classes_built_late_equal_classes_kept_all_along(ops):
    """Classes in creation order with their sorted keys, whenever first asked for."""
    q = PendingQueue()
    kept: dict = {}  # the eager bookkeeping the queue used to do
    jobs: dict[int, JobState] = {}
    for i, (add, size, ask) in enumerate(ops):
        queued = sorted(jobs)
        if add or not queued:
            s = spec(i, [1, 2, 4, 8][size])
            job = jobs[i] = JobState(i, s)
            q.add(job, float(i))
            kept.setdefault(request_class(s), SortedList()).add((s.submit_time, i))
        else:
            job = jobs.pop(queued[size % len(queued)])
            q.remove(job, float(i))
            ck = request_class(job.spec)
            kept[ck].remove((job.spec.submit_time, job.idx))
            if not kept[ck]:
                del kept[ck]
        if ask:
            got = q.classes
            assert list(got) == list(kept)
            assert all(list(got[k]) == list(kept[k]) for k in kept)
    assert list(q.classes) == list(kept)
    assert all(list(q.classes[k]) == list(kept[k]) for k in kept)
