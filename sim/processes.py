"""A user's SimPy processes beside the policy, and the handle they act on the run through.

A process is a function `fn(env, run)` returning a SimPy generator; it is given to
`Simulation(..., processes=[fn, ...])` and runs on the run's SimPy environment (`env`:
`env.timeout(...)`, `env.now`) next to the engine, in a batch run and a stepped one alike.
`run` is a `RunHandle`: read the clock and the queue, drain and restore nodes, take them
down and up, change their speed. Each action holds a scheduling pass at that instant.
See docs/processes.md.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from schedlab.sim.agenda import Agenda, Due
from schedlab.sim.cluster import ClusterState
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Level
from schedlab.sim.progress import Progress
from schedlab.sim.queue import PendingQueue
from schedlab.sim.recorder import Recorder
from schedlab.sim.speed import NodeSpeed

if TYPE_CHECKING:
    import simpy

    from schedlab.topologies.tree import Topology

__all__ = ["Process", "ProcessHost", "RunHandle"]

Process = Callable[["simpy.Environment", "RunHandle"], Generator[Any, Any, Any]]
"""A user's process: given the environment and the run's handle, a SimPy generator."""


class ProcessHost(Protocol):
    """What the handle needs of the run (the engine's `Run` is one)."""

    topo: Topology
    cluster: ClusterState
    queue: PendingQueue
    running: dict[int, JobState]
    jobs: list[JobState]
    agenda: Agenda
    progress: Progress
    recorder: Recorder

    @property
    def now(self) -> float:
        """Simulated time (s)."""
        ...

    def wake(self) -> None:
        """Set the clock to now and hold a scheduling pass now (waking the loop)."""
        ...


class RunHandle:
    """A user's process's view of the run, and the few changes it may make.

    Nodes are named by a node's name or index, or by the name of any cell at or above
    node level (a rack, a switch, the cluster): then every node under it.
    """

    __slots__ = ("_node_speed", "_run")

    def __init__(self, run: ProcessHost) -> None:
        self._run = run
        self._node_speed: NodeSpeed | None = None

    # --- reading ---

    @property
    def now(self) -> float:
        """Simulated time (s)."""
        return self._run.now

    def pending(self) -> list[str]:
        """Ids of the jobs waiting in the queue, in the queue's order."""
        jobs = self._run.jobs
        return [jobs[i].job_id for i in self._run.queue.iter_jobs()]

    def running(self) -> list[str]:
        """Ids of the running jobs, in the order they started."""
        return [j.job_id for j in self._run.running.values()]

    def nodes(self, where: str | int) -> list[str]:
        """Names of the nodes `where` names (a node, or a cell above nodes)."""
        topo = self._run.topo
        return [topo.nodes[n].name for n in self._resolve(where)]

    def drained(self) -> list[str]:
        """Names of the nodes drained now."""
        c = self._run.cluster
        return [self._run.topo.nodes[n].name for n, d in enumerate(c.drained) if d]

    def up(self, node: str | int) -> bool:
        """Whether a node is up (not failed or taken down)."""
        (n,) = self._resolve(node, single=True)
        return bool(self._run.cluster.node_up[n])

    # --- acting (each holds a scheduling pass now) ---

    def drain(self, where: str | int) -> None:
        """No new placement on these nodes; their running jobs run on until they end.

        Whatever the nodes have free, and whatever their jobs give back when they end
        (or are preempted), is held by the drain until `restore`: to the policy and the
        placer a drained node looks full. Already drained nodes are left as they are.
        """
        run = self._run
        run.wake()  # first: the run's clock is now, for what follows
        for n in self._resolve(where):
            if not run.cluster.drained[n]:
                run.cluster.drain_node(n)
                run.recorder.node(run.topo.nodes[n].name, "drain")

    def restore(self, where: str | int) -> None:
        """End the drain of these nodes: what the drain held is free again, now."""
        run = self._run
        run.wake()  # first: the run's clock is now, for what follows
        for n in self._resolve(where):
            if run.cluster.drained[n]:
                run.cluster.undrain_node(n)
                run.recorder.node(run.topo.nodes[n].name, "restore")

    def take_down(self, where: str | int) -> None:
        """Fail these nodes now, as a node failure does: their jobs are interrupted.

        Each job on them loses its work since its last checkpoint and is retried after
        `retry_delay` without using up its `max_retries`; the nodes stay down until
        `bring_up`. A node already down is left as it is.
        """
        run = self._run
        run.wake()  # first: the run's clock is now, for what follows
        for n in self._resolve(where):
            run.agenda.schedule(run.now, Due.NODE_FAIL, n, 0)

    def bring_up(self, where: str | int) -> None:
        """Repair these nodes now (a drained node comes back still drained)."""
        run = self._run
        run.wake()  # first: the run's clock is now, for what follows
        for n in self._resolve(where):
            run.agenda.schedule(run.now, Due.NODE_REPAIR, n, 0)

    def set_speed(self, where: str | int, factor: float) -> None:
        """Multiply the speed of jobs on these nodes by `factor` (> 0; 1 restores it).

        A job spread over several nodes runs at the pace of its slowest one. Jobs
        running there now change pace now (their completions move); CPU-only jobs are
        not affected.
        """
        if not factor > 0:
            raise ValueError(f"speed factor {factor!r}: expected a number > 0")
        run = self._run
        run.wake()
        nodes = set(self._resolve(where))
        ns = self._node_speed
        if ns is None:
            ns = self._node_speed = NodeSpeed(run.topo)
            run.progress.chain.add(ns)
        for n in nodes:
            ns.speed[n] = float(factor)
        gpu_node = run.topo.gpu_node
        for job in list(run.running.values()):
            if any(gpu_node[g] in nodes for g in job.gpus):
                run.progress.advance(job)
                run.progress.set_rate(job)

    # --- names ---

    def _resolve(self, where: str | int, single: bool = False) -> Sequence[int]:
        topo = self._run.topo
        if isinstance(where, int):
            if not 0 <= where < len(topo.nodes):
                raise ValueError(f"node {where}: no such node (0..{len(topo.nodes) - 1})")
            return (where,)
        for node in topo.nodes:
            if node.name == where:
                return (node.index,)
        if not single:
            for cell in topo.cells:
                if cell.name == where and cell.level >= Level.NODE:
                    return sorted({topo.gpu_node[g] for g in range(cell.gpu_lo, cell.gpu_hi)})
        raise ValueError(f"{where!r}: no node{'' if single else ' or group'} of that name "
                         f"in topology {topo.name!r}")
