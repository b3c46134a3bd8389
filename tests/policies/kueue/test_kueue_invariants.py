"""Hypothesis invariants of kueue on random quotas and traces: no GPU twice, gangs whole,
GPU time conserved (the shared `check_invariants`), and no ClusterQueue ever holds more
than its nominal quota plus what it may borrow (borrowingLimit, and what the cohort has)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kueue_cases import cluster, cq, flavor, gpus, job, run, write

from schedlab.policies.conformance import check_invariants
from schedlab.traces.base import Trace

TOPO = cluster((2, 4, "V100"))


@st.composite
def case(draw):
    queues = []
    for name in ("a", "b"):
        nominal = draw(st.integers(0, 6))
        limit = draw(st.one_of(st.none(), st.integers(0, 4)))
        lending = draw(st.one_of(st.none(), st.integers(0, nominal)))
        strategy = draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"]))
        reclaim = draw(st.sampled_from(["Never", "LowerPriority", "Any"]))
        within = draw(st.sampled_from(["Never", "LowerPriority"]))
        queues.append((name, nominal, limit, lending, strategy, reclaim, within))
    jobs = []
    t = 0.0
    for i in range(draw(st.integers(1, 10))):
        t += draw(st.sampled_from([0.0, 5.0, 30.0]))
        jobs.append(job(f"j{i}", t, draw(st.sampled_from([1, 2, 4])),
                        draw(st.sampled_from([10.0, 50.0, 200.0])),
                        draw(st.sampled_from(["a", "b"])), prio=draw(st.integers(0, 2))))
    return queues, jobs


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=case())
def test_kueue_invariants(tmp_path, data):
    queues, jobs = data
    docs = [flavor("default")]
    for name, nominal, limit, lending, strategy, reclaim, within in queues:
        docs.append(cq(name, gpus("default", nominal, limit, lending), cohort="co",
                       strategy=strategy, preemption={"reclaimWithinCohort": reclaim,
                                                      "withinClusterQueue": within}))
    result = run(write(tmp_path, *docs), TOPO, *jobs)
    check_invariants(result, TOPO, Trace("kueue", tuple(jobs)))
    # quota: each queue's GPUs at every instant within nominal + min(borrowingLimit, what
    # the other queue lends); the two together within what the cohort holds
    queue_of = {j.job_id: dict(j.extra)["queue"] for j in jobs}
    held: dict[str, int] = {}
    use = {"a": 0, "b": 0}
    lends = {n: (nom if lend is None else lend) for n, nom, _, lend, *_ in queues}
    cap = {}
    for n, nom, limit, *_ in queues:
        other = lends["b" if n == "a" else "a"]
        cap[n] = nom + (other if limit is None else min(limit, other))
    ev = result.events
    for time in sorted(set(ev.time)):
        for e in ev[ev.time == time].itertuples():
            q = queue_of[e.job_id]
            if e.kind in ("start", "resume"):
                held[e.job_id] = e.num_gpus
                use[q] += e.num_gpus
            elif e.kind in ("preempt", "finish", "fail", "kill") and e.job_id in held:
                use[q] -= held.pop(e.job_id)
        for n in use:
            assert use[n] <= cap[n], (time, n, use, cap)
        assert sum(use.values()) <= sum(nom for _, nom, *_ in queues)
