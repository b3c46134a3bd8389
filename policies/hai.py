"""`hai`: time-sharing of the HAI platform (HFAiLab/hai-platform; seeds/000).

Rules, as the open-source scheduler (`scheduler/modules/assigners/simple_fifo.py` and
`matchers/simple_fifo.py`) and the platform's documentation state them:

1. Levels: EXTREME_HIGH 50, VERY_HIGH 40, HIGH 30, ABOVE_NORMAL 20, NORMAL 10,
   UNDER_NORMAL 8, BELOW_NORMAL 5, LOW 0, and AUTO (-1). The trace's `priority` is read
   with `hai_level` (other numbers fall to the level below them).
2. Whole nodes: a job asks for ceil(num_gpus / GPUs per node) nodes, at least one, of one
   node group (GPU type and node size; an untyped job joins, at submission, the group
   with the lowest live demand relative to its size, see `choose_group`). It gets
   `num_gpus` GPUs packed on whole free nodes (lowest-numbered first; the real matcher
   picks them at random), and nobody else is placed on those nodes until it stops: the
   rounding shows as idle GPUs in the metrics. A job larger than its group is
   rejected. CPU-only jobs (no GPUs) are outside the plan: they start at once. The
   engine's `placer` is not used.
3. Quota (file of contract.md#sec-7; no file, no quota): live jobs (running and queued) are taken
   in order of first submission; a job is in quota if its user's remaining nodes at its
   level hold it (it then uses them), over quota (it waits) if not, and QUOTA_EXCEEDED
   (rejected) if it is larger than the user's whole quota at that level. AUTO takes the
   highest level with room, re-chosen at every plan; it is rejected if larger than the
   user's largest quota at any level.
4. Plan, per node group: in-quota jobs by level (high first) then first submission;
   admitted while the running total of nodes fits the group's healthy nodes. A running
   job is never interrupted to run another job of the same user at the same priority
   (seeds/000): a running job submitted after its user's first waiting job at its level
   is moved just ahead of that job (`running_first`), so a job demoted to the level of
   its user's earlier job, or backfilled ahead of its user's blocked job, keeps running. Without
   `backfill` the plan stops at the first job that does not fit (the open-source
   scheduler's cumulative sum); with it, smaller jobs behind still get in.
5. A running job outside the plan gets the suspend command and stops `suspend_grace`
   seconds later (or at its next periodic checkpoint if that comes first and
   `suspend_at_checkpoint`); its GPUs stay busy until then. The command is final: the job
   stops even if the plan takes it back meanwhile (it is then resumed at the next plan).
   Whether a suspended job checkpoints first is the engine's `checkpoint_on_suspend`
   (the documented code example does); otherwise it loses the progress since its last
   checkpoint. It keeps its place in line (its first submission).
6. A job submitted ABOVE_NORMAL becomes NORMAL once it has held GPUs for `demote_after`
   seconds in total (all attempts). AUTO jobs are not demoted.
7. Timing: the platform re-plans every `plan_period` seconds (ticks at multiples of it);
   a change between ticks takes effect at the next tick. With `replan=event` (default) the
   plan runs only at ticks that follow arrivals, ends, suspend deadlines and demotions,
   and is kept incrementally; `replan=every-period` recomputes it from scratch at every
   tick, literally, to check the other (same results, one event per tick).

Users: a job's user is its tenant (quotas, the same-user rule of 4); a job whose `user` is
empty counts under its `vc` (our choice: the bundled default trace has VCs but no users,
and a single empty user would make quotas and that rule cluster-wide).

Suspend events carry the platform's state name (`queued-suspended: why`); `state_names`
gives the names for the engine's other event kinds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from mypy_extensions import mypyc_attr

from schedlab.policies.base import Ctx, Policy
from schedlab.policies.quota_files import (
    AUTO,
    HAI_LEVELS,
    LEVEL_NAME,
    HaiQuotas,
    LiveJobs,
    hai_level,
    load_hai_quotas,
)
from schedlab.policies.tenant_key import user_or_vc
from schedlab.sim.cfuncs import heappop, heappush
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.jobstate import PENDING, RUNNING, JobState
from schedlab.sim.model import Decision, JobSpec, Reject, Start, Suspend, Unschedulable
from schedlab.sim.params import Param, as_bool, as_choice, as_float, as_optional, as_path
from schedlab.sim.queue import SortedKeys
from schedlab.topologies.tree import Topology

ABOVE_NORMAL: Final = HAI_LEVELS["ABOVE_NORMAL"]
NORMAL: Final = HAI_LEVELS["NORMAL"]
_TOP: Final = HAI_LEVELS["EXTREME_HIGH"]
_EPS: Final = 1e-9

# --- node groups and job sizes ---


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes of one GPU type and size: a plan of its own, like a group of the platform."""

    index: int
    gpu_type: str
    node_gpus: int
    nodes: tuple[int, ...]

    @property
    def label(self) -> str:
        """Name used in messages, e.g. `V100x8`."""
        return f"{self.gpu_type}x{self.node_gpus}"


