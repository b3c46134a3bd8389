"""`learned`: replay a trained scoring model (`--policy learned --param model=FILE`).

At each decision point of a pass (`schedlab.policies.observation`: one of the first K pending
jobs can be placed now) the model scores the valid choices and the policy takes the
best: start that candidate on the run's placer's GPUs, or start nothing more this pass.
The observation, the candidates and the mask are those of the Gym environment
`schedlab/Cluster-v0` (`schedlab.app.rl`) built from the model's `k` and `durations`, so a
model trained there makes here, on the same trace, topology, parameters and seed, the
same decisions, and the run the same results. Without `model` it runs the built-in
scorer: the earliest candidate that fits (fifo-backfill over the first K jobs).

The model file is JSON (`schedlab.policies.scorer`: a linear scorer or a small numpy MLP).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from schedlab.policies.base import Policy
from schedlab.policies.observation import Observer
from schedlab.policies.scorer import Scorer, load_scorer
from schedlab.sim.interfaces import PolicyContext
from schedlab.sim.jobstate import JobState
from schedlab.sim.model import Decision, Start, Unschedulable
from schedlab.sim.params import Param, as_optional, as_path

__all__ = ["LearnedPolicy"]


class LearnedPolicy(Policy):
    """Starts, at each decision point, the candidate a trained scorer ranks best."""

    name = "learned"
    description = ("a trained scorer (linear or small MLP, JSON) picks which of the first K "
                   "pending jobs to start; trained with the Gym env schedlab/Cluster-v0")
    params = {
        "model": Param(None, as_optional(as_path),
                       "JSON model file (schedlab.policies.scorer); none: the built-in scorer "
                       "(earliest of the first 16 pending jobs that fits)"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        path = self.p["model"]
        self.scorer: Scorer = load_scorer(path) if path else Scorer.default()
        self.observer = Observer(self.scorer.cfg, self.scorer.reads())
        self.choices = 0
        self.stops = 0

    def attach(self, ctx: PolicyContext) -> None:
        """Fresh observer state for the run (it builds only the features the model reads)."""
        self.observer = Observer(self.scorer.cfg, self.scorer.reads())
        self.observer.attach(ctx)
        self.choices = 0
        self.stops = 0

    def notify(self, ctx: PolicyContext, job: JobState, kind: str) -> None:
        """Keep the observer's running-job summary current."""
        self.observer.notify(ctx, job, kind)

    def schedule(self, ctx: PolicyContext) -> Iterator[Decision]:
        """Start the best-scored candidate until the model says no more or none fits."""
        obs = self.observer
        while (point := obs.point(ctx)) is not None:
            self.choices += 1
            action = self.scorer.act(obs.observe(ctx, point), point.mask)
            if action >= len(point.jobs):  # "no more starts this pass"
                self.stops += 1
                return
            got = point.places[action]
            assert not isinstance(got, Unschedulable)  # the mask allows placeable ones only
            yield Start(point.job_id(action), got)

    def metrics(self) -> dict[str, Any]:
        """Decision points seen and how many ended a pass with "no more"."""
        return {"decision_points": self.choices, "stops": self.stops}
