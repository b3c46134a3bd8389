"""Conservative backfilling's kept release steps equal the profile rebuilt from every job."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.policies.backfill import ConservativeBackfillPolicy, EndIndex, _Profile
from schedlab.policies.victims import free_milli
from schedlab.sim.context import SchedContext
from schedlab.sim.engine import Simulation
from schedlab.sim.model import Decision
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace

TIMES = st.sampled_from([0.0, 5.0, 10.0, 10.0, 12.5, 40.0])  # repeats: shared ends
OPS = st.lists(st.tuples(TIMES, st.sampled_from([250, 1000, 2000, 8000])), max_size=30)


@settings(max_examples=200, deadline=None)
@given(OPS, st.lists(st.integers(0, 29), max_size=10), st.sampled_from([0.0, 7.0, 10.0, 50.0]),
       st.integers(0, 4000))
def test_steps_equal_the_profile_of_the_releases(adds, drops, now, free):
    index = EndIndex()
    for t, m in adds:
        index._release(t, m, 1)
    kept = list(adds)
    for i in sorted(set(drops), reverse=True):
        if i < len(kept):
            t, m = kept.pop(i)
            index._release(t, -m, -1)
    steps = index.steps(now, free)
    assert steps is not None
    prof = _Profile(now, free, [(t if t > now else now, m) for t, m in kept])
    assert steps == (prof.times, prof.free)
    assert index._at == sorted({t for t, _ in kept})


class _Checked(ConservativeBackfillPolicy):
    """Conservative backfilling that checks its kept steps against a rebuild each pass."""

    name = "conservative-backfill-checked"
    checked = 0

    def schedule(self, ctx: SchedContext) -> Iterator[Decision]:
        self.running.sync(ctx, self.estimate)
        steps = self.running.steps(ctx.now, free_milli(ctx))
        if steps is not None:
            prof = _Profile(ctx.now, free_milli(ctx), [
                (t, len(r.gpus) * r.milli) for t, r in self.running.ends(ctx)])
            assert steps == (prof.times, prof.free)
            type(self).checked += 1
        yield from super().schedule(ctx)


def test_steps_equal_the_rebuilt_profile_through_a_contended_run():
    topo = uniform_topology(4)
    trace = load_trace("philly-like:600", topology=topo, load=1.5)
    _Checked.checked = 0
    checked = Simulation(trace, topo, _Checked(max_reservations=5)).run()
    plain = Simulation(trace, topo, ConservativeBackfillPolicy(max_reservations=5)).run()
    assert _Checked.checked > 100
    cols = ["time", "job_id", "kind"]
    assert checked.events[cols].equals(plain.events[cols])
