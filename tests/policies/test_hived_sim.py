"""The `hived` policy in whole simulations: VC guarantees, preemption, rejection, options."""

from __future__ import annotations

import pytest
from conftest import make_trace

import schedlab.policies as policies
from schedlab.policies.conformance import check_policy
from schedlab.policies.hived import HivedPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter, InvalidTopology
from schedlab.sim.model import JobSpec
from schedlab.topologies import load_topology
from schedlab.topologies.build import uniform_topology
from schedlab.topologies.native import native_from_dict


@pytest.fixture
def hived_registered():
    assert policies.policy_class("hived") is HivedPolicy  # a built-in registration
    return "hived"


@pytest.fixture
def basic(hived_root):
    """3 K80 nodes of 4 GPUs: VC1 one node, VC2 one node plus the pinned 10.151.41.21."""
    return load_topology(hived_root / "hived-configs" / "basic-hivedscheduler.yaml")


def job(jid, t, gpus, dur, vc="VC1", prio=0, per_task=0, **kw):
    return JobSpec(jid, t, gpus, dur, vc=vc, priority=prio, gpus_per_task=per_task, **kw)


def run(topo, *jobs, until=None, **params):
    return Simulation(make_trace(*jobs), topo, HivedPolicy(**params)).run(until=until)


def starts(result):
    ev = result.events
    return {r.job_id: (r.time, r.cells) for r in ev[ev.kind == "start"].itertuples()}


def test_gang_of_four_one_gpu_tasks_lands_on_one_node(basic):
    r = run(basic, job("g", 0, 4, 100, per_task=1))
    assert starts(r) == {"g": (0.0, "10.151.41.20:4")}


def test_request_larger_than_the_vc_is_rejected_and_preempts_nothing(basic):
    # HiveD would leave its pods pending for ever; the simulator says why and goes on
    r = run(basic,
            job("opp", 0, 4, 1000, prio=-1),
            job("big", 1, 8, 100, per_task=4),  # VC1 has one node of 4 GPUs
            until=500)
    jobs = r.jobs.set_index("job_id")
    assert jobs.loc["big", "status"] == "rejected"
    ev = r.events
    why = ev[(ev.job_id == "big") & (ev.kind == "reject")].detail.iloc[0]
    assert "2 x 4 GPUs cannot be placed even in the empty cluster" in why and "VC1" in why
    assert jobs.loc["opp", "preemptions"] == 0
    assert r.summary["preemptions"] == 0


def test_opportunistic_gang_beyond_quota_runs_then_is_preempted_whole(basic):
    r = run(basic,
            job("g1", 0, 4, 1000),  # VC1's node
            job("o1", 1, 8, 500, prio=-1, per_task=4),  # beyond VC1's quota: 2 free nodes
            job("g2", 2, 4, 100, vc="VC2"),  # VC2's cell binds to a node o1 holds
            preemption_delay=0)
    st = starts(r)
    assert st["o1"] == (1.0, "10.151.41.21:4;10.151.41.22:4")
    assert st["g2"] == (2.0, "10.151.41.22:4")
    ev = r.events
    pre = ev[ev.kind == "preempt"]
    assert list(pre.job_id) == ["o1"] and list(pre.time) == [2.0]
    assert "g2" in pre.detail.iloc[0]
    jobs = r.jobs.set_index("job_id")
    assert (jobs.status == "completed").all()
    assert jobs.loc["o1", "preemptions"] == 1
    # o1 needs two free nodes again: g2 ends at 102, g1 at 1000 -> 21 and 22 are free at 102
    resumed = ev[(ev.job_id == "o1") & (ev.kind == "resume")]
    assert list(resumed.time) == [102.0]


def test_higher_priority_preempts_lower_in_the_vc(basic):
    r = run(basic, job("low", 0, 4, 1000, prio=1), job("high", 5, 4, 100, prio=5),
            preemption_delay=0)
    st = starts(r)
    assert st["high"] == (5.0, "10.151.41.20:4")
    jobs = r.jobs.set_index("job_id")
    assert jobs.loc["low", "preemptions"] == 1
    ev = r.events
    assert ev[(ev.job_id == "low") & (ev.kind == "resume")].time.tolist() == [105.0]


def test_equal_priority_does_not_preempt(basic):
    r = run(basic, job("a", 0, 4, 1000, prio=3), job("b", 5, 4, 100, prio=3))
    assert r.summary["preemptions"] == 0
    assert starts(r)["b"][0] == 1000.0


