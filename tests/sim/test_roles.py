"""Jobs made of different tasks (issue 16, engine part): exact scenarios, hand-computed.

Topology `dgx2c`: two nodes of 2 sockets x 2 switches x 2 GPUs (GPUs 0-7 on node0, 8-15
on node1), 32 CPUs each. The consolidated placer puts each gang GPU task on the tightest
cell of one node (the fullest ancestors first), the largest task first; CPU-only gang
tasks go on the GPU tasks' nodes in placement order while their CPUs fit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from schedlab.policies.base import Policy
from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidDecision
from schedlab.sim.model import (
    Decision,
    Preempt,
    RolePlacement,
    Start,
    TaskPlacement,
    Unschedulable,
)
from schedlab.sim.roles import no_roles_reason
from schedlab.topologies.build import uniform_topology
from schedlab.traces.synthetic import from_records

TF = [{"role": "ps", "count": 2, "gpus": 0, "cpus": 8},
      {"role": "worker", "count": 4, "gpus": 2, "cpus": 4},
      {"role": "chief", "count": 1, "gpus": 1, "cpus": 2},
      {"role": "evaluator", "count": 1, "gpus": 1, "gang": False}]


def dgx(nodes: int = 2, cpus: float = 32.0) -> Any:
    return uniform_topology(nodes, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            num_cpus=cpus, name="dgx")


def tf_job(job_id: str = "tf", submit: float = 0.0, duration: float = 100.0,
           tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    tasks = TF if tasks is None else tasks
    gang = sum(r.get("count", 1) * r.get("gpus", 0) for r in tasks if r.get("gang", True))
    return {"job_id": job_id, "submit_time": submit, "num_gpus": gang,
            "duration": duration, "tasks": json.dumps(tasks)}


def where(job: Any) -> dict[str, tuple[int, tuple[int, ...]]]:
    """'role<i>' -> (node, GPUs) of a running job's gang tasks."""
    return {f"{t.role}{t.index}": (t.node, t.gpus) for t in job.tasks}


class Scripted(Policy):
    """FIFO on the run's placer, plus a preemption of `victim` at `at`, held until `back`."""

    name = "scripted"
    supports_roles = True

    def __init__(self, victim: str = "", at: float = -1.0, back: float = -1.0) -> None:
        super().__init__()
        self.victim, self.at, self.back = victim, at, back

    def attach(self, ctx: Any) -> None:
        if self.at >= 0:
            ctx.wake_at(self.at)
            ctx.wake_at(self.back)

    def schedule(self, ctx: Any) -> Iterable[Decision]:
        if ctx.now == self.at:
            yield Preempt(self.victim)
        for job in list(ctx.pending()):
            if job.job_id == self.victim and self.at <= ctx.now < self.back:
                continue
            got = ctx.place(job)
            if isinstance(got, Unschedulable):
                return
            yield Start(job.job_id, got)


def test_tf_job_places_every_role_and_the_evaluator_after_the_gang() -> None:
    evaluator = dict(TF[3], duration=30)
    tasks = [*TF[:3], evaluator]
    sim = Simulation(from_records([tf_job(tasks=tasks)]), dgx(), "fifo", seed=0)
    run = sim.start()
    run.env.run(until=5)
    tf = run.jobs[0]
    # workers (2 GPUs, largest first) fill node0 switch by switch; the chief takes the
    # first switch of node1; both ps go on node0 (the workers' first node: 32 - 4 x 4 =
    # 16 CPUs left, 8 each); the evaluator (not in the gang) the tightest GPU left: 9
    assert where(tf) == {"ps0": (0, ()), "ps1": (0, ()), "worker0": (0, (0, 1)),
                         "worker1": (0, (2, 3)), "worker2": (0, (4, 5)),
                         "worker3": (0, (6, 7)), "chief0": (1, (8,))}
    assert tf.gpus == tuple(range(9))
    assert tf.side is not None
    (ev, end, since), = [v for v in tf.side.values()]
    assert (ev.role, ev.node, ev.gpus, end, since) == ("evaluator", 1, (9,), 30.0, 0.0)
    c = run.cluster
    assert (c.node_cpu_free[0], c.node_cpu_free[1]) == (0.0, 30.0)
    assert c.free_whole == 16 - 10
    run.env.run(until=35)  # the evaluator's own 30 s are up: GPU 9 is free again
    assert tf.side[("evaluator", 0)] == ()
    assert c.free_whole == 16 - 9 and c.gpu_holders[9] == {}
    run.env.run()
    r = sim.result(run, 0.0)
    j = r.jobs.set_index("job_id")
    # 9 gang GPUs over two nodes: the best level for 9 GPUs is the cluster: no slowdown
    assert (j.status["tf"], j.start_time["tf"], j.end_time["tf"]) == ("completed", 0.0, 100.0)
    start = r.events[r.events.kind == "start"].detail.iloc[0]
    assert start == ("tasks=ps[0]@node0,ps[1]@node0,worker[0]@node0,worker[1]@node0,"
                     "worker[2]@node0,worker[3]@node0,chief[0]@node1")
    # the evaluator's own start is an event too, with its GPU (issue 50)
    ev_row = r.events[r.events.detail.str.startswith("task=evaluator[0]")]
    assert len(ev_row) == 1 and ev_row.kind.iloc[0] == "start"
    assert ev_row.detail.iloc[0] == "task=evaluator[0]@node1" and ev_row.num_gpus.iloc[0] == 1
    # everything is given back at the end
    assert run.cluster.free_whole == 16 and run.cluster.node_cpu_free == [32.0, 32.0]
    assert run.cluster.host_jobs == [{}, {}]


