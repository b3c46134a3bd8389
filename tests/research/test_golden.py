"""Golden summaries: every registered policy on the bundled default trace matches baselines/.

A change that moves a policy's numbers fails here (and so in CI) until the baseline is
rewritten on purpose with the command in REGENERATE.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from schedlab.app.check import RunRecord, compare_run, format_report, read_baseline
from schedlab.policies import registered_policies
from schedlab.sim.engine import Simulation
from schedlab.topologies import load_topology
from schedlab.traces import load_trace

BASELINE = Path(__file__).resolve().parents[2] / "baselines" / "default.json"
REGENERATE = ("rm -rf results/golden && schedlab run --quiet --out results/golden && "
              "schedlab check results/golden --baseline baselines/default.json --update")
POLICIES = registered_policies()  # built-in policies, at collection time


@pytest.fixture(scope="module")
def baseline():
    return read_baseline(BASELINE)


@pytest.fixture(scope="module")
def inputs():
    return load_trace("default"), load_topology("default")


@pytest.mark.parametrize("policy", POLICIES)
def test_policy_matches_its_golden_summary(policy, baseline, inputs):
    entry = baseline["runs"].get(policy)
    if entry is None:
        pytest.fail(f"no baseline for policy {policy}: run `{REGENERATE}` and commit "
                    "baselines/default.json")
    assert entry["config"]["trace"] == "default" and entry["config"]["topology"] == "default"
    result = Simulation(*inputs, policy, seed=0).run()
    rows = compare_run(policy, entry, RunRecord(policy, result.summary, result.config),
                       baseline)
    bad = [r for r in rows if r.failed]
    assert not bad, (f"policy {policy} moved from baselines/default.json:\n"
                     f"{format_report(bad)}\nif intended, run `{REGENERATE}`")


def test_baseline_has_no_policy_that_is_not_registered(baseline):
    stale = sorted(set(baseline["runs"]) - set(POLICIES))
    assert not stale, (f"baselines/default.json has policies no longer registered: "
                       f"{', '.join(stale)}; run `{REGENERATE}`")


def test_a_policy_without_baseline_fails_with_the_command_to_write_it(baseline, inputs):
    with pytest.raises(pytest.fail.Exception) as err:
        test_policy_matches_its_golden_summary("not-a-baselined-policy", baseline, inputs)
    assert str(err.value) == (f"no baseline for policy not-a-baselined-policy: run "
                              f"`{REGENERATE}` and commit baselines/default.json")