def test_lazy_preemption_keeps_the_victim_running_until_its_cells_are_needed(basic):
    r = run(basic,
            job("low", 0, 4, 1000, prio=1),
            job("high", 5, 4, 100, prio=5),  # lazy: low leaves VC1, VC1 rebinds to 22
            job("vc2", 10, 4, 100, vc="VC2"),  # VC2's cell gets the last free node: low's
            lazy_preemption=True, preemption_delay=0)
    st = starts(r)
    assert st["high"] == (5.0, "10.151.41.22:4")
    assert st["vc2"] == (10.0, "10.151.41.20:4")
    ev = r.events
    pre = ev[ev.kind == "preempt"]
    assert list(pre.job_id) == ["low"] and list(pre.time) == [10.0]


def test_lazy_preemption_without_need_never_preempts(basic):
    pol = HivedPolicy(lazy_preemption=True)
    r = Simulation(make_trace(job("low", 0, 4, 300, prio=1), job("high", 5, 4, 100, prio=5)),
                   basic, pol).run()
    assert r.summary["preemptions"] == 0
    assert pol.lazy_preemptions == 1
    assert starts(r)["high"][0] == 5.0


def test_rejections_carry_a_reason(basic):
    r = run(basic,
            job("novc", 0, 1, 10, vc="nope"),
            job("prio", 0, 1, 10, prio=1001),
            job("neg", 0, 1, 10, prio=-2),
            job("ok", 0, 1, 10))
    jobs = r.jobs.set_index("job_id")
    assert jobs.loc["ok", "status"] == "completed"
    assert jobs.loc["novc", "status"] == "rejected"
    assert "unknown VC 'nope'" in jobs.loc["novc", "reason"]
    assert "VC1" in jobs.loc["novc", "reason"]
    for jid in ("prio", "neg"):
        assert jobs.loc[jid, "status"] == "rejected"
        assert "out of range" in jobs.loc[jid, "reason"]


def test_vc_without_the_leaf_type_rejects(hived_root):
    topo = load_topology(hived_root / "hived-configs" / "hived-config-2.yaml")
    r = run(topo, job("m60", 0, 1, 10, vc="default", gpu_type="M60"),
            job("opp", 0, 1, 10, vc="default", gpu_type="M60", prio=-1))
    jobs = r.jobs.set_index("job_id")
    assert jobs.loc["m60", "status"] == "rejected"
    assert "no cells of leaf type 'M60'" in jobs.loc["m60", "reason"]
    assert jobs.loc["opp", "status"] == "completed"  # opportunistic: any physical cell


def test_pinned_cell_column(basic):
    jobs = [job("p", 0, 4, 10, vc="VC2", extra=(("pinned_cell_id", "VC2-K80"),)),
            job("q", 0, 4, 10, vc="VC1", extra=(("pinned_cell_id", "VC2-K80"),))]
    r = run(basic, *jobs)
    assert starts(r)["p"] == (0.0, "10.151.41.21:4")
    out = r.jobs.set_index("job_id")
    assert out.loc["q", "status"] == "rejected" and "no pinned cell" in out.loc["q", "reason"]


def test_unsafe_native_vcs_are_rejected_at_start():
    data = {"name": "t", "nodes": [{"count": 2, "sockets": 1, "switches_per_socket": 2,
                                    "gpus_per_switch": 2}],
            "vcs": {"a": {"node": 1}, "b": {"node": 1, "switch": 1}}}
    topo = native_from_dict(data, "t.yaml")
    with pytest.raises(InvalidTopology, match=r"VC 'b' cannot be backed .*level 2 .*switch"):
        run(topo, job("x", 0, 1, 1, vc="a"))


def test_vcs_parameter_file(tmp_path, dgx2):
    f = tmp_path / "vcs.yaml"
    f.write_text("a: {node: 1}\nb: {socket: 1, switch: 1}\n")
    r = run(dgx2, job("a8", 0, 8, 10, vc="a"), job("b4", 0, 4, 10, vc="b"),
            job("b2", 0, 2, 10, vc="b"), job("b8", 0, 8, 10, vc="b"), vcs=str(f), until=100)
    jobs = r.jobs.set_index("job_id")
    assert jobs.loc[["a8", "b4", "b2"], "status"].tolist() == ["completed"] * 3
    assert jobs.loc["b8", "status"] == "rejected"  # b holds 6 GPUs in two cells
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: {node: 3}\n")
    with pytest.raises(InvalidTopology, match="VC 'a' cannot be backed"):
        run(dgx2, job("x", 0, 1, 1, vc="a"), vcs=str(bad))
    typo = tmp_path / "typo.yaml"
    typo.write_text("a: {nod: 1}\n")
    with pytest.raises(InvalidParameter, match="nod: unknown level"):
        run(dgx2, job("x", 0, 1, 1, vc="a"), vcs=str(typo))


