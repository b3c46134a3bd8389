"""Agents for `schedlab/Cluster-v0`: a trained scorer, a built-in policy, random choices.

An agent is a callable `(obs, info) -> action`. `run_episode` plays one episode and
returns its return, steps and the run's `SimResult`, so an agent and the built-in
policies are compared on the same metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.policies.scorer import Scorer

__all__ = ["EpisodeOutcome", "ModelAgent", "PolicyAgent", "RandomAgent", "run_episode"]


class ModelAgent:
    """Greedy choices of a scoring model: the same as `--policy learned --param model=`."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        """The best-scored valid action."""
        return self.scorer.act(obs, info["action_mask"])


class PolicyAgent:
    """A registered policy acting through the action interface (the env's advisor).

    The environment runs the policy beside the episode (`reset(options={"advisor":
    name})`, which `run_episode` passes) and gives its choice as `info["advice"]`: its
    first decision when that starts one of the K candidates, else "no more". A policy
    that preempts, places or resizes jobs itself is thereby reduced to its choice of
    which visible job starts next.
    """

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.reset_options = {"advisor": policy}

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        """The advisor's choice."""
        return int(info["advice"])


class RandomAgent:
    """Uniform random valid actions from its own seeded generator."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        """A valid action drawn uniformly."""
        valid = np.flatnonzero(info["action_mask"])
        return int(valid[self.rng.integers(len(valid))])


@dataclass(frozen=True)
class EpisodeOutcome:
    """One played episode: total reward, steps, and the run's results."""

    total_reward: float
    steps: int
    result: Any


def run_episode(env: Any, agent: Any, *, seed: int | None = None,
                options: dict[str, Any] | None = None) -> EpisodeOutcome:
    """Play one episode of `env` with `agent`; returns its outcome (result included)."""
    opts = {**getattr(agent, "reset_options", {}), **(options or {})}
    obs, info = env.reset(seed=seed, options=opts)
    total = 0.0
    steps = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(agent(obs, info))
        total += reward
        steps += 1
        if terminated or truncated:
            break
    base = getattr(env, "unwrapped", env)
    return EpisodeOutcome(total, steps, base.result() if terminated else None)
