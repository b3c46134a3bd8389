"""Node failures and repairs: from a schedule file or drawn per node (mtbf/mttr, seeded).

A failing node's jobs lose the work since their checkpoint and are retried without using
up their `max_retries` (the job did nothing wrong); its GPUs leave the healthy pool until
the repair. A drained node that fails and is repaired comes back drained. Random
failures of a node are drawn one after the other from its repairs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from schedlab.sim.agenda import Agenda, Due
from schedlab.sim.cluster import ClusterState
from schedlab.sim.failures import read_failures
from schedlab.sim.jobstate import RUNNING, JobState
from schedlab.sim.recorder import Recorder


class NodeHealth:
    """The run's node failures: what is down since when, and what it cost."""

    def __init__(self, cluster: ClusterState, agenda: Agenda, recorder: Recorder,
                 params: Mapping[str, Any], rng: np.random.Generator,
                 clock: Callable[[], float]) -> None:
        self.cluster = cluster
        self.agenda = agenda
        self.recorder = recorder
        self.params = params
        self.rng = rng
        self._clock = clock
        self.failures = 0
        self.lost_gpu_s = 0.0
        self.down_since: dict[int, float] = {}

    def schedule(self) -> None:
        """Put the explicit failure schedule, or each node's first random failure, on the agenda."""
        topo = self.cluster.topo
        path = self.params["failures"]
        if path:
            for node, fail, repair in read_failures(path, topo):
                self.agenda.schedule(fail, Due.NODE_FAIL, node, 0)
                self.agenda.schedule(repair, Due.NODE_REPAIR, node, 0)
        elif self.params["mtbf"]:
            mtbf = self.params["mtbf"]
            for n in range(len(topo.nodes)):
                self.agenda.schedule(float(self.rng.exponential(mtbf)), Due.NODE_FAIL, n, 1)

    def fail(self, node: int, generated: int, jobs: Sequence[JobState],
             interrupt: Callable[[JobState, str], float]) -> None:
        """The node fails: interrupt its jobs (`interrupt` returns lost GPU-s), then down it."""
        now = self._clock()
        if self.cluster.node_up[node]:
            name = self.cluster.topo.nodes[node].name
            for idx in self.cluster.jobs_on_node(node):
                if jobs[idx].status != RUNNING:
                    continue  # ended by an earlier interrupt (a container job's sibling run)
                self.lost_gpu_s += interrupt(jobs[idx], f"node {name} failed")
            if self.cluster.drained[node]:  # the drain's share goes down with the rest
                self.cluster.give_back_drain(node)
            self.cluster.fail_node(node)
            self.failures += 1
            self.down_since[node] = now
            self.recorder.node(name, "fail")
        if generated:
            t = now + float(self.rng.exponential(self.params["mttr"]))
            self.agenda.schedule(t, Due.NODE_REPAIR, node, 1)

    def repair(self, node: int, generated: int) -> None:
        """The node is back: its GPUs return to the healthy pool."""
        now = self._clock()
        if not self.cluster.node_up[node]:
            self.cluster.repair_node(node)
            if self.cluster.drained[node]:  # back, but still drained
                self.cluster.absorb_drain(node)
            self.down_since.pop(node, None)
            self.recorder.node(self.cluster.topo.nodes[node].name, "repair")
        if generated:
            t = now + float(self.rng.exponential(self.params["mtbf"]))
            self.agenda.schedule(t, Due.NODE_FAIL, node, 1)
