"""`vc-quota`: the baseline HiveD was built against, VCs with GPU-count quotas only.

YARN-CS style: a VC may hold up to its quota of GPUs anywhere in the cluster; where a job
goes is the engine placer's choice (`consolidated` by default: a multi-GPU job waits for
GPUs close together). A VC whose quota has room can still wait because the free GPUs are
scattered by other VCs' jobs: HiveD's "sharing anomaly".

Quotas: the `quotas` file (vc -> GPUs), or by default the GPUs of each VC's cells (the
topology's HiveD `virtualClusters` or native `vcs:`), or, with no VCs, one VC `default`
owning the cluster that every job belongs to. Inside a VC jobs start highest priority
first, then in arrival order; the head that does not fit (quota or placement) makes its
VC wait. No preemption. A job of an unknown VC, or larger than its VC's quota, is rejected
with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import yaml
from sortedcontainers import SortedList

from schedlab.policies.base import Policy
from schedlab.policies.hived.config import DEFAULT_VC, build_physical, resolve_vcs
from schedlab.policies.hived.tracking import JobTracker
from schedlab.sim.errors import InvalidParameter, did_you_mean
from schedlab.sim.jobstate import PENDING, JobState
from schedlab.sim.model import Decision, Start, Unschedulable
from schedlab.sim.params import Param, as_optional, as_path

if TYPE_CHECKING:
    from schedlab.sim.interfaces import PolicyContext
    from schedlab.topologies.tree import Topology


def load_quotas(path: str) -> dict[str, int]:
    """A `vc: GPUs` YAML mapping, validated."""
    try:
        data = yaml.safe_load(open(path, encoding="utf-8").read())
    except (OSError, yaml.YAMLError) as e:
        raise InvalidParameter(f"parameter quotas: cannot read {path}: {e}") from None
    if not isinstance(data, Mapping) or not data:
        raise InvalidParameter(f"parameter quotas: {path}: got {type(data).__name__}; "
                               "allowed: a mapping of VC name -> GPUs")
    out = {}
    for vc, n in data.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InvalidParameter(f"parameter quotas: {path}: {vc}: got {n!r}; allowed: "
                                   "an integer number of GPUs >= 0")
        out[str(vc)] = n
    return out


def cell_quotas(topo: Topology) -> tuple[dict[str, int], bool]:
    """GPUs of each VC's cells, and whether the topology defines VCs at all."""
    pc = build_physical(topo)
    vcs, given = resolve_vcs(topo, pc)
    out = {}
    for name, vc in vcs.items():
        gpus = sum(n * pc.chains[chain].leaves[level] for chain, level, n in vc.cells)
        gpus += sum(pc.cells[cid].total for _pid, cid in vc.pinned)
        out[name] = gpus
    return out, given


class VcQuotaPolicy(Policy):
    """GPU-count quotas per VC, placement by the engine's placer (YARN-CS)."""
    supports_roles = True

    name = "vc-quota"
    tenant_field = "vc"
    description = ("VCs with GPU-count quotas only (YARN-CS): a VC uses up to its quota "
                   "anywhere; shows HiveD's sharing anomaly")
    params = {
        "quotas": Param(None, as_optional(as_path),
                        "YAML file vc -> GPUs (default: the GPUs of each VC's cells)"),
    }

    def attach(self, ctx: PolicyContext) -> None:
        """Read the quotas and index the VCs."""
        quotas, given = cell_quotas(ctx.topology)
        if self.p["quotas"]:
            quotas, given = load_quotas(self.p["quotas"]), True
        self.quotas = quotas
        self.given = given
        self.order = list(quotas)
        self.used = dict.fromkeys(quotas, 0)
        self.queues: dict[str, SortedList] = {vc: SortedList() for vc in quotas}
        self.jobs = JobTracker()
        self.dirty: set[str] = set(quotas)
        self.placement_blocked: set[str] = set()  # heads that fit the quota, not the cluster
        self.up = list(ctx.cluster.node_up)

    def notify(self, ctx: PolicyContext, job: JobState, kind: str) -> None:
        """Remember jobs that ended or were requeued."""
        self.jobs.notify(job, kind)

    def schedule(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Start VC heads that fit their quota and the placer, VC by VC."""
        yield from self.jobs.sync(ctx, self._gone, self._enqueue, self._drop)
        up = ctx.cluster.node_up
        if up != self.up:
            self.up = list(up)
            self.dirty.update(self.order)
        for vc in self.order:
            if vc not in self.dirty:
                continue
            self.dirty.discard(vc)
            self.placement_blocked.discard(vc)
            q = self.queues[vc]
            while q:
                job = ctx.job_at(q[0][2])
                if job.status != PENDING:
                    self._drop(job)
                    continue
                n = job.spec.num_gpus
                if self.used[vc] + n > self.quotas[vc]:
                    break
                got = ctx.place(job)
                if isinstance(got, Unschedulable):
                    self.placement_blocked.add(vc)
                    break
                self._drop(job)
                self.jobs.running[job.idx] = (vc, n)
                self.used[vc] += n
                yield Start(job.job_id, got)

    def _vc(self, job: JobState) -> str:
        return job.spec.vc if self.given else DEFAULT_VC

    def _enqueue(self, job: JobState) -> str:
        vc = self._vc(job)
        if vc not in self.queues:
            return (f"vc-quota: unknown VC {vc!r}{did_you_mean(vc, self.order)}; known: "
                    f"{', '.join(self.order)}")
        s = job.spec
        if s.num_gpus > self.quotas[vc]:
            return (f"vc-quota: needs {s.num_gpus} GPUs, more than VC {vc!r}'s quota of "
                    f"{self.quotas[vc]}")
        self.queues[vc].add((-s.priority, s.submit_time, job.idx))
        self.jobs.pending[job.idx] = vc
        self.dirty.add(vc)
        return ""

    def _drop(self, job: JobState) -> None:
        vc = self.jobs.pending.pop(job.idx, None)
        if vc is not None:
            s = job.spec
            self.queues[vc].discard((-s.priority, s.submit_time, job.idx))

    def _gone(self, idx: int, tag: Any) -> None:
        vc, n = tag
        self.used[vc] -= n
        self.dirty.add(vc)
        self.dirty |= self.placement_blocked  # freed GPUs may unblock any placement