def test_no_vcs_means_one_default_vc_for_every_job(dgx2):
    r = run(dgx2, job("x", 0, 8, 10, vc="anything"), job("y", 0, 8, 10, vc="other"),
            job("z", 0, 16, 10, vc="x"))
    st = starts(r)
    assert st["x"] == (0.0, "node0:8") and st["y"] == (0.0, "node1:8")
    assert st["z"][0] == 10.0 and st["z"][1] == "node0:8;node1:8"


def test_order_parameter_composes_an_ordering_inside_each_vc(basic):
    jobs = [job("run", 0, 2, 100), job("head", 1, 4, 10), job("small", 2, 1, 10)]
    fifo = starts(run(basic, *jobs))
    backfill = starts(run(basic, *jobs, order="fifo-backfill"))
    assert fifo["small"][0] == 110.0  # behind the blocked head
    assert backfill["small"][0] == 2.0  # backfilled inside VC1
    with pytest.raises(InvalidParameter, match="did you mean"):
        HivedPolicy(order="fif")
    with pytest.raises(InvalidParameter, match="hived cannot order"):
        HivedPolicy(order="hived")


def test_preemption_takes_the_delay_and_the_victim_runs_meanwhile(basic):
    """HiveD: the victim is being preempted for `preemption_delay` s, its cells reserved."""
    r = run(basic, job("low", 0, 4, 1000, prio=1), job("high", 5, 4, 100, prio=5),
            job("mid", 6, 4, 10, prio=3))  # cannot take the reserved cells meanwhile
    st = starts(r)
    assert st["high"] == (35.0, "10.151.41.20:4")
    ev = r.events
    pre = ev[ev.kind == "preempt"]
    assert list(pre.job_id) == ["low"] and list(pre.time) == [35.0]
    assert st["mid"][0] == 135.0  # after high, before low resumes (priority 3 > 1)
    assert ev[(ev.job_id == "low") & (ev.kind == "resume")].time.tolist() == [145.0]


def test_a_victim_that_ends_during_the_delay_lets_the_preemptor_start(basic):
    r = run(basic, job("low", 0, 4, 20, prio=1), job("high", 5, 4, 100, prio=5))
    assert starts(r)["high"] == (20.0, "10.151.41.20:4")
    assert (r.events.kind != "preempt").all()


def test_a_higher_priority_cancels_a_preemption_under_way(basic):
    """HiveD pod33/pod34: the later, higher preemptor takes the reservation over."""
    r = run(basic, job("low", 0, 4, 1000, prio=1), job("high", 5, 4, 100, prio=5),
            job("top", 10, 4, 100, prio=9))
    st = starts(r)
    assert st["top"] == (40.0, "10.151.41.20:4")  # its own delay, from its own start
    assert st["high"][0] == 140.0  # waits again; low was preempted for top only
    pre = r.events[r.events.kind == "preempt"]
    assert list(pre.job_id) == ["low"] and list(pre.time) == [40.0]
    assert "job top " in pre.detail.iloc[0]


@pytest.mark.parametrize("run_default", [False, True])
def test_the_trace_column_decides_lazy_preemption_per_job(basic, run_default):
    """HiveD pods 24-26: each victim's own flag decides; an empty cell takes the run's."""
    r = run(basic,
            job("a", 0, 4, 1000, prio=0, lazy_preemption=True),  # downgraded for b
            job("b", 5, 4, 1000, prio=1, lazy_preemption=False),  # preempted for c
            job("c", 10, 4, 100, prio=2),
            lazy_preemption=run_default, preemption_delay=0)
    pre = r.events[r.events.kind == "preempt"]
    assert list(pre.job_id) == ["b"] and list(pre.time) == [10.0]
    st = starts(r)
    assert st["b"] == (5.0, "10.151.41.22:4")  # VC1 rebound to the free node, a runs on
    assert st["c"] == (10.0, "10.151.41.22:4")


def test_priority_orders_the_vc_queue(basic):
    r = run(basic, job("run", 0, 4, 100), job("first", 1, 4, 10, prio=0),
            job("urgent", 2, 4, 10, prio=0), job("vip", 3, 4, 10, prio=7),
            preemption_delay=0)
    st = starts(r)
    assert st["vip"][0] == 3.0  # preempts "run" (priority 0)
    assert st["first"][0] < st["urgent"][0]


def test_zero_gpu_jobs_start_at_once(basic):
    assert starts(run(basic, job("cpu", 0, 0, 10)))["cpu"][0] == 0.0


