"""The policy inside a Gym episode: it hands each decision point to the agent (`Await`).

`AgentPolicy` is an ordinary policy to the engine. At each decision point of a pass
(`schedlab.policies.observation`) it stores the observation and mask, yields
`schedlab.sim.model.Await`
(the engine then returns control to `Run.advance`, i.e. to `ClusterEnv.step`), and on
resumption applies the action the environment left in `action`. The rewards are time
integrals kept by `RewardMeter` from the engine's events and the state after each pass.

An optional *advisor* (any registered policy) runs beside it on the same context and
hears the same events; at each decision point its first decision is turned into the
choice it would make (`advice`), so a built-in policy can act through the same action
interface (`schedlab.app.rl.agents.PolicyAgent`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from schedlab.policies.base import Policy
from schedlab.policies.observation import DecisionPoint, ObsConfig, Observer
from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.jobstate import FINAL, JobState
from schedlab.sim.model import Await, Start, Unschedulable

__all__ = ["REWARDS", "AgentPolicy", "RewardMeter"]

REWARDS: dict[str, str] = {
    "slowdown": "minus the integral over time of sum over the jobs in the system (submitted, "
                "not final) of 1 / max(duration, 10 s): over an episode, minus the sum of "
                "the jobs' JCT / max(duration, 10 s)",
    "queueing": "minus the integral over time of the queued jobs, in hours: over an episode, "
                "minus the job-hours spent in the queue",
    "utilization": "the integral of busy GPUs / all GPUs, in hours: over an episode, the "
                   "cluster's GPU-hours of work divided by its GPUs",
}
"""Reward options (the `reward` parameter of the environment) and what they add up to."""

_AWAIT = Await("decision point")
_ENTER = ("submit",)
_LEAVE = ("finish", "reject", "kill")


class RewardMeter:
    """Integrates the chosen reward rate over simulated time, one event at a time.

    The rate is piecewise constant: it changes only at instants where the engine runs a
    pass, so the integral up to an instant uses the rate left by the previous instant's
    pass (`advance` before any change, `sample` after the pass).
    """

    def __init__(self, kind: str, bound: float = 10.0) -> None:
        if kind not in REWARDS:
            from schedlab.sim.errors import InvalidParameter, unknown_name_message

            raise InvalidParameter(unknown_name_message("reward", kind, REWARDS))
        self.kind = kind
        self.bound = bound
        self.t = 0.0
        self.acc = 0.0
        self.rate = 0.0
        self._weights: dict[int, float] = {}  # slowdown: jobs in the system -> 1/max(d, b)
        self._weight_sum = 0.0
        self._failed: list[JobState] = []
        self._taken = 0.0

    def advance(self, now: float) -> None:
        """Integrate the current rate up to `now`."""
        if now > self.t:
            self.acc += self.rate * (now - self.t)
            self.t = now

    def notify(self, now: float, job: JobState, kind: str) -> None:
        """An engine event: integrate first, then (slowdown) update the jobs in the system."""
        self.advance(now)
        if self.kind != "slowdown":
            return
        if kind in _ENTER:
            w = 1.0 / max(job.spec.duration, self.bound)
            self._weights[job.idx] = w
            self._weight_sum += w
        elif kind in _LEAVE:
            self._leave(job)
        elif kind == "fail":
            self._failed.append(job)  # final or retried: known once the change is done
        self.rate = -self._weight_sum

    def _leave(self, job: JobState) -> None:
        w = self._weights.pop(job.idx, None)
        if w is not None:
            self._weight_sum = self._weight_sum - w if self._weights else 0.0

    def sample(self, ctx: PolicyContext) -> None:
        """The rate from now on, read from the state after the pass."""
        self.advance(ctx.now)
        if self.kind == "slowdown":
            for job in self._failed:
                if job.status in FINAL:
                    self._leave(job)
            self._failed.clear()
            self.rate = -self._weight_sum
        elif self.kind == "queueing":
            self.rate = -ctx.pending_count / 3600.0
        else:
            c = ctx.cluster
            self.rate = c.busy_milli / (1000.0 * max(1, c.total_gpus)) / 3600.0

    def take(self) -> float:
        """The reward accrued since the last call."""
        r = self.acc - self._taken
        self._taken = self.acc
        return r


class AgentPolicy(Policy):
    """A policy whose choices come from outside the run, one decision point at a time."""

    name = "gym-agent"
    description = "the Gym environment's agent (schedlab.app.rl): starts the candidate it chooses"

    def __init__(self, cfg: ObsConfig, reward: str = "slowdown",
                 advisor: Policy | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.observer = Observer(cfg)
        self.meter = RewardMeter(reward)
        self.reward_kind = reward
        self.advisor = advisor
        self._advisor_listens = advisor is not None and not getattr(
            type(advisor).notify, "__schedlab_noop__", False)
        self.point: DecisionPoint | None = None
        self.obs: np.ndarray | None = None
        self.advice: int | None = None
        self.action: int | None = None
        self.ctx: PolicyContext | None = None
        self.period = advisor.period if advisor is not None else None

    def attach(self, ctx: PolicyContext) -> None:
        """Fresh observer and meter for the episode; the advisor attaches too."""
        self.ctx = ctx
        self.observer = Observer(self.cfg)
        self.observer.attach(ctx)
        self.meter = RewardMeter(self.reward_kind)
        if self.advisor is not None:
            self.advisor.attach(ctx)

    def notify(self, ctx: PolicyContext, job: JobState, kind: str) -> None:
        """Observer, meter and advisor hear every event."""
        self.observer.notify(ctx, job, kind)
        self.meter.notify(ctx.now, job, kind)
        if self._advisor_listens:
            assert self.advisor is not None
            self.advisor.notify(ctx, job, kind)

    def schedule(self, ctx: PolicyContext) -> Iterator[Any]:
        """Yield `Await` at each decision point, then the start the agent chose (if any).

        Yields decisions and `schedlab.sim.model.Await` markers (only a stepping driver answers
        those: `schedlab.sim.engine.Run.advance`).
        """
        self.meter.advance(ctx.now)
        obs = self.observer
        while (point := obs.point(ctx)) is not None:
            self.point = point
            self.obs = obs.observe(ctx, point)
            self.advice = self._advise(ctx, point) if self.advisor is not None else None
            self.action = None
            yield _AWAIT
            action = self.resolve(self.action, point)
            if action >= len(point.jobs):
                break
            got = point.places[action]
            assert not isinstance(got, Unschedulable)  # resolve() keeps placeable ones
            yield Start(point.job_id(action), got)
        self.point = None
        self.meter.sample(ctx)

    def resolve(self, action: int | None, point: DecisionPoint) -> int:
        """The action applied: a valid one as given, an invalid one replaced.

        An invalid action becomes "no more" when that is allowed, else the earliest
        candidate that fits.
        """
        k = self.cfg.k
        mask = point.mask
        if action is not None and 0 <= action <= k and mask[action]:
            return action
        return k if mask[k] else int(np.argmax(mask[:k]))

    def _advise(self, ctx: PolicyContext, point: DecisionPoint) -> int:
        """The advisor's choice: its first decision if it starts a valid candidate.

        Else "no more" (or, where that is masked, the choice `resolve` would make).
        """
        assert self.advisor is not None
        gen = iter(self.advisor.schedule(ctx))
        try:
            first = next(gen, None)
        finally:
            close = getattr(gen, "close", None)
            if close is not None:
                close()
        if isinstance(first, Start):
            for i, job in enumerate(point.jobs):
                if job.job_id == first.job_id and point.mask[i]:
                    return i
        return self.resolve(None, point)
