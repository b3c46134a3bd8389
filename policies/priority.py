"""Priority policies: run pending jobs in the order of a key, optionally preemptively.

`PriorityPolicy` is the fast, documented way to write a policy that orders the queue
(SJF, SRTF, Tiresias, Themis and the README's example build on it). It keeps the pending
jobs in a sorted index fed by the engine's `notify` hook (`JobFeed`), so a pass costs the
jobs whose state changed plus the jobs it starts, never a sort or a scan of the queue;
and it walks that index with `priority_walk`, which asks the placer once per request
class and stops as soon as nothing more can start.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from schedlab.policies.base import Ctx, Policy, owner
from schedlab.policies.victims import VictimPool, find_victims, free_milli
from schedlab.sim.cfuncs import heapify, heappop, heappush
from schedlab.sim.context import (
    SchedContext as SchedContext,  # re-exported: policies import it here
)
from schedlab.sim.context import start_on
from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.jobstate import PENDING, RUNNING, JobState
from schedlab.sim.model import Decision, Preempt, Start, Suspend, Unschedulable
from schedlab.sim.params import Param, as_choice
from schedlab.sim.queue import SortedKeys

Key = tuple[Any, ...]
Search = Callable[[Ctx, JobState, Key, VictimPool],
                  tuple[list[JobState], tuple[int, ...]] | None]
"""A victim search: (ctx, job, its key, pool) -> (victims, placement) or None."""


def _owner(ctx: Ctx) -> Callable[[JobState], bool] | None:
    """`schedlab.policies.base.owner`, answered at once for the run's own context (it owns all)."""
    return None if type(ctx) is SchedContext else owner(ctx)


@mypyc_attr(allow_interpreted_subclasses=True)
class JobFeed:
    """The jobs whose status may have changed since the last call, oldest change first.

    Fed by the engine's `Policy.notify` hook, so a pass costs the number of changes, not
    the size of the queue. The hook fires while the engine is still applying a change,
    so jobs are only noted there and read at the next pass. A job released by its last
    dependency finishing is noted with that finish (it has no event of its own).
    """

    def __init__(self) -> None:
        self._dirty: dict[int, None] = {}

    def note(self, job: JobState, kind: str) -> None:
        """Remember a job that had an event (and its dependents, on a finish)."""
        self._dirty[job.idx] = None
        if kind == "finish":
            for d in job.dependents:
                self._dirty[d] = None

    def changed(self, ctx: PolicyContext) -> list[JobState]:
        """Jobs noted since the last call (each once, in the order first noted).

        A context narrowed to part of the run (hived's per-VC queues) offers
        `owns(job)`; jobs it does not own are left out (a dependent noted with a finish
        may belong to another queue).
        """
        if not self._dirty:
            return []
        out = [ctx.job_at(i) for i in self._dirty]
        self._dirty.clear()
        owns = _owner(ctx)
        return out if owns is None else [j for j in out if owns(j)]



def cpu_only_pending(ctx: PolicyContext) -> list[JobState]:
    """Pending jobs that ask for no GPU, via the request classes, in arrival order."""
    out: list[JobState] = []
    for lst in ctx.pending_classes().values():
        if lst and ctx.job_at(lst[0][1]).spec.num_gpus == 0:
            out.extend(ctx.job_at(k[1]) for k in lst)
    out.sort(key=lambda j: (j.spec.submit_time, j.idx))
    return out


def start_cpu_only(ctx: PolicyContext, jobs: list[JobState]) -> Iterator[Start]:
    """Start each pending CPU-only job of `jobs` whose node the placer finds now.

    Those waiting for CPUs, memory or disk stay pending (no GPUs to preempt for them).
    """
    for job in jobs:
        if job.status != PENDING:
            continue
        got = ctx.place(job)
        if not isinstance(got, Unschedulable):
            yield start_on(job.job_id, got)



