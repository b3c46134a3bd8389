"""`slurm`: Slurm's scheduling, simulated from the cluster's own slurm.conf and accounts.

Main scheduler (src/slurmctld/job_scheduler.c `_schedule`): on every arrival and end, at
most `default_queue_depth` jobs, and every `sched_interval` the whole queue, in the order
of `sort_job_queue2` (partition PriorityTier, then priority, then submission). A job that
cannot get resources blocks its partition for the rest of the pass and its nodes for other
partitions (`fail_by_part`); a job held by a QOS/association GrpTRES limit is skipped
without blocking (`ESLURM_ACCOUNTING_POLICY`). With `SchedulerType=sched/backfill`, every
`bf_interval` the backfill scheduler (src/plugins/sched/backfill/backfill.c
`_attempt_backfill`) walks up to `bf_max_job_test` jobs in the same order over a map of
free GPUs per node in time: running jobs free theirs at start + time limit (never the
real duration), each job starts now if it fits without touching the map's later
reservations, else reserves the whole nodes it would get at its earliest start within
`bf_window` (times on the `bf_resolution` grid, `_set_slot_time`). Priorities
(priority/multifactor, `_get_priority_internal`) are set at submission and recomputed
every PriorityCalcPeriod, when usage is charged and decayed (`policies/slurm/fairshare.py`).
Time limits: a job's `time_limit` (else its partition's DefaultTime, else MaxTime) becomes
its `max_lifetime` for this run, so a job still running at its limit is killed by the
engine (status `killed`, reason `max_lifetime`: Slurm's TIMEOUT). Preemption
(`preempt/partition_prio`, `preempt/qos`; REQUEUE or SUSPEND): a job that cannot start
stops the lowest-priority preemptable running jobs that make room.
Departures (documented in docs/slurm.md): a cycle takes no time, so `bf_continue` changes
nothing; CPUs and memory are not in the backfill map; a requeued job keeps the time limit
counted from its first start.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from schedlab.policies.base import Ctx, Policy
from schedlab.policies.slurm import fairshare
from schedlab.policies.slurm.accounts import Accounts, Assoc, default_accounts, read_accounts
from schedlab.policies.slurm.conf import Partition, SlurmConf, parse_time, read_slurm_conf
from schedlab.sim.context import start_on
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.jobstate import PENDING, JobState
from schedlab.sim.model import Decision, Preempt, Reject, Suspend, Unschedulable
from schedlab.sim.params import Param, as_path


@dataclass
class SlurmJob:
    """What the policy knows of one job: its partition, QOS, association and limit."""

    part: Partition
    qos: str
    assoc: Assoc | None
    limit: float
    billing: float
    reject: str = ""
    priority: int = 0
    cls: tuple[Any, ...] = ()  # request class: jobs alike for the backfill map
    static: float = math.nan  # weighted size + partition + QOS factors (set once)
    submit: float = 0.0
    run_since: float = math.nan  # start of the current run (usage is charged from here)
    charged_to: float = math.nan  # usage charged up to this time


def _extra(spec: Any, key: str) -> Any:
    """A pass-through column's value, None when absent or empty."""
    for k, v in spec.extra:
        if k == key:
            return None if v is None or (isinstance(v, float) and math.isnan(v)) or v == "" \
                else v
    return None


_STARTS = frozenset(("start", "resume"))
_STOPS = frozenset(("preempt", "suspend", "finish", "fail", "kill"))
_ENDS = frozenset(("kill", "reject", "fail", "finish"))
_REQUEUES = frozenset(("preempt", "suspend"))  # back in the queue at once (a failure
# waits out its retry delay first: `_sync` finds it when it is queued again)


