"""The Gym environment `schedlab/Cluster-v0` (schedlab.app.rl) and the engine's stepping API."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_trace
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.app.rl import ENV_ID, ClusterEnv, ModelAgent, PolicyAgent, RandomAgent, run_episode
from schedlab.policies.base import Policy
from schedlab.policies.conformance import check_invariants
from schedlab.policies.observation import ObsConfig
from schedlab.policies.scorer import Scorer
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidDecision, InvalidParameter
from schedlab.sim.model import Await
from schedlab.topologies.build import uniform_topology

TWO = uniform_topology(2, sockets=2, switches_per_socket=1, gpus_per_switch=2, name="two")


def contended(**kw):
    """Small philly-like episodes on 8 GPUs at 1.5x offered load: queues form."""
    return ClusterEnv("philly-like", TWO, window_jobs=kw.pop("window_jobs", 40), load=1.5,
                      **kw)


def test_check_env_passes_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(ENV_ID, window_jobs=40).unwrapped)
        check_env(gym.make(ENV_ID, trace="philly-like", topology=TWO, window_jobs=40,
                           load=1.5, reward="queueing").unwrapped)


def test_registered_with_gymnasium_and_importable_in_one_go():
    env = gym.make("schedlab.app.rl:schedlab/Cluster-v0", window_jobs=20, k=4)
    assert env.action_space == gym.spaces.Discrete(5)
    assert env.observation_space.shape == (ObsConfig(k=4).size,)
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space and info["action_mask"].shape == (5,)


def play(env, agent, seed, options=None):
    obs, info = env.reset(seed=seed, options=options)
    trail = [obs]
    rewards = []
    while True:
        obs, r, term, trunc, info = env.step(agent(obs, info))
        trail.append(obs)
        rewards.append(r)
        if term or trunc:
            return np.array(trail), rewards, env.result() if term else None


def test_same_seed_same_episode():
    env = contended()
    a = play(env, RandomAgent(3), seed=11)
    b = play(env, RandomAgent(3), seed=11)
    c = play(env, RandomAgent(3), seed=12)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1] == b[1]
    assert a[2].jobs.equals(b[2].jobs) and a[2].events.equals(b[2].events)
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0])


def test_windows_of_a_trace_are_drawn_and_shifted_to_zero():
    env = ClusterEnv("default", "default", window_jobs=25)
    _, info = env.reset(seed=4)
    ep = env.episode
    assert info["episode"]["start"] == ep.start and len(ep.trace.jobs) == 25
    assert min(s.submit_time for s in ep.trace.jobs) == 0.0
    _, info2 = env.reset(options={"start": 7, "sim_seed": 1})
    assert env.episode.start == 7 and env.episode.seed == 1
    times = [j.submit_time for j in env.episode.trace.jobs]
    fast = ClusterEnv("default", "default", window_jobs=25, load_scale=2)
    fast.reset(options={"start": 7})
    assert [j.submit_time for j in fast.episode.trace.jobs] == [t / 2 for t in times]
    with pytest.raises(InvalidParameter, match="load_scale 0"):
        ClusterEnv("default", "default", load_scale=0)
    with pytest.raises(InvalidParameter, match="start=5000"):
        env.reset(options={"start": 5000})
    with pytest.raises(InvalidParameter, match=r"reset options \['windw'\]"):
        env.reset(options={"windw": 1})
    with pytest.raises(InvalidParameter, match="unknown reward 'speed'"):
        ClusterEnv(reward="speed")


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 10_000), k=st.sampled_from([1, 3, 8]), data=st.data())
def test_random_valid_actions_keep_the_invariants(seed, k, data):
    env = contended(window_jobs=25, k=k)
    obs, info = env.reset(seed=seed)
    steps = 0
    while True:
        mask = info["action_mask"]
        assert obs in env.observation_space and mask.dtype == np.int8 and mask.any()
        action = data.draw(st.sampled_from(np.flatnonzero(mask).tolist()))
        obs, _, term, trunc, info = env.step(action)
        assert not info["invalid_action"] and not trunc
        steps += 1
        if term:
            break
    result = env.result()
    check_invariants(result, TWO, env.episode.trace)
    assert (result.jobs.status == "completed").all()
    assert steps >= len(env.episode.trace.jobs)  # one start a step at least


def test_a_trained_model_replays_as_the_learned_policy(tmp_path):
    env = contended(window_jobs=60, k=6)
    rng = np.random.default_rng(5)
    for seed in range(3):
        model = Scorer.from_vector(ObsConfig(k=6), rng.normal(size=Scorer.vector_size()))
        path = model.save(tmp_path / f"m{seed}.json")
        out = run_episode(env, ModelAgent(model), seed=seed)
        replay = env.simulation("learned", model=str(path)).run()
        assert out.result.jobs.equals(replay.jobs)
        assert out.result.events.equals(replay.events)
        assert replay.summary["policy_decision_points"] == out.steps


@pytest.mark.parametrize(("policy", "k"), [("fifo", 4), ("fifo-backfill", 60),
                                            ("sjf", 60), ("easy-backfill", 60)])
def test_a_builtin_policy_acting_in_the_env_is_that_policy(policy, k):
    # policies that only start jobs: fifo only ever starts the head, the others see every
    # pending job when K >= the window (a preempting one, tiresias-las, is reduced to
    # its starts)
    env = contended(window_jobs=60, k=k)
    for seed in range(2):
        out = run_episode(env, PolicyAgent(policy), seed=seed)
        ref = env.simulation(policy).run()
        assert out.result.jobs.equals(ref.jobs), (policy, seed)


def test_rewards_add_up_to_the_documented_totals():
    for reward in ("slowdown", "queueing", "utilization"):
        env = contended(reward=reward)
        out = run_episode(env, RandomAgent(1), seed=2)
        jobs = out.result.jobs
        assert (jobs.status == "completed").all()
        if reward == "slowdown":
            want = -((jobs.end_time - jobs.submit_time) / jobs.duration.clip(lower=10)).sum()
        elif reward == "queueing":
            want = -jobs.queueing_delay.sum() / 3600
        else:
            want = jobs.gpu_seconds.sum() / TWO.num_gpus / 3600
        assert out.total_reward == pytest.approx(want, rel=1e-9), reward


def test_an_invalid_action_is_applied_as_no_more_or_the_earliest_fit():
    trace = make_trace(("A", 0.0, 8, 100.0), ("B", 0.0, 4, 10.0), ("C", 0.0, 4, 20.0))
    env = ClusterEnv(trace, TWO, k=4)
    _, info = env.reset(seed=0, options={"trace": trace})
    assert info["action_mask"].tolist() == [1, 1, 1, 0, 0]  # nothing runs: no "no more"
    _, _, _, _, info = env.step(4)  # invalid: the earliest that fits (A) starts
    assert info["invalid_action"]
    assert info["time"] == 100.0  # A took all 8 GPUs: the next point is when it ends
    _, _, _, _, info = env.step(3)  # invalid (no candidate 3): B starts
    assert info["invalid_action"] and info["action_mask"].tolist() == [1, 0, 0, 0, 1]
    _, _, _, _, info = env.step(9)  # invalid: "no more" is allowed now (B runs)
    assert info["invalid_action"] and info["time"] == 110.0
    _, _, term, _, _ = env.step(0)
    assert term
    starts = [(e.time, e.job_id) for e in env.result().events.itertuples() if e.kind == "start"]
    assert starts == [(0.0, "A"), (100.0, "B"), (110.0, "C")]
    with pytest.raises(RuntimeError, match="episode has ended"):
        env.step(0)


def test_max_steps_truncates():
    env = contended(max_steps=3)
    env.reset(seed=0)
    flags = [env.step(RandomAgent(0)(None, {"action_mask": env._policy.point.mask}))[3]
             for _ in range(3)]
    assert flags == [False, False, True]
    with pytest.raises(RuntimeError, match="finished episode"):
        env.result()


class _Asker(Policy):
    name = "asker"

    def schedule(self, ctx):
        yield Await("an answer")


def test_simulation_run_refuses_a_policy_that_awaits():
    trace = make_trace(("A", 0.0, 1, 10.0))
    with pytest.raises(InvalidDecision, match="yielded Await"):
        Simulation(trace, TWO, _Asker()).run()


def test_stepping_a_plain_policy_gives_the_run_result():
    trace = make_trace(("A", 0.0, 4, 10.0), ("B", 1.0, 8, 5.0), ("C", 2.0, 2, 1.0))
    sim = Simulation(trace, TWO, "fifo-backfill")
    run = sim.start()
    assert run.advance() is False  # no Await: it runs to the end
    stepped = sim.result(run, 0.0)
    plain = Simulation(trace, TWO, "fifo-backfill").run()
    assert stepped.jobs.equals(plain.jobs) and stepped.events.equals(plain.events)


def test_hidden_durations_zero_the_duration_features():
    from schedlab.policies.observation import GLOBAL_FEATURES, JOB_FEATURES

    env = contended(durations=False)
    obs, info = env.reset(seed=3)
    g = len(GLOBAL_FEATURES)
    jobs = obs[g:].reshape(env.cfg.k, len(JOB_FEATURES))
    for name in ("duration", "gpu_time"):
        assert not jobs[:, JOB_FEATURES.index(name)].any()
    assert jobs[0, JOB_FEATURES.index("present")] == 1.0
    agent = RandomAgent(0)
    while True:
        obs, _, term, _, info = env.step(agent(obs, info))
        assert obs[GLOBAL_FEATURES.index("running_done")] == 0.0
        assert obs[GLOBAL_FEATURES.index("running_left")] == 0.0
        if term:
            break