@mypyc_attr(allow_interpreted_subclasses=True)
class ClassHeads:
    """The queued (key, idx) entries of a priority queue, by request class, in key order.

    Kept beside the queue by `PriorityPolicy`, so `priority_walk` can visit the queue as
    a merge of the classes' heads: a class that failed is dropped at once instead of
    each of its later jobs being met and skipped (on a contended cluster, most of a
    long queue). `touched` collects the classes changed since the walk last looked.
    Each class's first entry is kept as entries come and go (`firsts`), so a walk
    starts its merge without reading every class's sorted list.
    """

    def __init__(self) -> None:
        # each class's entries, sorted (`schedlab.sim.queue.SortedKeys`; a caller may hand in lists
        # of its own with `len`, indexing and `bisect_right`, as themis does)
        self.lists: dict[tuple[Any, ...], Any] = {}
        self.touched: set[tuple[Any, ...]] = set()
        self._first: dict[tuple[Any, ...], tuple[Key, int]] = {}
        self._first_of: dict[tuple[Any, ...], Any] | None = self.lists

    def add(self, ck: tuple[Any, ...], entry: tuple[Key, int]) -> bool:
        """Queue an entry of class `ck`; True when it became the class's first entry."""
        lst = self.lists.get(ck)
        if lst is None:
            lst = self.lists[ck] = SortedKeys()
        lst.add(entry)
        self.touched.add(ck)
        if self._first_of is not self.lists:
            return True
        first = self._first.get(ck)
        if first is None or entry < first:
            self._first[ck] = entry
            return True
        return False

    def remove(self, ck: tuple[Any, ...], entry: tuple[Key, int]) -> None:
        """Drop a queued entry of class `ck`."""
        lst = self.lists[ck]
        lst.remove(entry)
        kept = self._first_of is self.lists
        if not lst:
            del self.lists[ck]
            if kept:
                del self._first[ck]
        elif kept and self._first[ck] == entry:
            self._first[ck] = lst[0]
        self.touched.add(ck)

    def firsts(self) -> dict[tuple[Any, ...], tuple[Key, int]]:
        """Each class's first entry (read it, never change it).

        Kept by `add` and `remove`; computed again when `lists` was replaced (themis
        hands in lists of its own).
        """
        if self._first_of is not self.lists:
            self._first = {ck: lst[0] for ck, lst in self.lists.items()}
            self._first_of = self.lists
        return self._first


CLASS_WALK_MAX: Final = 64
"""Above this many request classes a walk goes down the queue itself: the merge of the
class heads costs one step per class and pass, the plain walk one per job visited."""


def priority_walk(
    ctx: PolicyContext,
    queue: SortedList,
    pool: Callable[[], VictimPool] | None,
    *,
    on_start: Callable[[JobState], None],
    on_stop: Callable[[JobState], None],
    stop: str = "preempt",
    reason: str = "",
    classes: Mapping[tuple, int] | None = None,
    heads: ClassHeads | None = None,
    search: Search = find_victims,
    known_failed: set[tuple[Any, ...]] | None = None,
    failed_out: set[tuple[Any, ...]] | None = None,
) -> Iterator[Decision]:
    """Start pending jobs of `queue` ((key, idx), smallest key first) in order.

    A job that cannot be placed takes the GPUs of strictly lower-priority jobs of `pool`
    (built on first need; None: never preempt). A request class that failed is skipped
    for the rest of the pass (starts only use up GPUs), unless a preemption freed more
    GPUs than the job took; the walk stops early once nothing is free and no
    lower-priority victim is left, or once every request class in `queue` (counts in
    `classes`, when given) has failed. `on_start` / `on_stop` let the caller update its
    own index as decisions are applied (a stopped job usually re-enters `queue`, behind).
    `heads`, the same entries by request class, lets the walk skip failed classes whole
    (same decisions). `search` chooses the victims (`schedlab.policies.victims.find_victims`).

    With `heads` (a merge of at most `CLASS_WALK_MAX` classes), `failed_out` receives
    the classes whose first entry failed after the walk's last decision: at the state
    the walk leaves, their heads can neither be placed nor find victims (a walk that
    resumes after a decision may meet a class past its first entry). A later walk from
    that same state (the caller checks: same cluster, queue and running keys) hands
    them in as `known_failed`: they count as failed, unvisited, until its first
    decision.
    """
    walk = _Walk(ctx, pool, classes, search)
    if heads is not None and len(heads.lists) <= CLASS_WALK_MAX:
        yield from _class_walk(ctx, heads, walk, on_start, on_stop, stop, reason,
                               known_failed, failed_out)
        return
    if failed_out is not None:
        failed_out.clear()  # (the plain walk keeps no such record)
    cur: tuple[Key, int] | None = None
    while True:
        # iterate without re-searching the list; start over from `cur` after a decision
        # (the callbacks change `queue`)
        it = iter(queue) if cur is None else queue.irange(cur, inclusive=(False, True))
        for cur in it:
            key, idx = cur
            job = ctx.job_at(idx)
            if job.status != PENDING:
                continue
            ck = job.request_class()
            if ck in walk.failed:
                continue
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                plan = walk.plan(job, key, got)
                if plan is None:
                    if walk.give_up(ck, key):
                        return
                    continue
                victims, got = plan
                yield from _stop_victims(job, victims, walk, on_stop, stop, reason)
            yield start_on(job.job_id, got)
            on_start(job)
            break
        else:
            return