class SlurmPolicy(Policy):
    """Slurm's main and backfill schedulers, multifactor priority, QOS, partitions."""

    name = "slurm"
    description = "Slurm from its slurm.conf: partitions, multifactor priority, QOS, backfill"
    params = {
        "config": Param(None, lambda v: None if v in (None, "") else as_path(v),
                        "the cluster's slurm.conf (none: one partition of every node, "
                        "backfill, multifactor with Slurm's defaults and age/fair-share "
                        "weights 1000/10000)"),
        "accounts": Param(None, lambda v: None if v in (None, "") else as_path(v),
                          "a `sacctmgr dump` file (accounts, users, Fairshare, QOS lines)"),
    }
    tenant_field = "user"
    tenant_kinds = ("account",)
    """tenants.parquet has a row per Slurm account too (`tenant_names`)."""
    container_jobs = False
    orders = False

    # --- setup ---

    def attach(self, ctx: Ctx) -> None:
        """Read the configuration, resolve every job's partition/QOS/account/limit."""
        self.conf: SlurmConf = (read_slurm_conf(self.p["config"]) if self.p["config"] else
                                SlurmConf("(built-in)", {"batch": Partition("batch", None)},
                                          "batch", multifactor=True, weight_age=1000,
                                          weight_fairshare=10000))
        self.acc: Accounts = (read_accounts(self.p["accounts"]) if self.p["accounts"]
                              else default_accounts())
        topo = ctx.topology
        names = {n.name: n.index for n in topo.nodes}
        self.node_gpus = [list(range(topo.cells[n.cell].gpu_lo, topo.cells[n.cell].gpu_hi))
                          for n in topo.nodes]
        self.part_nodes: dict[str, tuple[int, ...] | None] = {}
        for part in self.conf.partitions.values():
            if part.nodes is None:
                self.part_nodes[part.name] = None
                continue
            missing = [n for n in part.nodes if n not in names]
            if missing:
                raise InvalidParameter(
                    f"{self.conf.file}: partition {part.name}: nodes {missing[:3]} are not in "
                    f"the topology (its nodes: {', '.join(list(names)[:5])}...); give the "
                    "slurm.conf as --topology too, or Nodes=ALL")
            self.part_nodes[part.name] = tuple(sorted(names[n] for n in part.nodes))
        self.max_part_factor = max(p.job_factor for p in self.conf.partitions.values()) or 1
        self.max_qos_prio = max((q.priority for q in self.acc.qos.values()), default=0) or 1
        self.total_cpus = sum(n.num_cpus for n in topo.nodes) or float(topo.num_gpus) or 1.0
        self.max_node_gpus = max((len(g) for g in self.node_gpus), default=1) or 1
        self.jobs: dict[int, SlurmJob] = {}
        self.account_of: dict[int, str] = {}  # each job's account, for tenants.parquet
        for idx in range(ctx.trace_jobs):
            self._resolve(ctx, ctx.job_at(idx))
        self.queue: list[tuple[tuple[float, float, int], int]] = []
        self.queued: set[int] = set()
        self.running: dict[int, SlurmJob] = {}
        self.qos_gpus: dict[str, int] = {}
        self.assoc_gpus: dict[int, int] = {}
        self.decay = fairshare.decay_factor(self.conf.decay_half_life)
        self.last_tick = math.nan
        self.next_tick = 0.0
        self.next_sched = 0.0
        self.next_bf = 0.0
        self.timeouts = 0
        self.bf_started = 0
        self.to_reject: list[int] = []
        self.cpu_queued: set[int] = set()  # queued jobs that ask no GPU
        self.changes = 0  # queue arrivals and leavings, for backfill's "nothing changed"
        self.bf_state: tuple[int, int, float] = (-1, -1, math.nan)
        self.preemptions = 0
        self._fs_update()

    def _resolve(self, ctx: Ctx, job: JobState) -> None:
        s = job.spec
        pname = _extra(s, "partition") or self.conf.default_partition
        part = self.conf.partitions.get(str(pname))
        reject = ""
        if part is None:
            part = self.conf.partitions[self.conf.default_partition]
            reject = f"Invalid partition name specified: {pname}"
        user = s.user or "root"
        account = str(_extra(s, "account") or self.acc.default_account.get(user, "")
                      or ("default" if not self.acc.given else ""))
        self.account_of[job.idx] = account
        assoc = self.acc.user_assoc(account, user)
        if assoc is None and not self.acc.given:
            assoc = self.acc.add_user(account, user)
        if assoc is None and not reject:
            reject = f"Invalid account or account/partition combination: {account}/{user}"
        qos = str(_extra(s, "qos") or (assoc.default_qos if assoc else "") or "normal")
        if not reject and qos not in self.acc.qos:
            reject = f"Invalid qos specification: {qos}"
        if not reject and assoc and assoc.qos and qos not in assoc.qos:
            reject = f"Invalid qos specification: {qos} not allowed for {user}"
        if not reject and part.allow_accounts is not None and account not in part.allow_accounts:
            reject = f"Invalid account or account/partition combination: {account}"
        if not reject and part.allow_qos is not None and qos not in part.allow_qos:
            reject = f"Invalid qos for job request: {qos} in partition {part.name}"
        raw = _extra(s, "time_limit")
        if raw is None:
            limit = part.default_time if part.default_time is not None else part.max_time
        else:
            try:
                limit = float(raw) if not isinstance(raw, str) or raw.replace(
                    ".", "", 1).isdigit() else parse_time(raw)
            except ValueError:
                raise InvalidParameter(f"job {s.job_id}: time_limit {raw!r}: allowed: seconds "
                                       "> 0 or a Slurm time (D-HH:MM:SS)") from None
            if not limit > 0:
                raise InvalidParameter(f"job {s.job_id}: time_limit {raw!r}: allowed: > 0")
        if not reject and limit > part.max_time:
            reject = f"Requested time limit is invalid (PartitionTimeLimit {part.name})"
        nodes = self.part_nodes[part.name]
        cap = sum(len(self.node_gpus[n]) for n in (nodes if nodes is not None
                                                   else range(len(self.node_gpus))))
        if not reject and s.num_gpus > cap:
            reject = f"Requested node configuration is not available (partition {part.name})"
        billing = self._billing(part, s)
        cls = (part.name, s.num_gpus, s.task_gpus, limit, s.num_cpus, s.mem_gb, s.disk_gb,
               s.gpu_type)
        self.jobs[job.idx] = SlurmJob(part, qos, assoc, limit, billing, reject, cls=cls,
                                      submit=s.submit_time)
        if math.isfinite(limit) and not reject and (s.max_lifetime is None
                                                    or limit < s.max_lifetime):
            job.spec = replace(s, max_lifetime=limit)

    def _billing(self, part: Partition, s: Any) -> float:
        """Billable TRES of a job (`calc_job_billable_tres`): TRESBillingWeights, else CPUs."""
        cpus = s.num_cpus or s.num_tasks
        if not part.billing:
            return float(cpus)
        total = 0.0
        for k, w in part.billing:
            total += w * (cpus if k == "cpu" else s.num_gpus if k == "gres/gpu" else s.mem_gb)
        return total

    # --- priority (priority/multifactor) ---

    def _priority(self, now: float, job: JobState, sj: SlurmJob) -> int:
        """`_get_priority_internal` + `set_priority_factors` at time `now`."""
        c = self.conf
        if not c.multifactor:  # priority/basic: earlier submission first
            return 0
        if math.isnan(sj.static):
            sj.static = self._static_priority(job, sj)
        age = 0.0
        if c.weight_age and c.max_age > 0:
            age = min(1.0, max(0.0, now - job.spec.submit_time) / c.max_age)
        elif c.weight_age:
            age = 1.0
        fs = sj.assoc.fs_factor if sj.assoc is not None else 0.0
        prio = c.weight_age * age + c.weight_fairshare * fs + sj.static
        return max(1, min(int(prio), 0xFFFFFFFF))

    def _static_priority(self, job: JobState, sj: SlurmJob) -> float:
        """The weighted job-size, partition and QOS factors (fixed for a job's life)."""
        c = self.conf
        js = 0.0
        if c.weight_jobsize:
            nodes = len(self.node_gpus)
            min_nodes = max(1, math.ceil(job.spec.num_gpus / self.max_node_gpus))
            cpus = job.spec.num_cpus or job.spec.num_tasks
            if c.favor_small:
                js = (nodes - min_nodes) / nodes if nodes > min_nodes else 0.0
                js = (js + (self.total_cpus - cpus) / self.total_cpus) / 2
            else:
                js = (min_nodes / nodes + cpus / self.total_cpus) / 2
            js = min(1.0, max(0.0, js))
        part = sj.part.job_factor if c.no_normal_part else sj.part.job_factor / \
            self.max_part_factor
        q = self.acc.qos[sj.qos].priority if sj.qos in self.acc.qos else 0
        qos = q if c.no_normal_qos else q / self.max_qos_prio
        return float(c.weight_jobsize * js + c.weight_partition * part + c.weight_qos * qos)

    def _key(self, job: JobState, sj: SlurmJob) -> tuple[float, float, int]:
        return (-sj.part.priority_tier, -sj.priority, job.idx)

    def _fs_update(self) -> None:
        if self.conf.fair_tree:
            fairshare.fair_tree(self.acc.root)
        else:
            fairshare.classic(self.acc.root)

    def _charge(self, sj: SlurmJob, until: float) -> None:
        """Usage of a running job up to `until` (`_apply_new_usage`)."""
        if sj.assoc is None or not until > sj.charged_to:
            return
        delta = until - sj.charged_to
        q = self.acc.qos.get(sj.qos)
        factor = q.usage_factor if q else 1.0
        fairshare.add_usage(sj.assoc, delta * self.decay ** delta * sj.billing * factor)
        sj.charged_to = until

    def _tick(self, ctx: Ctx, t: float) -> None:
        """One pass of `_decay_thread` at time t: decay, charge, fair-share, priorities."""
        if math.isfinite(self.last_tick):
            fairshare.decay_all(self.acc.root, self.decay ** (t - self.last_tick))
            for sj in self.running.values():
                self._charge(sj, t)
        self.last_tick = t
        self._fs_update()
        keep: list[tuple[tuple[float, float, int], int]] = []
        c = self.conf
        queued, jobs = self.queued, self.jobs
        wa = c.weight_age if c.multifactor else 0
        wf = c.weight_fairshare if c.multifactor else 0
        max_age = c.max_age
        for _, idx in self.queue:  # the same sum as `_priority`, inlined: every job a tick
            if idx not in queued:
                continue
            sj = jobs[idx]
            if c.multifactor:
                age = (min(1.0, max(0.0, t - sj.submit) / max_age) if max_age > 0 else 1.0) \
                    if wa else 0.0
                fs = sj.assoc.fs_factor if wf and sj.assoc is not None else 0.0
                if math.isnan(sj.static):
                    sj.static = self._static_priority(ctx.job_at(idx), sj)
                sj.priority = max(1, min(int(wa * age + wf * fs + sj.static), 0xFFFFFFFF))
            keep.append(((-sj.part.priority_tier, -sj.priority, idx), idx))
        keep.sort()
        self.queue = keep

    # --- events ---

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Keep the queue, the running set, the GPU counts of QOS/accounts and usage."""
        sj = self.jobs.get(job.idx)
        if sj is None:
            return
        now = ctx.now
        if kind in _STARTS and job.idx not in self.running:
            self.running[job.idx] = sj
            sj.run_since = sj.charged_to = now
            self.queued.discard(job.idx)
            self.cpu_queued.discard(job.idx)
            self.qos_gpus[sj.qos] = self.qos_gpus.get(sj.qos, 0) + job.spec.num_gpus
            if sj.assoc is not None:
                self._assoc_add(sj.assoc, job.spec.num_gpus)
        elif kind in _STOPS and job.idx in self.running:
            del self.running[job.idx]
            self._charge(sj, now)
            self.qos_gpus[sj.qos] -= job.spec.num_gpus
            if sj.assoc is not None:
                self._assoc_add(sj.assoc, -job.spec.num_gpus)
            if kind == "kill" and job.reason == "max_lifetime":
                self.timeouts += 1
            if kind in _REQUEUES and job.idx not in self.queued:
                self._enqueue(now, job, sj, False)
        elif kind == "submit" and job.idx not in self.queued:
            self._enqueue(now, job, sj, True)
        elif kind in _ENDS and job.idx in self.queued:  # ended while waiting
            self.queued.discard(job.idx)
            self.cpu_queued.discard(job.idx)

    def _enqueue(self, now: float, job: JobState, sj: SlurmJob, new: bool) -> None:
        """Into the priority-sorted queue (a new job's priority set as `priority_p_set`)."""
        if sj.reject:
            self.to_reject.append(job.idx)
            return
        self.queued.add(job.idx)
        self.changes += 1
        if not job.spec.num_gpus:
            self.cpu_queued.add(job.idx)
        if new:
            sj.priority = self._priority(now, job, sj)
        insort(self.queue, (self._key(job, sj), job.idx))

    def _sync(self, ctx: Ctx) -> None:
        """Jobs that became pending without an event of theirs (released dependents)."""
        if ctx.pending_count == len(self.queued):
            return
        for job in ctx.pending():
            if job.idx not in self.queued and job.idx in self.jobs:
                self._enqueue(ctx.now, job, self.jobs[job.idx], True)

    def _assoc_add(self, assoc: Assoc, n: int) -> None:
        a: Assoc | None = assoc
        while a is not None:
            self.assoc_gpus[id(a)] = self.assoc_gpus.get(id(a), 0) + n
            a = a.parent

    def _limits_ok(self, job: JobState, sj: SlurmJob) -> bool:
        """QOS and association GrpTRES=gres/gpu (`acct_policy_job_runnable_pre_select`)."""
        if not self.conf.enforce_limits:
            return True
        n = job.spec.num_gpus
        q = self.acc.qos[sj.qos]
        if self.qos_gpus.get(sj.qos, 0) + n > q.gpu_limit:
            return False
        a = sj.assoc
        while a is not None:
            if self.assoc_gpus.get(id(a), 0) + n > a.gpu_limit:
                return False
            a = a.parent
        return True

    # --- placement ---

    def _free(self, ctx: Ctx, node: int) -> int:
        """Whole free GPUs of a healthy node (0 when it is down)."""
        if not ctx.cluster.node_up[node]:
            return 0
        return ctx.cluster.cell_free[ctx.topology.nodes[node].cell]

    def _place(self, ctx: Ctx, job: JobState, nodes: tuple[int, ...] | None,
               blocked: set[int]) -> Any:
        """GPUs on the allowed nodes: the run's placer when all are, else Slurm's node order.

        cons_tres order: lowest-numbered nodes first, whole tasks on a node.
        """
        if nodes is None and not blocked:
            return ctx.place(job)
        s = job.spec
        if s.num_gpus == 0:
            return ctx.place(job)
        per, tasks = s.task_gpus, s.num_tasks
        cl = ctx.cluster
        free = cl.gpu_free
        asks = ((s.num_cpus / tasks, cl.node_cpu_free, "num_cpus"),
                (s.mem_gb / tasks, cl.node_mem_free, "mem_gb"),
                (s.disk_gb, cl.node_disk_free, "disk_gb"))
        topo = ctx.topology
        got: list[int] = []
        for n in (nodes if nodes is not None else range(len(self.node_gpus))):
            if n in blocked or not cl.node_up[n] or (
                    s.gpu_type and topo.nodes[n].gpu_type != s.gpu_type):
                continue
            avail = [g for g in self.node_gpus[n] if free[g] >= 1000]
            k = min(len(avail) // per, tasks)
            for ask, have, cap in asks:
                if ask > 0 and getattr(topo.nodes[n], cap):  # a capacity of 0: not modelled
                    k = min(k, int(have[n] // ask))
            got.extend(avail[:k * per])
            tasks -= k
            if not tasks:
                return tuple(sorted(got))
        return Unschedulable("no nodes of the partition free", True)

    # --- the pass ---

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Decay tick, then the main scheduler, then (on its timer) the backfill scheduler."""
        now = ctx.now
        for idx in self.to_reject:
            job = ctx.job_at(idx)
            if job.status == PENDING:
                yield Reject(job.job_id, self.jobs[idx].reject)
        self.to_reject.clear()
        self._sync(ctx)
        while self.next_tick <= now:
            self._tick(ctx, self.next_tick)
            self.next_tick += self.conf.calc_period
        full = now >= self.next_sched
        while self.next_sched <= now:
            self.next_sched += self.conf.sched_interval
        yield from self._main(ctx, full)
        if self.conf.backfill and now >= self.next_bf:
            while self.next_bf <= now:
                self.next_bf += self.conf.bf_interval
            yield from self._backfill(ctx)
        if self.queued:
            ctx.wake_at(min(self.next_sched, self.next_tick,
                            self.next_bf if self.conf.backfill else math.inf))
        else:
            ctx.wake_at(self.next_tick)

    def _pending(self, ctx: Ctx) -> Iterator[tuple[JobState, SlurmJob]]:
        """Pending jobs in priority order.

        Entries of jobs no longer queued are dropped when they outnumber the live ones.
        """
        if len(self.queue) > 2 * len(self.queued) + 64:
            self.queue = [e for e in self.queue if e[1] in self.queued]
        for _, idx in list(self.queue):
            if idx in self.queued:
                job = ctx.job_at(idx)
                if job.status == PENDING:
                    yield job, self.jobs[idx]

    def _main(self, ctx: Ctx, full: bool) -> Iterator[Decision]:
        """`_schedule`: priority order, a failed job blocks its partition and its nodes."""
        failed: set[str] = set()
        blocked: set[int] = set()
        depth = 0
        for job, sj in self._pending(ctx):
            if job.status != PENDING:
                continue
            if not full and depth >= self.conf.default_queue_depth:
                break
            depth += 1
            if sj.part.name in failed:
                if len(failed) == len(self.conf.partitions):
                    break  # every partition blocked: nothing more starts this pass
                continue
            if not self._limits_ok(job, sj):
                continue
            got = self._place(ctx, job, self.part_nodes[sj.part.name], blocked)
            if not isinstance(got, Unschedulable):
                yield start_on(job.job_id, got)
                continue
            stops = self._victims(ctx, job, sj)
            if stops:
                yield from stops
                got = self._place(ctx, job, self.part_nodes[sj.part.name], blocked)
                if not isinstance(got, Unschedulable):
                    yield start_on(job.job_id, got)
                    continue
            failed.add(sj.part.name)
            nodes = self.part_nodes[sj.part.name]
            blocked.update(nodes if nodes is not None else range(len(self.node_gpus)))

    # --- preemption ---

    def _mode(self, sj: SlurmJob) -> str:
        q = self.acc.qos.get(sj.qos)
        if self.conf.preempt_type == "preempt/qos" and q is not None and q.preempt_mode:
            return q.preempt_mode
        return sj.part.preempt_mode or self.conf.preempt_mode

    def _can_preempt(self, sj: SlurmJob, other: SlurmJob) -> bool:
        t = self.conf.preempt_type
        if t == "preempt/partition_prio":
            return other.part.priority_tier < sj.part.priority_tier
        if t == "preempt/qos":
            return other.qos in self.acc.qos[sj.qos].preempt
        return False

    def _victims(self, ctx: Ctx, job: JobState, sj: SlurmJob) -> list[Decision]:
        """Lowest-priority preemptable running jobs, fewest that make room (`_preempt_jobs`)."""
        if self.conf.preempt_type == "preempt/none":
            return []
        cands = sorted(((o.priority, -o.run_since, idx) for idx, o in self.running.items()
                        if self._mode(o) != "OFF" and self._can_preempt(sj, o)))
        if not cands:
            return []
        chosen: list[int] = []
        nodes = self.part_nodes[sj.part.name]
        for _, _, idx in cands:
            chosen.append(idx)
            with ctx.what_if([ctx.job_at(i) for i in chosen]) as view:
                if nodes is None:
                    ok = not isinstance(view.place(job), Unschedulable)
                else:
                    free = view.cluster.gpu_free
                    per = job.spec.task_gpus
                    ok = sum(sum(1 for g in self.node_gpus[n] if free[g] >= 1000) // per
                             for n in nodes) >= job.spec.num_tasks
            if ok:
                out: list[Decision] = []
                for i in chosen:
                    o = self.jobs[i]
                    jid = ctx.job_at(i).job_id
                    why = f"preempted by {job.job_id}"
                    out.append(Suspend(jid, why) if self._mode(o) == "SUSPEND"
                               else Preempt(jid, why))
                self.preemptions += len(chosen)
                return out
        return []

    # --- backfill ---

    def _backfill(self, ctx: Ctx) -> Iterator[Decision]:
        """`_attempt_backfill` over a per-node map of free GPUs in time (module doc)."""
        res = self.conf.bf_resolution
        now = ctx.now
        begin = math.floor(now / res) * res
        window_end = math.floor((now + self.conf.bf_window) / res) * res
        state = (ctx.cluster.version, self.changes, self.last_tick)
        if not self.queued or state == self.bf_state:
            return  # nothing started, ended or arrived since the last cycle: same answers
        self.bf_state = state
        gpu_node = ctx.topology.gpu_node
        releases: dict[float, dict[int, int]] = {}
        for idx, sj in self.running.items():  # running jobs free their GPUs at their limit
            j = ctx.job_at(idx)
            t = max(j.first_start + sj.limit, begin + res)
            if t <= window_end:
                at = releases.setdefault(t, {})
                for g in j.gpus:
                    at[gpu_node[g]] = at.get(gpu_node[g], 0) + 1
        plan = _Plan(begin, window_end,
                     [self._free(ctx, n) for n in range(len(self.node_gpus))], releases)
        failed: dict[tuple[Any, ...], float] = {}  # request class -> no start before this
        if not self.cpu_queued and not any(any(row) for row in plan.free):
            return  # no GPU free now nor freed within the window, no CPU-only job waiting
        tested = 0
        max_test = self.conf.bf_max_job_test
        every = tuple(range(len(self.node_gpus)))
        for job, sj in self._pending(ctx):
            if tested >= max_test:
                break
            tested += 1
            after = failed.get(sj.cls, begin)  # the map only fills up during a cycle
            if after == math.inf or not self._limits_ok(job, sj):
                continue
            cls = sj.cls
            nodes = self.part_nodes[sj.part.name]
            allowed = nodes if nodes is not None else every
            sp = job.spec
            start, picked = plan.earliest(sp, sj.limit, allowed, after)
            if start is None:
                failed[cls] = math.inf
                continue
            failed[cls] = start
            if start <= begin:
                blocked = plan.blocked(now, now + sj.limit)
                got = self._place(ctx, job, nodes, blocked)
                if not isinstance(got, Unschedulable):
                    yield start_on(job.job_id, got)
                    self.bf_started += 1
                    plan.take(got, gpu_node, max(now + sj.limit, begin + res))
                    continue
                start, picked = plan.earliest(sp, sj.limit, allowed, begin + res)
                if start is None:
                    continue
            end = start + sj.limit + res - 1  # `_set_slot_time`
            plan.reserve(math.floor(start / res) * res,
                         math.floor(end / res) * res if math.isfinite(end) else math.inf,
                         picked)

    def explain(self, ctx: Ctx, job: JobState) -> str:
        """Why a job can never start: a rejection reason, or a GrpTRES it alone exceeds."""
        sj = self.jobs.get(job.idx)
        if sj is None:
            return ""
        if sj.reject:
            return sj.reject
        n = job.spec.num_gpus
        if self.conf.enforce_limits:
            q = self.acc.qos[sj.qos]
            if n > q.gpu_limit:
                return f"QOSGrpGRES: QOS {q.name} GrpTRES=gres/gpu={q.gpu_limit:g} < {n} GPUs"
            a = sj.assoc
            while a is not None:
                if n > a.gpu_limit:
                    return (f"AssocGrpGRES: {a.name} GrpTRES=gres/gpu={a.gpu_limit:g} < "
                            f"{n} GPUs")
                a = a.parent
        return ""

    def tenant_names(self, idx: int) -> tuple[str]:
        """The job's account (as resolved: its `account` column, else the user's default)."""
        return (self.account_of.get(idx, ""),)

    def metrics(self) -> dict[str, Any]:
        """Timeouts (jobs killed at their time limit), backfilled starts, preemptions."""
        return {"timeouts": self.timeouts, "backfill_starts": self.bf_started,
                "preemptions": self.preemptions}


class _Plan:
    """Backfill's node-space map (`node_space_map_t`).

    Free GPUs per node from each release time on, and the whole nodes reserved for jobs
    planned later.
    """

    def __init__(self, begin: float, window_end: float, free: list[int],
                 releases: dict[float, dict[int, int]]) -> None:
        self.begin = begin
        self.window_end = window_end
        self.times: list[float] = [begin]  # sorted release times within the window
        self.free: list[list[int]] = [free]  # free GPUs per node from times[i] on
        row = free
        for t in sorted(releases):
            row = list(row)
            for n, k in releases[t].items():
                row[n] += k
            self.times.append(t)
            self.free.append(row)
        self.resv: list[tuple[float, float, frozenset[int]]] = []

    def _at(self, t: float) -> int:
        """Index of the map row for time t (a row is created at t if none starts there)."""
        i = bisect_right(self.times, t) - 1
        if self.times[i] != t:
            self.times.insert(i + 1, t)
            self.free.insert(i + 1, list(self.free[i]))
            i += 1
        return i

    def take(self, gpus: tuple[int, ...], gpu_node: tuple[int, ...], t: float) -> None:
        """A job started now holds these GPUs until t."""
        if t <= self.window_end:
            self._at(t)
        for g in gpus:
            n = gpu_node[g]
            for k, row in enumerate(self.free):
                if self.times[k] < t:
                    row[n] -= 1

    def reserve(self, start: float, end: float, nodes: list[int]) -> None:
        """Whole nodes reserved over [start, end) for a job planned later."""
        self.resv.append((start, end, frozenset(nodes)))
        if end <= self.window_end:
            self._at(end)

    def blocked(self, start: float, end: float) -> set[int]:
        """Nodes reserved for other jobs at some time in [start, end)."""
        return {n for s0, e0, ns in self.resv if s0 < end and start < e0 for n in ns}

    def earliest(self, spec: Any, limit: float, allowed: tuple[int, ...], after: float
                 ) -> tuple[float | None, list[int]]:
        """The earliest map time >= after at which the job fits for its whole limit.

        With the nodes it takes; (None, []) when not within the window.
        """
        per, tasks = spec.task_gpus or 1, spec.num_tasks
        for i, t in enumerate(self.times):
            if t < after:
                continue
            if t > self.window_end:
                break
            row = self.free[i]
            if spec.num_gpus and sum(row[n] for n in allowed) < spec.num_gpus:
                continue
            blocked = self.blocked(t, t + limit)
            picked: list[int] = []
            left = tasks
            for n in allowed:
                if n in blocked:
                    continue
                if not spec.num_gpus:
                    return t, [n]
                k = min(row[n] // per, left)
                if k:
                    picked.append(n)
                    left -= k
                    if not left:
                        return t, picked
        return None, []