def test_native_racks_default_vc_and_failures_conform(hived_registered):
    check_policy(hived_registered)
    check_policy(hived_registered, params={"order": "fifo-backfill", "lazy_preemption": True})


def test_native_vcs_topology_runs():
    topo = uniform_topology(4, switches_per_socket=2, gpus_per_switch=2, nodes_per_rack=2)
    topo.vcs.update({"a": {"rack": 1}, "b": {"node": 1}})
    r = run(topo, job("a", 0, 8, 10, vc="a", per_task=4), job("b", 0, 4, 10, vc="b"),
            job("b2", 0, 4, 10, vc="b"))
    st = starts(r)
    assert st["a"] == (0.0, "node0:4;node1:4")
    assert st["b"] == (0.0, "node2:4")
    assert st["b2"] == (10.0, "node0:4")  # buddies merged back: lowest free node


def test_gang_larger_than_every_chain_is_rejected_not_left_waiting():
    # 3 nodes of 8 in racks of 2: chains of 16 and 8 GPUs; 17 GPUs fit neither (found by
    # the conformance property test: the job used to wait for ever)
    topo = uniform_topology(3, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            nodes_per_rack=2)
    r = run(topo, job("j0", 0, 17, 1, per_task=17))
    out = r.jobs.set_index("job_id")
    assert out.loc["j0", "status"] == "rejected"
    assert "cannot be placed even in the empty cluster" in out.loc["j0", "reason"]


# Orderings that follow the engine with their own trackers
# (schedlab.policies.queues.EngineMirror: capacity, drf;
# schedlab.policies.hived.tracking.JobTracker: vc-quota) must keep only the jobs their
# narrowed hived context owns: arrivals walked by index and dependents released by a
# finish may belong to another queue, and starting one is InvalidDecision ("started 'x',
# which is not in queue 'default'"). Cases found by benchmarks/fuzz_campaign.py.
NARROWED = {
    "opportunistic-dependent-released": (
        JobSpec("g", 1.0, 1, 50.0, priority=5, depends_on=("o",)),
        JobSpec("o", 2.0, 8, 1.0, priority=-1), JobSpec("s", 2.0, 2, 1.0),
        JobSpec("x", 5.0, 3, 50.0, priority=-1, depends_on=("s",))),
    "dependent-of-a-preemptor": (
        JobSpec("a", 0.0, 4, 500.0), JobSpec("b", 1.0, 8, 1.0, priority=5),
        JobSpec("c", 1.0, 3, 50.0, priority=-1, depends_on=("b",))),
}


@pytest.mark.parametrize("order", ["capacity", "drf", "vc-quota"])
@pytest.mark.parametrize("case", sorted(NARROWED))
def test_orderings_with_own_trackers_keep_to_their_queue(order, case):
    from schedlab.policies.conformance import check_invariants

    topo = uniform_topology(1, switches_per_socket=2, gpus_per_switch=4)
    trace = make_trace(*NARROWED[case])
    r = Simulation(trace, topo, "hived", params={"order": order}).run()
    check_invariants(r, topo, trace)
    assert set(r.jobs.status) == {"completed"}


_FUZZ_TOPOLOGY = {'name': 'fuzz',
     'nodes': [{'count': 3,
                'gpu_type': 'V100',
                'sockets': 2,
                'switches_per_socket': 2,
                'gpus_per_switch': 1,
                'num_cpus': 16,
                'mem_gb': 128,
                'gpu_mem_gb': 32,
                'interconnect': 'ethernet'}],
     'queues': [{'name': 'vc0', 'capacity': 0.953, 'user_limit_factor': 1.0},
                {'name': 'vc1', 'capacity': 0.047, 'max_capacity': 0.247}]}
