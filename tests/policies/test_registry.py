from __future__ import annotations

import pytest

from schedlab.policies import make_policy, register, registered_policies
from schedlab.policies.base import Policy
from schedlab.policies.registry import policy_class, unregister
from schedlab.sim.errors import InvalidParameter, SimError, UnknownPolicy


def test_builtins_are_registered_lazily():
    assert {"fifo", "fifo-backfill"} <= set(registered_policies())
    assert policy_class("fifo").name == "fifo"


def test_unknown_policy_names_a_close_match_and_the_known_ones():
    with pytest.raises(UnknownPolicy) as e:
        make_policy("fifo-backfil")
    msg = str(e.value)
    assert "'fifo-backfil'" in msg and "did you mean 'fifo-backfill'" in msg
    assert "known: " in msg and "fifo" in msg


def test_duplicate_registration_is_an_error():
    with pytest.raises(SimError, match="registered already"):
        register("fifo", "schedlab.policies.fifo:FifoPolicy")


def test_lazy_string_entry_and_unregister():
    register("fifo-copy", "schedlab.policies.fifo:FifoPolicy")
    try:
        assert isinstance(make_policy("fifo-copy"), Policy)
    finally:
        unregister("fifo-copy")
    assert "fifo-copy" not in registered_policies()


def test_names_must_be_lowercase():
    with pytest.raises(SimError, match="lowercase"):
        register("FIFO2", "schedlab.policies.fifo:FifoPolicy")


def test_unknown_policy_parameter_lists_known():
    with pytest.raises(InvalidParameter, match="unknown parameter 'speed' for policy 'fifo'"):
        make_policy("fifo", speed=1)
