"""Co-location groups: jobs on the same GPUs, taking turns (timeshare) or together (pack).

Time-slicing is modelled analytically (no event per slice): N members each progress at
(1 - switch_cost / time_slice) / N. Packed members run concurrently at
min(1, 1 / sum of gpu_util) less `pack_penalty`. A group's GPUs are split among its
members in milli-GPUs so the cluster state accounts every share.
"""

from __future__ import annotations

from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from schedlab.sim.cluster import ClusterState
from schedlab.sim.errors import InvalidDecision, InvalidParameter
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import MILLI
from schedlab.sim.progress import Progress

GroupKey = tuple[int, ...]
MODES = ("timeshare", "pack")


@mypyc_attr(allow_interpreted_subclasses=True)
class Group:
    """Jobs co-located on the same GPUs."""

    __slots__ = ("gpus", "mode", "members")

    def __init__(self, gpus: GroupKey, mode: str, members: list[JobState]) -> None:
        self.gpus = gpus
        self.mode = mode
        self.members = members


@mypyc_attr(allow_interpreted_subclasses=True)
class Colocation:
    """The run's co-location groups and the sharing model."""

    def __init__(self, cluster: ClusterState, jobs: Sequence[JobState]) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.groups: dict[GroupKey, Group] = {}
        self.sharing = {"time_slice": 60.0, "switch_cost": 0.5, "pack_penalty": 0.1}
        self.progress: Progress | None = None  # set by the engine once built

    def configure(self, time_slice: float | None, switch_cost: float | None,
                  pack_penalty: float | None) -> None:
        """Set the sharing model (time-slice length, switch cost, pack penalty)."""
        sh = self.sharing
        for key, v in (("time_slice", time_slice), ("switch_cost", switch_cost),
                       ("pack_penalty", pack_penalty)):
            if v is not None:
                sh[key] = float(v)
        if sh["time_slice"] <= 0 or sh["switch_cost"] < 0 or not 0 <= sh["pack_penalty"] < 1:
            raise InvalidParameter(f"sharing model out of range: {sh}")

    def factor(self, job: JobState) -> float:
        """Speed factor of a member of a group (1 alone)."""
        assert job.group is not None
        g = self.groups[job.group]
        n = len(g.members)
        if n <= 1:
            return 1.0
        sh = self.sharing
        if g.mode == "timeshare":
            # N jobs take turns in slices of T s, each switch costs c s of no progress
            return max(0.0, 1.0 - sh["switch_cost"] / sh["time_slice"]) / n
        load = sum(m.spec.gpu_util for m in g.members)
        return min(1.0, 1.0 / load) * (1.0 - sh["pack_penalty"]) if load > 0 else 1.0

    def members(self, job: JobState) -> list[JobState]:
        """The jobs sharing `job`'s GPUs (itself included)."""
        return [job] if job.group is None else list(self.groups[job.group].members)

    def mode(self, job: JobState) -> str:
        """'timeshare', 'pack' or '' for a job running alone."""
        return "" if job.group is None else self.groups[job.group].mode

    def join(self, job: JobState, gpus: tuple[int, ...], mode: str) -> None:
        """Validate a co-located start and add the job to the group of `gpus`."""
        if mode not in MODES:
            raise InvalidDecision(
                f"Start {job.job_id!r}: share {mode!r} unknown; allowed: timeshare, pack")
        key = tuple(sorted(gpus))
        g = self.groups.get(key) or self._found(job, key, mode)
        if g.mode != mode:
            raise InvalidDecision(
                f"Start {job.job_id!r} with share={mode}: the GPUs are shared by {g.mode}")
        if mode == "pack":
            topo = self.cluster.topo
            node = topo.nodes[topo.gpu_node[key[0]]]
            mem = sum(m.spec.gpu_mem_gb for m in g.members) + job.spec.gpu_mem_gb
            if node.gpu_mem_gb > 0 and mem > node.gpu_mem_gb + 1e-9:
                raise InvalidDecision(
                    f"Start {job.job_id!r} packed on {node.name}: GPU memory {mem:g} GB of the "
                    f"pack exceeds the {node.gpu_mem_gb:g} GB per GPU")
        g.members.append(job)
        job.group = key
        self.rebalance(key, newcomer=job)

    def _found(self, job: JobState, key: GroupKey, mode: str) -> Group:
        """A new group around the one running job that holds exactly these GPUs, whole."""
        holders = {h for gpu in key for h in self.cluster.gpu_holders[gpu]}
        owner = self.jobs[next(iter(holders))] if len(holders) == 1 else None
        if owner is None or tuple(sorted(owner.gpus)) != key or owner.milli != MILLI:
            raise InvalidDecision(
                f"Start {job.job_id!r} with share={mode}: GPUs {key} must be held, whole, "
                f"by one running job or one group (holders: {sorted(holders)})")
        g = self.groups[key] = Group(key, mode, [owner])
        owner.group = key
        return g

    def remove(self, job: JobState) -> None:
        """Take a job out of its group (its GPUs already released); rebalance the rest."""
        key = job.group
        assert key is not None
        job.group = None
        g = self.groups[key]
        g.members.remove(job)
        if g.members:
            self.rebalance(key)
        else:
            del self.groups[key]

    def rebalance(self, key: GroupKey, newcomer: JobState | None = None) -> None:
        """Split a group's GPUs among its members and reset their rates (work kept)."""
        prog = self.progress
        assert prog is not None
        g = self.groups[key]
        old = [m for m in g.members if m is not newcomer]
        for m in old:
            prog.advance(m)
            prog.account(m)
            self.cluster.release(m.idx, m.gpus, m.milli)
        n = len(g.members)
        for i, m in enumerate(g.members):
            m.milli = MILLI // n + (MILLI % n if i == 0 else 0)
            self.cluster.allocate(m.idx, m.gpus, m.milli)
        for m in old:
            if n == 1:
                m.group = None
            prog.set_rate(m)
        if n == 1:
            del self.groups[key]