def test_preempting_the_gang_stops_the_evaluator_and_restarts_it_with_the_gang() -> None:
    other = {"job_id": "x", "submit_time": 41, "num_gpus": 4, "duration": 5}
    sim = Simulation(from_records([tf_job(), other]), dgx(),
                     Scripted("tf", at=40.0, back=50.0), seed=0)
    run = sim.start()
    run.env.run(until=39)
    tf = run.jobs[0]
    assert tf.side is not None and tf.side[("evaluator", 0)][0].gpus == (9,)
    run.env.run(until=45)  # preempted at 40: gang and evaluator gone; x runs 41..46
    assert tf.status == "pending" and tf.tasks == () and tf.side is None
    assert run.cluster.gpu_holders[9] == {} and run.cluster.host_jobs == [{}, {}]
    run.env.run(until=55)  # started again at 50 (no checkpoint: from scratch)
    assert where(tf)["chief0"] == (1, (8,))
    assert tf.side is not None and tf.side[("evaluator", 0)][:3:2] == (
        tf.side[("evaluator", 0)][0], 50.0)
    assert tf.side[("evaluator", 0)][0].gpus == (9,)
    run.env.run()
    j = sim.result(run, 0.0).jobs.set_index("job_id")
    # tf: 0..40 lost (no checkpoint), 50..150; x: 41..46 on node1 (4 free GPUs whole)
    assert (j.start_time["tf"], j.end_time["tf"], j.preemptions["tf"]) == (0.0, 150.0, 1)
    assert (j.start_time["x"], j.end_time["x"]) == (41.0, 46.0)


def test_ps_off_the_workers_nodes_pays_the_cross_node_factor() -> None:
    # 1 ps (8 CPUs) + 2 workers x 2 GPUs (4 CPUs each) on nodes of 8 CPUs: the workers
    # fill node0's CPUs, so the ps goes on node1. 4 GPUs in one socket would run at full
    # speed (best level socket, factor 1.4); with the ps across nodes the level is the
    # cluster (5.0): speed 1.4 / 5 and the 100 s job takes 100 x 5 / 1.4 = 357.142857 s
    tasks = [{"role": "ps", "count": 1, "gpus": 0, "cpus": 8},
             {"role": "worker", "count": 2, "gpus": 2, "cpus": 4}]
    for cpus, node, end in ((8.0, 1, 100 * 5.0 / 1.4), (16.0, 0, 100.0)):
        sim = Simulation(from_records([tf_job(tasks=tasks)]), dgx(cpus=cpus), "fifo", seed=0)
        run = sim.start()
        run.env.run(until=1)
        assert where(run.jobs[0]) == {"ps0": (node, ()), "worker0": (0, (0, 1)),
                                      "worker1": (0, (2, 3))}
        run.env.run()
        j = sim.result(run, 0.0).jobs.set_index("job_id")
        assert j.end_time["tf"] == pytest.approx(end, abs=1e-9)
        assert j.locality_level["tf"] == ("cluster" if node else "socket")


