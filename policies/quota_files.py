"""Shared pieces of the quota policies (`hai`, `quota-priority`): quota files and live jobs.

* HAI priority levels and the `hai` quota file of docs/contract.md#sec-7 (user -> nodes per level);
* the `quota-priority` quota file (vc -> GPUs);
* `LiveJobs`: what the engine changed since a policy's last pass (arrivals, ends, retries),
  inferred without scanning the queue, since the engine reports nothing to policies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from mypy_extensions import mypyc_attr

from schedlab.policies.base import Ctx
from schedlab.sim.cfuncs import heappop, heappush
from schedlab.sim.errors import InvalidParameter, did_you_mean
from schedlab.sim.jobstate import FINAL, HELD, PENDING, RETRYING, RUNNING, WAITING, JobState
from schedlab.sim.model import PRIORITY_NAMES
from schedlab.topologies.native import load_yaml

# --- HAI priority levels (conf/server_flags TASK_PRIORITY of hai-platform) ---

HAI_LEVELS: Final[Mapping[str, int]] = MappingProxyType(
    {k: v for k, v in PRIORITY_NAMES.items() if k != "AUTO"})
"""Level name -> value, highest first (the order AUTO tries them in)."""

AUTO: Final = PRIORITY_NAMES["AUTO"]
"""The AUTO pseudo-level: the highest level at which the user still has quota room."""

LEVEL_NAME: Mapping[int, str] = MappingProxyType(
    {v: k for k, v in HAI_LEVELS.items()} | {AUTO: "AUTO"})
"""Level value -> name (AUTO included)."""

_DESCENDING = tuple(HAI_LEVELS.values())


def hai_level(value: int | str) -> int:
    """The HAI level of a trace priority: a level name, AUTO, or a number.

    Numbers that are not a level value fall to the highest level below them (7 -> BELOW_NORMAL,
    100 -> EXTREME_HIGH); -1 is AUTO and any other negative number is LOW.
    """
    if isinstance(value, str):
        t = value.strip().upper()
        if t == "AUTO":
            return AUTO
        if t in HAI_LEVELS:
            return HAI_LEVELS[t]
        try:
            value = int(t)
        except ValueError:
            names = ", ".join([*HAI_LEVELS, "AUTO"])
            raise ValueError(f"unknown priority {value!r}{did_you_mean(t, HAI_LEVELS)}; "
                             f"known: {names} or an integer") from None
    v = int(value)
    if v == AUTO:
        return AUTO
    for lv in _DESCENDING:
        if v >= lv:
            return lv
    return HAI_LEVELS["LOW"]


@dataclass(frozen=True)
class HaiQuotas:
    """Per-user node quotas per HAI level; `default` applies to users not listed."""

    default: Mapping[int, int] | None
    users: Mapping[str, Mapping[int, int]]
    source: str = ""

    def of(self, user: str) -> Mapping[int, int]:
        """Nodes per level for `user` (levels not listed: 0; unlisted user, no default: 0)."""
        got = self.users.get(user)
        if got is not None:
            return got
        return self.default if self.default is not None else MappingProxyType({})


def _count(path: str | Path, where: str, value: Any, unit: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 \
            or value != math.floor(value):
        raise InvalidParameter(
            f"quota file {path}: {where}: expected a whole number of {unit} >= 0, got {value!r}")
    return int(value)


def _levels(path: str | Path, where: str, data: Any) -> Mapping[int, int]:
    if data is None:
        return MappingProxyType({})
    if not isinstance(data, Mapping):
        raise InvalidParameter(f"quota file {path}: {where}: expected a mapping of level -> "
                               f"nodes, got {data!r}")
    out: dict[int, int] = {}
    for key, nodes in data.items():
        name = str(key).strip().upper()
        if name in HAI_LEVELS:
            lv = HAI_LEVELS[name]
        elif isinstance(key, int) and key in LEVEL_NAME and key != AUTO:
            lv = key
        else:
            raise InvalidParameter(
                f"quota file {path}: {where}.{key}: unknown level{did_you_mean(name, HAI_LEVELS)}"
                f"; known: {', '.join(HAI_LEVELS)} (or their values)")
        out[lv] = _count(path, f"{where}.{key}", nodes, "nodes")
    return MappingProxyType(out)


def load_hai_quotas(path: str | Path) -> HaiQuotas:
    """Read the `hai` quota file of contract.md#sec-7: `default:` and `users:` (level -> nodes)."""
    data = load_yaml(path, "quota file", InvalidParameter)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InvalidParameter(f"quota file {path}: expected a mapping with default/users, "
                               f"got {type(data).__name__}")
    for key in data:
        if key not in ("default", "users"):
            raise InvalidParameter(f"quota file {path}: unknown key {key!r}"
                                   f"{did_you_mean(str(key), ('default', 'users'))}; "
                                   "allowed: default, users")
    default = _levels(path, "default", data["default"]) if "default" in data else None
    users_raw = data.get("users") or {}
    if not isinstance(users_raw, Mapping):
        raise InvalidParameter(f"quota file {path}: users: expected a mapping of user -> "
                               f"levels, got {users_raw!r}")
    users = {str(u): _levels(path, f"users.{u}", q) for u, q in users_raw.items()}
    return HaiQuotas(default, MappingProxyType(users), str(path))


def load_vc_quotas(path: str | Path) -> Mapping[str, int]:
    """Read a `quota-priority` quota file: a mapping vc -> GPUs (VCs not listed: 0)."""
    data = load_yaml(path, "quota file", InvalidParameter)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InvalidParameter(f"quota file {path}: expected a mapping vc -> GPUs, "
                               f"got {type(data).__name__}")
    return MappingProxyType({str(vc): _count(path, str(vc), g, "GPUs")
                             for vc, g in data.items()})