def _stop_victims(job: JobState, victims: Sequence[JobState], walk: _Walk,
                  on_stop: Callable[[JobState], None], stop: str, reason: str
                  ) -> Iterator[Decision]:
    """Stop the victims a plan chose for `job`; the pass's failed classes are forgotten."""
    why = f"{reason}: for {job.job_id}" if reason else f"for {job.job_id}"
    for v in victims:
        walk.victims().remove(v.idx)
        yield (Suspend if stop == "suspend" else Preempt)(v.job_id, why)
        on_stop(v)
    walk.failed.clear()  # the victims may have freed more than the job takes


class _Merge:
    """The heads of one `_class_walk`: each live class's next entry, in a heap."""

    def __init__(self, heads: ClassHeads, failed: set[tuple[Any, ...]]) -> None:
        self.lists = heads.lists
        self.failed = failed
        # every class's first entry (the walk has no failed class yet; no list is empty)
        self.head: dict[tuple[Any, ...], tuple[Key, int]] = dict(heads.firsts())
        self.heap: list[tuple[tuple[Key, int], tuple[Any, ...]]] = [
            (e, ck) for ck, e in self.head.items()]
        heapify(self.heap)

    def refresh(self, ck: tuple[Any, ...], after: tuple[Key, int]) -> None:
        """Class `ck`'s head becomes its first entry after `after` (none: it leaves)."""
        lst = self.lists.get(ck)
        if lst is None or ck in self.failed:
            self.head.pop(ck, None)
            return
        i: int = lst.bisect_right(after)
        if i < len(lst):
            e: tuple[Key, int] = lst[i]
            self.head[ck] = e
            heappush(self.heap, (e, ck))
        else:
            self.head.pop(ck, None)


