"""The `learned` policy, its observation and its model files (numpy scorers in JSON)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from conftest import make_trace

from schedlab.policies.learned import LearnedPolicy
from schedlab.policies.observation import GLOBAL_FEATURES, JOB_FEATURES, ObsConfig, squash
from schedlab.policies.registry import policy_class
from schedlab.policies.scorer import INPUTS, Scorer, load_scorer
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter


def starts(result):
    return [(e.time, e.job_id) for e in result.events.itertuples() if e.kind == "start"]


def test_registered_by_name():
    assert policy_class("learned") is LearnedPolicy


def test_the_builtin_scorer_backfills_over_the_first_k(dgx2):
    # A takes all 16 GPUs; B (16) waits for it; C (8) and D (8) queue behind B and start
    # when A ends, before B (the earliest candidates that fit), then B after them
    trace = make_trace(("A", 0.0, 16, 100.0), ("B", 1.0, 16, 10.0), ("C", 2.0, 8, 30.0),
                       ("D", 3.0, 8, 50.0))
    r = Simulation(trace, dgx2, "learned").run()
    assert starts(r) == [(0.0, "A"), (100.0, "B"), (110.0, "C"), (110.0, "D")]
    # B fits at 100 (the whole cluster is free) and is the earliest: it goes first
    s = r.summary
    assert s["policy_decision_points"] == 4 and s["policy_stops"] == 0


def test_k_limits_what_the_policy_sees(dgx2, tmp_path):
    # the 16-GPU head B cannot start while A runs; with K = 1 C behind it stays hidden
    trace = make_trace(("A", 0.0, 8, 100.0), ("B", 1.0, 16, 10.0), ("C", 2.0, 8, 30.0))
    wide = Simulation(trace, dgx2, "learned").run()
    assert starts(wide) == [(0.0, "A"), (2.0, "C"), (100.0, "B")]
    path = Scorer.default(ObsConfig(k=1)).save(tmp_path / "k1.json")
    narrow = Simulation(trace, dgx2, "learned", params={"model": str(path)}).run()
    assert starts(narrow) == [(0.0, "A"), (100.0, "B"), (110.0, "C")]


def test_a_model_that_says_no_more_waits_while_jobs_run(dgx2, tmp_path):
    # stop always scores highest: a start happens only where "no more" is masked,
    # i.e. when nothing runs (the cluster never idles for good)
    stop = np.zeros(len(GLOBAL_FEATURES))
    stop[GLOBAL_FEATURES.index("bias")] = 10.0
    path = Scorer.linear(ObsConfig(), np.zeros(len(INPUTS)), stop).save(tmp_path / "m.json")
    trace = make_trace(("A", 0.0, 8, 100.0), ("B", 1.0, 8, 10.0), ("C", 2.0, 8, 30.0))
    r = Simulation(trace, dgx2, "learned", params={"model": str(path)}).run()
    assert starts(r) == [(0.0, "A"), (100.0, "B"), (110.0, "C")]
    # at 1 and 2 while A runs, and at 100 once B runs (C waits for B to end)
    assert r.summary["policy_stops"] == 3


def test_model_file_round_trip_linear_and_mlp(tmp_path):
    rng = np.random.default_rng(0)
    lin = Scorer.from_vector(ObsConfig(k=4, durations=False),
                             rng.normal(size=Scorer.vector_size()))
    back = load_scorer(lin.save(tmp_path / "lin.json"))
    assert back.kind == "linear" and back.cfg == ObsConfig(k=4, durations=False)
    obs = rng.random(ObsConfig(k=4).size).astype(np.float32)
    np.testing.assert_array_equal(back.scores(obs), lin.scores(obs))
    data = lin.to_dict()
    data["layers"] = [{"weights": rng.normal(size=(len(INPUTS), 3)).tolist(), "bias": [0, 0, 0]},
                      {"weights": rng.normal(size=(3, 1)).tolist(), "bias": [0.5]}]
    mlp = Scorer.from_dict(data)
    assert mlp.kind == "mlp"
    scores = mlp.scores(obs)
    assert scores.shape == (5,) and np.isfinite(scores).all()
    mask = np.array([0, 1, 0, 1, 0], dtype=np.int8)
    assert mlp.act(obs, mask) in (1, 3)


@pytest.mark.parametrize(("change", "field"), [
    ({"format": "other"}, "'format'"),
    ({"k": 0}, "'k'"),
    ({"durations": "yes"}, "'durations'"),
    ({"inputs": ["present"]}, "'inputs'"),
    ({"layers": []}, "'layers'"),
    ({"layers": [{"weights": [[1.0]], "bias": [0.0]}]}, "'layers[0].weights'"),
    ({"stop_weights": [1.0, 2.0]}, "'stop_weights'"),
    ({"stop_weights": [math.nan] * len(GLOBAL_FEATURES)}, "'stop_weights'"),
])
def test_a_bad_model_file_names_the_file_and_field(tmp_path, change, field):
    data = {**Scorer.default().to_dict(), **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    want = rf"model file .*bad\.json: field {re.escape(field)}"
    with pytest.raises(InvalidParameter, match=want):
        LearnedPolicy(model=str(path))


def test_a_model_file_that_is_not_json_or_missing(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(InvalidParameter, match=r"broken\.json: not JSON: line 1"):
        LearnedPolicy(model=str(path))
    with pytest.raises(InvalidParameter, match="model.*existing file"):
        Simulation(make_trace(("A", 0.0, 1, 1.0)), "default", "learned",
                   params={"model": str(tmp_path / "missing.json")})


def test_observation_at_the_first_decision_point(dgx2):
    from schedlab.app.rl import ClusterEnv

    trace = make_trace(("A", 0.0, 16, 100.0), ("B", 0.0, 4, 3600.0), ("C", 0.0, 2, 60.0))
    env = ClusterEnv(trace, dgx2, k=4)
    obs, info = env.reset(seed=0, options={"trace": trace})
    assert obs.shape == (len(GLOBAL_FEATURES) + 4 * len(JOB_FEATURES),)
    assert obs.dtype == np.float32 and obs.min() >= 0.0 and obs.max() <= 1.0
    g = dict(zip(GLOBAL_FEATURES, obs[:len(GLOBAL_FEATURES)].tolist(), strict=True))
    assert g["bias"] == 1.0 and g["free_gpus"] == 1.0 and g["nodes_free_8"] == 1.0
    assert g["switch_free"] == g["socket_free"] == g["node_free"] == 1.0
    assert g["pending"] == pytest.approx(3 / 7) and g["running"] == 0.0 and g["busy"] == 0.0
    jobs = obs[len(GLOBAL_FEATURES):].reshape(4, len(JOB_FEATURES))
    a = dict(zip(JOB_FEATURES, jobs[0].tolist(), strict=True))
    b = dict(zip(JOB_FEATURES, jobs[1].tolist(), strict=True))
    assert a["present"] == 1 and a["position"] == 0 and a["gpus"] == pytest.approx(16 / 24)
    assert a["gpus_vs_free"] == 1.0 and a["wait"] == 0.0 and a["cpu_only"] == 0.0
    assert a["duration"] == pytest.approx(squash(100.0))
    assert b["position"] == 0.25 and b["gpu_time"] == pytest.approx(squash(4 * 3600.0))
    assert b["duration"] == pytest.approx(0.3852, abs=1e-3)  # one hour
    assert not jobs[3:].any()
    # nothing runs: "no more" is masked; the three candidates fit
    assert info["action_mask"].tolist() == [1, 1, 1, 0, 0]
    obs, _, _, _, info = env.step(1)  # B starts: 12 free, A no longer fits, C does
    assert info["action_mask"].tolist() == [0, 1, 0, 0, 1] and info["time"] == 0.0
    g = dict(zip(GLOBAL_FEATURES, obs[:len(GLOBAL_FEATURES)].tolist(), strict=True))
    assert g["busy"] == 0.25 and g["nodes_free_4"] == 0.5 and g["nodes_free_8"] == 0.5
    assert g["switch_free"] == 0.75 and g["socket_free"] == 0.75 and g["node_free"] == 0.5
    assert g["running"] == pytest.approx(1 / 5) and g["running_done"] == 0.0
    assert g["running_left"] == pytest.approx(squash(3600.0), abs=1e-6)


def _sparse(job: dict[str, float], stop: dict[str, float]) -> Scorer:
    w = np.zeros(len(INPUTS))
    for name, x in job.items():
        w[INPUTS.index(name)] = x
    s = np.zeros(len(GLOBAL_FEATURES))
    for name, x in stop.items():
        s[GLOBAL_FEATURES.index(name)] = x
    return Scorer.linear(ObsConfig(k=4), w, s)


@pytest.mark.parametrize("scorer", [
    Scorer.default(ObsConfig(k=4)),
    _sparse({"position": -1.0, "wait": 0.5, "gpus": -0.3}, {"bias": -2.0}),
    _sparse({"position": -1.0, "pending": 0.4}, {"bias": -1.0, "free_gpus": 0.5}),
    Scorer.linear(ObsConfig(k=4), np.linspace(-1, 1, len(INPUTS)),
                  np.linspace(1, -1, len(GLOBAL_FEATURES))),
], ids=["default", "job-features", "global-features", "dense"])
def test_features_no_weight_reads_are_left_zero_and_scores_stay_bit_identical(
        dgx2, tmp_path, monkeypatch, scorer):
    from schedlab.policies.observation import Observer

    reads = scorer.reads()
    names = list(GLOBAL_FEATURES) + [f for _ in range(4) for f in JOB_FEATURES]
    read = np.array([n in reads for n in names])
    orig = Observer.observe
    points = []

    def both(self, ctx, point):
        part = orig(self, ctx, point)
        kept = (self._globals, self._measures)
        self._globals = self._measures = True
        full = orig(self, ctx, point)
        self._globals, self._measures = kept
        assert np.array_equal(part[read], full[read])
        assert np.all((part == full) | (part == 0))  # the others: exact, or left 0
        assert np.array_equal(scorer.scores(part), scorer.scores(full))
        points.append(point)
        return part

    monkeypatch.setattr(Observer, "observe", both)
    trace = make_trace(*[(f"j{i}", float(i % 5), (1, 2, 4, 8, 16)[i % 5], 30.0 + 7 * i)
                         for i in range(24)])
    path = scorer.save(tmp_path / "m.json")
    Simulation(trace, dgx2, "learned", params={"model": str(path)}).run()
    assert len(points) > 10
