"""The progress watch: every version bump of a job reaches every watch, bounded (issue 18).

Policies that keep running jobs' progress fields (srtf's columns, themis-ftf's arrays)
re-read only the jobs a watch names instead of every running job's version each pass.
"""

from __future__ import annotations

from schedlab.policies.fifo import FifoPolicy
from schedlab.sim.agenda import WATCH_ALL, WATCH_MAX, Agenda, drain_watch
from schedlab.sim.engine import Simulation
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace


def test_every_bump_reaches_every_watch():
    jobs = [JobState(i, JobSpec(f"j{i}", 0.0, 1, 10.0)) for i in range(3)]
    agenda = Agenda(jobs)
    agenda.bump(jobs[0])  # before any watch: nobody hears of it
    a, b = agenda.watch(), agenda.watch()
    agenda.bump(jobs[2])
    agenda.bump(jobs[1])
    agenda.bump(jobs[2])
    assert a == b == {1, 2}
    a.clear()
    agenda.bump(jobs[0])
    assert a == {0} and b == {0, 1, 2}
    assert [j.version for j in jobs] == [2, 1, 2]


def test_an_unread_watch_overflows_to_watch_all():
    jobs = [JobState(i, JobSpec(f"j{i}", 0.0, 1, 10.0)) for i in range(WATCH_MAX + 5)]
    agenda = Agenda(jobs)
    w = agenda.watch()
    for j in jobs:
        agenda.bump(j)
    assert w == {WATCH_ALL}  # any job may have moved: read them all
    w.clear()
    agenda.bump(jobs[7])
    assert w == {7}


def test_the_context_watch_sees_the_runs_bumps():
    """Starts and finishes of a run reach a watch taken from the context."""
    seen: set[int] = set()

    class Watching(FifoPolicy):
        name = "watching-fifo"

        def attach(self, ctx):
            super().attach(ctx)
            self.watch = ctx.watch_progress()

        def schedule(self, ctx):
            seen.update(self.watch)
            self.watch.clear()
            yield from super().schedule(ctx)

    jobs = tuple(JobSpec(f"j{i}", float(i), 1, 5.0) for i in range(6))
    Simulation(Trace("w", jobs), uniform_topology(1, sockets=1, switches_per_socket=1,
                                                  gpus_per_switch=2), Watching()).run()
    assert seen >= set(range(5))  # every job but the last was bumped before a later pass


def test_draining_a_watch_names_its_jobs_or_asks_for_all():
    watch = {3, 1}
    assert sorted(drain_watch(watch, kept=5)) == [1, 3] and watch == set()
    assert drain_watch(watch, kept=5) == []  # nothing moved since: nothing to re-read
    assert drain_watch(None, kept=5) is None  # no watch: read every kept job
    watch = {WATCH_ALL}
    assert drain_watch(watch, kept=5) is None and watch == set()  # overflowed
    watch = {1, 2, 3}
    assert drain_watch(watch, kept=2) is None and watch == set()  # more than are kept