def _class_walk(
    ctx: PolicyContext,
    heads: ClassHeads,
    walk: _Walk,
    on_start: Callable[[JobState], None],
    on_stop: Callable[[JobState], None],
    stop: str,
    reason: str,
    known_failed: set[tuple[Any, ...]] | None = None,
    failed_out: set[tuple[Any, ...]] | None = None,
) -> Iterator[Decision]:
    """`priority_walk` as a merge of the request classes' heads (the same visits).

    A heap holds the next entry of each class not failed in this pass; a failed class
    leaves it. After a decision the classes the callbacks changed (and, once victims
    were stopped, every class: the failures are forgotten) get their first entry after
    the current one, as the plain walk resumes after it.

    `known_failed` classes (see `priority_walk`) start failed: until the first decision
    the cluster is the one they failed on, so each would fail again where the walk met
    it. At that decision, those whose head lies after it are met after all (the walk
    would not have met them yet); those before it were met and failed, and stay so.
    """
    lists = heads.lists
    m = _Merge(heads, walk.failed)
    heap, head = m.heap, m.head
    heads.touched.clear()
    # known_failed classes, until the first decision (in the classes' own order)
    assumed = [ck for ck in lists if ck in known_failed and ck in head] \
        if known_failed else []
    since: set[tuple[Any, ...]] = set() if failed_out is None else failed_out
    since.clear()  # the classes failed since the walk's last decision (may be known_failed)
    for ck in assumed:
        del head[ck]
        walk.failed.add(ck)
        since.add(ck)
    while heap:
        entry, ck = heap[0]
        if head.get(ck) != entry:  # stale: the class moved on or failed
            heappop(heap)
            continue
        key, idx = entry
        job = ctx.job_at(idx)
        if job.status != PENDING:
            heappop(heap)
            m.refresh(ck, entry)
            continue
        got = ctx.place(job)
        forget = False
        if isinstance(got, Unschedulable):
            plan = walk.plan(job, key, got)
            if plan is None:
                if lists[ck][0][1] == idx:  # (a walk may meet a class past its head)
                    since.add(ck)
                if walk.give_up(ck, key):
                    return
                heappop(heap)
                del head[ck]
                continue
            victims, got = plan
            yield from _stop_victims(job, victims, walk, on_stop, stop, reason)
            forget = True
        yield start_on(job.job_id, got)
        on_start(job)
        since.clear()
        changed = list(lists) if forget else [*heads.touched, ck]
        heads.touched.clear()
        if assumed:
            if not forget:  # (stops forgot every failure: all are refreshed below)
                for c in assumed:
                    lst = lists.get(c)
                    if lst is not None and len(lst) and lst[0] > entry:
                        walk.failed.discard(c)
                        changed.append(c)
            assumed = []
        for c in changed:
            m.refresh(c, entry)


class _Walk:
    """The state of one priority walk: failed request classes and the victim pool."""

    def __init__(self, ctx: PolicyContext, pool: Callable[[], VictimPool] | None,
                 classes: Mapping[tuple[Any, ...], int] | None, search: Search) -> None:
        self.ctx = ctx
        self.pool = pool
        self.classes = classes
        self.search = search
        self.failed: set[tuple[Any, ...]] = set()
        self._victims: VictimPool | None = None

    def victims(self) -> VictimPool:
        """The victim pool, built on first need (only when the walk may preempt)."""
        if self._victims is None:
            assert self.pool is not None
            self._victims = self.pool()
        return self._victims

    def plan(self, job: JobState, key: Key, got: Unschedulable
             ) -> tuple[list[JobState], tuple[int, ...]] | None:
        """Victims and a placement for a job that does not fit now, if preemption helps."""
        if self.pool is None or not got.resolvable:
            return None
        pool = self.victims()
        low: Any = pool.lowest()  # keys may hold numpy numbers: no bool here
        if low is None or low <= key:  # no running job of lower priority (`pool.below`)
            return None
        return self.search(self.ctx, job, key, pool)

    def give_up(self, ck: tuple[Any, ...], key: Key) -> bool:
        """Note a failed class; True when nothing later in the walk can start."""
        self.failed.add(ck)
        if self.classes is not None and len(self.failed) >= len(self.classes):
            return True
        if free_milli(self.ctx) > 0:
            return False
        if self.pool is None:
            return True
        low: Any = self.victims().lowest()
        return low is None or bool(low <= key)


_UNUSED: Final[SortedList] = SortedList()  # the queue argument of a walk that merges class heads

STOP_PARAM = Param(
    "suspend", as_choice("preempt", "suspend"),
    "how a job loses its GPUs: suspend (checkpoint first, per the engine's "
    "checkpoint_on_suspend, as DL schedulers preempt) or preempt (work since the job's "
    "last checkpoint is lost)",
)



