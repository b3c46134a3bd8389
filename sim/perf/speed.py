"""The speed of jobs that name a model: goodput where they run over their reference.

`ModelSpeed` heads the speed chain of a run with a performance model. For a job with a
model it is the whole placement speed: GPU type, count, nodes and (packed) partner come
from the table, so the built-in type, locality and elastic factors leave such a job
alone (`SkipModelJobs`), and co-location applies unless a packed pair was measured
(`ModelColocation`). Policies read the same answers through `ctx.perf` (`PerfView`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from schedlab.sim.jobstate import JobState
from schedlab.sim.model import JobSpec, Level
from schedlab.sim.perf.agent import FIRST_STEP, STEP, FittedAgent, StepTimes
from schedlab.sim.perf.base import Shape
from schedlab.sim.perf.run import JobModel, PerfSet


class ModelSpeed:
    """goodput(model, shape, batch size, progress) / the job's reference goodput."""

    name = "model"

    def __init__(self, perf: PerfSet, topo: Any, jobs: Sequence[JobState],
                 colocation: Any) -> None:
        self.perf = perf
        self._topo = topo
        self._co = colocation
        self._by_idx: dict[int, JobModel] = {
            j.idx: perf.jobs[j.spec.job_id] for j in jobs if j.spec.model}
        self._jobs = jobs
        self.batch: dict[int, int | None] = {}  # the batch size each job runs with now
        self._noted: dict[int, tuple[float, float, int | None, int]] = {}
        self._fitted = perf.agent == "fitted"
        self._agents: dict[tuple[int, str], FittedAgent | None] = {}
        # per (job, GPU type): (attempt, GPUs), work and batch of the agent's last step
        self._where: dict[tuple[int, str], tuple[Any, float, int]] = {}
        self._due: dict[int, float] = {}  # seconds of running to an agent's re-pick

    def agent(self, job: JobState, gpu_type: str) -> FittedAgent | None:
        """The job's agent on a GPU type under `perf_agent=fitted` (None: the oracle).

        One per GPU type: a fit describes the GPUs it was measured on. A backend
        without step times has no agent.
        """
        if not self._fitted:
            return None
        key = (job.idx, gpu_type)
        if key in self._agents:
            return self._agents[key]
        jm = self._by_idx.get(job.idx)
        got = None
        if jm is not None and isinstance(jm.backend, StepTimes):
            got = FittedAgent(jm.backend, jm.model, jm.adaptive, jm.batch_size)
        self._agents[key] = got
        return got

    def job_model(self, job: JobState | JobSpec) -> JobModel | None:
        """The job's model entry (None: it names no model)."""
        if isinstance(job, JobState):
            return self._by_idx.get(job.idx)
        return self.perf.jobs.get(job.job_id) if job.model else None

    def shapes(self, gpus: tuple[int, ...]) -> list[Shape]:
        """The placement's shape per GPU type it holds (one, unless types mix)."""
        topo = self._topo
        per: dict[int, int] = {}
        for g in gpus:
            n = topo.gpu_node[g]
            per[n] = per.get(n, 0) + 1
        counts = tuple(sorted(per.values(), reverse=True))
        level = topo.walk.lowest_common_level(gpus) if len(gpus) > 1 else Level.GPU
        types = sorted({topo.nodes[n].gpu_type for n in per})
        return [Shape(t, counts, level) for t in types]

    def factor(self, job: JobState | JobSpec, gpus: tuple[int, ...], run: Any = None
               ) -> float:
        """The job's goodput on `gpus` over its reference (1 for a job with no model)."""
        jm = self.job_model(job)
        if jm is None or not gpus:
            return 1.0
        b, model = jm.backend, jm.model
        if not isinstance(job, JobState):  # a what-if: alone, at its start
            return min(b.goodput(model, s, jm.batch_size, 0.0)
                       for s in self.shapes(gpus)) / jm.ref
        progress = self._progress(job, jm)
        best = math.inf
        bsz = jm.batch_size
        for shape in self.shapes(gpus):
            agent = self.agent(job, shape.gpu_type)
            if agent is None:
                bsz = jm.batch_for(shape, progress)
            else:
                bsz = self._agent_step(job, agent, shape, gpus, progress)
            pair = self._pair(job, jm, shape, bsz)
            g = pair if pair is not None else b.goodput(model, shape, bsz, progress)
            best = min(best, g)
        self.batch[job.idx] = bsz
        return best / jm.ref

    def _agent_step(self, job: JobState, agent: FittedAgent, shape: Shape,
                    gpus: tuple[int, ...], progress: float) -> int:
        """The agent's batch on its placement; when it learned, a re-pick is due.

        Asked again with no progress since (the same instant), it keeps its batch.
        """
        key = (job.idx, shape.gpu_type)
        where = (job.attempt_start, gpus)
        last = self._where.get(key)
        if last is not None and last[0] == where and last[1] == job.work:
            return last[2]
        current = last[2] if last is not None and last[0] == where else None
        fresh = current is None
        bsz, learned = agent.step(shape, progress, current)
        self._where[key] = (where, job.work, bsz)
        if learned:
            self._due[job.idx] = FIRST_STEP if fresh else STEP
        else:
            self._due.pop(job.idx, None)
        return bsz

    def _progress(self, job: JobState, jm: JobModel) -> float:
        """Work done in the backend's units, a boundary reached up to rounding passed.

        So the rate asked at a `horizon` is the next segment's.
        """
        progress = job.work * jm.ref
        tol = 1e-9 * max(1.0, job.spec.duration) * jm.ref
        h = jm.backend.horizon(jm.model, self.batch.get(job.idx, jm.batch_size), progress)
        return h + tol if math.isfinite(h) and h - progress <= tol else progress

    def _partner(self, job: JobState) -> JobState | None:
        """The other member of a packed pair (None: not packed, or not a pair)."""
        if job.group is None or self._co.mode(job) != "pack":
            return None
        others = [m for m in self._co.members(job) if m is not job]
        return others[0] if len(others) == 1 else None

    def _pair(self, job: JobState, jm: JobModel, shape: Shape, bsz: int | None
              ) -> float | None:
        other = self._partner(job)
        if other is None or not other.spec.model:
            return None
        return jm.backend.pair(jm.model, other.spec.model, shape, bsz)

    def paired(self, job: JobState) -> bool:
        """Whether the job's speed comes from a measured packed pair."""
        jm = self._by_idx.get(job.idx)
        if jm is None or not job.gpus:
            return False
        return any(self._pair(job, jm, s, self.batch.get(job.idx, jm.batch_size))
                   is not None for s in self.shapes(job.gpus))

    def horizon(self, job: JobState) -> float:
        """Work (ideal seconds) at which the job's goodput must be asked again (inf)."""
        jm = self._by_idx.get(job.idx)
        if jm is None:
            return math.inf
        bsz = self.batch.get(job.idx, jm.batch_size)
        # strictly ahead: a boundary reached up to rounding is passed (no zero-length step)
        h = jm.backend.horizon(jm.model, bsz, self._progress(job, jm))
        out = h / jm.ref if math.isfinite(h) else math.inf
        due = self._due.get(job.idx) if self._due else None
        if due is not None and job.rate > 0:  # an agent's re-pick after a step of running
            out = min(out, job.work + due * job.rate)
        return out

    def note(self, job: JobState) -> str | None:
        """The `rate` row's detail when the job's speed, batch or attempt is new, else None.

        `goodput` is in its model's work units a second, `rate` in ideal seconds a second.
        """
        jm = self._by_idx.get(job.idx)
        if jm is None or not job.gpus:
            return None
        bsz = self.batch.get(job.idx, jm.batch_size)
        key = (job.attempt_start, job.rate, bsz, len(job.gpus))
        if self._noted.get(job.idx) == key:
            return None
        self._noted[job.idx] = key
        b = "" if bsz is None else f";batch={bsz}"
        return f"rate={job.rate:.6g};goodput={job.rate * jm.ref:.6g}{b}"

    def restart_cost(self, spec: JobSpec) -> float | None:
        """The model's restart cost (None: the run's `restore_overhead`)."""
        jm = self.perf.jobs.get(spec.job_id) if spec.model else None
        return None if jm is None else jm.backend.restart_cost(jm.model)


