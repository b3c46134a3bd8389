"""The narrow faces of a run that the engine's helpers take, instead of the whole run.

Each helper names only what it uses: `SimInputs` (what a run takes from its
`Simulation`), and the faces of the settling step, the container jobs and the result
build. The engine's `Run` has all of them; taking these Protocols, no helper imports the
engine, so the modules of `schedlab.sim` import each other without a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from schedlab.sim.jobstate import JobState
from schedlab.sim.model import EventKind, JobSpec, JobStatus

if TYPE_CHECKING:
    from schedlab.sim.agenda import Agenda
    from schedlab.sim.cluster import ClusterState
    from schedlab.sim.colocation import Colocation
    from schedlab.sim.nodes import NodeHealth
    from schedlab.sim.progress import Progress
    from schedlab.sim.queue import PendingQueue
    from schedlab.sim.recorder import Recorder
    from schedlab.topologies.tree import Topology
    from schedlab.traces.base import Trace

__all__ = ["ContainerHost", "ResultRun", "SettleRun", "SimInputs"]


class SimInputs(Protocol):
    """What a run takes from its `Simulation` (read only)."""

    @property
    def trace(self) -> Trace:
        """The trace."""
        ...
    @property
    def topology(self) -> Topology:
        """The topology."""
        ...
    @property
    def policy(self) -> Any:
        """The policy."""
        ...
    @property
    def seed(self) -> int:
        """The seed."""
        ...
    @property
    def jobs(self) -> tuple[JobSpec, ...]:
        """The jobs."""
        ...
    @property
    def engine_params(self) -> Mapping[str, Any]:
        """The resolved engine parameters."""
        ...
    @property
    def perf(self) -> Any:
        """The run's performance models (`schedlab.sim.perf.run.PerfSet`; None: unused)."""
        ...
    @property
    def params_given(self) -> Mapping[str, Any]:
        """The parameters as given."""
        ...
    @property
    def placer_name(self) -> str:
        """The placer's name."""
        ...


class _Lifecycle(Protocol):
    """Moving a job along its states (`schedlab.sim.lifecycle.RunState`)."""

    events_processed: int

    @property
    def sim(self) -> SimInputs:
        """What the run was given."""
        ...
    @property
    def jobs(self) -> list[JobState]:
        """The jobs."""
        ...

    def dequeue(self, job: JobState) -> None:
        """Take a job out of the queue now."""
        ...

    def enqueue(self, job: JobState) -> None:
        """Queue a job now."""
        ...

    def finalize(self, job: JobState, status: JobStatus, kind: EventKind | None,
                 detail: str = "") -> None:
        """End a job for good."""
        ...


class SettleRun(_Lifecycle, Protocol):
    """What the end of a stuck run reads and does (`schedlab.sim.settle`)."""

    @property
    def ctx(self) -> Any:
        """The policy's context."""
        ...
    @property
    def cluster(self) -> ClusterState:
        """The cluster state."""
        ...
    @property
    def queue(self) -> PendingQueue:
        """The pending queue."""
        ...


class ContainerHost(_Lifecycle, Protocol):
    """What container jobs' task runs need of the run (`schedlab.sim.containers`)."""

    in_pass: bool

    @property
    def now(self) -> float:
        """Simulated time (s)."""
        ...
    @property
    def topo(self) -> Topology:
        """The topology."""
        ...
    @property
    def ctx(self) -> Any:
        """The policy's context."""
        ...
    @property
    def by_id(self) -> dict[str, JobState]:
        """The jobs by id."""
        ...
    @property
    def agenda(self) -> Agenda:
        """The agenda of future events."""
        ...
    @property
    def progress(self) -> Progress:
        """Job progress."""
        ...
    @property
    def colocation(self) -> Colocation:
        """Co-location groups."""
        ...
    @property
    def recorder(self) -> Recorder:
        """The recorder."""
        ...
    @property
    def engine_params(self) -> Mapping[str, Any]:
        """The resolved engine parameters."""
        ...
    @property
    def notify(self) -> Any:
        """The policy's notify, or None."""
        ...

    def record(self, job: JobState, kind: EventKind, detail: str = "") -> None:
        """Record one event of a job (and tell the policy)."""
        ...

    def release(self, job: JobState) -> None:
        """A running job gives back what it holds."""
        ...

    def schedule_failure(self, job: JobState) -> None:
        """Put the attempt's failure on the agenda, if it fails."""
        ...


class ResultRun(Protocol):
    """What the result build reads of an ended run (`schedlab.sim.results`)."""

    @property
    def sim(self) -> SimInputs:
        """What the run was given."""
        ...
    @property
    def topo(self) -> Topology:
        """The topology."""
        ...
    @property
    def jobs(self) -> list[JobState]:
        """The jobs."""
        ...
    @property
    def num_trace(self) -> int:
        """The trace's own jobs (task runs follow)."""
        ...
    @property
    def until(self) -> float | None:
        """Where the run stops (None: at the end)."""
        ...
    @property
    def events_processed(self) -> int:
        """Engine events so far."""
        ...
    @property
    def recorder(self) -> Recorder:
        """The recorder."""
        ...
    @property
    def health(self) -> NodeHealth:
        """Node failures."""
        ...
    @property
    def containers(self) -> Any:
        """Container jobs (None: none)."""
        ...

    def sample(self) -> None:
        """Add a timeline row if the cluster or the queue changed."""
        ...