@mypyc_attr(allow_interpreted_subclasses=True)
class PriorityPolicy(Policy):
    """Runs pending jobs in the order of a key (smallest first), optionally preemptively.

    Subclass it and define `pending_key`; that is a complete, fast policy. Each pass it
    starts jobs in key order; a job that does not fit is skipped (its whole request class
    is, for the rest of the pass) and the walk stops once nothing more can start.

    Hooks, all optional but `pending_key`:

    * `pending_key(ctx, job)`: the priority of a waiting job, smaller first. Computed
      when the job enters the queue and kept while it waits; call `rekey(ctx, job)`
      after changing what it depends on (e.g. a Tiresias demotion).
    * `preemptive = True` with `running_key(ctx, job)` on the same scale: a running job
      is stopped for a pending one only when its key is strictly larger, and only the
      victims whose GPUs the placer then uses (`stop` param: suspend or preempt).
      `running_key` is computed afresh each pass that needs victims; with
      `fixed_running_keys = True` it is computed when a job starts and kept (call
      `rekey_running` after a change), which avoids the per-pass computation.
    * `on_status(ctx, job, old)`: a job changed status (`old` None: first seen), to keep
      the subclass's own state (attained service, queue levels, timers).
    * `before_walk(ctx)` / `after_walk(ctx)`: per-pass bookkeeping around the walk
      (e.g. promotions before, `ctx.wake_at` for the next demotion after).
    * `choose_victims(ctx, job, key, pool)`: which running jobs to stop for a waiting
      one, and where it then goes (default: `schedlab.policies.victims.find_victims`).

    The index is fed by `notify`: a subclass that overrides `notify` must call
    `super().notify(ctx, job, kind)`. Jobs that ask for no GPU start as soon as the
    placer finds them a node.

    A walk that started nothing is not repeated until the cluster, the first entry of
    a request class in the queue, or the running keys change (a pass woken by a timer
    that changed nothing, or an arrival queued behind the first job of its class): the
    walk is a function of those alone when the running keys are fixed (or nobody is
    preempted), as it meets a class only at its first entry. A subclass whose walk
    reads anything else (its hooks read more of the queue or the clock) sets
    `skip_unchanged = False`. Under the same contract, a walk from the very state the
    last walk left takes the classes whose first entry failed after that walk's last
    decision as failed until its own first decision (`priority_walk`'s `known_failed`).
    """
    supports_roles = True

    preemptive: ClassVar[bool] = False
    fixed_running_keys: ClassVar[bool] = False  # keys change only via `rekey_running`
    skip_unchanged: ClassVar[bool] = True  # see the class docstring

    def attach(self, ctx: Ctx) -> None:
        """Fresh per-run index: the feed, the ordered queue, the last seen statuses."""
        self.feed = JobFeed()
        self._queue: SortedList | None = None  # the whole queue, built on first need
        self.qkey: dict[int, tuple[Key, tuple[Any, ...]]] = {}  # key and request class
        self.known: dict[int, str] = {}
        self.cpu_only: deque[JobState] = deque()
        self.class_count: dict[tuple, int] = {}  # request classes of the queued jobs
        self.heads = ClassHeads()  # the queue by request class
        self.running_pool = VictimPool([])  # kept current when fixed_running_keys
        self._ver = 0  # grows with every change of the queue or of the running keys
        self._idle: tuple[int, int] | None = None  # (cluster, own) versions of an idle walk
        # the classes that failed after the last walk's last decision, and the (cluster,
        # own) versions it left: a walk from there knows they fail (`priority_walk`)
        self._late: set[tuple[Any, ...]] = set()
        self._late_at: tuple[int, int] | None = None

    # --- what subclasses define ---

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Note the job for the next pass (see JobFeed)."""
        self.feed.note(job, kind)

    def pending_key(self, ctx: Ctx, job: JobState) -> Key:
        """Priority of a waiting job (smaller first); must not change while it waits."""
        raise NotImplementedError

    def running_key(self, ctx: Ctx, job: JobState) -> Key:
        """Priority of a running job now, comparable with `pending_key`."""
        return self.pending_key(ctx, job)

    def on_status(self, ctx: Ctx, job: JobState, old: str | None) -> None:
        """A job changed status (`old` None: first seen); `job.status` is the new one."""

    def before_walk(self, ctx: Ctx) -> None:
        """Per-pass bookkeeping before jobs are started (e.g. queue changes)."""

    def after_walk(self, ctx: Ctx) -> None:
        """Per-pass bookkeeping after the decisions (e.g. timers)."""

    def choose_victims(self, ctx: Ctx, job: JobState, key: Key, pool: VictimPool
                       ) -> tuple[list[JobState], tuple[int, ...]] | None:
        """Running jobs of `pool` ranking below `key` to stop so `job` starts, and where.

        `schedlab.policies.victims.find_victims`: few, lowest priority first, each set tried on a
        what-if of the cluster. Override it to choose victims another way (None: none).
        """
        return find_victims(ctx, job, key, pool)

    # --- index maintenance ---

    @property
    def queue(self) -> SortedList:
        """The pending GPU jobs as (key, idx), smallest key first.

        Built from the class heads on first need (a walk over more than
        `CLASS_WALK_MAX` classes) and kept from then on: while the walk merges the
        class heads, nothing reads it, so it costs nothing to keep.
        """
        if self._queue is None:
            self._queue = SortedList(e for lst in self.heads.lists.values() for e in lst)
        return self._queue

    def queued(self) -> list[tuple[Key, int]]:
        """The entries of `queue`, in its order, without building it."""
        if self._queue is not None:
            return list(self._queue)
        return sorted(e for lst in self.heads.lists.values() for e in lst)

    def _enqueue(self, ctx: Ctx, job: JobState) -> None:
        """Queue a waiting job; `_ver` moves only when the job heads its request class.

        A walk visits a class only at its first entry (a class that fails there is
        dropped for the pass, and its later entries come after that entry), so a job
        queued behind its class's first entry changes no walk: a walk that started
        nothing stays one that would start nothing (`_idle`).
        """
        key = self.pending_key(ctx, job)
        ck = job.request_class()
        self.qkey[job.idx] = (key, ck)
        if self._queue is not None:
            self._queue.add((key, job.idx))
        self.class_count[ck] = self.class_count.get(ck, 0) + 1
        if self.heads.add(ck, (key, job.idx)):
            self._ver += 1

    def _dequeue(self, job: JobState) -> None:
        got = self.qkey.pop(job.idx, None)
        if got is not None:
            self._ver += 1
            key, ck = got
            if self._queue is not None:
                self._queue.remove((key, job.idx))
            self.heads.remove(ck, (key, job.idx))
            left = self.class_count[ck] - 1
            if left:
                self.class_count[ck] = left
            else:
                del self.class_count[ck]

    def rekey(self, ctx: Ctx, job: JobState) -> None:
        """Recompute a pending job's key (after a change the subclass made)."""
        self._dequeue(job)
        if job.status == PENDING and job.spec.num_gpus > 0:
            self._enqueue(ctx, job)

    def rekey_running(self, ctx: Ctx, job: JobState) -> None:
        """Recompute a running job's key (with fixed_running_keys, after a change)."""
        if self.fixed_running_keys and job.idx in self.running_pool.keys:
            self._ver += 1
            self.running_pool.add(job.idx, self.running_key(ctx, job))

    def _observe(self, ctx: Ctx, job: JobState) -> None:
        old = self.known.get(job.idx)
        new = job.status
        if new == old:
            return
        if not (old is None and new == PENDING and job.spec.num_gpus):
            self._ver += 1  # (a first-seen waiting GPU job: as `_enqueue` says)
        if old == PENDING:
            self._dequeue(job)
        elif old == RUNNING:
            self.running_pool.remove(job.idx)
        if new in (PENDING, RUNNING):
            self.known[job.idx] = new
        else:
            self.known.pop(job.idx, None)
        self.on_status(ctx, job, old)
        if new == RUNNING and self.fixed_running_keys and job.spec.num_gpus:
            self.running_pool.add(job.idx, self.running_key(ctx, job))
        elif new == PENDING:
            if job.spec.num_gpus == 0:
                self.cpu_only.append(job)
            else:
                self._enqueue(ctx, job)

    def _pool(self, ctx: Ctx) -> Callable[[], VictimPool] | None:
        if not self.preemptive:
            return None
        if self.fixed_running_keys:
            return lambda: self.running_pool
        return lambda: VictimPool([(self.running_key(ctx, j), j.idx)
                                   for j in ctx.running().values() if j.spec.num_gpus])

    def schedule(self, ctx: Ctx) -> Iterator[Decision]:
        """Sync the index with what changed, then start (and preempt) in key order."""
        for job in self.feed.changed(ctx):
            self._observe(ctx, job)
        self.before_walk(ctx)
        waiting: deque[JobState] = deque()
        while self.cpu_only:  # no GPUs to wait for: they start once a node has room
            job = self.cpu_only.popleft()
            if job.status != PENDING:
                continue
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                waiting.append(job)
                continue
            yield start_on(job.job_id, got)
            self._observe(ctx, job)
        self.cpu_only.extend(waiting)
        if not self.class_count or (
                self._idle is not None and self._idle == (ctx.cluster.version, self._ver)):
            # no GPU job waits, or nothing changed since a walk that started nothing
            self.after_walk(ctx)
            return
        # the whole queue only when the walk goes down it (too many classes to merge)
        queue = self.queue if len(self.heads.lists) > CLASS_WALK_MAX else _UNUSED
        self._idle = None  # (stays so if the caller closes the walk early)
        same = self._late_at is not None and self._late_at == (ctx.cluster.version, self._ver)
        self._late_at = None  # (likewise)
        late = self._late
        decided = stopped = False
        for d in priority_walk(
            ctx, queue, self._pool(ctx),
            on_start=lambda j: self._observe(ctx, j),
            on_stop=lambda j: self._observe(ctx, j),
            stop=self.p.get("stop", "suspend"), reason=self.name, classes=self.class_count,
            heads=self.heads, search=self.choose_victims,
            known_failed=late if same else None, failed_out=late,
        ):
            decided = True
            stopped = stopped or not isinstance(d, Start)
            yield d
        if self._unchanged_ok(ctx):
            if not decided or (not stopped and self._no_victim_for_queue()):
                self._idle = (ctx.cluster.version, self._ver)
            elif late:  # a walk from this state meets these classes failing again
                self._late_at = (ctx.cluster.version, self._ver)
        self.after_walk(ctx)

    def _no_victim_for_queue(self) -> bool:
        """Whether no running job ranks strictly below the queue's best waiting job.

        After a walk that only started jobs, that makes a second walk idle: each job
        still waiting failed to fit (its class did, or nothing was free) on a cluster
        with at least what is free now, and it has nobody to preempt (the walk's own
        `low <= key` test). So the walk is remembered as idle, as one that started
        nothing: a later pass that changed nothing (a timer's) skips it.
        """
        if not self.preemptive:
            return True
        low: Any = self.running_pool.lowest()
        if low is None or not self.class_count:
            return True
        if self._queue is not None:
            head = self._queue[0][0]
        else:
            head = min(self.heads.firsts().values())[0]
        return bool(low <= head)

    def _unchanged_ok(self, ctx: Ctx) -> bool:
        """Whether an idle walk is a function of the cluster, the queue and fixed keys.

        Not under a context narrowed to part of the run (hived's virtual clusters place
        by state of their own), nor with running keys that change with time.
        """
        return (self.skip_unchanged and (not self.preemptive or self.fixed_running_keys)
                and _owner(ctx) is None)


