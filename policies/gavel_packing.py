"""Gavel's space-sharing max-min fairness (`max_min_fairness_packed`), for `gavel-mmf`.

The LP (Gavel's `MaxMinFairnessPolicyWithPacking.get_allocation`, with
`PolicyWithPacking.flatten` / `get_base_constraints`, scheduler/policies/): one variable
x[c, t] per job combination c (each job alone, and each pair of jobs of the same scale
factor whose packed throughputs the performance model measured) and GPU type t. Job j's
effective throughput is sum over the combinations c holding j of T_j(c, t) s_c x[c, t],
normalised by its throughput under an equal split of every type (Gavel's
`ProportionalPolicy` on the jobs' isolated throughputs: sum_t T[j, t] N_t / sum N).
Maximise the least normalised throughput subject to sum_{c holds j, t} x[c, t] <= 1 per
job and sum_c s_c x[c, t] <= N_t per type (a pair counts its GPUs once). Solved by
scipy's HiGHS (`gavel_lp.solve`); a second LP keeps the optimal minimum and maximises the
total normalised throughput (our tie-break, as `gavel-mmf`'s unpacked LP does).

Rounds (Gavel's `_update_priorities` / `_schedule_jobs_on_workers_helper` with pairs):
each combination's priority on type t is x[c, t] over its share of the time type t ran
combinations since the allocation (x x 1e9 before it ran there); per type, fastest
first, combinations are taken in decreasing priority while no member is taken yet and
the type has GPUs for them. A chosen pair runs packed on the same GPUs (`Start` with
share "pack"), at the table's pair throughputs (`sim.perf.speed.ModelSpeed`).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from scipy.sparse import csc_matrix

from schedlab.policies import gavel_lp
from schedlab.policies.base import Ctx
from schedlab.policies.priority import cpu_only_pending, start_cpu_only
from schedlab.sim.jobstate import RUNNING, JobState
from schedlab.sim.model import MILLI, Decision, Preempt, Start, Suspend, Unschedulable

if TYPE_CHECKING:
    from schedlab.policies.gavel import GavelPolicy

EPS: Final = 1e-9
Combo = tuple[int, ...]  # job indices, increasing: one job alone, or a packed pair


@dataclass(frozen=True, slots=True)
class PairRates:
    """Two jobs' rates per GPU type when packed (0 where unmeasured or not usable)."""

    a: int  # position of the first job in the LP's job order
    b: int
    rate_a: tuple[float, ...]
    rate_b: tuple[float, ...]


def packed_allocation(single: np.ndarray, scale: np.ndarray, capacity: np.ndarray,
                      pairs: Sequence[PairRates]) -> tuple[np.ndarray, float]:
    """Gavel's packed max-min LP: x (combinations x types) and the optimal minimum.

    Rows of x: the n jobs alone (in order), then `pairs` (in order). `single` holds each
    job's throughput per type (0: cannot run there), `scale` its GPUs, `capacity` the
    GPUs per type; a pair's rates are in the same units as its jobs' `single` rows.
    """
    n, k = single.shape
    p = len(pairs)
    usable = (single > 0) & (scale[:, None] <= capacity[None, :])
    tput = np.where(usable, single, 0.0)
    share = capacity / capacity.sum() if capacity.sum() > 0 else np.zeros(k)
    prop = tput @ share  # Gavel's ProportionalPolicy.get_throughputs
    prop[prop <= 0] = 1.0
    m = (n + p) * k  # x columns, then z
    # entries of the fairness rows: (job row, column, coefficient)
    rows: list[np.ndarray] = [np.repeat(np.arange(n), k)]
    cols: list[np.ndarray] = [np.arange(n * k)]
    vals: list[np.ndarray] = [(tput * scale[:, None] / prop[:, None]).ravel()]
    ub = np.zeros(m + 1)
    ub[: n * k] = usable.ravel()
    ub[m] = np.inf
    cap_w = np.concatenate([scale, np.zeros(p)])
    for q, pr in enumerate(pairs):
        ra, rb = np.asarray(pr.rate_a), np.asarray(pr.rate_b)
        ok = (ra > 0) & (rb > 0) & usable[pr.a] & usable[pr.b]
        base = (n + q) * k
        ub[base: base + k] = ok
        cap_w[n + q] = scale[pr.a]
        for j, r in ((pr.a, ra), (pr.b, rb)):
            rows.append(np.full(k, j))
            cols.append(base + np.arange(k))
            vals.append(np.where(ok, r, 0.0) * scale[j] / prop[j])
    fr, fc, fv = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    live = np.zeros(n, dtype=bool)
    np.logical_or.at(live, fr, (fv > 0) & (ub[fc] > 0))
    # time rows: every x[c, t] of a combination holding job j
    tr, tc = [], []
    for c, mem in enumerate([np.arange(n)] + [np.array([pr.a, pr.b]) for pr in pairs]):
        if c == 0:
            tr.append(np.repeat(mem, k))
            tc.append(np.arange(n * k))
            continue
        for j in mem:
            tr.append(np.full(k, j))
            tc.append((n + c - 1) * k + np.arange(k))
    cr = np.tile(np.arange(k), n + p)  # capacity rows
    a = csc_matrix((
        np.concatenate([-fv, np.ones(int(live.sum())), np.ones(sum(len(x) for x in tr)),
                        np.repeat(cap_w, k)]),
        (np.concatenate([fr, np.flatnonzero(live), n + np.concatenate(tr), 2 * n + cr]),
         np.concatenate([fc, np.full(int(live.sum()), m), np.concatenate(tc),
                         np.arange(m)]))),
        shape=(2 * n + k, m + 1))
    b = np.concatenate([np.zeros(n), np.ones(n), capacity.astype(float)])
    lb = np.zeros(m + 1)
    c1 = np.zeros(m + 1)
    c1[m] = -1.0
    status, x1 = gavel_lp.solve(c1, a, b, lb, ub)
    if status != 0 or x1 is None:
        return np.zeros((n + p, k)), 0.0
    z = float(x1[m])
    lb[m] = max(0.0, z * (1 - 1e-7) - 1e-9)
    c2 = np.zeros(m + 1)
    np.add.at(c2, fc, -fv)  # maximise the total normalised throughput
    status, x2 = gavel_lp.solve(c2, a, b, lb, ub)
    x = x2 if status == 0 and x2 is not None else x1
    return x[:m].reshape(n + p, k).clip(0.0, 1.0).round(6), z


