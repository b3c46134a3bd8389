"""`schedlab/Cluster-v0`: a Gymnasium environment over the engine, one trace window an episode.

Each `step` resumes the simulation from one decision point to the next (see
`schedlab.policies.observation`): the engine's loop runs unchanged, the episode's policy
(`schedlab.app.rl.driver.AgentPolicy`) yields `schedlab.sim.model.Await` at each decision point and
`schedlab.sim.engine.Run.advance` hands control back here. Nothing is simulated twice and no
thread is used; simulated time, events and results are those of `Simulation.run`.

* **Observation**: `Box(0, 1, (G + K x F,), float32)`, the globals then K candidate
  blocks, documented feature by feature in `schedlab.policies.observation`.
* **Action**: `Discrete(K + 1)`: i < K starts the i-th pending job (arrival order) on the
  run's placer's GPUs; K starts nothing more this pass. `info["action_mask"]` (int8,
  K + 1) marks the valid ones. An invalid action is applied as "no more" when that is
  valid, else as the earliest candidate that fits (`info["invalid_action"]` is True).
* **Reward** (`reward=`): `slowdown` (default), `queueing` or `utilization`, integrals
  over simulated time between decision points (`schedlab.app.rl.driver.REWARDS`).
* **Episodes**: `trace` a trace (name, path or Trace): each `reset` takes a window of
  `window_jobs` consecutive jobs (by submit time) starting at a job drawn from the
  environment's seeded generator, shifted to start at 0 (`load_scale` divides its
  gaps between arrivals); `trace="philly-like"` or `"helios-like"`: each `reset` draws
  a fresh calibrated trace of `window_jobs` jobs at offered `load` on the topology.
  The defaults, 100-job philly-like traces at load 1.0 on one 8-GPU DGX-1
  (`dgx1-v100`), give queues to learn from. A window starts on an empty cluster: on
  the bundled default trace and topology (288 GPUs) windows of a few hundred jobs
  hardly queue; take thousands (the whole trace is 3,000). The run's seed is drawn
  too, so `reset(seed=s)` gives the same episode every time. `reset(options=...)` picks
  one instead: `trace` (a Trace to replay whole), `start` (window start index),
  `sim_seed`, `advisor`.
  The episode terminates when the run ends (every job final); `max_steps` truncates it.
* **Comparing**: `result()` (after termination) is the episode's `SimResult`, the same
  metrics and files as `schedlab run`; `simulation(policy)` runs any registered policy
  on the same episode; `advisor=NAME` puts `info["advice"]`, the choice that policy would
  make, next to the mask (`schedlab.app.rl.agents.PolicyAgent` follows it).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    import gymnasium as gym
    from gymnasium import spaces
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError("schedlab's Gym environment needs gymnasium: pip install "
                      "'schedlab[rl]'") from e

from schedlab.app.rl.driver import REWARDS, AgentPolicy
from schedlab.policies.base import Policy
from schedlab.policies.observation import DecisionPoint, ObsConfig
from schedlab.policies.registry import make_policy
from schedlab.sim.engine import Run, Simulation
from schedlab.sim.errors import InvalidParameter, unknown_name_message
from schedlab.topologies import load_topology
from schedlab.topologies.tree import Topology
from schedlab.traces import load_trace
from schedlab.traces.base import Trace
from schedlab.traces.calibrated import PROFILES, calibrated
from schedlab.traces.shaping import shape

__all__ = ["ENV_ID", "ClusterEnv", "Episode"]

ENV_ID = "schedlab/Cluster-v0"
_SEED_LIMIT = 2**31 - 1
_TRIES = 20  # sampled episodes without any decision point are drawn again


@dataclass(frozen=True)
class Episode:
    """What one episode replays: its trace (already windowed) and the run's seed."""

    trace: Trace
    seed: int
    start: int | None = None  # window start (job index in submit order), if a window


