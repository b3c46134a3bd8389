"""qssf (Helios' quasi-shortest-service-first): its history estimator and order, by hand."""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.policies.qssf import QssfPolicy
from schedlab.policies.qssf_history import ServiceHistory
from schedlab.policies.registry import policy_class
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology


def job(jid, submit, gpus, duration, user="", name=None, estimate=None):
    extra = tuple((k, v) for k, v in (("name", name), ("estimate", estimate))
                  if v is not None)
    return JobSpec(jid, submit, gpus, duration, user=user, extra=extra)


def order(result):
    return [(e.time, e.job_id) for e in result.events.itertuples() if e.kind == "start"]


def test_registered():
    assert policy_class("qssf") is QssfPolicy


def test_history_rules_as_helios_naive_estimator():
    h = ServiceHistory()
    assert h.service("u", "train", 2) == 0.0  # nothing finished yet
    h.add("u", "train", 1, 100.0)
    h.add("u", "train", 1, 51.0)
    h.add("u", "train", 4, 400.0)
    h.add("v", "eval", 1, 10.0)
    h.add("v", "", 1, 30.0)
    # the name seen, the user's jobs of it with the same GPU count: int(75.5 x 1)
    assert h.service("u", "train", 1) == 75.0
    # no job of that GPU count: all the user's `train` jobs, (100+51+400)/3 x 2, cut
    assert h.service("u", "train", 2) == float(int(551 / 3 * 2))
    # the user never ran `train`: everyone's `train` jobs, 551/3 x 1 (not cut)
    assert h.service("v", "train", 1) == pytest.approx(551 / 3)
    # an unseen name close to `eval` (difflib ratio 0.89 >= 0.6): the user's `eval` jobs
    assert h.service("v", "evals", 2) == 20.0
    # ... of a user who never ran it: everyone's `eval` jobs x GPUs
    assert h.service("u", "evals", 3) == 30.0
    # no close name: the user's mean (v: 10 and 30), else everyone's (591/5)
    assert h.service("v", "zzzz", 1) == 20.0
    assert h.service("w", "zzzz", 2) == pytest.approx(591 / 5 * 2)
    # no name at all matches nothing
    assert h.service("v", "", 1) == 20.0


def test_two_close_names_pool_their_jobs():
    h = ServiceHistory()
    h.add("u", "resnet50", 1, 100.0)
    h.add("u", "resnet18", 1, 300.0)
    h.add("u", "bert", 1, 1000.0)
    assert h.close_names("resnet34") == ["resnet50", "resnet18"] or \
        sorted(h.close_names("resnet34")) == ["resnet18", "resnet50"]
    assert h.service("u", "resnet34", 1) == 200.0


def test_qssf_orders_by_service_learned_online():
    # one GPU. a (u/train, 100 s) runs 0..100; b and c wait with no history (estimate 0,
    # arrival order): b 100..110, c 110..1110. At 200 (history: train 100 s by u, eval
    # 10 s by v) d..g arrive and wait for c: f ~ eval 10, g (new user, no name match)
    # the mean 55, d (u's train, 1 GPU) 100, e (v never ran train: everyone's) 100.
    one = uniform_topology(1, name="one")
    trace = make_trace(
        job("a", 0.0, 1, 100.0, "u", "train"), job("b", 0.0, 1, 10.0, "v", "eval"),
        job("c", 0.0, 1, 1000.0, "w", "long"),
        job("d", 200.0, 1, 5.0, "u", "train"), job("e", 200.0, 1, 7.0, "v", "train"),
        job("f", 200.0, 1, 3.0, "u", "evals"), job("g", 200.0, 1, 4.0, "x", "zzz"))
    r = Simulation(trace, one, QssfPolicy()).run()
    assert order(r) == [(0.0, "a"), (100.0, "b"), (110.0, "c"), (1110.0, "f"),
                        (1113.0, "g"), (1117.0, "d"), (1122.0, "e")]


def test_qssf_estimate_column_and_blocking():
    # two GPUs, `a` holds both until 10. Services from the column: d -5, c 2 x 20 = 40,
    # b 50. At 10 d starts; c (2 GPUs) does not fit: blocked=stop holds b behind it
    # (c 40..50, b 50..60), blocked=skip starts b at 10 (c waits for d and b: 60).
    two = uniform_topology(1, gpus_per_switch=2, name="two")
    trace = make_trace(job("a", 0.0, 2, 10.0, estimate=1),
                       job("b", 1.0, 1, 50.0, estimate=50), job("c", 1.0, 2, 10.0, estimate=20),
                       job("d", 1.0, 1, 30.0, estimate=-5))
    stop = Simulation(trace, two, QssfPolicy(estimator="column")).run()
    assert order(stop) == [(0.0, "a"), (10.0, "d"), (40.0, "c"), (50.0, "b")]
    skip = Simulation(trace, two, QssfPolicy(estimator="column", blocked="skip")).run()
    assert order(skip) == [(0.0, "a"), (10.0, "d"), (10.0, "b"), (60.0, "c")]


def test_qssf_estimate_column_missing_is_one_clear_error():
    one = uniform_topology(1, name="one")
    trace = make_trace(job("a", 0.0, 1, 10.0), job("b", 0.0, 1, 10.0))
    with pytest.raises(InvalidTrace, match=r"job 'a': column 'estimate' is None"):
        Simulation(trace, one, QssfPolicy(estimator="column")).run()


# what Helios' own `NaiveEstimator.inference` (HeliosArtifact @bdaae10, run unmodified
# under pandas 1.2.4 with this history as its training jobs) returns for each query
HELIOS_HISTORY = [
    ("u", "train_resnet", 1, 100), ("u", "train_resnet", 1, 51), ("u", "train_resnet", 4, 400),
    ("v", "eval_bert", 1, 10), ("v", "misc", 1, 30), ("w", "train_resnet", 2, 700),
    ("u", "resnet50_imagenet", 8, 3600), ("u", "resnet18_imagenet", 8, 1800),
    ("w", "bert_large", 2, 5000), ("x", "gpt_small", 1, 999)]
HELIOS_ANSWERS = [
    (("u", "train_resnet", 1), 75), (("u", "train_resnet", 2), 367),
    (("v", "train_resnet", 1), 312.75), (("y", "train_resnet", 4), 1251.0),
    (("u", "train_resnet50", 1), 75), (("v", "eval_bertx", 2), 20),
    (("u", "eval_bertx", 3), 30.0), (("u", "resnet34_imagenet", 8), 21600),
    (("v", "qqqq", 1), 20.0), (("y", "qqqq", 2), 2538.0), (("w", "bert_large", 2), 10000),
    (("w", "bert_larg", 1), 5000), (("x", "gpt_smal", 4), 3996)]


def test_history_gives_helios_naive_estimator_answers():
    h = ServiceHistory()
    for user, name, gpus, duration in HELIOS_HISTORY:
        h.add(user, name, gpus, duration)
    assert [h.service(*q) for q, _ in HELIOS_ANSWERS] == [a for _, a in HELIOS_ANSWERS]