_FUZZ_JOBS = [{'job_id': 'j0',
      'submit_time': 2.932,
      'duration': 11.705,
      'user': 'u2',
      'num_gpus': 8,
      'vc': 'vc1',
      'mem_gb': 64},
     {'job_id': 'j1',
      'submit_time': 11.727,
      'duration': 1.273,
      'user': 'u1',
      'num_gpus': 2,
      'depends_on': ['j0'],
      'vc': 'vc0',
      'gpu_mem_gb': 4,
      'max_wait_hours': 48.0},
     {'job_id': 'j2',
      'submit_time': 11.727,
      'duration': 19.497,
      'user': 'u1',
      'num_gpus': 1,
      'priority': 0,
      'lazy_preemption': False,
      'vc': 'vc0',
      'num_cpus': 16},
     {'job_id': 'j3',
      'submit_time': 14.334,
      'duration': 16.492,
      'user': 'u2',
      'num_gpus': 2,
      'gpus_per_task': 1,
      'fail_at': 18.428,
      'max_retries': 2,
      'checkpoint_interval': 3.679,
      'vc': 'vc1',
      'num_cpus': 32},
     {'job_id': 'j4',
      'submit_time': 14.431,
      'duration': 11.144,
      'user': 'u3',
      'num_gpus': 8,
      'min_gpus': 6,
      'max_gpus': 10,
      'checkpoint_interval': 1.736,
      'vc': 'vc1',
      'gpu_util': 0.3,
      'locality_sensitivity': 1.0,
      'max_wait_hours': 6.0},
     {'job_id': 'j5',
      'submit_time': 15.483,
      'duration': 116.259,
      'user': 'u2',
      'num_gpus': 2,
      'min_gpus': 2,
      'max_gpus': 4,
      'checkpoint_interval': 24.518,
      'priority': 50,
      'lazy_preemption': True,
      'vc': 'vc0',
      'mem_gb': 256},
     {'job_id': 'j6',
      'submit_time': 21.566,
      'duration': 155.923,
      'user': 'u1',
      'num_gpus': 0,
      'checkpoint_interval': 55.263,
      'priority': 50,
      'vc': 'vc1',
      'mem_gb': 256},
     {'job_id': 'j7',
      'submit_time': 25.696,
      'duration': 1.376,
      'user': 'u2',
      'num_gpus': 0,
      'vc': 'vc0',
      'gpu_util': 0.89,
      'max_wait_hours': 6.0},
     {'job_id': 'j8',
      'submit_time': 32.164,
      'duration': 19.298,
      'user': 'u3',
      'num_gpus': 1,
      'max_lifetime': 53.945,
      'depends_on': ['j4'],
      'priority': -1,
      'lazy_preemption': False,
      'vc': 'vc1',
      'mem_gb': 64,
      'gpu_util': 0.14,
      'locality_sensitivity': 0.0,
      'max_wait_hours': 4.0},
     {'job_id': 'j9',
      'submit_time': 32.164,
      'duration': 62.91,
      'user': 'u2',
      'num_gpus': 2,
      'max_lifetime': 81.759,
      'checkpoint_interval': 8.678,
      'priority': 0,
      'vc': 'vc1'},
     {'job_id': 'j10',
      'submit_time': 34.965,
      'duration': 1.901,
      'user': 'u2',
      'num_gpus': 1,
      'min_gpus': 1,
      'max_gpus': 4,
      'priority': 10,
      'lazy_preemption': False,
      'vc': 'vc-unknown',
      'gpu_type': 'V100',
      'disk_gb': 50},
     {'job_id': 'j11',
      'submit_time': 37.33,
      'duration': 10.128,
      'user': 'u3',
      'num_gpus': 4,
      'gpus_per_task': 1,
      'checkpoint_interval': 7.592,
      'priority': 10,
      'lazy_preemption': True,
      'vc': 'vc1'},
     {'job_id': 'j12',
      'submit_time': 40.417,
      'duration': 10.914,
      'user': 'u1',
      'num_gpus': 1,
      'min_gpus': 1,
      'max_gpus': 5,
      'vc': 'vc0'},
     {'job_id': 'j13',
      'submit_time': 47.032,
      'duration': 12.195,
      'user': 'u0',
      'num_gpus': 15,
      'min_gpus': 4,
      'max_gpus': 16,
      'vc': 'vc0',
      'gpu_mem_gb': 4},
     {'job_id': 'j14',
      'submit_time': 51.493,
      'duration': 16.042,
      'user': 'u1',
      'num_gpus': 1,
      'gpu_share': 0.3,
      'checkpoint_interval': 6.015,
      'vc': 'vc1',
      'gpu_type': 'V100',
      'num_cpus': 16,
      'locality_sensitivity': 1.0},
     {'job_id': 'j15',
      'submit_time': 52.443,
      'duration': 19.851,
      'user': 'u1',
      'num_gpus': 2,
      'vc': 'vc-unknown',
      'gpu_type': 'V100'},
     {'job_id': 'j16',
      'submit_time': 60.231,
      'duration': 28.285,
      'user': 'u3',
      'num_gpus': 3,
      'gpus_per_task': 1,
      'priority': 30,
      'lazy_preemption': False,
      'vc': 'vc0',
      'gpu_util': 0.53},
     {'job_id': 'j17',
      'submit_time': 70.582,
      'duration': 37.195,
      'user': 'u1',
      'num_gpus': 1,
      'max_retries': 2,
      'checkpoint_interval': 33.942,
      'vc': 'vc-unknown'},
     {'job_id': 'j18',
      'submit_time': 74.224,
      'duration': 1.7,
      'user': 'u0',
      'num_gpus': 14,
      'vc': 'vc-unknown'},
     {'job_id': 'j19',
      'submit_time': 80.121,
      'duration': 48.049,
      'user': 'u3',
      'num_gpus': 1,
      'gpu_share': 0.3,
      'vc': 'vc0',
      'gpu_type': 'A100'},
     {'job_id': 'j20',
      'submit_time': 84.202,
      'duration': 1.133,
      'user': 'u1',
      'num_gpus': 1,
      'checkpoint_interval': 0.275,
      'priority': 5,
      'lazy_preemption': False,
      'vc': 'vc0',
      'num_cpus': 4,
      'locality_sensitivity': 0.0},
     {'job_id': 'j21',
      'submit_time': 84.202,
      'duration': 0.5,
      'user': 'u0',
      'num_gpus': 3,
      'gpus_per_task': 1,
      'max_retries': 2,
      'priority': 10,
      'vc': 'vc-unknown',
      'gpu_type': 'A100'},
     {'job_id': 'j22',
      'submit_time': 84.515,
      'duration': 95.85,
      'user': 'u0',
      'num_gpus': 0,
      'vc': 'vc0',
      'gpu_mem_gb': 16},
     {'job_id': 'j23',
      'submit_time': 84.612,
      'duration': 5.201,
      'user': 'u1',
      'num_gpus': 1,
      'gpu_share': 0.5,
      'priority': 0,
      'lazy_preemption': True,
      'vc': 'vc1'},
     {'job_id': 'j24',
      'submit_time': 88.846,
      'duration': 1.163,
      'user': 'u3',
      'num_gpus': 1,
      'min_gpus': 1,
      'max_gpus': 4,
      'max_retries': 2,
      'checkpoint_interval': 1.123,
      'priority': 10,
      'vc': 'vc0',
      'gpu_type': 'V100',
      'locality_sensitivity': 0.0}]