def node_groups(topo: Topology) -> tuple[NodeGroup, ...]:
    """The node groups of a topology, by GPU type then node size."""
    members: dict[tuple[str, int], list[int]] = {}
    for n in topo.nodes:
        if n.num_gpus:
            members.setdefault((n.gpu_type, n.num_gpus), []).append(n.index)
    return tuple(NodeGroup(i, t, g, tuple(members[t, g]))
                 for i, (t, g) in enumerate(sorted(members)))


def choose_group(spec: JobSpec, groups: Sequence[NodeGroup],
                 demand: Sequence[int] = ()) -> tuple[int, int] | str:
    """(group index, nodes) for a GPU job, or why no group can ever hold it.

    Among the groups that can hold it (its GPU type if it names one), the job joins the
    one whose live demand (GPUs of the whole nodes of its live jobs, `demand`) plus its own
    is the smallest fraction of the group's GPUs; ties go to the least rounding waste, the
    fewest nodes, the largest group.
    """
    best: tuple[tuple, int, int] | None = None
    largest = 0
    for g in groups:
        if spec.gpu_type and g.gpu_type != spec.gpu_type:
            continue
        nodes = max(1, -(-spec.num_gpus // g.node_gpus))
        largest = max(largest, len(g.nodes))
        if nodes > len(g.nodes):
            continue
        size = len(g.nodes) * g.node_gpus
        load = ((demand[g.index] if demand else 0) + nodes * g.node_gpus) / size
        rank = (load, nodes * g.node_gpus - spec.num_gpus, nodes, -size, g.gpu_type,
                g.node_gpus)
        if best is None or rank < best[0]:
            best = (rank, g.index, nodes)
    if best is None:
        kind = f"of type {spec.gpu_type!r} " if spec.gpu_type else ""
        return (f"needs {spec.num_gpus} GPUs on whole nodes; the largest node group {kind}"
                f"has {largest} nodes")
    return best[1], best[2]


# --- the planner, as pure functions (the literal re-plan) ---


@dataclass(frozen=True, slots=True)
class PlanJob:
    """One live job as the planner sees it: its request and its place in line."""

    idx: int
    user: str
    level: int  # requested level after demotion; AUTO = -1
    nodes: int
    group: int
    submit: float


OUT = None  # over quota now: waits


def assign_levels(user: str, jobs: Sequence[PlanJob], quota: Mapping[int, int] | None
                  ) -> list[tuple[int | None, str]]:
    """One user's live jobs, in order of first submission -> (level or OUT, rejection).

    The assigner's quota pass: a job in quota uses the user's nodes at its level; AUTO takes
    the highest level with room. The rejection text is set for QUOTA_EXCEEDED only.
    """
    out: list[tuple[int | None, str]] = []
    if quota is None:
        return [(_TOP if j.level == AUTO else j.level, "") for j in jobs]
    left = dict(quota)
    for j in jobs:
        if j.level != AUTO:
            if left.get(j.level, 0) >= j.nodes:
                left[j.level] -= j.nodes
                out.append((j.level, ""))
            elif quota.get(j.level, 0) < j.nodes:
                out.append((OUT, f"QUOTA_EXCEEDED: needs {j.nodes} nodes at "
                                 f"{LEVEL_NAME[j.level]}, user {user!r} has a quota of "
                                 f"{quota.get(j.level, 0)} there"))
            else:
                out.append((OUT, ""))
            continue
        for lv in HAI_LEVELS.values():
            if left.get(lv, 0) >= j.nodes:
                left[lv] -= j.nodes
                out.append((lv, ""))
                break
        else:
            most = max(quota.values(), default=0)
            out.append((OUT, "" if j.nodes <= most else (
                f"QUOTA_EXCEEDED: AUTO job needs {j.nodes} nodes, user {user!r} has at most "
                f"{most} at any level")))
    return out


PlanKey = tuple[int, float, int, int, int]


def plan_key(level: int, job: PlanJob | JobState) -> PlanKey:
    """Place in the plan: level (high first), then first submission, then trace order.

    The fields are (-level, submit, idx, 1, idx); the last is always the job's index.
    `running_first` may move a running job just ahead of a waiting job of its user.
    """
    submit = job.submit if isinstance(job, PlanJob) else job.spec.submit_time
    return own_key(level, submit, job.idx)


def own_key(level: int, submit: float, idx: int) -> PlanKey:
    """A job's key at its own place in the plan (not moved by `running_first`)."""
    return (-level, submit, idx, 1, idx)


def pinned_key(level: int, first: tuple[float, int], idx: int) -> PlanKey:
    """The key of a running job moved just ahead of its user's first waiting job."""
    return (-level, first[0], first[1], 0, idx)


def running_first(level: int, members: Sequence[tuple[float, int, bool]]
                  ) -> dict[int, PlanKey]:
    """The plan keys of one user's jobs at one level in one node group.

    `members` are (submit, idx, running). The platform never interrupts a running job
    to run another job of the same user at the same priority (seeds/000): a running job
    submitted after the user's first waiting job at that level is moved just ahead of
    it (in submission order among such jobs); every other job keeps its own place, so
    other users' places are untouched.
    """
    pend = [(m[0], m[1]) for m in members if not m[2]]
    first = min(pend) if pend else None
    out = {}
    for t, i, running in members:
        if running and first is not None and (t, i) > first:
            out[i] = pinned_key(level, first, i)
        else:
            out[i] = own_key(level, t, i)
    return out


def admit(entries: Sequence[tuple[int, int]], cap: int, backfill: bool) -> list[int]:
    """Jobs (idx, nodes), in plan order, admitted into `cap` nodes."""
    used = 0
    out = []
    for idx, n in entries:
        if used + n <= cap:
            used += n
            out.append(idx)
        elif not backfill:
            break
        if used >= cap and backfill:
            break
    return out


class GroupPlan:
    """The plan of one node group, kept incrementally (same result as `admit`).

    `keys` holds the plan keys of the group's in-quota live jobs. Admitted: every key
    below `bound` (the first job that does not fit; None when all fit), whose nodes sum to
    `used`, plus with backfill the later jobs that fit in what is left, first come first.
    """

    def __init__(self, cap: int, backfill: bool) -> None:
        self.cap = cap
        self.backfill = backfill
        self.keys: SortedKeys = SortedKeys()
        self.nodes: dict[int, int] = {}
        self.bound: tuple | None = None
        self.used = 0
        self.extra: dict[int, tuple] = {}  # backfilled idx -> key

    def add(self, key: tuple, nodes: int) -> None:
        """A job enters the group's in-quota set."""
        self.keys.add(key)
        self.nodes[key[-1]] = nodes
        if self.bound is None or key < self.bound:
            self.used += nodes

    def remove(self, key: tuple) -> None:
        """A job leaves the group's in-quota set."""
        n = self.nodes.pop(key[-1])
        if self.bound is None or key < self.bound:
            self.used -= n
        elif key == self.bound:
            i = self.keys.index(key)
            self.bound = self.keys[i + 1] if i + 1 < len(self.keys) else None
        self.keys.remove(key)

    def admitted(self, idx: int, key: tuple) -> bool:
        """True when the job with this key is in the plan."""
        return (self.bound is None or key < self.bound) or idx in self.extra

    def settle(self) -> list[int]:
        """Move the cut-off to where it belongs; return the jobs whose admission changed."""
        changed: list[int] = []
        keys, nodes = self.keys, self.nodes
        while self.used > self.cap:
            i = (len(keys) if self.bound is None else keys.bisect_left(self.bound)) - 1
            k = keys[i]
            self.used -= nodes[k[-1]]
            self.bound = k
            changed.append(k[-1])
        while self.bound is not None and self.used + nodes[self.bound[-1]] <= self.cap:
            k = self.bound
            self.used += nodes[k[-1]]
            changed.append(k[-1])
            i = keys.bisect_right(k)
            self.bound = keys[i] if i < len(keys) else None
        if self.backfill:
            changed.extend(self._refill())
        return changed

    def _refill(self) -> list[int]:
        """Backfill behind the cut-off, in plan order, until nothing is left."""
        new: dict[int, tuple] = {}
        left = self.cap - self.used
        if self.bound is not None and left > 0:
            for k in self.keys.irange(self.bound, inclusive=(False, False)):
                n = self.nodes[k[-1]]
                if n <= left:
                    new[k[-1]] = k
                    left -= n
                    if left == 0:
                        break
        old = self.extra
        self.extra = new
        return [i for i in old if i not in new] + [i for i in new if i not in old]


# --- the policy ---


@mypyc_attr(allow_interpreted_subclasses=True)
class HaiPolicy(Policy):
    """HAI platform time-sharing: levels, whole nodes, per-user quotas, suspend with grace."""

    name = "hai"
    tenant_field = "user"
    orders = False  # its own per-user node quotas and time-slicing over the cluster
    description = ("HAI platform time-sharing: priority levels, whole nodes, per-user node "
                   "quotas per level, suspend with grace, ABOVE_NORMAL demotion")
    params = {
        "quotas": Param(None, as_optional(as_path),
                        "YAML file of node quotas per user and level (contract.md#sec-7); none: "
                        "no quota"),
        "backfill": Param(False, as_bool,
                          "let smaller jobs behind a job that does not fit into the plan"),
        "suspend_grace": Param(5.0, as_float(0.0),
                               "seconds from the suspend command to the forced stop"),
        "suspend_at_checkpoint": Param(
            True, as_bool, "a job told to suspend stops at its next periodic checkpoint if "
            "that comes before the grace deadline"),
        "demote_after": Param(1800.0, as_optional(as_float(0.0, lo_open=True)),
                              "seconds of running after which ABOVE_NORMAL becomes NORMAL "
                              "(none: never)"),
        "plan_period": Param(1.0, as_float(0.0),
                             "seconds between plans; changes take effect at the next "
                             "multiple (0: at once)"),
        "replan": Param("event", as_choice("event", "every-period"),
                        "event: plan only at ticks after a change, incrementally; "
                        "every-period: from scratch at every tick (slow, for checking)"),
    }
    state_names: ClassVar[Mapping[str, str]] = {
        "submit": "waiting-init", "start": "running", "resume": "running",
        "suspend": "queued-suspended", "finish": "finished", "fail": "finished",
        "kill": "finished", "reject": "finished",
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        path = self.p["quotas"]
        self.quotas: HaiQuotas | None = load_hai_quotas(path) if path else None
        self.event = self.p["replan"] == "event"
        if not self.event and self.p["plan_period"] <= 0:
            raise InvalidParameter("parameter replan='every-period' for policy 'hai' needs "
                                   "plan_period > 0")

    # --- per-run state ---

    def attach(self, ctx: Ctx) -> None:
        """Per-run state: node groups, the quota book, the plans and the timers."""
        self.live = LiveJobs()
        self.groups = node_groups(ctx.topology)
        self.plans = [GroupPlan(len(g.nodes), self.p["backfill"]) for g in self.groups]
        self.demand = [0] * len(self.groups)  # GPUs of the whole nodes of live jobs
        self.changed = True  # anything since the last plan that a plan could act on
        self.healthy = -1
        self.size: dict[int, tuple[int, int]] = {}  # idx -> (group, nodes)
        self.level_req: dict[int, int] = {}  # requested level, after demotion
        self.status: dict[int, int | None] = {}  # idx -> level in quota, or OUT
        self.key: dict[int, tuple] = {}  # idx -> plan key while in a group plan
        # (user, level, group) -> (submit, idx) of its running / waiting in-plan jobs, for
        # `running_first`: running jobs submitted after the bucket's first waiting job
        # are moved just ahead of it (`pinned`, re-keyed when that changes)
        self.bucket_run: dict[tuple[str, int, int], SortedKeys] = {}
        self.bucket_pend: dict[tuple[str, int, int], SortedKeys] = {}
        self.bucket_of: dict[int, tuple[str, int, int]] = {}
        self.dirty_buckets: set[tuple[str, int, int]] = set()
        self.pinned: dict[tuple[str, int, int], tuple[tuple[float, int], set[int]]] = {}
        self.exceeded: dict[int, str] = {}  # idx -> QUOTA_EXCEEDED reason
        self.user_jobs: dict[str, SortedKeys] = {}  # user -> (submit, idx) of live jobs
        self.dirty_users: set[str] = set()
        self.dirty_groups: set[int] = set()
        self.touched: set[int] = set()
        self.to_start: SortedKeys = SortedKeys()  # plan keys of admitted pending jobs
        self.start_key: dict[int, tuple] = {}
        self.infeasible: dict[int, str] = {}  # pending jobs to reject (no group holds them)
        self.cpu_jobs: SortedKeys = SortedKeys()  # pending CPU-only jobs
        self.suspending: dict[int, tuple[float, str]] = {}  # idx -> (stop time, reason)
        self._stops: list[tuple[float, int]] = []
        self._demotions: list[tuple[float, int]] = []
        self._tick_wake = -math.inf
        self.counts = {"suspend_commands": 0, "demotions": 0, "quota_rejections": 0}

    def tenant_key(self, spec: JobSpec) -> str:
        """A job's tenant: its user, or its vc when it has none (`policies.tenant_key`)."""
        return user_or_vc(spec)

    def metrics(self) -> dict[str, float]:
        """Counters of this run: suspend commands, demotions, quota rejections."""
        return dict(self.counts)

    # --- ticks ---

    def _on_tick(self, now: float) -> bool:
        """True at a multiple of plan_period (within float noise)."""
        p = self.p["plan_period"]
        if p <= 0:
            return True
        return abs(now - round(now / p) * p) <= max(_EPS, abs(now) * 1e-13)

    def _next_tick(self, now: float) -> float:
        """The first multiple of plan_period after `now` (which is not one)."""
        p = self.p["plan_period"]
        return (math.floor(now / p) + 1) * p

    def _wake_tick(self, ctx: Ctx, t: float) -> None:
        if t != self._tick_wake:
            self._tick_wake = t
            ctx.wake_at(t)

    # --- bookkeeping of live jobs ---

    def _enter(self, job: JobState) -> None:
        """A job is pending in the queue (new, or back after a retry)."""
        s = job.spec
        self.changed = True
        if s.num_gpus == 0:
            self.cpu_jobs.add((s.submit_time, job.idx))
            return
        size = self.size.get(job.idx)
        if size is None:
            got = choose_group(s, self.groups, self.demand)
            if isinstance(got, str):
                self.infeasible[job.idx] = got
                return
            size = self.size[job.idx] = got
        self.demand[size[0]] += size[1] * self.groups[size[0]].node_gpus
        if job.idx not in self.level_req:
            self.level_req[job.idx] = hai_level(s.priority)
        if not self.event:
            return
        self.status[job.idx] = OUT
        if self.quotas is None:
            self._set_status(job, self._level_unlimited(job.idx))
        else:
            self.user_jobs.setdefault(user_or_vc(s), SortedKeys()).add((s.submit_time, job.idx))
            self.dirty_users.add(user_or_vc(s))

    def _leave(self, job: JobState) -> None:
        """A job left the live set: ended, rejected, or out waiting for a retry."""
        idx = job.idx
        self.suspending.pop(idx, None)
        self.infeasible.pop(idx, None)
        self.exceeded.pop(idx, None)
        k = self.start_key.pop(idx, None)
        if k is not None:
            self.to_start.discard(k)
        if job.spec.num_gpus == 0:
            self.cpu_jobs.discard((job.spec.submit_time, idx))
            return
        size = self.size.get(idx)
        if size is None:
            return
        self.demand[size[0]] -= size[1] * self.groups[size[0]].node_gpus
        self.changed = True
        if not self.event or idx not in self.status:
            return
        self._set_status(job, OUT)
        del self.status[idx]
        if self.quotas is not None:
            self.user_jobs[user_or_vc(job.spec)].discard((job.spec.submit_time, idx))
            self.dirty_users.add(user_or_vc(job.spec))

    def _mark(self, job: JobState) -> None:
        if self.quotas is None:
            self._set_status(job, self._level_unlimited(job.idx))
        else:
            self.dirty_users.add(user_or_vc(job.spec))

    def _level_unlimited(self, idx: int) -> int:
        lv = self.level_req[idx]
        return _TOP if lv == AUTO else lv

    def _set_status(self, job: JobState, level: int | None) -> None:
        """Put a job in its group plan at `level`, or take it out (OUT)."""
        idx = job.idx
        if self.status.get(idx) == level and (level is None or idx in self.key):
            return
        group, nodes = self.size[idx]
        plan = self.plans[group]
        old = self.key.pop(idx, None)
        if old is not None:
            plan.remove(old)
        bk = self.bucket_of.pop(idx, None)
        if bk is not None:
            self._bucket_move(bk, job, None)
        if level is not None:
            k = self.key[idx] = plan_key(level, job)
            plan.add(k, nodes)
            bk = self.bucket_of[idx] = (user_or_vc(job.spec), level, group)
            self._bucket_move(bk, job, job.status == RUNNING)
        if idx in self.status:
            self.status[idx] = level
        self.dirty_groups.add(group)
        self.touched.add(idx)

    # --- the pass ---

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Book changes, stop jobs whose grace ended, and plan at ticks."""
        now = ctx.now
        ch = self.live.poll(ctx)
        for job in ch.stopped:
            self._leave(job)
        for job in ch.dropped:
            self._leave(job)
        for job in (*ch.arrived, *ch.requeued):
            self._enter(job)
        yield from self._due_stops(ctx)
        for key in list(self.cpu_jobs):  # no GPUs to plan: they start once a node has room
            job = ctx.job_at(key[1])
            if job.status != PENDING:
                self.cpu_jobs.discard(key)
                continue
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                continue
            self.cpu_jobs.discard(key)
            yield Start(job.job_id, got)
            self.live.started(job)
        if not self._on_tick(now):
            self._wake_tick(ctx, self._next_tick(now))
            return
        if self.event:
            if not (self.changed or ctx.cluster.healthy_gpus != self.healthy
                    or (self._demotions and self._demotions[0][0] <= now + _EPS)):
                return  # the plan would come out the same
            self.changed = False
            commands, rejects = self._plan_incremental(ctx)
            starts = list(self.to_start)
        else:
            commands, rejects, starts = self._plan_literal(ctx)
        decided = False
        for idx, why in rejects:
            job = ctx.job_at(idx)
            yield Reject(job.job_id, why)
            self.live.removed(job)
            self._leave(job)
            decided = True
        for idx, why in commands:
            self._command(ctx, ctx.job_at(idx), why)
        yield from self._due_stops(ctx)
        for key in starts:
            job = ctx.job_at(key[-1])
            if job.status != PENDING:
                continue
            gpus = self._whole_nodes(ctx, job)
            if gpus is None:
                continue
            yield Start(job.job_id, gpus)
            self._started(ctx, job)
            decided = True
        if not self.event and (ctx.running() or self.suspending or decided):
            self._wake_tick(ctx, now + self.p["plan_period"])

    def _started(self, ctx: Ctx, job: JobState) -> None:
        self.live.started(job)
        if self.event:
            self._status_changed(ctx, job)
        k = self.start_key.pop(job.idx, None)
        if k is not None:
            self.to_start.discard(k)
        after = self.p["demote_after"]
        if (after is not None and self.event
                and self.level_req.get(job.idx) == ABOVE_NORMAL):
            t = ctx.now + max(0.0, after - ctx.run_time(job))
            heappush(self._demotions, (t, job.idx))
            if t > ctx.now:
                ctx.wake_at(t)

    def _command(self, ctx: Ctx, job: JobState, why: str) -> None:
        """Send the suspend command: the job stops at its checkpoint or after the grace."""
        now = ctx.now
        t = now + self.p["suspend_grace"]
        c = job.spec.checkpoint_interval
        if c and self.p["suspend_at_checkpoint"]:
            base = job.run_start
            k = 1 if now < base else math.floor((now - base) / c + _EPS) + 1
            t = min(t, base + k * c)
        self.suspending[job.idx] = (t, why)
        self.counts["suspend_commands"] += 1
        heappush(self._stops, (t, job.idx))
        if t > now:
            ctx.wake_at(t)

    def _due_stops(self, ctx: Ctx) -> Iterator[Decision]:
        stops = self._stops
        while stops and stops[0][0] <= ctx.now + _EPS:
            t, idx = heappop(stops)
            got = self.suspending.get(idx)
            if got is None or got[0] != t:
                continue
            del self.suspending[idx]
            job = ctx.job_at(idx)
            if job.status != RUNNING:
                continue
            yield Suspend(job.job_id, f"queued-suspended: {got[1]}")
            self.live.stopped_by_policy(job)
            self.touched.add(idx)
            self.changed = True
            if self.event:
                self._status_changed(ctx, job)

    # --- incremental plan ---

    def _refresh_caps(self, ctx: Ctx) -> None:
        c = ctx.cluster
        if c.healthy_gpus == self.healthy:
            return
        self.healthy = c.healthy_gpus
        for g, plan in zip(self.groups, self.plans, strict=True):
            cap = sum(1 for n in g.nodes if c.node_up[n])
            if cap != plan.cap:
                plan.cap = cap
                self.dirty_groups.add(g.index)

    def _demote_due(self, ctx: Ctx) -> list[JobState]:
        out = []
        after = self.p["demote_after"]
        while self._demotions and self._demotions[0][0] <= ctx.now + _EPS:
            _, idx = heappop(self._demotions)
            job = ctx.job_at(idx)
            if (job.status == RUNNING and self.level_req.get(idx) == ABOVE_NORMAL
                    and ctx.run_time(job) >= after - _EPS):
                self.level_req[idx] = NORMAL
                self.counts["demotions"] += 1
                out.append(job)
        return out

    def _plan_incremental(self, ctx: Ctx
                          ) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        for job in self._demote_due(ctx):
            if job.idx in self.status:
                self._mark(job)
        self._refresh_caps(ctx)
        if self.dirty_users:
            for user in sorted(self.dirty_users):
                self._requota(ctx, user)
            self.dirty_users.clear()
        for bk in sorted(self.dirty_buckets):
            self._rekey_bucket(ctx, bk)
        self.dirty_buckets.clear()
        for g in sorted(self.dirty_groups):
            self.touched.update(self.plans[g].settle())
        self.dirty_groups.clear()
        commands = []
        for idx in sorted(self.touched):
            job = ctx.job_at(idx)
            key = self.key.get(idx)
            inside = key is not None and self.plans[self.size[idx][0]].admitted(idx, key)
            if job.status == RUNNING:
                if not inside and idx not in self.suspending:
                    commands.append((idx, self._why(idx)))
            want = key if inside and job.status == PENDING else None
            old = self.start_key.get(idx)
            if old != want:
                if old is not None:
                    self.to_start.discard(old)
                    del self.start_key[idx]
                if want is not None:
                    self.start_key[idx] = want
                    self.to_start.add(want)
        self.touched.clear()
        rejects = sorted(self.infeasible.items()) if self.infeasible else []
        if self.exceeded:
            rejects += [(i, why) for i, why in sorted(self.exceeded.items())
                        if ctx.job_at(i).status == PENDING]
        return commands, rejects

    def _bucket_move(self, bk: tuple[str, int, int], job: JobState,
                     running: bool | None) -> bool:
        """Put a job among its bucket's running or waiting jobs (None: out of it).

        Returns True when the bucket's places must be recomputed (marked dirty).
        """
        item = (job.spec.submit_time, job.idx)
        for table in (self.bucket_run, self.bucket_pend):
            lst = table.get(bk)
            if lst is not None and item in lst:
                lst.remove(item)
                if not lst:
                    del table[bk]
        if running is not None:
            table = self.bucket_run if running else self.bucket_pend
            table.setdefault(bk, SortedKeys()).add(item)
        if self._inverted(bk) or bk in self.pinned:
            self.dirty_buckets.add(bk)
            return True
        return False

    def _inverted(self, bk: tuple[str, int, int]) -> bool:
        """True while a waiting job of the bucket was submitted before a running one."""
        run, pend = self.bucket_run.get(bk), self.bucket_pend.get(bk)
        return bool(run and pend and pend[0] < run[-1])

    def _rekey(self, idx: int, k: PlanKey, group: int) -> None:
        old = self.key.get(idx)
        if old is not None and old != k:
            plan = self.plans[group]
            plan.remove(old)
            plan.add(k, self.size[idx][1])
            self.key[idx] = k
            self.touched.add(idx)
            self.dirty_groups.add(group)

    def _rekey_bucket(self, ctx: Ctx, bk: tuple[str, int, int]) -> None:
        """Pin the bucket's running jobs submitted after its first waiting job.

        Only those are re-keyed: the cost is the user's running jobs, not its backlog.
        """
        _, level, group = bk
        for _, i in list(self.bucket_run.get(bk, ())):
            # stopped by the engine (a node failure), not by the plan: waiting now
            if ctx.job_at(i).status != RUNNING:
                self._bucket_move(bk, ctx.job_at(i), False)
        old_first, old = self.pinned.pop(bk, (None, set()))
        run, pend = self.bucket_run.get(bk), self.bucket_pend.get(bk)
        first = pend[0] if pend else None
        now: set[int] = set()
        if first is not None and run:
            now = {i for _, i in run.irange(first, inclusive=(False, True))}
        for i in old - now:  # back to its own place
            if i in self.key:
                self._rekey(i, plan_key(level, ctx.job_at(i)), group)
        for i in now:
            assert first is not None
            if i not in old or first != old_first:
                self._rekey(i, pinned_key(level, first, i), group)
        if now:
            assert first is not None
            self.pinned[bk] = (first, now)

    def _status_changed(self, ctx: Ctx, job: JobState) -> None:
        """A job started or stopped: its user's places at its level may swap."""
        bk = self.bucket_of.get(job.idx)
        if bk is not None and self._bucket_move(bk, job, job.status == RUNNING):
            self.changed = True

    def _why(self, idx: int) -> str:
        if self.status.get(idx) is OUT or idx not in self.status:
            return "over quota"
        return f"past the plan cut-off of node group {self.groups[self.size[idx][0]].label}"

    def _plan_job(self, job: JobState) -> PlanJob:
        group, nodes = self.size[job.idx]
        return PlanJob(job.idx, user_or_vc(job.spec), self.level_req[job.idx], nodes, group,
                       job.spec.submit_time)

    def _requota(self, ctx: Ctx, user: str) -> None:
        assert self.quotas is not None
        jobs = [ctx.job_at(i) for _, i in self.user_jobs.get(user, ())]
        verdicts = assign_levels(user, [self._plan_job(j) for j in jobs],
                                 self.quotas.of(user))
        for job, (level, why) in zip(jobs, verdicts, strict=True):
            self._set_status(job, level)
            if why:
                if job.idx not in self.exceeded:
                    self.counts["quota_rejections"] += 1
                self.exceeded[job.idx] = why
            else:
                self.exceeded.pop(job.idx, None)

    # --- literal plan ---

    def _plan_literal(self, ctx: Ctx) -> tuple[list, list, list]:
        """Recompute the whole plan from the live jobs, as the platform does every tick."""
        after = self.p["demote_after"]
        live = [*self.live.running.values(), *self.live.pending.values()]
        live = sorted((j for j in live if j.idx in self.size), key=lambda j: j.idx)
        if after is not None:
            for job in live:
                if (job.status == RUNNING and self.level_req[job.idx] == ABOVE_NORMAL
                        and ctx.run_time(job) >= after - _EPS):
                    self.level_req[job.idx] = NORMAL
                    self.counts["demotions"] += 1
        by_user: dict[str, list[JobState]] = {}
        for job in sorted(live, key=lambda j: (j.spec.submit_time, j.idx)):
            by_user.setdefault(user_or_vc(job.spec), []).append(job)
        level: dict[int, int | None] = {}
        exceeded: dict[int, str] = {}
        for user in sorted(by_user):
            jobs = by_user[user]
            quota = None if self.quotas is None else self.quotas.of(user)
            for job, (lv, why) in zip(jobs, assign_levels(
                    user, [self._plan_job(j) for j in jobs], quota), strict=True):
                level[job.idx] = lv
                if why:
                    exceeded[job.idx] = why
        inside: set[int] = set()
        keys: dict[int, tuple] = {}
        for g in self.groups:
            caps = sum(1 for n in g.nodes if ctx.cluster.node_up[n])
            bucket: dict[tuple[str, int], list[tuple[float, int, bool]]] = {}
            for i, lv in sorted(level.items()):
                if lv is not None and self.size[i][0] == g.index:
                    j = ctx.job_at(i)
                    bucket.setdefault((user_or_vc(j.spec), lv), []).append(
                        (j.spec.submit_time, i, j.status == RUNNING))
            mine = sorted((k, i) for (_, lv), members in bucket.items()
                          for i, k in running_first(lv, members).items())
            for k, i in mine:
                keys[i] = k
            inside.update(admit([(i, self.size[i][1]) for _, i in mine], caps,
                                self.p["backfill"]))
        commands = []
        starts = []
        for job in live:
            idx = job.idx
            if job.status == RUNNING and idx not in inside and idx not in self.suspending:
                why = ("over quota" if level.get(idx) is None else
                       f"past the plan cut-off of node group "
                       f"{self.groups[self.size[idx][0]].label}")
                commands.append((idx, why))
            elif job.status == PENDING and idx in inside:
                starts.append(keys[idx])
        for idx, why in exceeded.items():
            if idx not in self.exceeded:
                self.counts["quota_rejections"] += 1
                self.exceeded[idx] = why
        rejects = sorted(self.infeasible.items())
        rejects += [(i, why) for i, why in sorted(exceeded.items())
                    if ctx.job_at(i).status == PENDING]
        return commands, rejects, sorted(starts)

    # --- whole nodes ---

    def _whole_nodes(self, ctx: Ctx, job: JobState) -> tuple[int, ...] | None:
        """`num_gpus` GPUs packed on the first free whole nodes of the job's group."""
        group, nodes = self.size[job.idx]
        g = self.groups[group]
        topo = ctx.topology
        bucket = ctx.cluster.node_buckets[g.gpu_type][g.node_gpus]
        if len(bucket) < nodes:
            return None
        s = job.spec
        host = (s.num_cpus, s.mem_gb, s.disk_gb * s.num_tasks)
        asks = any(v > 0 for v in host)
        gpus: list[int] = []
        left = s.num_gpus
        for n in bucket:
            if topo.nodes[n].num_gpus != g.node_gpus:
                continue
            take = min(left, g.node_gpus)
            if asks and not ctx.cluster.node_fits_host(
                    n, *(v * take / s.num_gpus for v in host)):
                continue  # its CPUs, memory or disk are taken: the next whole node
            lo = topo.cells[topo.nodes[n].cell].gpu_lo
            gpus.extend(range(lo, lo + take))
            left -= take
            if not left:
                return tuple(gpus)
        return None
