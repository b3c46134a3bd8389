"""check_policy's documented errors; extending.md lists every member of the cluster view."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from schedlab.policies.base import Policy
from schedlab.policies.conformance import ConformanceError, InvalidDecisionError, check_policy
from schedlab.sim.errors import InvalidDecision
from schedlab.sim.interfaces import ClusterView
from schedlab.sim.model import Start

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


class GpuZeroAlways(Policy):
    """Starts every pending job on GPU 0, whoever holds it."""

    name = "gpu-zero"

    def schedule(self, ctx):  # type: ignore[no-untyped-def]
        return [Start(j.spec.job_id, (0,)) for j in ctx.pending()]


@pytest.mark.parametrize("clause", [ConformanceError, InvalidDecision, AssertionError])
def test_an_invalid_start_is_a_conformance_error_naming_job_policy_and_decision(clause):
    with pytest.raises(clause) as e:
        check_policy(GpuZeroAlways)
    assert isinstance(e.value, InvalidDecisionError)
    msg = str(e.value)
    assert re.match(r"scenario \S+: policy 'gpu-zero' made an invalid decision, Start of "
                    r"job '[^']+' \(Start\(job_id=", msg), msg
    assert "has 0" in msg and "free, job needs 1" in msg


def test_extending_lists_every_member_of_the_cluster_view():
    members = sorted(k for k in vars(ClusterView) if not k.startswith("_"))
    text = DOC.read_text(encoding="utf-8")
    missing = [m for m in members if f"`{m}" not in text]
    assert members and not missing, missing
