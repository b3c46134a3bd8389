"""What a policy sees of a run (`SchedContext`): time, queue, jobs, cluster, placement.

Policies read through it and never write the run's state; they change the world only by
yielding decisions, which the engine validates and applies.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from sim.cluster import MILLI, ClusterState
from sim.errors import InvalidParameter
from sim.jobstate import RUNNING, JobState
from sim.model import JobSpec, Placement, resized
from topologies.tree import Topology


def live_keys(keys: SortedList) -> Iterator[Any]:
    """The keys of a sorted list in order, while it may change under the iteration.

    Each step resumes after the last key yielded, so keys added or removed meanwhile
    (a job started, requeued, dropped) are seen or skipped as their place says.
    """
    key = None
    while True:
        i = 0 if key is None else keys.bisect_right(key)
        if i >= len(keys):
            return
        key = keys[i]
        yield key


class SchedContext:
    """What a policy sees of a run: time, queue, running jobs, cluster, placement."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self.topology: Topology = run.topo
        self.cluster: ClusterState = run.cluster
        self.rng: np.random.Generator = run.policy_rng
        self.params: Mapping[str, Any] = run.engine_params

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        return self._run.env.now

    @property
    def num_jobs(self) -> int:
        """Jobs in the run's trace; `job_at` takes indices 0 .. num_jobs - 1."""
        return len(self._run.jobs)

    @property
    def pending_count(self) -> int:
        """Jobs waiting in the queue."""
        return len(self._run.pending)

    def pending(self) -> Iterator[JobState]:
        """Pending jobs in arrival order (submit time, then trace order).

        Iterates a sorted index; decisions applied while iterating are safe because the
        iteration works on the keys present when each step is taken.
        """
        jobs = self._run.jobs
        for key in live_keys(self._run.pending):
            yield jobs[key[1]]

    def pending_classes(self) -> dict[tuple, SortedList]:
        """Pending jobs grouped by identical resource request, each in arrival order.

        Two jobs of one class fit or fail to fit in exactly the same cluster state, so a
        backfilling policy tries only the head of each class.
        """
        return self._run.classes

    def running(self) -> Mapping[int, JobState]:
        """Running jobs by index."""
        return self._run.running

    def job_at(self, idx: int) -> JobState:
        """A job's state by its index (the second element of queue keys)."""
        return self._run.jobs[idx]

    def job(self, job_id: str) -> JobState:
        """A job's state by its trace id."""
        return self._run.jobs[self._run.index[job_id]]

    def place(self, job: JobState | JobSpec, num_gpus: int | None = None) -> Placement:
        """Ask the run's placer for GPUs for `job` in the current state.

        `num_gpus` asks for another size (an elastic job within min_gpus..max_gpus).
        """
        spec = job.spec if isinstance(job, JobState) else job
        if num_gpus is not None and num_gpus != spec.num_gpus:
            spec = resized(spec, num_gpus)
        return self._run.placer.place(spec, self._run.cluster)

    def place_if_freed(self, job: JobState | JobSpec, victims: list[JobState],
                       num_gpus: int | None = None) -> Placement:
        """Where `job` would go if the running `victims` released their GPUs (what-if).

        The cluster state is restored before returning; nothing is preempted.
        """
        run = self._run
        spec = job.spec if isinstance(job, JobState) else job
        if num_gpus is not None and num_gpus != spec.num_gpus:
            spec = resized(spec, num_gpus)
        cluster = run.cluster
        freed = [v for v in victims if v.status == RUNNING]
        for v in freed:
            cluster.release(v.idx, v.gpus, v.milli, *v.host)
        try:
            return run.placer.place(spec, cluster)
        finally:
            for v in reversed(freed):
                cluster.allocate(v.idx, v.gpus, v.milli, *v.host)

    def placement_speed(self, job: JobState | JobSpec, gpus: tuple[int, ...]) -> float:
        """Relative speed the job would run at on `gpus` alone (type speed x locality).

        What the engine's rate would be without sharing or elastic resizing, so a policy
        can compare candidate placements as a throughput profiler would.
        """
        spec = job.spec if isinstance(job, JobState) else job
        return self._run.placement_speed(spec, tuple(gpus))

    def run_time(self, job: JobState) -> float:
        """Seconds the job has held GPUs so far (all attempts), up to now."""
        extra = self.now - job.held_since if job.status == RUNNING else 0.0
        return job.run_time + extra

    def attained_service(self, job: JobState) -> float:
        """GPU-seconds received so far (Tiresias' attained service)."""
        extra = 0.0
        if job.status == RUNNING:
            extra = (self.now - job.held_since) * len(job.gpus) * job.milli / MILLI
        return job.gpu_seconds + extra

    def configure_sharing(self, *, time_slice: float | None = None,
                          switch_cost: float | None = None,
                          pack_penalty: float | None = None) -> None:
        """Set the co-location model (time-slice length and switch cost, pack penalty)."""
        sh = self._run.sharing
        for key, v in (("time_slice", time_slice), ("switch_cost", switch_cost),
                       ("pack_penalty", pack_penalty)):
            if v is not None:
                sh[key] = float(v)
        if sh["time_slice"] <= 0 or sh["switch_cost"] < 0 or not 0 <= sh["pack_penalty"] < 1:
            raise InvalidParameter(f"sharing model out of range: {sh}")

    def group_of(self, job: JobState) -> list[JobState]:
        """The jobs sharing `job`'s GPUs (itself included); [job] when not shared."""
        if job.group is None:
            return [job]
        return list(self._run.groups[job.group].members)

    def share_mode(self, job: JobState) -> str:
        """'timeshare', 'pack' or '' for a job running alone."""
        return "" if job.group is None else self._run.groups[job.group].mode

    def wake_at(self, t: float) -> None:
        """Ask for a scheduling pass at time `t` (in the future)."""
        self._run.wake(max(t, self.now))

    def progress(self, job: JobState) -> float:
        """Work done by the job so far (ideal seconds)."""
        return job.progress_at(self.now)