# --- live jobs ---


@dataclass(frozen=True, slots=True)
class Changes:
    """What the engine did since the last poll, each list in job-index order."""

    arrived: tuple[JobState, ...]  # newly submitted, now pending
    requeued: tuple[JobState, ...]  # pending again (retry, released dependencies)
    stopped: tuple[JobState, ...]  # left running without the policy (ended or retrying)
    dropped: tuple[JobState, ...]  # left the queue without the policy (killed)

    def __bool__(self) -> bool:
        return bool(self.arrived or self.requeued or self.stopped or self.dropped)


_UNSET: Final = object()
_NOTHING: Final = Changes((), (), (), ())


@mypyc_attr(allow_interpreted_subclasses=True)
class LiveJobs:
    """The running and pending jobs a policy knows of, kept in step with the engine.

    Arrivals come from a cursor over the jobs in submission order; ends of running jobs
    from their predicted finish times (rates never change under these policies); failures
    and kills from a running count below the known one; jobs held for dependencies or
    waiting to retry from a watch list, looked at when a job ends or a retry is due; and a
    queue longer or shorter than known sends a full comparison (a safety net). The policy
    reports its own decisions with `started`, `stopped_by_policy` and `removed`.
    """

    def __init__(self) -> None:
        self.cursor = 0
        self.running: dict[int, JobState] = {}
        self.pending: dict[int, JobState] = {}
        self.watch: dict[int, JobState] = {}  # held or retrying: pending again later
        self._ends: list[tuple[float, int]] = []
        self._next: Any = _UNSET  # the job at `cursor` (None past the last one)
        self._due: list[float] = []  # when retrying jobs come back to the queue

    def _arrivals(self, ctx: Ctx) -> list[JobState]:
        out = []
        job = self._next
        # by status, not by submit time: the engine submits in this order, and its clock
        # can sit one ulp below a submit time it has reached (14.698999999999998 for 14.699)
        while job is not None and job.status != WAITING:
            out.append(job)
            self.cursor += 1
            try:
                job = ctx.job_at(self.cursor)
            except IndexError:
                job = None
        self._next = job
        return out

    def poll(self, ctx: Ctx) -> Changes:
        """Bring the known sets up to date and say what changed."""
        if self._next is _UNSET:
            try:
                self._next = ctx.job_at(0)
            except IndexError:
                self._next = None
        now = ctx.now
        nxt = self._next
        due = self._due
        if ((nxt is None or nxt.status == WAITING)
                and not (self._ends and self._ends[0][0] <= now)
                and not (due and due[0] <= now)
                and len(ctx.running()) == len(self.running)
                and ctx.pending_count == len(self.pending)):
            return _NOTHING
        arrived: list[JobState] = []
        requeued: list[JobState] = []
        stopped: dict[int, JobState] = {}
        dropped: list[JobState] = []
        for job in self._arrivals(ctx):
            if job.status == PENDING:
                self.pending[job.idx] = job
                arrived.append(job)
            elif job.status in (HELD, RETRYING):
                self.watch[job.idx] = job
        ends = self._ends
        while ends and ends[0][0] <= now:
            _, idx = heappop(ends)
            ended = self.running.get(idx)
            if ended is not None and ended.status != RUNNING:
                stopped[idx] = ended
        if len(ctx.running()) != len(self.running) - len(stopped):
            for idx in sorted(self.running):
                job = self.running[idx]
                if job.status != RUNNING:
                    stopped[idx] = job
        for idx in sorted(stopped):
            job = self.running.pop(idx)
            if job.status == PENDING:  # a failed attempt retried at once
                self.pending[idx] = job
                requeued.append(job)
            elif job.status not in FINAL:
                self.watch[idx] = job
                heappush(due, now + ctx.params.get("retry_delay", 0.0))
        retry = False
        while due and due[0] <= now:
            heappop(due)
            retry = True
        # held jobs are released by an end, retried ones at their retry time
        if self.watch and (stopped or retry or ctx.pending_count != len(self.pending)):
            for idx in sorted(self.watch):
                job = self.watch[idx]
                if job.status == PENDING:
                    del self.watch[idx]
                    self.pending[idx] = job
                    requeued.append(job)
                elif job.status in FINAL:
                    del self.watch[idx]
        if ctx.pending_count != len(self.pending):
            for idx in sorted(self.pending):
                job = self.pending[idx]
                if job.status != PENDING:
                    del self.pending[idx]
                    dropped.append(job)
            if ctx.pending_count != len(self.pending):  # a safety net: pending we missed
                for job in ctx.pending():
                    if job.idx not in self.pending:
                        self.watch.pop(job.idx, None)
                        self.pending[job.idx] = job
                        requeued.append(job)
        requeued.sort(key=lambda j: j.idx)
        return Changes(tuple(arrived), tuple(requeued),
                       tuple(stopped[i] for i in sorted(stopped)), tuple(dropped))

    def started(self, job: JobState) -> None:
        """The policy started `job` (the engine has applied it): expect its end."""
        self.pending.pop(job.idx, None)
        self.running[job.idx] = job
        if job.rate > 0:
            heappush(self._ends, (job.seg_start + job.remaining_work / job.rate, job.idx))

    def stopped_by_policy(self, job: JobState) -> None:
        """The policy suspended or preempted `job`: it is pending again."""
        self.running.pop(job.idx, None)
        self.pending[job.idx] = job

    def removed(self, job: JobState) -> None:
        """The policy rejected a pending job."""
        self.pending.pop(job.idx, None)
