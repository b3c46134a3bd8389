"""Hierarchical capacity scheduling with the semantics of YARN's Capacity Scheduler.

Queues (docs/contract.md#sec-3 `queues:`): from the `queues` parameter (a YAML file), else the
topology's `queues:`, else one leaf queue per VC seen in the trace with equal capacities,
`max_capacity` 1 and a `user_limit_factor` letting one user reach it (a VC of a trace is
often one user). Leaf queues hold the jobs whose trace `vc` is their name.

Rules:
1. Shares are dominant shares over GPUs, CPUs and memory (YARN's DominantResourceCalculator;
   a resource the topology does not model is ignored). A queue's guarantee is its
   `capacity` times its parent's guarantee (absolute capacity); its ceiling likewise from
   `max_capacity`. Quotas are shares, not machines: GPUs are bound at placement.
2. Admission: a job of an unknown queue, of a parent queue, of a stopped queue (`state:
   stopped`, itself or an ancestor: YARN's STOPPED state, no new applications; jobs
   already started keep running and are requeued after preemption or failure), or larger
   than its queue's ceiling or its user limit is rejected with the reason.
3. Allocation: free resources go down the tree to the child queue with the lowest used /
   guaranteed ratio (ties by name); a queue that cannot start anything is passed over
   for the rest of the pass. In a leaf, jobs start in arrival order; a job starts only if
   every queue on its path stays within its ceiling (idle capacity is lent up to
   `max_capacity`: bonus resources) and its user stays within the user limit,
   min(`user_limit_factor` x guarantee, ceiling). A user at its limit is skipped (its later
   jobs wait); a job the placer cannot fit, or that would cross a ceiling, blocks its leaf
   for the pass (FIFO within the leaf, like YARN's reservation of a node for it).
4. Preemption (`preempt`, on by default). Every `preemption_interval` the ideal share of
   each queue is computed by water-filling the cluster down the tree in proportion to the
   guarantees, each queue capped by its ceiling and its demand (used + pending work its
   users' limits allow) and a leaf also by max(used, claim), so preemption only
   restores guarantees (YARN's ideal assignment). A leaf's claim is its guarantee under
   the root; below a parent it is the parent's claim water-filled over the children by
   guarantee, each up to its demand: sub-queues of an organisation share its guarantee
   before other queues use it (eng = {eng-a, eng-b} at 0.5 with eng-b idle: eng-a
   claims all of eng's 0.5, not its own 0.25). Leaves above their ideal give back their
   youngest (most recently started) jobs, largest excess first, while above the ideal, at
   most `total_preemption_per_round` of the cluster per round (a job larger than what is
   left of that budget is skipped, as YARN does: a container larger than the round's
   budget is never preempted at all, so with the default 0.1 on a cluster of fewer than
   10 GPUs no job can be; the run's summary then warns once) and never going below their
   own guarantee (with gangs, a queue pushed below it would take the GPUs straight back). A
   selected job is marked; it is preempted (work since its checkpoint lost) at the first
   round at least `max_wait_before_kill` seconds after its mark in which it is still
   selected; a mark no longer selected is dropped. While a leaf with a queue below its
   guarantee on its path (itself or an ancestor) cannot place its next job, no queue is
   lent resources beyond its guarantee in that pass, except inside such a starving
   ancestor: what preemption frees goes to the queue it was freed for.
5. Rounds cost events only when they can do something: a round is a timer at the next
   multiple of `preemption_interval` after a change while some leaf with runnable pending
   work has itself or an ancestor below its guarantee and some leaf is above its
   guarantee, or jobs are marked; with no change since the last round, the next is the
   earliest mark's deadline. A long stretch with nothing over capacity costs no events.
Simplifications: YARN's natural_termination_factor and max_ignored_over_capacity are 1 and 0
(not modelled); a user limit is a hard ceiling (YARN lets a user cross it by one
container); minimum-user-limit-percent is not modelled; shares use the topology's totals
even while nodes are down; an elastic job is started at its `num_gpus`.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from typing import Any

from mypy_extensions import mypyc_attr

from schedlab.policies.base import Ctx, Policy
from schedlab.policies.queues import (
    EPS,
    EngineMirror,
    QueueTree,
    Resources,
    Vec,
    add,
    due,
    parse_queue_param,
    queues_for_vcs,
)
from schedlab.sim.jobstate import PENDING, JobState
from schedlab.sim.model import Decision, Preempt, Reject, Start, Unschedulable, request_class
from schedlab.sim.params import Param, as_bool, as_float, as_optional, as_path
from schedlab.sim.queue import SortedKeys


def _stopped_queues(specs: Any) -> frozenset[str]:
    """Names of the queues whose `state` is stopped (their children are found by path)."""
    out: set[str] = set()
    stack = list(specs)
    while stack:
        q = stack.pop()
        if q.state == "stopped":
            out.add(q.name)
        stack.extend(q.children)
    return frozenset(out)


class _Leaf:
    """Mutable per-run state of one leaf queue: pending jobs by user, running jobs."""

    __slots__ = ("users", "heads", "pend", "running", "user_used")

    def __init__(self) -> None:
        self.users: dict[str, SortedKeys] = {}  # user -> (submit_time, idx), arrival order
        self.heads: SortedKeys = SortedKeys()  # (first key of a user, user)
        self.pend: dict[str, list[float]] = {}  # user -> demand of its pending jobs
        self.running: dict[int, Vec] = {}  # idx -> demand, in start order
        self.user_used: dict[str, list[float]] = {}

    def add(self, key: tuple[float, int], user: str, d: Vec) -> None:
        lst = self.users.get(user)
        if lst is None:
            lst = self.users[user] = SortedKeys()
            self.pend[user] = [0.0, 0.0, 0.0]
        if lst and key < lst[0]:
            self.heads.remove((lst[0], user))
        if not lst or key < lst[0]:
            self.heads.add((key, user))
        lst.add(key)
        add(self.pend[user], d)

    def remove(self, key: tuple[float, int], user: str, d: Vec) -> None:
        lst = self.users[user]
        if lst[0] == key:
            self.heads.remove((key, user))
            lst.remove(key)
            if lst:
                self.heads.add((lst[0], user))
        else:
            lst.remove(key)
        if not lst:
            del self.users[user]
            del self.pend[user]
        else:
            add(self.pend[user], d, -1.0)

    def clear_pending(self) -> None:
        self.users.clear()
        self.heads = SortedKeys()
        self.pend.clear()


@mypyc_attr(allow_interpreted_subclasses=True)
class CapacityPolicy(Policy):
    """Hierarchical queues with guarantees, elastic ceilings, user limits and preemption."""
    supports_roles = True

    name = "capacity"
    tenant_field = "vc"
    description = ("hierarchical queues (YARN Capacity Scheduler): guaranteed capacity, "
                   "elastic max_capacity, user limits, preemption back to guarantees")
    params = {
        "queues": Param(None, as_optional(as_path),
                        "YAML file in the queues: form of the topology (default: the "
                        "topology's queues, else one equal queue per VC of the trace)"),
        "preemption_interval": Param(3.0, as_float(0.0, lo_open=True),
                                     "seconds between preemption rounds"),
        "total_preemption_per_round": Param(
            0.1, as_float(0.0, 1.0, lo_open=True),
            "largest fraction of the cluster selected for preemption in one round"),
        "max_wait_before_kill": Param(15.0, as_float(0.0),
                                      "seconds a job marked for preemption keeps running"),
        "preempt": Param(True, as_bool, "take resources back for queues below their "
                                        "guarantee (YARN's preemption monitor)"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.queue_specs = parse_queue_param(self.p["queues"])

    # --- per-run state ---

    def attach(self, ctx: Ctx) -> None:
        """Build the queue tree and fresh per-run state."""
        if self.queue_specs is not None:
            tree = QueueTree(self.queue_specs, f"file {self.p['queues']}")
        elif ctx.topology.queues:
            tree = QueueTree(ctx.topology.queues, f"topology {ctx.topology.name}")
        else:
            vcs = []
            i = 0
            while True:
                try:
                    vcs.append(ctx.job_at(i).spec.vc)
                except IndexError:
                    break
                i += 1
            tree = QueueTree(queues_for_vcs(vcs), "one equal queue per VC of the trace")
        self.tree = tree
        specs = (self.queue_specs if self.queue_specs is not None
                 else ctx.topology.queues if ctx.topology.queues else ())
        self.stopped = _stopped_queues(specs)
        self.res = Resources.of(ctx.topology)
        self.mirror = EngineMirror()
        self.used: list[list[float]] = [[0.0, 0.0, 0.0] for _ in tree.queues]
        self.ushare: list[float] = [0.0] * len(tree.queues)  # dominant share of `used`
        self.pcount: list[int] = [0] * len(tree.queues)  # pending jobs in the subtree
        self.leaf: dict[int, _Leaf] = {q.id: _Leaf() for q in tree.queues if q.leaf}
        self.owner: dict[int, int] = {}  # running job index -> leaf id
        self.marks: dict[int, float] = {}  # job index -> time it was marked for preemption
        self.next_round: float | None = None
        self.dirty = True  # state changed since the last preemption round
        self.starving = False  # a leaf below its guarantee could not place its next job
        self.starved: set[int] = set()  # queues below their guarantee on such a leaf's path
        self.healthy = -1  # healthy GPUs at the previous pass
        self.rounds = 0
        self.budget_warning = self._budget_warning(ctx) if self.p["preempt"] else ""

    def _budget_warning(self, ctx: Ctx) -> str:
        """Why no job of the run can ever be preempted under the round budget, or ''.

        YARN's rule (4): a container larger than `total_preemption_per_round` of the
        cluster is never selected. Stops at the first job the budget admits (usually one
        of the first), so it scans the trace only when the warning is due.
        """
        budget = self.p["total_preemption_per_round"]
        share = self.res.share
        smallest = math.inf
        for i in range(ctx.trace_jobs):
            s = share(Resources.demand(ctx.job_at(i).spec))
            if s <= EPS:
                continue
            if s <= budget + EPS:
                return ""
            smallest = min(smallest, s)
        if not math.isfinite(smallest):
            return ""
        gpus = int(self.res.totals[0])
        return (f"capacity: no job of this run can ever be preempted: the smallest job holds "
                f"{smallest:.4g} of the cluster ({gpus} GPUs) and, as in YARN, a job larger "
                f"than total_preemption_per_round={budget:g} of the cluster is never "
                "selected; a queue below its guarantee waits for jobs to end. Raise "
                f"total_preemption_per_round to {smallest:.4g} or more to let preemption "
                "work")

    def warnings(self) -> list[str]:
        """This run's configuration problems, for the summary's `warnings` (said once)."""
        return [self.budget_warning] if self.budget_warning else []

    # --- bookkeeping ---

    def _admit(self, job: JobState) -> str:
        """'' when the job may queue, else why it is rejected."""
        s = job.spec
        tree = self.tree
        qid = tree.leaves.get(s.vc)
        if qid is None:
            if s.vc in tree.parents:
                why = f"queue {s.vc!r} is a parent queue; jobs go to leaf queues"
            else:
                why = f"unknown queue {s.vc!r}"
            return f"{why} (leaf queues: {', '.join(sorted(tree.leaves))})"
        if not job.started_before:
            for q in tree.queues[qid].path:
                name = tree.queues[q].name
                if name in self.stopped:
                    where = "" if q == qid else f" (in stopped queue {name!r})"
                    return (f"queue {s.vc!r} is stopped{where}: it accepts no new jobs "
                            "(state: stopped)")
        need = self.res.share(Resources.demand(s))
        for q in tree.queues[qid].path:
            info = tree.queues[q]
            if need > info.abs_max_capacity + EPS:
                return (f"needs {need:.4g} of the cluster; queue {info.name!r} may use at most "
                        f"{info.abs_max_capacity:.4g} (max_capacity)")
        info = tree.queues[qid]
        if need > info.user_limit + EPS:
            return (f"needs {need:.4g} of the cluster; one user of queue {info.name!r} may hold "
                    f"at most {info.user_limit:.4g} (user_limit_factor "
                    f"{info.user_limit_factor:g} x capacity {info.abs_capacity:.4g})")
        return ""

    def _queue(self, job: JobState) -> None:
        qid = self.tree.leaves[job.spec.vc]
        self.leaf[qid].add((job.spec.submit_time, job.idx), job.spec.user,
                           Resources.demand(job.spec))
        for q in self.tree.queues[qid].path:
            self.pcount[q] += 1

    def _unqueue(self, job: JobState) -> None:
        qid = self.tree.leaves[job.spec.vc]
        self.leaf[qid].remove((job.spec.submit_time, job.idx), job.spec.user,
                              Resources.demand(job.spec))
        for q in self.tree.queues[qid].path:
            self.pcount[q] -= 1

    def _charge(self, job: JobState, sign: float) -> None:
        """Charge (sign 1) or release (-1) a running job to its queues and user."""
        s = job.spec
        qid = self.tree.leaves[s.vc]
        leaf = self.leaf[qid]
        d = Resources.demand(s)
        share = self.res.share
        for q in self.tree.queues[qid].path:
            u = self.used[q]
            add(u, d, sign)
            self.ushare[q] = share(u)
        uu = leaf.user_used.get(s.user)
        if uu is None:
            uu = leaf.user_used[s.user] = [0.0, 0.0, 0.0]
        add(uu, d, sign)
        if sign > 0:
            leaf.running[job.idx] = d
            self.owner[job.idx] = qid
        else:
            del leaf.running[job.idx]
            del self.owner[job.idx]
            if all(abs(x) < EPS for x in uu):
                del leaf.user_used[s.user]

    def _sync(self, ctx: Ctx) -> tuple[list[JobState], set[int] | None]:
        """Apply the engine's changes.

        Returns the newly queued jobs that must be rejected, and the leaves that received
        jobs when nothing else changed (no job stopped, same healthy GPUs), else None: in
        such a pass only those leaves can start anything (every other leaf ended the
        previous pass unable to), so the allocation looks at them alone.
        """
        ch = self.mirror.sync(ctx)
        for job in ch.stopped:
            self._charge(job, -1.0)
            self.marks.pop(job.idx, None)
        bad: list[JobState] = []
        if ch.rebuilt is not None:
            for leaf in self.leaf.values():
                leaf.clear_pending()
            self.pcount = [0] * len(self.tree.queues)
        fresh: set[int] = set()
        for job in ch.rebuilt if ch.rebuilt is not None else ch.queued:
            if self._admit(job):
                bad.append(job)
            else:
                self._queue(job)
                fresh.add(self.tree.leaves[job.spec.vc])
        if ch.stopped or ch.queued or ch.rebuilt:
            self.dirty = True
        healthy = ctx.cluster.healthy_gpus
        changed = bool(ch.stopped) or ch.rebuilt is not None or healthy != self.healthy
        self.healthy = healthy
        return bad, None if changed else fresh

    # --- the pass ---

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Reject, run a due preemption round, allocate, and arm the next round if needed."""
        bad, fresh = self._sync(ctx)
        for job in bad:
            yield Reject(job.job_id, self._admit(job))
            self.mirror.rejected()
        now = ctx.now
        if self.p["preempt"] and self.next_round is not None and due(self.next_round, now):
            self.next_round = None
            for idx in self._round(now):
                job = ctx.job_at(idx)
                yield Preempt(job.job_id, f"capacity: queue {job.spec.vc!r} above its "
                                          "ideal share")
                self._charge(job, -1.0)
                self.mirror.preempted(job)
                self._queue(job)
                self.dirty = True
                fresh = None
        started = yield from self._allocate(ctx, fresh)
        if started:
            self.dirty = True
        if self.p["preempt"]:
            self._arm(ctx)

    def _allocate(self, ctx: Ctx, fresh: set[int] | None
                  ) -> Generator[Decision, None, int]:
        """Start jobs down the tree, least-served queue first, until nothing more fits.

        `fresh`: when not None, only these leaves can start anything (see `_sync`); the
        others, and the `starving` flag, stay as the previous pass left them.
        """
        # queues that cannot start anything more in this pass
        done: set[int] = set() if fresh is None else {q for q in self.leaf if q not in fresh}
        failed: set[tuple] = set()  # requests that did not fit (only less is free later)
        if fresh is None:
            self.starving = False  # a leaf below its guarantee could not place its next job
            self.starved = set()  # the queues below their guarantee on such a leaf's path
        started = 0
        while True:
            got = self._pick(ctx, self.tree.top, done, failed)
            if got is None:
                return started
            qid, job, gpus = got
            yield Start(job.job_id, gpus)
            self._unqueue(job)
            self._charge(job, 1.0)
            self.mirror.started(job)
            started += 1

    def _pick(self, ctx: Ctx, kids: tuple[int, ...], done: set[int],
              failed: set[tuple]) -> tuple[int, JobState, tuple[int, ...]] | None:
        queues = self.tree.queues
        pcount = self.pcount
        ushare = self.ushare
        order = sorted((ushare[c] / queues[c].abs_capacity, queues[c].name, c)
                       for c in kids if pcount[c] and c not in done)
        for _, _, c in order:
            if queues[c].leaf:
                got = self._from_leaf(ctx, c, failed)
            else:
                got = self._pick(ctx, queues[c].children, done, failed)
            if got is not None:
                return got
            done.add(c)
        return None

    def _from_leaf(self, ctx: Ctx, qid: int, failed: set[tuple]
                   ) -> tuple[int, JobState, tuple[int, ...]] | None:
        leaf = self.leaf[qid]
        if not self.pcount[qid]:
            return None
        info = self.tree.queues[qid]
        share = self.res.share
        for key, user in list(leaf.heads):
            job = ctx.job_at(key[1])
            if job.status != PENDING:  # the engine dropped it; the mirror resyncs next pass
                self._unqueue(job)
                continue
            d = Resources.demand(job.spec)
            uu = leaf.user_used.get(user)
            after = list(uu) if uu else [0.0, 0.0, 0.0]
            add(after, d)
            if share(after) > info.user_limit + EPS:
                continue  # this user is at its limit: the next user's job may go
            for q in info.path:
                after = list(self.used[q])
                add(after, d)
                if share(after) > self.tree.queues[q].abs_max_capacity + EPS:
                    return None  # the ceiling: the leaf waits (FIFO)
            if self.starving and self._lends(qid, d):
                return None  # no lending while a queue below its guarantee waits for room
            cls = request_class(job.spec)
            got = None if cls in failed else ctx.place(job)
            if got is None or isinstance(got, Unschedulable):
                failed.add(cls)
                if self.p["preempt"]:
                    below = {q for q in info.path if self.ushare[q]
                             < self.tree.queues[q].abs_capacity - EPS}
                    if below:
                        self.starving = True
                        self.starved |= below
                return None
            return qid, job, got
        return None

    def _lends(self, qid: int, d: Vec) -> bool:
        """True when starting demand `d` in leaf `qid` lends resources away.

        That is, it takes a queue of the leaf's path beyond its guarantee without a
        starving ancestor of that queue to receive it, while queues wait for theirs.
        """
        queues = self.tree.queues
        share = self.res.share
        path = queues[qid].path
        for i, q in enumerate(path):
            grown = list(self.used[q])
            add(grown, d)
            if share(grown) > queues[q].abs_capacity + EPS \
                    and not any(a in self.starved for a in path[i + 1:]):
                return True
        return False

    # --- preemption ---

    def _pending_share(self, qid: int) -> float:
        """Share of pending work the leaf's users could still run under their limits."""
        leaf = self.leaf[qid]
        limit = self.tree.queues[qid].user_limit
        share = self.res.share
        total = 0.0
        for user, vec in leaf.pend.items():
            uu = leaf.user_used.get(user)
            room = limit - (share(uu) if uu else 0.0)
            if room > EPS:
                total += min(share(vec), room)
        return total

    def claims(self, demand: list[float]) -> list[float]:
        """Each queue's claimable guarantee, by queue id.

        A top-level queue's own guarantee; below it, the parent's claim water-filled
        over its children by guarantee, each up to its demand (sub-queues of an
        organisation share its guarantee first: YARN's hierarchical queues).
        """
        queues = self.tree.queues
        claim = [0.0] * len(queues)
        for c in self.tree.top:
            claim[c] = queues[c].abs_capacity
        for q in queues:  # a parent comes before its children
            if not q.leaf:
                self._fill(q.children, claim[q.id], demand, claim, recurse=False)
        return claim

    def ideal(self) -> list[float]:
        """Each queue's ideal share of the cluster (YARN's ideal assignment), by queue id.

        A leaf is capped by its ceiling, its demand and max(used, claim): preemption only
        restores claimable guarantees, and a leaf may claim its idle siblings' part of its
        parent's guarantee.
        """
        queues = self.tree.queues
        demand = [0.0] * len(queues)
        for q in reversed(queues):  # children come after their parent
            if q.leaf:
                used = self.ushare[q.id]
                want = used + self._pending_share(q.id) if self.pcount[q.id] else used
                demand[q.id] = min(q.abs_max_capacity, want)
            else:
                demand[q.id] = min(q.abs_max_capacity, sum(demand[c] for c in q.children))
        claim = self.claims(demand)
        cap = [0.0] * len(queues)
        for q in reversed(queues):
            if q.leaf:
                cap[q.id] = min(demand[q.id], max(self.ushare[q.id], claim[q.id]))
            else:
                cap[q.id] = min(q.abs_max_capacity, sum(cap[c] for c in q.children))
        ideal = [0.0] * len(queues)
        self._fill(self.tree.top, 1.0, cap, ideal)
        return ideal

    def _fill(self, kids: tuple[int, ...], amount: float, cap: list[float],
              ideal: list[float], recurse: bool = True) -> None:
        """Water-fill `amount` over `kids` in proportion to guarantees, each up to its cap."""
        queues = self.tree.queues
        order = sorted(kids, key=lambda c: (cap[c] / queues[c].abs_capacity, queues[c].name))
        weight = sum(queues[c].abs_capacity for c in kids)
        left = amount
        i = 0
        while i < len(order):
            c = order[i]
            g = queues[c].abs_capacity
            if cap[c] <= left * g / weight + EPS:
                ideal[c] = cap[c]
                left -= cap[c]
                weight -= g
                i += 1
            else:
                break
        for c in order[i:]:
            ideal[c] = left * queues[c].abs_capacity / weight
        if recurse:
            for c in kids:
                if not queues[c].leaf:
                    self._fill(queues[c].children, ideal[c], cap, ideal)

    def _round(self, now: float) -> list[int]:
        """One preemption round: select victims within the budget; return those to kill."""
        self.rounds += 1
        self.dirty = False
        ideal = self.ideal()
        share = self.res.share
        budget = self.p["total_preemption_per_round"]
        over = []
        for qid in self.leaf:
            excess = self.ushare[qid] - ideal[qid]
            if excess > EPS:
                over.append((-excess, self.tree.queues[qid].name, qid))
        selected: list[int] = []
        for _, _, qid in sorted(over):
            leaf = self.leaf[qid]
            vec = list(self.used[qid])
            floor = self.tree.queues[qid].abs_capacity
            for idx in reversed(leaf.running):
                if share(vec) <= ideal[qid] + EPS:
                    break
                d = leaf.running[idx]
                ds = share(d)
                if ds <= EPS or ds > budget + EPS:
                    continue  # frees nothing counted, or more than this round may take
                after = list(vec)
                add(after, d, -1.0)
                if share(after) < floor - EPS:
                    continue  # never below the guarantee: the owner would take it back
                selected.append(idx)
                add(vec, d, -1.0)
                budget -= ds
        wait = self.p["max_wait_before_kill"]
        marks: dict[int, float] = {}
        kills: list[int] = []
        for idx in selected:
            t0 = self.marks.get(idx)
            if t0 is None:
                marks[idx] = now
            elif due(t0 + wait, now):
                kills.append(idx)
            else:
                marks[idx] = t0
        self.marks = marks
        return kills

    def _needs_round(self) -> bool:
        """True when a leaf below its guarantee has runnable pending work and one is above."""
        if not any(self.pcount[q] for q in self.tree.top):
            return False
        ushare = self.ushare
        queues = self.tree.queues
        under = over = False
        for qid in self.leaf:
            used, cap = ushare[qid], queues[qid].abs_capacity
            if used > cap + EPS:
                over = True
            if (not under and self.pcount[qid]
                    and any(ushare[q] < queues[q].abs_capacity - EPS
                            for q in queues[qid].path)
                    and self._pending_share(qid) > EPS):
                under = True  # the leaf or an ancestor is below its guarantee
            if under and over:
                return True
        return False

    def _arm(self, ctx: Ctx) -> None:
        """Ask for the next preemption round when one could change anything."""
        interval = self.p["preemption_interval"]
        now = ctx.now
        if self.dirty:
            if not self.marks and not self._needs_round():
                return
            t = (math.floor(now / interval + 1e-9) + 1) * interval
        elif self.marks:
            due = min(self.marks.values()) + self.p["max_wait_before_kill"]
            t = max(math.ceil(due / interval - 1e-9), math.floor(now / interval + 1e-9) + 1)
            t *= interval
        else:
            return
        if self.next_round is None or t < self.next_round - EPS:
            self.next_round = t
            ctx.wake_at(t)
