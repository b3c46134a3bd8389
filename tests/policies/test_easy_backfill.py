"""EASY and conservative backfilling: reservations from estimates, exact start orders."""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.policies.backfill import ConservativeBackfillPolicy, EasyBackfillPolicy
from schedlab.policies.conformance import check_policy
from schedlab.policies.registry import policy_class
from schedlab.sim.engine import Simulation
from schedlab.topologies.build import uniform_topology

CLASSES = {"easy-backfill": EasyBackfillPolicy,
           "conservative-backfill": ConservativeBackfillPolicy}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_registered_by_name(name):
    assert policy_class(name) is CLASSES[name]


@pytest.fixture
def four():
    """One node of 4 GPUs (2 switches x 2)."""
    return uniform_topology(1, switches_per_socket=2, gpus_per_switch=2, name="four")


def starts(result):
    return [(e.time, e.job_id) for e in result.events.itertuples() if e.kind == "start"]


@pytest.mark.parametrize("cls", [EasyBackfillPolicy, ConservativeBackfillPolicy])
def test_conformance_with_overestimates(cls):
    check_policy(lambda: cls(estimate_factor=3.0))


def test_conservative_reservation_cap_still_conforms():
    check_policy(lambda: ConservativeBackfillPolicy(max_reservations=2))


def test_easy_starts_a_small_job_only_if_it_ends_before_the_reservation(four):
    # A holds 2 of 4 GPUs until 100; the head H needs all 4: reservation at 100, no
    # extra GPUs. S1 (2 + 200 > 100) must wait; S2 (3 + 50 <= 100) backfills at once.
    trace = make_trace(("A", 0.0, 2, 100.0), ("H", 1.0, 4, 100.0), ("S1", 2.0, 1, 200.0),
                       ("S2", 3.0, 1, 50.0))
    r = Simulation(trace, four, EasyBackfillPolicy()).run()
    assert starts(r) == [(0.0, "A"), (3.0, "S2"), (100.0, "H"), (200.0, "S1")]
    # backfilling without a reservation starts S1 at once and delays H to 202
    r0 = Simulation(trace, four, "fifo-backfill").run()
    assert starts(r0) == [(0.0, "A"), (2.0, "S1"), (3.0, "S2"), (202.0, "H")]


def test_easy_lets_a_long_job_use_the_extra_gpus(four):
    # H needs 3 of the 4 GPUs free at 100: one extra GPU. S1 (long) takes it at 2; S3
    # (long) finds no extra left and waits for H.
    trace = make_trace(("A", 0.0, 2, 100.0), ("H", 1.0, 3, 100.0), ("S1", 2.0, 1, 200.0),
                       ("S3", 3.0, 1, 300.0))
    r = Simulation(trace, four, EasyBackfillPolicy()).run()
    assert starts(r) == [(0.0, "A"), (2.0, "S1"), (100.0, "H"), (200.0, "S3")]


def test_easy_counts_every_job_ending_at_the_shadow_time_as_extra(four):
    # A (2 GPUs) and B (1) both end at 100, 1 GPU is free. The head H needs 3: shadow time
    # 100, and at 100 A and B free 3 GPUs + 1 free = 4, one more than H needs. The long
    # S (1 GPU) may take that extra GPU now without delaying H.
    trace = make_trace(("A", 0.0, 2, 100.0), ("B", 0.0, 1, 100.0), ("H", 1.0, 3, 100.0),
                       ("S", 2.0, 1, 300.0))
    r = Simulation(trace, four, EasyBackfillPolicy()).run()
    assert starts(r) == [(0.0, "A"), (0.0, "B"), (2.0, "S"), (100.0, "H")]


def test_easy_with_overestimates(four):
    # exact estimates: S2 (60 + 45 > 100) waits. Twice the durations: A is expected to
    # end at 200 and S2 at 150, so it backfills at 60 -- and delays H from 100 to 105.
    trace = make_trace(("A", 0.0, 2, 100.0), ("H", 1.0, 4, 100.0), ("S2", 60.0, 1, 45.0))
    exact = Simulation(trace, four, EasyBackfillPolicy()).run()
    over = Simulation(trace, four, EasyBackfillPolicy(estimate_factor=2.0)).run()
    assert starts(exact) == [(0.0, "A"), (100.0, "H"), (200.0, "S2")]
    assert starts(over) == [(0.0, "A"), (60.0, "S2"), (105.0, "H")]


def test_conservative_protects_every_queued_job_where_easy_protects_the_head(four):
    # H1 (2 GPUs) is the head; H2 (4 GPUs) is second. EASY lets the long S use H1's extra
    # GPU at 3, which delays H2 until S ends at 253. Conservative reserves H1 at 100 and
    # H2 at 200; S fits nowhere before 300 without delaying H2.
    trace = make_trace(("A", 0.0, 3, 100.0), ("H1", 1.0, 2, 100.0), ("H2", 2.0, 4, 100.0),
                       ("S", 3.0, 1, 250.0))
    easy = Simulation(trace, four, EasyBackfillPolicy()).run()
    cons = Simulation(trace, four, ConservativeBackfillPolicy()).run()
    assert starts(easy) == [(0.0, "A"), (3.0, "S"), (100.0, "H1"), (253.0, "H2")]
    assert starts(cons) == [(0.0, "A"), (100.0, "H1"), (200.0, "H2"), (300.0, "S")]


def test_conservative_backfills_a_job_that_delays_nobody(four):
    # S2 fits in [3, 53) next to A, before H's reservation at 100
    trace = make_trace(("A", 0.0, 2, 100.0), ("H", 1.0, 4, 100.0), ("S2", 3.0, 2, 50.0))
    r = Simulation(trace, four, ConservativeBackfillPolicy()).run()
    assert starts(r) == [(0.0, "A"), (3.0, "S2"), (100.0, "H")]
