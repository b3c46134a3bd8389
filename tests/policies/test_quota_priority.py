"""The `quota-priority` policy: quotas give high priority, high jobs suspend low ones."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import make_trace

from schedlab.policies.conformance import check_invariants, check_policy, scenarios
from schedlab.policies.quota_files import load_vc_quotas
from schedlab.policies.quota_priority import QuotaPriorityPolicy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec


def job(job_id, t, gpus, dur, vc="dev", wait=0.0, **kw) -> JobSpec:
    """A job of group `vc` with an expected maximum wait in hours (0: low priority)."""
    return JobSpec(job_id, t, gpus, dur, vc=vc, max_wait_hours=wait, **kw)


@pytest.fixture
def quotas(tmp_path):
    """Write a vc -> GPUs quota file from a dict; return its path."""
    def write(q: dict[str, int]) -> str:
        p = tmp_path / "vc_quotas.yaml"
        p.write_text("".join(f"{k}: {v}\n" for k, v in q.items()))
        return str(p)
    return write


def run(jobs, topo, params=None, **policy):
    """Run the policy; return (result, policy)."""
    pol = QuotaPriorityPolicy(**policy)
    return Simulation(make_trace(*jobs), topo, pol, params=params or {}).run(), pol


def log(res, kinds=("start", "preempt", "suspend", "resume")) -> list[tuple]:
    """(time, job, kind) of the events of these kinds, in order."""
    ev = res.events[res.events.kind.isin(kinds)]
    return list(zip(ev.time, ev.job_id, ev.kind, strict=True))


def cells(res, job_id, kind="start") -> str:
    """Where a job went at its first event of `kind`."""
    ev = res.events
    return ev[(ev.job_id == job_id) & (ev.kind == kind)].cells.iloc[0]


def test_quota_file(quotas, tmp_path):
    assert dict(load_vc_quotas(quotas({"a": 8, "b": 0}))) == {"a": 8, "b": 0}
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: -2\n")
    with pytest.raises(InvalidParameter, match="a: expected a whole number of GPUs >= 0"):
        load_vc_quotas(bad)
    bad.write_text("[1, 2]\n")
    with pytest.raises(InvalidParameter, match="expected a mapping vc -> GPUs"):
        load_vc_quotas(bad)


def test_within_quota_high_beyond_quota_low(dgx2, quotas):
    """b is within vc0's quota (high); c, beyond it, is low and suspends nobody; d of vc2
    is high and suspends the running low job L1."""
    q = quotas({"vc0": 8, "vc2": 8})
    res, pol = run([job("L1", 0, 8, 1000, "vc1"), job("b", 1, 8, 100, "vc0", 4),
                    job("c", 2, 8, 100, "vc0", 4), job("d", 3, 8, 500, "vc2", 6)],
                   dgx2, quotas=q)
    assert log(res) == [
        (0.0, "L1", "start"), (1.0, "b", "start"), (3.0, "L1", "preempt"), (3.0, "d", "start"),
        (101.0, "L1", "resume"),  # a suspended job comes back before the waiting low job
        (503.0, "c", "start")]
    assert pol.metrics()["high_priority_jobs"] == 2


def test_suspends_the_longest_running_low_job_that_frees_enough(dgx2):
    """L1 has run longest but frees only 4 GPUs of node0; L2 frees node1 for the 8-GPU job."""
    lows = [job("L1", 0, 4, 1000), job("L2", 10, 8, 1000), job("L3", 20, 4, 1000)]
    res, _ = run([*lows, job("H", 100, 8, 50, "prod", 4)], dgx2)
    assert cells(res, "L1") == cells(res, "L3") == "node0:4" and cells(res, "L2") == "node1:8"
    assert log(res)[3:5] == [(100.0, "L2", "preempt"), (100.0, "H", "start")]
    assert cells(res, "H") == "node1:8"
    res, _ = run([*lows, job("H", 100, 4, 50, "prod", 4)], dgx2)
    assert log(res)[3:5] == [(100.0, "L1", "preempt"), (100.0, "H", "start")]  # L1 will do


def test_no_single_job_frees_enough_takes_the_fewest_longest_running(dgx2):
    """12 GPUs over two nodes: A+C or B+C would do; A has run longer than B."""
    lows = [job("A", 0, 4, 1000), job("B", 5, 4, 1000), job("C", 10, 8, 1000)]
    res, pol = run([*lows, job("H", 100, 12, 50, "prod", 4)], dgx2)
    assert log(res)[3:6] == [(100.0, "A", "preempt"), (100.0, "C", "preempt"),
                             (100.0, "H", "start")]
    assert pol.metrics()["killed"] == 2


def test_elastic_jobs_save_first_rigid_jobs_lose_since_checkpoint(dgx2):
    lows = [job("E", 0, 8, 1000, min_gpus=4, max_gpus=8),
            job("R", 1, 8, 1000, checkpoint_interval=30.0)]
    res, pol = run([*lows, job("H", 100, 16, 50, "prod", 4)], dgx2)
    assert log(res, ("suspend", "preempt")) == [(100.0, "E", "suspend"),
                                                (100.0, "R", "preempt")]
    lost = res.jobs.set_index("job_id").lost_work
    assert lost["E"] == 0.0 and lost["R"] == 9.0  # ran 99 s, last checkpoint at 90
    assert pol.metrics()["suspended"] == 1 and pol.metrics()["killed"] == 1
    detail = res.events[res.events.kind == "preempt"].detail.iloc[0]
    assert detail.startswith("killed for high-priority job H")


@pytest.mark.parametrize(("rule", "first", "second"),
                         [("priority-wait", "P", "Q"), ("wait", "Q", "P")])
def test_resume_order_follows_the_weight(dgx2, quotas, rule, first, second):
    """Q and P are suspended together; P asked for high priority (over quota), so weighs
    twice as much under priority-wait; under wait they tie and Q (earlier) goes first."""
    q = quotas({"prod": 32})
    jobs = [job("Q", 0, 8, 1000), job("P", 0.5, 8, 1000, "dev", 4),
            job("H1", 100, 16, 100, "prod", 4), job("H2", 150, 8, 100, "prod", 4)]
    res, _ = run(jobs, dgx2, quotas=q, resume_weight=rule)
    assert log(res) == [
        (0.0, "Q", "start"), (0.5, "P", "start"), (100.0, "Q", "preempt"),
        (100.0, "P", "preempt"), (100.0, "H1", "start"), (200.0, "H2", "start"),
        (200.0, first, "resume"), (300.0, second, "resume")]


def test_high_priority_jobs_are_never_suspended_and_lateness_is_reported(dgx2):
    res, pol = run([job("A", 0, 16, 1000, "prod", 4), job("B", 10, 8, 50, "prod", 0.01)], dgx2)
    assert log(res) == [(0.0, "A", "start"), (1000.0, "B", "start")]
    m = pol.metrics()
    assert m["high_priority_jobs"] == 2 and m["high_priority_late"] == 1
    assert m["high_priority_late_fraction"] == 0.5


def test_check_policy(quotas):
    check_policy(QuotaPriorityPolicy)
    q = quotas({"vc0": 4, "vc1": 2})
    check_policy(lambda: QuotaPriorityPolicy(quotas=q, resume_weight="suspensions"),
                 params={"checkpoint_on_suspend": False})


def test_invariants_with_high_priority_jobs(quotas):
    """The conformance scenarios with expected waits drawn per job and tight quotas."""
    q = quotas({"vc0": 4, "vc1": 2, "default": 4})
    rng = np.random.default_rng(11)
    for _name, topo, trace in scenarios(5):
        jobs = tuple(dataclasses.replace(s, max_wait_hours=float(rng.choice([0, 0, 4, 24])))
                     for s in trace.jobs)
        trace = dataclasses.replace(trace, jobs=jobs)
        for pol in (QuotaPriorityPolicy(), QuotaPriorityPolicy(quotas=q, resume_weight="wait")):
            for placer in ("consolidated", "pack"):
                res = Simulation(trace, topo, pol, params={
                    "mtbf": 2000.0, "mttr": 100.0, "retry_delay": 3.0, "placer": placer}).run()
                check_invariants(res, topo, trace)


_ULP_TOPOLOGY = {'name': 'fuzz',
     'nodes': [{'count': 4,
                'gpu_type': 'V100',
                'sockets': 1,
                'switches_per_socket': 1,
                'gpus_per_switch': 1,
                'num_cpus': 64,
                'mem_gb': 128,
                'gpu_mem_gb': 32}]}
_ULP_JOBS = [{'job_id': 'j0',
      'submit_time': 0.223,
      'duration': 18.755,
      'user': 'u0',
      'num_gpus': 4,
      'checkpoint_interval': 17.501,
      'vc': 'default'},
     {'job_id': 'j1',
      'submit_time': 4.909,
      'duration': 1.729,
      'user': 'u0',
      'num_gpus': 3,
      'min_gpus': 2,
      'max_gpus': 7,
      'fail_at': 0.835,
      'max_retries': 2,
      'checkpoint_interval': 1.034,
      'vc': 'default'},
     {'job_id': 'j2',
      'submit_time': 14.699,
      'duration': 0.5,
      'user': 'u0',
      'num_gpus': 4,
      'fail_at': 0.714,
      'max_retries': 1,
      'priority': 10,
      'lazy_preemption': False,
      'vc': 'default',
      'num_cpus': 4,
      'locality_sensitivity': 0.0,
      'disk_gb': 10},
     {'job_id': 'j3',
      'submit_time': 32.162,
      'duration': 1.17,
      'user': 'u0',
      'num_gpus': 3,
      'gpus_per_task': 1,
      'vc': 'default',
      'locality_sensitivity': 0.0},
     {'job_id': 'j4',
      'submit_time': 32.712,
      'duration': 53.961,
      'user': 'u0',
      'num_gpus': 4,
      'priority': 50,
      'lazy_preemption': False,
      'vc': 'default',
      'deadline': 254.296},
     {'job_id': 'j5',
      'submit_time': 33.426,
      'duration': 87.937,
      'user': 'u0',
      'num_gpus': 6,
      'gpus_per_task': 2,
      'priority': 50,
      'lazy_preemption': True,
      'vc': 'default',
      'disk_gb': 200},
     {'job_id': 'j6',
      'submit_time': 33.666,
      'duration': 14.506,
      'user': 'u0',
      'num_gpus': 2,
      'priority': 0,
      'vc': 'default',
      'gpu_type': 'V100'},
     {'job_id': 'j7',
      'submit_time': 34.254,
      'duration': 97.054,
      'user': 'u0',
      'num_gpus': 4,
      'checkpoint_interval': 50.511,
      'vc': 'default'},
     {'job_id': 'j8',
      'submit_time': 35.228,
      'duration': 439.363,
      'user': 'u0',
      'num_gpus': 3,
      'gpus_per_task': 1,
      'vc': 'default',
      'gpu_util': 0.36,
      'disk_gb': 10},
     {'job_id': 'j9',
      'submit_time': 38.805,
      'duration': 497.544,
      'user': 'u0',
      'num_gpus': 2,
      'gpus_per_task': 1,
      'priority': 50,
      'vc': 'default',
      'gpu_type': 'V100',
      'gpu_util': 0.75,
      'disk_gb': 50},
     {'job_id': 'j10',
      'submit_time': 38.812,
      'duration': 109.586,
      'user': 'u0',
      'num_gpus': 3,
      'max_retries': 3,
      'vc': 'default',
      'gpu_util': 0.55},
     {'job_id': 'j11',
      'submit_time': 57.373,
      'duration': 0.5,
      'user': 'u0',
      'num_gpus': 2,
      'checkpoint_interval': 0.12,
      'depends_on': ['j8'],
      'priority': -1,
      'lazy_preemption': True,
      'vc': 'default',
      'gpu_type': 'V100'},
     {'job_id': 'j12',
      'submit_time': 60.238,
      'duration': 1.075,
      'user': 'u0',
      'num_gpus': 1,
      'fail_at': 0.597,
      'max_retries': 1,
      'vc': 'default'},
     {'job_id': 'j13',
      'submit_time': 62.525,
      'duration': 52.466,
      'user': 'u0',
      'num_gpus': 2,
      'min_gpus': 1,
      'max_gpus': 4,
      'priority': -1,
      'lazy_preemption': True,
      'vc': 'default'},
     {'job_id': 'j14',
      'submit_time': 64.658,
      'duration': 577.955,
      'user': 'u0',
      'num_gpus': 4,
      'max_retries': 3,
      'priority': 0,
      'lazy_preemption': False,
      'vc': 'default',
      'num_cpus': 4,
      'gpu_util': 0.87},
     {'job_id': 'j15',
      'submit_time': 65.777,
      'duration': 1.693,
      'user': 'u0',
      'num_gpus': 4,
      'priority': 30,
      'vc': 'default',
      'gpu_mem_gb': 16},
     {'job_id': 'j16',
      'submit_time': 72.558,
      'duration': 326.592,
      'user': 'u0',
      'num_gpus': 4,
      'vc': 'default',
      'num_cpus': 32},
     {'job_id': 'j17',
      'submit_time': 76.441,
      'duration': 7.23,
      'user': 'u0',
      'num_gpus': 4,
      'gpus_per_task': 1,
      'vc': 'default',
      'disk_gb': 50},
     {'job_id': 'j18',
      'submit_time': 80.803,
      'duration': 19.152,
      'user': 'u0',
      'num_gpus': 1,
      'max_retries': 1,
      'priority': 0,
      'vc': 'default',
      'locality_sensitivity': 0.0,
      'disk_gb': 50},
     {'job_id': 'j19',
      'submit_time': 88.668,
      'duration': 1.861,
      'user': 'u0',
      'num_gpus': 4,
      'max_lifetime': 2.494,
      'vc': 'default',
      'num_cpus': 1},
     {'job_id': 'j20',
      'submit_time': 91.264,
      'duration': 425.762,
      'user': 'u0',
      'num_gpus': 0,
      'vc': 'default'},
     {'job_id': 'j21',
      'submit_time': 91.501,
      'duration': 487.207,
      'user': 'u0',
      'num_gpus': 1,
      'checkpoint_interval': 253.728,
      'priority': 5,
      'vc': 'default',
      'mem_gb': 8,
      'gpu_util': 0.48,
      'gpu_mem_gb': 4},
     {'job_id': 'j22',
      'submit_time': 96.193,
      'duration': 336.293,
      'user': 'u0',
      'num_gpus': 0,
      'max_retries': 2,
      'priority': 5,
      'lazy_preemption': False,
      'vc': 'default'},
     {'job_id': 'j23',
      'submit_time': 99.924,
      'duration': 8.983,
      'user': 'u0',
      'num_gpus': 2,
      'priority': 30,
      'lazy_preemption': True,
      'vc': 'default',
      'gpu_type': 'V100',
      'gpu_util': 0.87,
      'disk_gb': 200},
     {'job_id': 'j24',
      'submit_time': 113.164,
      'duration': 75.646,
      'user': 'u0',
      'num_gpus': 6,
      'gpus_per_task': 2,
      'vc': 'default',
      'gpu_util': 0.44,
      'locality_sensitivity': 0.0},
     {'job_id': 'j25',
      'submit_time': 113.304,
      'duration': 113.582,
      'user': 'u0',
      'num_gpus': 1,
      'priority': 10,
      'lazy_preemption': True,
      'vc': 'default',
      'gpu_util': 0.75}]


def test_arrival_seen_when_the_clock_sits_one_ulp_below_the_submit_time():
    """Found by the fuzz campaign: the engine's clock reached j2's submit time 14.699 as
    14.698999999999998; the policy's arrival cursor compared submit times, missed j2, found
    it again through its safety net and later as an arrival, so j2 sat in its queue twice
    and was started again after it completed (InvalidDecision). Arrivals now go by status."""
    from schedlab.topologies.native import native_from_dict
    from schedlab.traces.synthetic import from_records

    topo = native_from_dict(_ULP_TOPOLOGY, "repro")
    trace = from_records(_ULP_JOBS)
    result = Simulation(trace, topo, "quota-priority", seed=1247552448,
                        params={"restore_overhead": 0.0, "elastic_scaling": "amdahl",
                                "serial_fraction": 0.5, "resume_weight": "wait"}).run()
    check_invariants(result, topo, trace)
    j2 = result.events[result.events.job_id == "j2"]
    assert list(j2.kind) == ["submit", "start", "finish"]