class ClusterEnv(gym.Env[np.ndarray, np.int64]):
    """Scheduling decisions on a simulated GPU cluster (see the module doc)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        trace: str | Path | Trace = "philly-like",
        topology: str | Path | Topology = "dgx1-v100",
        *,
        window_jobs: int = 100,
        load: float = 1.0,
        load_scale: float = 1.0,
        k: int = 16,
        durations: bool = True,
        reward: str = "slowdown",
        params: Mapping[str, Any] | None = None,
        advisor: str | None = None,
        max_steps: int | None = None,
    ) -> None:
        if reward not in REWARDS:
            raise InvalidParameter(unknown_name_message("reward", reward, REWARDS))
        if isinstance(window_jobs, bool) or not isinstance(window_jobs, int) \
                or window_jobs < 1:
            raise InvalidParameter(f"window_jobs {window_jobs!r}: expected an integer >= 1")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise InvalidParameter(f"max_steps {max_steps!r}: expected an integer >= 1")
        try:
            self.cfg = ObsConfig(k=k, durations=bool(durations))
        except ValueError as e:
            raise InvalidParameter(str(e)) from None
        self.topology = topology if isinstance(topology, Topology) else load_topology(topology)
        self.profile: str | None = None
        self.load = float(load)
        if isinstance(load_scale, bool) or not isinstance(load_scale, int | float) \
                or not 0 < load_scale < float("inf"):
            raise InvalidParameter(f"load_scale {load_scale!r}: expected a number > 0 "
                                   "(2 halves the gaps between a window's arrivals)")
        self.load_scale = float(load_scale)
        self._jobs: tuple[Any, ...] = ()
        if isinstance(trace, str) and trace in PROFILES:
            self.profile = trace
            self.source: Trace | None = None
        else:
            src = trace if isinstance(trace, Trace) else load_trace(trace)
            # submit order, stable: a window is a slice of consecutive jobs
            self._jobs = tuple(sorted(src.jobs, key=lambda s: s.submit_time))
            self.source = dataclasses.replace(src, jobs=self._jobs)
        self.window_jobs = window_jobs
        self.reward_kind = reward
        self.params = dict(params or {})
        self.advisor = advisor
        self.max_steps = max_steps
        self.observation_space = spaces.Box(0.0, 1.0, (self.cfg.size,), np.float32)
        self.action_space = spaces.Discrete(self.cfg.num_actions)
        self.episode: Episode | None = None
        self._sim: Simulation | None = None
        self._run: Run | None = None
        self._policy: AgentPolicy | None = None
        self._done = True
        self._steps = 0
        self._wall = 0.0
        self._last_obs: np.ndarray | None = None

    # --- episodes ---

    def _draw(self) -> int:
        return int(self.np_random.integers(0, _SEED_LIMIT))

    def _sample(self, options: Mapping[str, Any]) -> Episode:
        """The episode `options` ask for, else one drawn from the seeded generator."""
        given = options.get("trace")
        start = options.get("start")
        seed = options.get("sim_seed")
        if given is not None:
            trace = given if isinstance(given, Trace) else load_trace(given)
            return Episode(trace, self._draw() if seed is None else int(seed))
        if self.profile is not None:
            if start is not None:
                raise InvalidParameter("reset option 'start' needs a trace to window; "
                                       f"episodes of {self.profile!r} are generated")
            trace = calibrated(self.profile, self.window_jobs, seed=self._draw(),
                               topology=self.topology, load=self.load)
            return Episode(trace, self._draw() if seed is None else int(seed))
        assert self.source is not None
        n = len(self._jobs)
        w = min(self.window_jobs, n)
        if start is None:
            start = int(self.np_random.integers(0, n - w + 1))
        elif isinstance(start, bool) or not isinstance(start, int | np.integer) \
                or not 0 <= start < n:
            raise InvalidParameter(f"reset option start={start!r}: expected a job index "
                                   f"in 0..{n - 1}")
        trace = shape(self.source, window=(self._jobs[start].submit_time, None), max_jobs=w,
                      load_scale=self.load_scale if self.load_scale != 1.0 else None)
        return Episode(trace, self._draw() if seed is None else int(seed), int(start))

    def _begin(self, episode: Episode, advisor: str | None) -> bool:
        """Start the episode's run and advance to its first decision point."""
        adv: Policy | None = make_policy(advisor) if advisor else None
        self._policy = AgentPolicy(self.cfg, self.reward_kind, adv)
        self._sim = Simulation(episode.trace, self.topology, self._policy, seed=episode.seed,
                               params=self.params)
        self.episode = episode
        self._steps = 0
        self._wall = 0.0
        t0 = time.perf_counter()
        self._run = self._sim.start()
        more = self._run.advance()
        self._wall += time.perf_counter() - t0
        self._done = not more
        return more

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode (see the module doc); returns its first observation and info."""
        super().reset(seed=seed)
        opts = dict(options or {})
        unknown = set(opts) - {"trace", "start", "sim_seed", "advisor"}
        if unknown:
            raise InvalidParameter(f"reset options {sorted(unknown)}: known are trace, "
                                   "start, sim_seed, advisor")
        advisor = opts.get("advisor", self.advisor)
        for _ in range(_TRIES):
            episode = self._sample(opts)
            if self._begin(episode, advisor):
                obs, info = self._observe(invalid=False)
                info["episode"] = {"start": episode.start, "sim_seed": episode.seed,
                                   "jobs": len(episode.trace.jobs)}
                return obs, info
            if "trace" in opts or "start" in opts:
                break
        raise InvalidParameter(
            "no decision point in the episode: no job of it could ever be started "
            f"(trace {self.episode.trace.name if self.episode else '?'})")

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply one action and run to the next decision point (or the end of the run)."""
        if self._run is None or self._policy is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode has ended: call reset()")
        pol = self._policy
        point = pol.point
        assert point is not None
        a = int(action)
        invalid = pol.resolve(a, point) != a
        pol.action = a
        t0 = time.perf_counter()
        more = self._run.advance()
        self._wall += time.perf_counter() - t0
        self._steps += 1
        self._done = not more
        reward = float(pol.meter.take())
        obs, info = self._observe(invalid)
        truncated = more and self.max_steps is not None and self._steps >= self.max_steps
        return obs, reward, not more, truncated, info

    def _observe(self, invalid: bool) -> tuple[np.ndarray, dict[str, Any]]:
        pol = self._policy
        assert pol is not None and pol.ctx is not None
        k = self.cfg.k
        if self._done:
            mask = np.zeros(k + 1, dtype=np.int8)
            mask[k] = 1
            obs = pol.observer.observe(pol.ctx, DecisionPoint((), (), mask))
        else:
            assert pol.point is not None and pol.obs is not None
            mask = pol.point.mask.copy()
            obs = pol.obs
        info: dict[str, Any] = {"action_mask": mask, "time": pol.ctx.now,
                                "invalid_action": invalid}
        if pol.advice is not None and not self._done:
            info["advice"] = pol.advice
        self._last_obs = obs
        return obs, info

    # --- comparing ---

    @property
    def context(self) -> Any:
        """The episode's scheduling context (read-only view of the run), for agents."""
        return None if self._policy is None else self._policy.ctx

    def result(self) -> Any:
        """The finished episode's SimResult (jobs, events, timeline, summary; `write`)."""
        if self._run is None or self._sim is None or not self._done:
            raise RuntimeError("result() needs a finished episode: step until terminated")
        return self._sim.result(self._run, self._wall)

    def simulation(self, policy: Any, **params: Any) -> Simulation:
        """A Simulation of `policy` (a registered name) on the current episode."""
        if self.episode is None:
            raise RuntimeError("call reset() first")
        return Simulation(self.episode.trace, self.topology, policy, seed=self.episode.seed,
                          params={**self.params, **params})

    @property
    def steps(self) -> int:
        """Steps taken in the current episode."""
        return self._steps
