"""A `--param` some policies of the command do not take is an error, unless scoped to one."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from schedlab.app.cli import main, params_by_policy
from schedlab.app.sweep_file import parse_sweep
from schedlab.sim.errors import InvalidParameter


def test_a_param_only_some_policies_take_names_them_and_the_scoped_form() -> None:
    with pytest.raises(InvalidParameter) as e:
        params_by_policy(["fifo", "drf"], {"preempt": "true"})
    assert str(e.value) == (
        "--param preempt=true: policy 'fifo' does not take parameter 'preempt' (taken by "
        "'drf'); give it to those as POLICY.preempt=VALUE, e.g. --param drf.preempt=true")


def test_a_scoped_param_goes_to_its_policy_only_and_engine_keys_to_all() -> None:
    got = params_by_policy(["fifo", "drf"], {"drf.preempt": "true", "placer": "pack"})
    assert got == {"fifo": {"placer": "pack"}, "drf": {"preempt": "true", "placer": "pack"}}


@pytest.mark.parametrize("given, message", [
    ({"xx.preempt": "1"}, "'xx' is not a policy of this command (fifo, drf)"),
    ({"fifo.preempt": "1"}, "unknown parameter 'preempt' for policy 'fifo'"),
    ({"nosuch": "1"}, "unknown parameter 'nosuch' for policy 'fifo'"),
])
def test_bad_scopes_and_unknown_keys_fail(given: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidParameter, match=message.replace("(", r"\(").replace(")", r"\)")):
        params_by_policy(["fifo", "drf"], given)


def test_max_jobs_zero_is_an_error() -> None:
    r = CliRunner().invoke(main, ["run", "--policy", "fifo", "--max-jobs", "0", "--quiet"])
    assert r.exit_code == 2 and "0 is not in the range x>=1" in r.output


def test_a_sweep_scopes_with_params_policy_key() -> None:
    sweep = parse_sweep({"grid": {"policy": ["fifo", "drf"], "params.drf.preempt": [True]}})
    assert {p.policy: dict(p.params) for p in sweep.points} == {
        "fifo": {}, "drf": {"preempt": True}}
    with pytest.raises(InvalidParameter, match="'xx' is not a policy of the sweep"):
        parse_sweep({"grid": {"policy": ["fifo", "drf"], "params.xx.preempt": [True]}})