def test_preemptor_whose_host_share_went_during_the_delay_gives_its_cells_up():
    """Found by the fuzz suite: while a preemptor's victims were being preempted, another
    job took the CPUs of its cells' nodes (HiveD's cells are GPUs only); starting it then
    over-committed the node (InvalidDecision). Now it gives its reserved cells up and
    waits again, and the run ends with every invariant kept."""
    from schedlab.policies.conformance import check_invariants
    from schedlab.sim import Simulation
    from schedlab.topologies.native import native_from_dict
    from schedlab.traces.synthetic import from_records

    topo = native_from_dict(_FUZZ_TOPOLOGY, "repro")
    trace = from_records(_FUZZ_JOBS)
    result = Simulation(trace, topo, "hived", seed=423665689,
                        params={"restore_overhead": 5.0, "lazy_preemption": True,
                                "order": "srtf"}).run()
    check_invariants(result, topo, trace)
    jobs = result.jobs.set_index("job_id")
    assert jobs.loc["j3", "status"] == "rejected"
    assert "lack the CPUs" in jobs.loc["j3", "reason"]


_SAFETY_TOPOLOGY = {'name': 'fuzz',
     'nodes': [{'count': 4,
                'gpu_type': 'V100',
                'sockets': 2,
                'switches_per_socket': 1,
                'gpus_per_switch': 2,
                'num_cpus': 0,
                'mem_gb': 512,
                'gpu_mem_gb': 16,
                'disk_gb': 500}],
     'nodes_per_rack': 1,
     'vcs': {'vc0': {'node': 1, 'gpu': 6}, 'vc1': {'node': 1}, 'vc2': {'gpu': 2}}}