class SkipModelJobs:
    """A built-in factor that leaves jobs with a model alone (their table says it all)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)

    def factor(self, job: JobState | JobSpec, gpus: tuple[int, ...], run: Any = None
               ) -> float:
        """1 for a job with a model, else the inner factor."""
        spec = job.spec if isinstance(job, JobState) else job
        return 1.0 if spec.model else float(self.inner.factor(job, gpus, run))


class ModelColocation:
    """Co-location, except for a packed pair whose throughput the table gives."""

    name = "colocation"

    def __init__(self, colocation: Any, model: ModelSpeed) -> None:
        self._co = colocation
        self._model = model

    def factor(self, job: JobState, gpus: tuple[int, ...], run: Any = None) -> float:
        """The group's factor (1 alone, 1 for a measured pair)."""
        if job.group is None:
            return 1.0
        if job.spec.model and self._model.paired(job):
            return 1.0
        return float(self._co.factor(job))


class PerfView:
    """What a policy asks of the run's performance models (`ctx.perf`)."""

    def __init__(self, speed: ModelSpeed, per_node: int) -> None:
        self._speed = speed
        self._per_node = per_node

    def knows(self, job: JobState | JobSpec) -> bool:
        """Whether the job names a model (its speed comes from the performance model)."""
        return self._speed.job_model(job) is not None

    def fitted(self, job: JobState, gpu_type: str | None = None) -> bool:
        """Whether `goodput` answers from the job's own fit (perf_agent=fitted, measured)."""
        jm = self._speed.job_model(job)
        if jm is None:
            return False
        agent = self._speed.agent(job, gpu_type or jm.ref_type)
        return agent is not None and agent.fitted

    def _shape(self, jm: JobModel, num_gpus: int, num_nodes: int | None,
               gpu_type: str | None) -> Shape:
        t = gpu_type or jm.ref_type
        if num_nodes is None:
            return Shape.packed(t, num_gpus, self._per_node)
        base, extra = divmod(num_gpus, max(1, num_nodes))
        per = tuple(sorted((base + (i < extra) for i in range(num_nodes)), reverse=True))
        level = Level.NODE if num_nodes <= 1 else Level.CLUSTER
        return Shape(t, per, level)

    def goodput(self, job: JobState, num_gpus: int, num_nodes: int | None = None,
                gpu_type: str | None = None) -> float:
        """Work units per second on `num_gpus` GPUs of `gpu_type`, over `num_nodes`.

        Defaults: the fewest nodes, the job's reference type. At the job's progress, with
        the batch size it would pick there; 0 when it cannot run so.
        """
        jm = self._speed.job_model(job)
        if jm is None or num_gpus <= 0:
            return 0.0
        shape = self._shape(jm, num_gpus, num_nodes, gpu_type)
        progress = job.work * jm.ref
        agent = self._speed.agent(job, shape.gpu_type)
        if agent is not None:  # perf_agent=fitted: what the job's fit says
            if agent.fitted:
                return agent.goodput(shape.num_nodes, num_gpus)
            # nothing measured yet on this type: linear from one GPU (Pollux's prior)
            one = self._shape(jm, 1, 1, shape.gpu_type)
            return num_gpus * jm.backend.goodput(jm.model, one, jm.batch_for(one, progress),
                                                 progress)
        return jm.backend.goodput(jm.model, shape, jm.batch_for(shape, progress), progress)

    def rate(self, job: JobState, num_gpus: int, num_nodes: int | None = None,
             gpu_type: str | None = None) -> float:
        """`goodput` over the job's reference: ideal seconds of work done per second."""
        jm = self._speed.job_model(job)
        return 0.0 if jm is None else self.goodput(job, num_gpus, num_nodes,
                                                   gpu_type) / jm.ref

    def speedup(self, job: JobState, num_gpus: int, num_nodes: int | None = None,
                gpu_type: str | None = None) -> float:
        """`goodput` on `num_gpus` over `goodput` on one GPU (Pollux's speedup)."""
        one = self.goodput(job, 1, 1, gpu_type)
        return self.goodput(job, num_gpus, num_nodes, gpu_type) / one if one > 0 else 0.0

    def throughput(self, job: JobState | JobSpec, gpu_type: str, num_gpus: int) -> float:
        """Units per second alone on `num_gpus` consolidated GPUs of `gpu_type`."""
        jm = self._speed.job_model(job)
        if jm is None:
            return 0.0
        return jm.backend.throughput(jm.model, Shape.packed(gpu_type, num_gpus,
                                                            self._per_node), jm.batch_size)

    def pair(self, job: JobState | JobSpec, partner: JobState | JobSpec, gpu_type: str
             ) -> float | None:
        """Units per second of `job` packed with `partner` on `gpu_type` (None: unmeasured)."""
        jm = self._speed.job_model(job)
        other = partner.spec if isinstance(partner, JobState) else partner
        if jm is None or not other.model:
            return None
        spec = job.spec if isinstance(job, JobState) else job
        shape = Shape.packed(gpu_type, max(1, spec.num_gpus), self._per_node)
        return jm.backend.pair(jm.model, other.model, shape, jm.batch_size)

    def reference(self, job: JobState | JobSpec) -> float:
        """The job's reference goodput (units per second at rate 1; 0 without a model)."""
        jm = self._speed.job_model(job)
        return 0.0 if jm is None else jm.ref

    def job_model(self, job: JobState | JobSpec) -> JobModel | None:
        """The job's entry (backend, model, batch size, reference; None: no model)."""
        return self._speed.job_model(job)

    def restart_cost(self, job: JobState | JobSpec) -> float | None:
        """Seconds of no progress at each (re)start of the job (None: the run's)."""
        jm = self._speed.job_model(job)
        return None if jm is None else jm.backend.restart_cost(jm.model)

    def max_gpus(self, job: JobState | JobSpec) -> int | None:
        """Most GPUs the job's model can use at its batch size (None: no such limit)."""
        jm = self._speed.job_model(job)
        if jm is None:
            return None
        return jm.backend.max_gpus(jm.model, jm.batch_size, jm.adaptive)

    def batch_size(self, job: JobState) -> int | None:
        """The batch size the job runs with now (its initial one when it is not running)."""
        jm = self._speed.job_model(job)
        if jm is None:
            return None
        return self._speed.batch.get(job.idx, jm.batch_size)