def test_pytorch_master_and_workers() -> None:
    # master 1 GPU + 3 workers x 2 GPUs: the workers on three switches of node0, the
    # master on its fourth; 7 GPUs on one node (best level: node) run at full speed. A
    # plain 10-GPU job at 1 waits for them: 100..150
    tasks = [{"role": "master", "count": 1, "gpus": 1, "cpus": 4},
             {"role": "worker", "count": 3, "gpus": 2, "cpus": 4}]
    plain = {"job_id": "big", "submit_time": 1, "num_gpus": 10, "duration": 50}
    sim = Simulation(from_records([tf_job("pt", tasks=tasks), plain]), dgx(), "fifo", seed=0)
    run = sim.start()
    run.env.run(until=1)
    assert where(run.jobs[0]) == {"master0": (0, (6,)), "worker0": (0, (0, 1)),
                                  "worker1": (0, (2, 3)), "worker2": (0, (4, 5))}
    assert run.cluster.node_cpu_free[0] == 32 - 16
    run.env.run()
    j = sim.result(run, 0.0).jobs.set_index("job_id")
    assert list(j.start_time) == [0.0, 100.0] and list(j.end_time) == [100.0, 150.0]


@pytest.mark.parametrize("policy", ["gandiva", "gavel-mmf", "hai", "fgd"])
def test_policies_without_roles_reject_with_the_reason(policy: str) -> None:
    recs = [tf_job(), {"job_id": "p", "submit_time": 1, "num_gpus": 2, "duration": 10}]
    r = Simulation(from_records(recs), dgx(), policy, seed=0).run()
    j = r.jobs.set_index("job_id")
    assert j.status["tf"] == "rejected"
    assert j.reason["tf"] == no_roles_reason(policy) == (
        f"policy {policy} does not support task roles")
    assert j.status["p"] == "completed"


def test_a_gang_too_wide_for_any_node_is_rejected_at_submission() -> None:
    tasks = [{"role": "worker", "count": 1, "gpus": 9}, {"role": "chief", "gpus": 1}]
    r = Simulation(from_records([tf_job(tasks=tasks)]), dgx(), "fifo", seed=0).run()
    assert r.jobs.reason.iloc[0] == ("a task needs 9 GPUs on one node, the largest node "
                                     "of the allowed types has 8")


class Fixed(Policy):
    """Starts job 'tf' once with the given decision (to check the engine's validation)."""

    name = "fixed"
    supports_roles = True

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def schedule(self, ctx: Any) -> Iterable[Decision]:
        for job in list(ctx.pending()):
            yield self.make(ctx, job)


def _tasks(**moves: tuple[int, tuple[int, ...]]) -> tuple[TaskPlacement, ...]:
    base = {"ps0": (0, ()), "ps1": (0, ()), "worker0": (0, (0, 1)), "worker1": (0, (2, 3)),
            "worker2": (0, (4, 5)), "worker3": (0, (6, 7)), "chief0": (1, (8,))}
    base.update(moves)
    return tuple(TaskPlacement(k[:-1], int(k[-1]), n, g) for k, (n, g) in base.items())


@pytest.mark.parametrize(("make", "message"), [
    (lambda ctx, job: Start(job.job_id, tuple(range(9))),
     "Start 'tf': a job with task roles starts task by task: give tasks"),
    (lambda ctx, job: Start(job.job_id, RolePlacement(tuple(range(9)), _tasks(
        chief0=(0, (8,))))),
     "Start 'tf': task chief[0]: GPU 8 is on node node1, not on its node node0"),
    (lambda ctx, job: Start(job.job_id, RolePlacement(tuple(range(9)), _tasks()[1:])),
     "Start 'tf': gang tasks ps[0] not placed (a gang starts all or nothing)"),
    (lambda ctx, job: Start(job.job_id, RolePlacement((0, 1, 2, 3, 4, 5, 6, 7, 9),
                                                      _tasks(chief0=(1, (9, 10)))), ),
     "Start 'tf': task chief[0] has 2 GPUs, its role asks 1 per task"),
    (lambda ctx, job: Start(job.job_id, RolePlacement(tuple(range(9)), _tasks(
        worker3=(0, (4, 5)), chief0=(1, (8,))))),
     "Start 'tf': GPUs (0, 1, 2, 3, 4, 5, 6, 7, 8) are not its tasks' GPUs"),
    (lambda ctx, job: Start(job.job_id, RolePlacement(tuple(range(9)), (
        *_tasks()[:-1], TaskPlacement("boss", 0, 1, (8,))))),
     "Start 'tf': task boss[0] is not a gang task of the job"),
])
def test_invalid_starts_of_a_job_with_roles(make: Any, message: str) -> None:
    sim = Simulation(from_records([tf_job()]), dgx(cpus=20), Fixed(make), seed=0)
    with pytest.raises(InvalidDecision) as e:
        sim.run()
    assert str(e.value).startswith(message), str(e.value)