_SAFETY_JOBS = [{'job_id': 'j0',
      'submit_time': 1.612,
      'duration': 77.203,
      'user': 'u0',
      'num_gpus': 1,
      'vc': 'vc1',
      'max_wait_hours': 24.0},
     {'job_id': 'j1',
      'submit_time': 7.695,
      'duration': 438.376,
      'user': 'u3',
      'num_gpus': 4,
      'gpus_per_task': 2,
      'priority': 0,
      'lazy_preemption': True,
      'vc': 'vc1',
      'num_cpus': 32,
      'disk_gb': 200},
     {'job_id': 'j2',
      'submit_time': 8.745,
      'duration': 250.788,
      'user': 'u0',
      'num_gpus': 8,
      'checkpoint_interval': 36.234,
      'priority': 10,
      'lazy_preemption': False,
      'vc': 'vc0',
      'gpu_type': 'V100',
      'num_cpus': 1,
      'mem_gb': 256,
      'locality_sensitivity': 0.5,
      'max_wait_hours': 24.0},
     {'job_id': 'j3',
      'submit_time': 10.797,
      'duration': 17.511,
      'user': 'u1',
      'num_gpus': 3,
      'checkpoint_interval': 4.038,
      'priority': 10,
      'vc': 'vc0',
      'num_cpus': 4},
     {'job_id': 'j4',
      'submit_time': 13.757,
      'duration': 24.441,
      'user': 'u2',
      'num_gpus': 4,
      'checkpoint_interval': 11.502,
      'depends_on': ['j0', 'j3'],
      'priority': 10,
      'lazy_preemption': False,
      'vc': 'vc1',
      'gpu_type': 'V100',
      'gpu_util': 0.92,
      'max_wait_hours': 8.0},
     {'job_id': 'j5',
      'submit_time': 14.397,
      'duration': 64.707,
      'user': 'u2',
      'num_gpus': 1,
      'priority': 50,
      'lazy_preemption': True,
      'vc': 'vc0',
      'gpu_util': 0.82},
     {'job_id': 'j6',
      'submit_time': 14.443,
      'duration': 1.905,
      'user': 'u1',
      'num_gpus': 4,
      'checkpoint_interval': 1.368,
      'depends_on': ['j3', 'j4', 'j5'],
      'vc': 'vc1',
      'locality_sensitivity': 0.0},
     {'job_id': 'j7',
      'submit_time': 16.325,
      'duration': 0.856,
      'user': 'u2',
      'num_gpus': 1,
      'vc': 'vc2',
      'deadline': 623.323,
      'disk_gb': 200},
     {'job_id': 'j8',
      'submit_time': 16.325,
      'duration': 386.273,
      'user': 'u0',
      'num_gpus': 3,
      'vc': 'vc2',
      'num_cpus': 16,
      'max_wait_hours': 6.0},
     {'job_id': 'j9',
      'submit_time': 24.436,
      'duration': 55.417,
      'user': 'u3',
      'num_gpus': 0,
      'max_lifetime': 114.819,
      'vc': 'vc1'},
     {'job_id': 'j10',
      'submit_time': 24.436,
      'duration': 378.204,
      'user': 'u3',
      'num_gpus': 17,
      'vc': 'vc1',
      'mem_gb': 8},
     {'job_id': 'j11',
      'submit_time': 26.059,
      'duration': 377.516,
      'user': 'u0',
      'num_gpus': 1,
      'max_lifetime': 1100.165,
      'checkpoint_interval': 163.118,
      'priority': 0,
      'lazy_preemption': True,
      'vc': 'vc2'},
     {'job_id': 'j12',
      'submit_time': 41.159,
      'duration': 2.967,
      'user': 'u1',
      'num_gpus': 0,
      'priority': 30,
      'vc': 'vc0',
      'num_cpus': 32},
     {'job_id': 'j13',
      'submit_time': 45.368,
      'duration': 10.217,
      'user': 'u0',
      'num_gpus': 1,
      'priority': 10,
      'lazy_preemption': True,
      'vc': 'vc0',
      'gpu_type': 'V100',
      'disk_gb': 200},
     {'job_id': 'j14',
      'submit_time': 50.947,
      'duration': 0.564,
      'user': 'u0',
      'num_gpus': 0,
      'fail_at': 0.428,
      'max_retries': 1,
      'checkpoint_interval': 0.433,
      'priority': 10,
      'lazy_preemption': False,
      'vc': 'vc-unknown',
      'mem_gb': 256},
     {'job_id': 'j15',
      'submit_time': 55.448,
      'duration': 19.77,
      'user': 'u2',
      'num_gpus': 1,
      'gpu_share': 0.5,
      'fail_at': 13.262,
      'max_retries': 2,
      'max_lifetime': 45.907,
      'checkpoint_interval': 16.56,
      'priority': 0,
      'vc': 'vc2',
      'gpu_type': 'V100',
      'gpu_util': 0.33,
      'deadline': 917.368},
     {'job_id': 'j16',
      'submit_time': 55.448,
      'duration': 1.9,
      'user': 'u3',
      'num_gpus': 1,
      'checkpoint_interval': 1.633,
      'priority': 10,
      'lazy_preemption': False,
      'vc': 'vc-unknown',
      'gpu_type': 'V100',
      'locality_sensitivity': 1.0},
     {'job_id': 'j17',
      'submit_time': 66.54,
      'duration': 1.21,
      'user': 'u3',
      'num_gpus': 1,
      'gpu_share': 0.75,
      'checkpoint_interval': 0.903,
      'vc': 'vc0'},
     {'job_id': 'j18',
      'submit_time': 67.043,
      'duration': 72.939,
      'user': 'u1',
      'num_gpus': 1,
      'fail_at': 83.342,
      'max_retries': 1,
      'max_lifetime': 88.853,
      'priority': 20,
      'vc': 'vc2',
      'num_cpus': 4},
     {'job_id': 'j19',
      'submit_time': 68.533,
      'duration': 1.542,
      'user': 'u0',
      'num_gpus': 8,
      'depends_on': ['j4', 'j7', 'j14'],
      'priority': 50,
      'lazy_preemption': True,
      'vc': 'vc2',
      'gpu_util': 0.12,
      'max_wait_hours': 6.0},
     {'job_id': 'j20',
      'submit_time': 89.346,
      'duration': 6.129,
      'user': 'u3',
      'num_gpus': 2,
      'max_retries': 2,
      'priority': 20,
      'lazy_preemption': False,
      'vc': 'vc2',
      'num_cpus': 32},
     {'job_id': 'j21',
      'submit_time': 89.346,
      'duration': 63.253,
      'user': 'u3',
      'num_gpus': 0,
      'vc': 'vc0',
      'gpu_type': 'V100',
      'gpu_util': 0.67,
      'max_wait_hours': 48.0},
     {'job_id': 'j22',
      'submit_time': 90.051,
      'duration': 477.609,
      'user': 'u1',
      'num_gpus': 1,
      'checkpoint_interval': 452.821,
      'priority': 30,
      'lazy_preemption': False,
      'vc': 'vc1'},
     {'job_id': 'j23',
      'submit_time': 117.142,
      'duration': 18.383,
      'user': 'u1',
      'num_gpus': 18,
      'priority': 50,
      'lazy_preemption': True,
      'vc': 'vc0',
      'locality_sensitivity': 0.5},
     {'job_id': 'j24',
      'submit_time': 119.425,
      'duration': 8.903,
      'user': 'u3',
      'num_gpus': 8,
      'vc': 'vc2',
      'gpu_type': 'V100'},
     {'job_id': 'j25',
      'submit_time': 122.698,
      'duration': 17.727,
      'user': 'u1',
      'num_gpus': 2,
      'gpus_per_task': 1,
      'max_retries': 1,
      'depends_on': ['j21'],
      'vc': 'vc1'},
     {'job_id': 'j26',
      'submit_time': 124.807,
      'duration': 418.446,
      'user': 'u2',
      'num_gpus': 4,
      'fail_at': 420.512,
      'max_retries': 1,
      'vc': 'vc1',
      'mem_gb': 64,
      'locality_sensitivity': 0.0},
     {'job_id': 'j27',
      'submit_time': 129.58,
      'duration': 64.302,
      'user': 'u0',
      'num_gpus': 2,
      'depends_on': ['j0', 'j12', 'j25'],
      'priority': 20,
      'vc': 'vc1',
      'num_cpus': 1,
      'disk_gb': 200},
     {'job_id': 'j28',
      'submit_time': 134.9,
      'duration': 31.265,
      'user': 'u3',
      'num_gpus': 2,
      'vc': 'vc0',
      'gpu_type': 'V100',
      'max_wait_hours': 48.0},
     {'job_id': 'j29',
      'submit_time': 136.43,
      'duration': 1.441,
      'user': 'u3',
      'num_gpus': 2,
      'gpus_per_task': 1,
      'vc': 'vc0',
      'num_cpus': 1,
      'locality_sensitivity': 0.0}]


def test_vc_safety_holds_under_node_failures_with_hived_free_list_order():
    """Found by the fuzz campaign (seed 3002176): with node failures, settling the doomed
    bad cells once per node (lowest level first) left vc1 a level-3 guarantee with no
    level-3 cell ("VC safety broken"); HiveD checks at every leaf, and so do we now."""
    from schedlab.policies.conformance import check_invariants
    from schedlab.topologies.native import native_from_dict
    from schedlab.traces.synthetic import from_records

    topo = native_from_dict(_SAFETY_TOPOLOGY, "repro")
    trace = from_records(_SAFETY_JOBS)
    params = {"mtbf": 300.0,
              "mttr": 1000.0,
              "node_failure_retries": 3,
              "retry_delay": 60.0,
              "order": "capacity"}
    result = Simulation(trace, topo, "hived", seed=1835665239, params=params).run()
    check_invariants(result, topo, trace)
