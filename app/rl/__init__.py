"""Learned schedulers: the Gymnasium environment `schedlab/Cluster-v0` and its agents.

Needs the optional `rl` extra (`pip install 'schedlab[rl]'`). Importing this package
registers the environment with Gymnasium, so `gymnasium.make("schedlab/Cluster-v0")`
works after `import schedlab.app.rl` (or in one go: `gymnasium.make("schedlab.app.rl:schedlab/
Cluster-v0")`). Modules: `env` (the environment), `driver` (the policy inside an episode
and the rewards), `agents` (a trained scorer, a built-in policy, random choices, and
`run_episode`). A trained scorer replays as a policy: `--policy learned --param
model=FILE` (`schedlab.policies.learned`, `schedlab.policies.scorer`).
"""

from __future__ import annotations

try:
    import gymnasium as gym
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError("schedlab's Gym environment needs gymnasium: pip install "
                      "'schedlab[rl]'") from e

from schedlab.app.rl.agents import EpisodeOutcome, ModelAgent, PolicyAgent, RandomAgent, run_episode
from schedlab.app.rl.env import ENV_ID, ClusterEnv, Episode

__all__ = [
    "ENV_ID", "ClusterEnv", "Episode", "EpisodeOutcome", "ModelAgent", "PolicyAgent",
    "RandomAgent", "register_env", "run_episode",
]


def register_env() -> None:
    """Register `schedlab/Cluster-v0` with Gymnasium, once.

    Keyword arguments of `ClusterEnv` go to `gymnasium.make`.
    """
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="schedlab.app.rl.env:ClusterEnv",
                     nondeterministic=False)


register_env()
