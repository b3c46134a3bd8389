"""The policy interface: which jobs run and what to take back, as frozen decisions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.model import Decision
from schedlab.sim.params import Param, resolve

if TYPE_CHECKING:
    from schedlab.sim.jobstate import JobState

_PLAIN_CONTEXTS: set[type] = set()  # context classes found to offer no `owns`


Ctx = PolicyContext
"""What a policy's hooks receive: the run's `SchedContext`, or a context narrowed to part
of the run that offers the same members (hived's per-VC queues). Typed by the protocol,
never by the class `SchedContext`: a compiled function checks a class-typed argument on
entry (a narrowed context is no subclass), while mypyc treats a protocol as `object`."""


def owner(ctx: Ctx) -> Callable[[JobState], bool] | None:
    """`ctx.owns` of a context narrowed to part of the run (hived's per-VC queues), else None.

    Policies that read the run's changes filter them by it (a dependent released by a
    finish, an arrival, may belong to another queue). A context class found without it is
    remembered: on a plain `SchedContext` the lookup would raise and catch an
    AttributeError at every pass, which costs more than the rest of a typical pass.
    """
    cls = type(ctx)
    if cls in _PLAIN_CONTEXTS:
        return None
    owns: Callable[[JobState], bool] | None = getattr(ctx, "owns", None)
    if owns is None:
        _PLAIN_CONTEXTS.add(cls)
    return owns


class Policy:
    """Base class of scheduling policies.

    A policy declares its parameters in `params` and yields decisions from `schedule`;
    the engine applies each decision before asking for the next, so the policy always
    sees the cluster state its earlier decisions produced. `period` (seconds) asks for a
    pass on a timer as well as on arrivals and completions. `placer` names the placer the
    run uses when the user does not choose one (None: the engine's default). Policies
    that order pending jobs by a key should subclass `schedlab.policies.priority.PriorityPolicy`.
    """

    name: ClassVar[str] = "policy"
    description: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    period: float | None = None
    placer: ClassVar[str | None] = None
    tenant_field: str | None = None
    """The job field whose values are the tenants the policy shares the cluster between
    (`user`, `vc`), or None; a run whose jobs all share one value gets a warning."""
    ordering_param: ClassVar[str | None] = None
    """The parameter naming another policy that orders jobs inside this one (hived's
    `order`), so the conformance harness can run every composition."""
    container_jobs: ClassVar[bool] = True
    """Whether the policy runs container jobs' task runs (`schedlab.sim.containers`) as ordinary
    jobs; False: such a job is rejected at submission, naming the policy."""
    supports_roles: ClassVar[bool] = False
    """Whether the policy runs jobs with roles (contract.md#sec-2 `tasks`,
    `schedlab.sim.roles.has_roles`). The engine rejects such a job at submission under any other
    policy, with "policy X does not support task roles". A policy may set it when it
    starts jobs on the run's placer's answers (a `RolePlacement`, taken whole by
    `Start`), never moves or resizes them and accounts for them by `num_gpus` (the gang's GPUs)."""
    only_pending: ClassVar[bool] = False
    """Whether a pass with no pending job decides nothing and changes nothing (the policy
    only starts queued jobs): the engine then skips the pass, which saves a generator and
    a queue walk at every instant where only jobs finished (strict and backfilling FIFO)."""
    orders: ClassVar[bool] = True
    """Whether the policy can order the jobs of another policy's queues (a HiveD VC): it
    only starts, preempts, suspends or rejects jobs, at the places the context offers."""

    def __init__(self, **params: Any) -> None:
        self.p: dict[str, Any] = resolve(params, self.params, f"policy {self.name!r}")

    def attach(self, ctx: Ctx) -> None:
        """Called once before the run starts; build per-run state here."""

    def schedule(self, ctx: Ctx) -> Iterable[Decision]:
        """Yield decisions for the current instant."""
        raise NotImplementedError

    def notify(self, ctx: Ctx, job: JobState, kind: str) -> None:
        """Called after every job event (kinds of events.parquet) to keep indexes current.

        Override it to maintain per-policy indexes incrementally instead of rescanning the
        running jobs each pass; the default does nothing and costs nothing (the engine
        does not call it).
        """

    notify.__dict__["__schedlab_noop__"] = True  # the engine skips a no-op notify

    def explain(self, ctx: Ctx, job: JobState) -> str:
        """Why this pending job cannot start under the policy ('' when it knows no reason).

        Asked when nothing can change any more (see `schedlab.sim.settle`): a non-empty answer
        rejects the job as `unschedulable: <answer>` instead of leaving it waiting for
        ever. Override it where the policy's own rules (quotas, VCs, levels) block a job
        the placer alone would accept; the default defers to the placer.
        """
        return ""

    def metrics(self) -> Mapping[str, Any]:
        """The policy's own counters for the summary (as `policy_<key>`); none by default."""
        return {}

    @property
    def settings(self) -> Mapping[str, Any]:
        """The resolved parameter values."""
        return self.p
