"""The failure layer (docs/failures.md): models, checkpoints with a cost, spares, metrics.

Scenario tests are computed by hand; the analytic test checks the engine against Daly's
model (2006) over many independent one-GPU jobs of one seeded run.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import yaml

from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.failure_ckpt import daly_interval, daly_wall_time, progress_time, wall_time
from schedlab.sim.failure_health import _Stream
from schedlab.sim.failure_models import (
    LLAMA3_TABLE,
    Component,
    FailureModel,
    Software,
    llama3,
    meta_rsc1,
)
from schedlab.sim.model import JobSpec
from schedlab.sim.registry import FAILURE_MODELS
from schedlab.topologies.build import uniform_topology
from schedlab.traces.base import Trace


def _rates(tmp_path, **data) -> str:
    path = tmp_path / "rates.yaml"
    path.write_text(yaml.safe_dump({"name": "test", **data}))
    return str(path)


def _run(jobs, topo, **params):
    return Simulation(Trace("t", tuple(jobs)), topo, "fifo", seed=0, params=params).run()


# --- checkpoints with a cost ---

def test_progress_and_wall_time_are_inverse():
    tau, period = 300.0, 310.0
    assert progress_time(0, tau, period) == 0
    assert progress_time(305, tau, period) == 300  # writing: no progress
    assert progress_time(320, tau, period) == 310
    for q in (1.0, 299.0, 300.0, 301.0, 600.0, 1000.0):
        assert progress_time(wall_time(q, tau, period), tau, period) == pytest.approx(q)
    assert wall_time(600, tau, period) == 610  # ends without writing a last checkpoint


def test_auto_interval_is_within_1pct_of_the_sweep_optimum_of_dalys_model():
    for cost, mtbf in ((30.0, 3600.0), (120.0, 7200.0), (600.0, 86400.0)):
        taus = np.linspace(10, 4 * math.sqrt(2 * cost * mtbf), 200_001)
        wall = mtbf * np.expm1((taus + cost) / mtbf) / taus  # daly_wall_time, vectorized
        assert wall[1000] == pytest.approx(daly_wall_time(1.0, float(taus[1000]), cost, 0, mtbf))
        best = float(taus[np.argmin(wall)])
        assert daly_interval(cost, mtbf) == pytest.approx(best, rel=0.01)


def test_one_job_hand_computed_checkpoints_restart_and_lost_hours_by_cause(tmp_path):
    # 8 GPUs, 1000 s of work, a checkpoint every 300 s of progress taking 10 s to write;
    # its node is down 500..700 (maintenance), restore 20 s.
    # attempt 1: 0..300 progress, 300..310 write (ckpt 300), 310..500 progress (190 s
    # lost); wait 500..700; attempt 2: 700..720 restore, 720..1020 progress, write to 1030
    # (ckpt 600), 1030..1330, write to 1340 (ckpt 900), 1340..1440 the last 100 s.
    rates = _rates(tmp_path, maintenance=[{"start_s": 500, "duration_s": 200,
                                           "target": "node0"}])
    topo = uniform_topology(1, gpus_per_switch=8, name="one")
    res = _run([JobSpec("a", 0.0, 8, 1000.0)], topo, failure_model=rates,
               checkpoint_interval=300, checkpoint_cost=10, restore_overhead=20)
    j = res.jobs.iloc[0]
    assert j.status == "completed" and j.end_time == pytest.approx(1440.0)
    assert j.lost_work == pytest.approx(190.0)
    assert j.interruptions == 1
    g = 8 / 3600
    assert j.productive_gpu_hours == pytest.approx(1000 * g)
    assert j.lost_recompute_gpu_hours == pytest.approx(190 * g)
    assert j.lost_checkpoint_gpu_hours == pytest.approx(30 * g)
    assert j.lost_restart_gpu_hours == pytest.approx(20 * g)
    assert j.lost_wait_gpu_hours == pytest.approx(200 * g)
    lost = sum(j[f"lost_{c}_gpu_hours"] for c in ("recompute", "checkpoint", "restart", "wait"))
    assert lost == pytest.approx(1440 * g - j.productive_gpu_hours)
    assert j.ettr == pytest.approx(1000 / 1440)
    s = res.summary
    assert s["interruptions_by_component"] == {"maintenance": 1}
    assert s["lost_wait_gpu_hours"] == pytest.approx(200 * g)
    ev = res.events[res.events.kind == "fail"]
    assert "lost_work=190" in ev.detail.iloc[0]  # restarts from its last checkpoint (300)


def test_daly_expected_wall_time_within_1pct(tmp_path):
    # n independent 1-GPU jobs, exponential software failures (MTBF M), checkpoint every
    # tau s writing C s, restore R s: mean wall time vs Daly's model. The engine's segments
    # differ from Daly's closed form only at the ends (no write after the last one, no
    # restore before the first checkpoint), which `exact` sums segment by segment.
    mtbf, tau, cost, restore, work, n = 3600.0, 300.0, 30.0, 60.0, 30000.0, 120
    rates = _rates(tmp_path, software=[{"name": "crash", "per_job_hour": 3600 / mtbf}])
    topo = uniform_topology(n // 8, gpus_per_switch=8, name="flat")
    res = _run([JobSpec(f"j{i}", 0.0, 1, work) for i in range(n)], topo,
               failure_model=rates, checkpoint_interval=tau, checkpoint_cost=cost,
               restore_overhead=restore, node_failure_retries=10_000)
    jobs = res.jobs
    assert (jobs.status == "completed").all()
    mean = float((jobs.end_time - jobs.start_time).mean())

    def seg(length: float, r: float) -> float:  # Daly's per-segment expectation
        return mtbf * (math.exp((r + length) / mtbf) - math.exp(r / mtbf))

    k = int(work // tau)
    exact = seg(tau + cost, 0) + sum(seg(tau + cost, restore) for _ in range(k - 2)) + \
        seg(tau, restore)
    assert mean == pytest.approx(exact, rel=0.01)
    assert mean == pytest.approx(daly_wall_time(work, tau, cost, restore, mtbf), rel=0.01)
    assert res.summary["interruptions_by_component"]["crash"] > 500


def test_auto_interval_follows_the_jobs_size(tmp_path):
    rates = _rates(tmp_path, components=[{"name": "gpu", "unit": "gpu", "per_day": 0.01}])
    topo = uniform_topology(2, gpus_per_switch=8, name="two")
    res = _run([JobSpec("a", 0.0, 8, 100.0), JobSpec("b", 0.0, 1, 100.0)], topo,
               failure_model=rates, checkpoint_interval="auto", checkpoint_cost=60)
    used = dict(zip(res.jobs.job_id, res.jobs.checkpoint_interval_used, strict=True))
    assert used["a"] == pytest.approx(daly_interval(60, 86400 / 0.08))
    assert used["b"] == pytest.approx(daly_interval(60, 86400 / 0.01))


# --- failure domains, spares, technicians ---

def test_a_rack_outage_interrupts_every_job_on_the_rack_once(tmp_path):
    rates = _rates(tmp_path, maintenance=[{"start_s": 100, "duration_s": 1000,
                                           "target": "rack0"}])
    topo = uniform_topology(4, gpus_per_switch=8, nodes_per_rack=2, name="racks")
    jobs = [JobSpec("big", 0.0, 16, 500.0), JobSpec("x", 0.0, 8, 500.0),
            JobSpec("y", 0.0, 8, 500.0)]
    res = _run(jobs, topo, failure_model=rates)
    ev = res.events
    starts = ev[ev.kind == "start"].set_index("job_id").cells
    on_rack0 = {j for j, cells in starts.items()
                if any(c.split(":")[0] in ("node0", "node1") for c in cells.split(";"))}
    got = dict(zip(res.jobs.job_id, res.jobs.interruptions, strict=True))
    assert on_rack0 and all(got[j] == 1 for j in on_rack0)
    assert all(got[j] == 0 for j in set(got) - on_rack0)
    fails = ev[ev.kind == "fail"]
    assert sorted(fails.job_id) == sorted(on_rack0)
    assert set(res.nodes[res.nodes.kind == "fail"].node) == {"node0", "node1"}


def test_a_hot_spare_replaces_a_failed_node_after_the_swap_time(tmp_path):
    rates = _rates(tmp_path, maintenance=[{"start_s": 100, "duration_s": 10000,
                                           "target": "node0"}])
    topo = uniform_topology(3, gpus_per_switch=8, name="three")
    res = _run([JobSpec("a", 0.0, 16, 1000.0)], topo, failure_model=rates, spare_nodes=1,
               spare_swap_time=600, restore_overhead=0)
    ev = res.events[res.events.job_id == "a"]
    again = ev[ev.kind == "resume"].iloc[0]
    assert again.time == pytest.approx(700.0)  # the spare (node2) is in service at 700
    assert "node2" in again.cells
    rows = [(r.time, r.node, r.kind) for r in res.nodes.itertuples()]
    assert rows[:3] == [(0.0, "node2", "drain"), (100.0, "node0", "fail"),
                        (700.0, "node2", "restore")]
    assert (10100.0, "node0", "drain") in rows or res.jobs.end_time.iloc[0] < 10100
    assert res.summary["spare_swaps"] == 1


def test_technicians_queue_repairs_in_order_of_detection():
    model = FailureModel("m", (Component("host", "node", per_day=3.0, repair_s=7200.0,
                                         repair_fixed=True),))
    FAILURE_MODELS.register("test-techs", lambda: model, replace=True)
    try:
        topo = uniform_topology(8, gpus_per_switch=1, name="eight")
        res = _run([JobSpec("a", 0.0, 1, 30000.0)], topo, failure_model="test-techs",
                   technicians=1)
    finally:
        FAILURE_MODELS.unregister("test-techs")
    nodes = res.nodes
    repairs = sorted(nodes[nodes.kind == "repair"].time)
    # one technician: repairs end at least 2 h apart
    assert len(repairs) >= 3
    assert all(b - a >= 7200 - 1e-6 for a, b in zip(repairs, repairs[1:], strict=False))


# --- presets and streams ---

def test_llama3_preset_reproduces_the_reports_interruptions_in_54_days():
    model = llama3()
    assert sum(n for _, _, n in LLAMA3_TABLE) == 419
    # the job's expected interruption rate over 54 days on 16,384 GPUs is the report's 419
    assert model.job_rate_per_hour(16384, 8, 16) * 54 * 24 == pytest.approx(419)
    # drawn: counts per cause over 54 days on 2,048 nodes x 8 GPUs, vs the table
    rng = np.random.default_rng(7)
    units = {"gpu": 16384, "node": 2048}
    got: Counter[str] = Counter()
    for c in model.components:
        s = _Stream(c, units[c.unit], rng)
        while s.t < 54 * 86400:
            got[c.name] += 1
            s.step()
    for sw in model.software:
        got[sw.name] = int(rng.poisson(sw.per_gpu_hour * 16384 * 54 * 24))
    total = sum(got.values())
    assert abs(total - 419) < 3 * math.sqrt(419)
    want = {name: n for name, _, n in LLAMA3_TABLE}
    chi2 = sum((got[k] - v) ** 2 / v for k, v in want.items())
    assert chi2 < 42.3  # 17 degrees of freedom, p = 0.001
    hw = sum(got[k] for k, u, _ in LLAMA3_TABLE
             if u != "software" and k != "host_maintenance") / total
    assert 0.70 < hw < 0.85  # the report: about 78% hardware


def test_meta_rsc1_gives_the_papers_mttf_of_a_16k_gpu_job():
    hours = 1 / meta_rsc1().job_rate_per_hour(16384, 8, 16)
    assert hours == pytest.approx(1.8, rel=0.02)


def test_weibull_stream_has_the_components_mean_rate():
    rng = np.random.default_rng(3)
    s = _Stream(Component("x", "node", per_day=1.0, shape=0.7), 200, rng)
    n = 0
    while s.t < 50 * 86400:
        n += 1
        s.step()
    assert n == pytest.approx(200 * 50, rel=0.1)


# --- bad input ---

def test_bad_rates_file_names_the_field(tmp_path):
    topo = uniform_topology(1, gpus_per_switch=1, name="one")
    bad = _rates(tmp_path, components=[{"name": "g", "unit": "socket", "per_day": 1}])
    with pytest.raises(InvalidParameter, match=r"components\[0\]: unit 'socket'"):
        _run([JobSpec("a", 0.0, 1, 10.0)], topo, failure_model=bad)
    bad = _rates(tmp_path, software=[{"name": "s", "per_job_hour": -1}])
    with pytest.raises(InvalidParameter, match=r"software\[0\]: per_job_hour -1"):
        _run([JobSpec("a", 0.0, 1, 10.0)], topo, failure_model=bad)
    with pytest.raises(InvalidParameter, match="checkpoint_cost > 0"):
        _run([JobSpec("a", 0.0, 1, 10.0)], topo, checkpoint_interval="auto")
    with pytest.raises(InvalidParameter, match="replaces the node failure process"):
        _run([JobSpec("a", 0.0, 1, 10.0)], topo, failure_model="llama3", mtbf=100.0)


def test_software_failures_restart_without_using_up_retries():
    model = FailureModel("s", software=(Software("bug", per_job_hour=2.0),))
    FAILURE_MODELS.register("test-soft", lambda: model, replace=True)
    try:
        topo = uniform_topology(1, gpus_per_switch=1, name="one")
        res = _run([JobSpec("a", 0.0, 1, 7200.0, checkpoint_interval=600.0)], topo,
                   failure_model="test-soft")
    finally:
        FAILURE_MODELS.unregister("test-soft")
    j = res.jobs.iloc[0]
    assert j.status == "completed" and j.interruptions > 0
    assert j.restarts == j.interruptions


# --- LLM-era workload and topology ---

def test_llm_like_mix_is_seeded_and_pretraining_takes_most_gpu_time():
    from schedlab.traces.llm_like import llm_like

    a = llm_like(2000, span_days=54, seed=3)
    assert [(s.job_id, s.num_gpus, s.duration) for s in a.jobs] == \
        [(s.job_id, s.num_gpus, s.duration) for s in llm_like(2000, span_days=54, seed=3).jobs]
    kinds = Counter(s.vc for s in a.jobs)
    assert kinds["eval"] > kinds["debug"] > kinds["finetune"] > kinds["pretrain"] > 0
    gpu_time = Counter()
    for s in a.jobs:
        gpu_time[s.vc] += s.num_gpus * s.duration
    assert gpu_time["pretrain"] > 0.5 * sum(gpu_time.values())
    assert max(s.num_gpus for s in llm_like(500, seed=1, max_gpus=64).jobs) <= 64


def test_h100_2048_preset():
    # the file, not the 16,384-GPU tree (building it takes seconds; the benchmark does)
    from schedlab.topologies.presets import DATA_DIR, PRESETS

    assert "h100-2048" in PRESETS
    data = yaml.safe_load((DATA_DIR / "h100-2048.yaml").read_text())
    (group,) = data["nodes"]
    per_node = group["sockets"] * group["switches_per_socket"] * group["gpus_per_switch"]
    assert group["count"] == 2048 and per_node == 8 and group["gpu_type"] == "H100"
    assert data["nodes_per_rack"] == 16


def test_a_drain_before_maintenance_keeps_new_jobs_off_the_node(tmp_path):
    # node0 drained at 500 for a window 1000..1100: b (submitted at 600) waits for the
    # window's end instead of starting at 600 and being interrupted at 1000
    rates = _rates(tmp_path, maintenance=[{"start_s": 1000, "duration_s": 100,
                                           "target": "node0", "drain_s": 500}])
    topo = uniform_topology(1, gpus_per_switch=8, name="one")
    jobs = [JobSpec("a", 0.0, 4, 300.0), JobSpec("b", 600.0, 4, 1000.0)]
    res = _run(jobs, topo, failure_model=rates)
    j = res.jobs.set_index("job_id")
    assert j.loc["b", "start_time"] == pytest.approx(1100.0)
    assert j.interruptions.sum() == 0
    rows = [(r.time, r.kind) for r in res.nodes.itertuples()]
    assert rows == [(500.0, "drain"), (1000.0, "fail"), (1100.0, "repair"),
                    (1100.0, "restore")]


def test_an_elastic_job_shrinks_on_a_failure_and_grows_back_after_the_repair(tmp_path):
    rates = _rates(tmp_path, maintenance=[{"start_s": 100, "duration_s": 1000,
                                           "target": "node0"}])
    topo = uniform_topology(2, gpus_per_switch=8, name="two")
    job = JobSpec("a", 0.0, 16, 3000.0, min_gpus=8, max_gpus=16, checkpoint_interval=50.0)
    res = Simulation(Trace("t", (job,)), topo, "fifo-elastic", params={
        "failure_model": rates, "restore_overhead": 0}).run()
    ev = [(r.time, r.kind, r.cells) for r in res.events.itertuples()
          if r.kind in ("fail", "resume", "resize", "finish")]
    # on node1 alone at half speed 100..1100 (500 s of work), both nodes from then on
    assert ev == [(100.0, "fail", "node0:8;node1:8"), (100.0, "resume", "node1:8"),
                  (1100.0, "resize", "node0:8;node1:8"), (3500.0, "finish", "")]


def test_spares_need_a_failure_model():
    topo = uniform_topology(2, gpus_per_switch=1, name="two")
    with pytest.raises(InvalidParameter, match="spare_nodes=1 needs a failure_model"):
        _run([JobSpec("a", 0.0, 1, 10.0)], topo, spare_nodes=1)


def test_a_job_hangs_from_the_failure_to_its_detection():
    # detection 500 s after the failure: the job makes no progress from the failure on,
    # and a checkpoint due in between is not written; it restarts from the checkpoint
    # before the failure (every 300 s of progress, free)
    model = FailureModel("d", (Component("gpu", "gpu", per_day=4.0, detect_s=500.0,
                                         repair_s=60.0, repair_fixed=True),))
    FAILURE_MODELS.register("test-detect", lambda: model, replace=True)
    try:
        topo = uniform_topology(1, gpus_per_switch=8, name="one")
        res = _run([JobSpec("a", 0.0, 8, 50_000.0)], topo, failure_model="test-detect",
                   checkpoint_interval=300, restore_overhead=0)
    finally:
        FAILURE_MODELS.unregister("test-detect")
    fail = res.events[res.events.kind == "fail"].iloc[0]
    occurred = fail.time - 500.0
    lost = float(fail.detail.rpartition("lost_work=")[2])
    assert lost == pytest.approx(occurred - 300 * math.floor(occurred / 300), abs=1e-3)