class PackedRounds:
    """`gavel-mmf` with `packing=true`: the packed LP's allocation run in rounds.

    Holds the allocation (combination -> x row), each combination's time per type since
    the allocation and each type's total; the policy supplies throughput rows, capacity,
    type order, typed specs and parameters.
    """

    def __init__(self, policy: GavelPolicy, ctx: Ctx) -> None:
        self.pol = policy
        k = len(policy.types)
        self.alloc: dict[Combo, np.ndarray] = {}
        self.alloc_ids: frozenset[int] = frozenset()
        self.alloc_time = -math.inf
        self.combo_time: dict[tuple[Combo, int], float] = {}
        self.type_time = np.zeros(k)
        self.next_round = -math.inf
        self.last_round = -math.inf
        self.armed = -math.inf
        self._rates: dict[tuple, float] = {}  # `_pair_rate`
        self._mem: list[float] | None = None  # `_type_mem`
        self.counts = {"packed_starts": 0, "packed_allocations": 0}

    # --- allocation ---

    def _pair_rate(self, ctx: Ctx, job: JobState, other: JobState, t: str) -> float:
        """`job`'s rate (ideal s per s) packed with `other` on type t (0: unmeasured)."""
        s, o = job.spec, other.spec
        key = (s.model, s.batch_size, s.num_gpus, s.gpu_type, o.model, o.batch_size, t)
        got = self._rates.get(key)
        if got is None:  # the reference depends on the job's model, size, batch and type
            v = ctx.perf.pair(job, other, t)
            ref = ctx.perf.reference(job)
            got = self._rates[key] = v / ref if v is not None and ref > 0 else 0.0
        return got

    def _packable(self, ctx: Ctx, job: JobState) -> bool:
        s = job.spec
        return (bool(s.model) and ctx.perf.knows(job) and s.num_gpus > 0
                and s.gpu_share >= 1.0 and s.min_gpus is None and s.max_gpus is None)

    def _type_mem(self, ctx: Ctx) -> list[float]:
        """GPU memory (GB) of each type's smallest modelled GPUs (0: none), made once."""
        if self._mem is None:
            mem = dict.fromkeys(self.pol.types, math.inf)
            for node in ctx.topology.nodes:
                if node.num_gpus and node.gpu_mem_gb > 0 and node.gpu_type in mem:
                    mem[node.gpu_type] = min(mem[node.gpu_type], node.gpu_mem_gb)
            self._mem = [0.0 if not math.isfinite(m) else m for m in mem.values()]
        return self._mem

    def _reallocate(self, ctx: Ctx, ids: list[int]) -> None:
        pol = self.pol
        idx = np.array(ids, dtype=np.int64)
        single = pol._tputs(ctx, idx)
        scale = pol.jobs.need[idx] / MILLI
        capacity = np.asarray(pol._capacity(ctx), dtype=float)
        jobs = [ctx.job_at(i) for i in ids]
        pairs: list[PairRates] = []
        ok = [self._packable(ctx, j) for j in jobs]
        for a in range(len(ids)):
            if not ok[a]:
                continue
            for b in range(a + 1, len(ids)):
                if not ok[b] or jobs[a].spec.num_gpus != jobs[b].spec.num_gpus:
                    continue
                mem = jobs[a].spec.gpu_mem_gb + jobs[b].spec.gpu_mem_gb
                fit = [m <= 0 or mem <= m + 1e-9 for m in self._type_mem(ctx)]
                ra = tuple(self._pair_rate(ctx, jobs[a], jobs[b], t) if f else 0.0
                           for t, f in zip(pol.types, fit, strict=True))
                rb = tuple(self._pair_rate(ctx, jobs[b], jobs[a], t) if f else 0.0
                           for t, f in zip(pol.types, fit, strict=True))
                if any(x > 0 and y > 0 for x, y in zip(ra, rb, strict=True)):
                    pairs.append(PairRates(a, b, ra, rb))
        x, _ = packed_allocation(single, scale, capacity, pairs)
        combos: list[Combo] = [(i,) for i in ids]
        combos += [(ids[pr.a], ids[pr.b]) for pr in pairs]
        self.alloc = {c: x[r] for r, c in enumerate(combos)}
        self.alloc_ids = frozenset(ids)
        self.alloc_time = ctx.now
        self.combo_time = {}
        self.type_time = np.zeros(len(pol.types))
        self.counts["packed_allocations"] += 1
        pol.counts["allocations"] += 1

    # --- time received ---

    def _current(self, ctx: Ctx) -> dict[Combo, tuple[int, float]]:
        """Running combinations: members -> (type index, since when they run so)."""
        out: dict[Combo, tuple[int, float]] = {}
        gti = self.pol.gpu_type_ix
        for j in ctx.running().values():
            if not j.gpus:
                continue
            group = ctx.group_of(j) if j.group is not None else [j]
            combo = tuple(sorted(m.idx for m in group))
            if combo not in out:
                out[combo] = (int(gti[j.gpus[0]]), max(m.held_since for m in group))
        return out

    def _credit(self, ctx: Ctx, current: dict[Combo, tuple[int, float]]) -> None:
        since = max(self.last_round, self.alloc_time)
        for combo, (ti, held) in current.items():
            dt = ctx.now - max(held, since)
            if dt > 0:
                key = (combo, ti)
                self.combo_time[key] = self.combo_time.get(key, 0.0) + dt
                self.type_time[ti] += dt

    def _priority(self, combo: Combo, ti: int) -> float:
        """Gavel's priority: allocation over the share of the type's time received."""
        row = self.alloc.get(combo)
        x = 0.0 if row is None else float(row[ti])
        if x <= EPS:
            return 0.0
        total = self.type_time[ti]
        got = self.combo_time.get((combo, ti), 0.0)
        return x / (got / total) if total > 0 and got > 0 else x * 1e9

    # --- rounds ---

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """CPU-only jobs at once; at a round boundary, the round's decisions."""
        pol = self.pol
        if pol._cpu_only:
            yield from start_cpu_only(ctx, cpu_only_pending(ctx))
        if ctx.now < self.next_round - EPS:
            return
        gpu = pol.jobs.gpu
        pend = [j.idx for j in ctx.pending() if gpu[j.idx]]
        current = self._current(ctx)
        self._credit(ctx, current)
        self.last_round = ctx.now
        self.next_round = ctx.now + pol.p["round"]
        held = sorted(i for c in current for i in c)
        ids = sorted(pend + held)
        if not ids:
            return
        pol._tputs(ctx, np.array(ids, dtype=np.int64))  # rows of jobs new since (once each)
        if frozenset(ids) != self.alloc_ids and (
                not self.alloc or ctx.now - self.alloc_time >= pol.p["reset_interval"]):
            self._reallocate(ctx, ids)
        pol.counts["rounds"] += 1
        made = yield from self._round(ctx, ids, current)
        waiting = made or ctx.running() or ctx.cluster.healthy_gpus < ctx.topology.num_gpus
        if not waiting and pol.p["unallocated"] == "wait":
            waiting = not self.alloc_ids.issuperset(ids)  # for the next allocation
        if waiting and self.armed < self.next_round:
            self.armed = self.next_round
            ctx.wake_at(self.next_round)

    def _choose(self, ctx: Ctx, ids: list[int]) -> list[tuple[Combo, int]]:
        """This round's (combination, type index), greedily per type as Gavel picks."""
        pol = self.pol
        active = set(ids)
        tput = pol.jobs.tput
        need, submit = pol.jobs.need, pol.jobs.submit
        wait = pol.p["unallocated"] == "wait"
        combos = [c for c in self.alloc if all(i in active for i in c)]
        if not wait:
            combos += [(i,) for i in ids if (i,) not in self.alloc]
        left = [int(c) * MILLI for c in pol._capacity(ctx).tolist()]
        order = pol.type_order(ctx, tput[np.array(ids, dtype=np.int64)])
        taken: set[int] = set()
        chosen: list[tuple[Combo, int]] = []
        for ti in order:
            cand = []
            for c in combos:
                row = self.alloc.get(c)
                x = 0.0 if row is None else float(row[ti])
                if len(c) > 1 and x <= EPS:
                    continue  # a pair the allocation does not run here (our choice)
                if any(tput[i, ti] <= 0 for i in c):
                    continue
                cand.append((-self._priority(c, ti), -x, submit[c[0]], c))
            cand.sort()
            for *_, c in cand:
                if left[ti] <= 0:
                    break
                d = int(need[c[0]])
                if any(i in taken for i in c) or d > left[ti]:
                    continue
                left[ti] -= d
                taken.update(c)
                chosen.append((c, ti))
        return chosen

    def _round(self, ctx: Ctx, ids: list[int], current: dict[Combo, tuple[int, float]]
               ) -> Generator[Decision, None, int]:
        """Stop what does not run as chosen, keep the rest, start and pack the new."""
        pol = self.pol
        chosen = self._choose(ctx, ids)
        stop = Suspend if pol.p["stop"] == "suspend" else Preempt
        why = f"{pol.name}: round"
        # where each running job is now: (its combination, type index)
        now_in = {i: (c, ti) for c, (ti, _) in current.items() for i in c}
        keep: set[int] = set()
        claimed: set[Combo] = set()  # running combinations whose GPUs a keep holds
        starts: list[tuple[Combo, int, int | None]] = []  # (combo, type, kept host)
        rest = []
        for c, ti in chosen:
            if current.get(c, (-1, 0.0))[0] == ti:
                keep.update(c)  # runs as chosen: untouched
                claimed.add(c)
            else:
                rest.append((c, ti))
        for c, ti in rest:
            # a member already on the type keeps its GPUs (a former partner, chosen
            # for no combination with it, is stopped): alone, or as the pair's host
            host = next((i for i in c if now_in.get(i, ((), -1))[1] == ti
                         and now_in[i][0] not in claimed), None)
            if host is not None:
                keep.add(host)
                claimed.add(now_in[host][0])
                if len(c) == 1:
                    continue
            starts.append((c, ti, host))
        made = 0
        for i in sorted(now_in):
            if i not in keep:
                yield stop(ctx.job_at(i).job_id, why)
                made += 1
        starts.sort(key=lambda s: (-int(pol.jobs.need[s[0][0]]), s[0]))
        for c, ti, host in starts:
            if host is None:
                first = c[0]
                got = self._place(ctx, first, ti)
                if got is None:
                    continue
                yield Start(ctx.job_at(first).job_id, got)
                pol._started(ctx.job_at(first))
                made += 1
                host = first
            for i in c:
                if i == host:
                    continue
                j, h = ctx.job_at(i), ctx.job_at(host)
                if (j.status == RUNNING or h.status != RUNNING or h.milli != MILLI
                        or not self._mem_fits(ctx, j, h)):
                    continue
                yield Start(j.job_id, tuple(sorted(h.gpus)), "pack")
                pol._started(j)
                self.counts["packed_starts"] += 1
                made += 1
        return made

    def _place(self, ctx: Ctx, i: int, ti: int) -> Any:
        """GPUs for job i on type ti (None: the placer finds none now)."""
        j = ctx.job_at(i)
        if j.status == RUNNING:
            return None
        got = ctx.place(self.pol._typed_spec(j.spec, i, ti))
        return None if isinstance(got, Unschedulable) else got

    @staticmethod
    def _mem_fits(ctx: Ctx, job: JobState, host: JobState) -> bool:
        topo = ctx.topology
        node = topo.nodes[topo.gpu_node[host.gpus[0]]]
        mem = job.spec.gpu_mem_gb + host.spec.gpu_mem_gb
        return not (node.gpu_mem_gb > 0 and mem > node.gpu_mem_gb + 1e-9)