def test_over_committed_host_is_refused_and_nothing_is_taken() -> None:
    # both ps on node0 with the workers: 8 + 8 + 4 CPUs leave none for worker1
    make = lambda ctx, job: Start(job.job_id, RolePlacement(tuple(range(9)), _tasks()))  # noqa: E731
    sim = Simulation(from_records([tf_job()]), dgx(cpus=20), Fixed(make), seed=0)
    run = sim.start()
    with pytest.raises(InvalidDecision, match=r"^Start 'tf': task worker\[1\]: node node0 "
                       r"has 0 CPUs free, the job needs 4$"):
        run.env.run()
    assert run.cluster.free_whole == 16 and run.cluster.node_cpu_free == [20.0, 20.0]
    assert run.cluster.host_jobs == [{}, {}]


def test_node_failures_stop_the_evaluator_alone_or_the_whole_gang(tmp_path) -> None:
    # PyTorch master (1 GPU) + 3 workers x 2 GPUs on node0 (GPUs 0-6); its evaluator
    # (2 GPUs, not in the gang) does not fit the one GPU left there: node1, GPUs 8-9
    tasks = [{"role": "master", "count": 1, "gpus": 1},
             {"role": "worker", "count": 3, "gpus": 2},
             {"role": "evaluator", "count": 1, "gpus": 2, "gang": False}]
    failures = tmp_path / "failures.csv"
    failures.write_text("node,fail_time,repair_time\nnode1,20,60\nnode0,80,200\n")
    sim = Simulation(from_records([tf_job("pt", tasks=tasks)]), dgx(), "fifo", seed=0,
                     params={"failures": str(failures), "retry_delay": 10.0})
    run = sim.start()
    pt = run.jobs[0]

    def evaluator() -> Any:
        assert pt.side is not None
        v = pt.side[("evaluator", 0)]
        return v if v is None else (v[0].node, v[0].gpus, v[2])

    run.env.run(until=10)
    assert evaluator() == (1, (8, 9), 0.0)
    run.env.run(until=30)  # node1 failed at 20: the evaluator alone stops, nowhere to go
    assert evaluator() is None and pt.status == "running" and pt.gpus == tuple(range(7))
    run.env.run(until=70)  # node1 back at 60: the evaluator runs there again
    assert evaluator() == (1, (8, 9), 60.0)
    run.env.run(until=85)  # node0 failed at 80: the whole gang stops, evaluator with it
    assert pt.status == "retrying" and pt.side is None and run.cluster.free_whole == 8
    run.env.run(until=150)  # retried at 90 on node1; no room left there for the evaluator
    assert pt.status == "running" and {t.node for t in pt.tasks} == {1}
    assert evaluator() is None
    run.env.run()
    j = sim.result(run, 0.0).jobs.set_index("job_id")
    # lost 0..80 (no checkpoint), ran again 90..190
    assert (j.status["pt"], j.end_time["pt"], j.restarts["pt"]) == ("completed", 190.0, 1)
    # GPU time: gang 7 x (80 + 100) + evaluator 2 x (20 + 20)
    assert j.gpu_seconds["pt"] == pytest.approx(7 * 180 + 2 * 40)


def test_a_run_cut_short_counts_the_running_evaluator_gpu_time() -> None:
    # at until=50: the gang's 9 GPUs and the evaluator's one, each held for 50 s
    r = Simulation(from_records([tf_job()]), dgx(), "fifo", seed=0).run(until=50)
    j = r.jobs.set_index("job_id")
    assert (j.status["tf"], j.gpu_seconds["tf"]) == ("unfinished", 10 * 50.0)


def test_a_one_gpu_job_with_an_off_node_ps_pays_the_cross_node_factor() -> None:
    # 1 ps (8 CPUs) + 1 worker of 1 GPU (4 CPUs) on nodes of 8 CPUs: the ps goes on
    # node1. Alone the worker would run at full speed (one GPU: level gpu, factor 1);
    # with the ps across nodes the level is the cluster (5.0): the 100 s job takes 500 s.
    # (The engine's shortcut for a plain one-GPU job must not skip a job with roles.)
    tasks = [{"role": "ps", "count": 1, "gpus": 0, "cpus": 8},
             {"role": "worker", "count": 1, "gpus": 1, "cpus": 4}]
    sim = Simulation(from_records([tf_job(tasks=tasks)]), dgx(cpus=8.0), "fifo", seed=0)
    j = sim.run().jobs.set_index("job_id")
    assert j.end_time["tf"] == pytest.approx(500.0, abs=1e-9)
    assert j.locality_level["tf"] == "cluster"
