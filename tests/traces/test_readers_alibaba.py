"""Alibaba trace readers: PAI 2020 job/task tables, openb 2023 pods (their topologies:
tests/topologies/test_topology_alibaba.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import TaskRole
from schedlab.topologies import read_openb_nodes, read_pai_machines
from schedlab.traces import DATA_DIR
from schedlab.traces.readers import detect_format, read_trace
from schedlab.traces.readers.openb import read_openb_pods
from schedlab.traces.readers.pai import read_pai

SAMPLES = DATA_DIR / "samples"
TASKS = SAMPLES / "pai_task_table_sample.csv"
JOBS = SAMPLES / "pai_job_table_sample.csv"


def pai_rows(t):
    return [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.gpu_share, j.gpus_per_task,
             j.gpu_type, j.num_cpus, round(j.mem_gb, 6), j.user, dict(j.extra)) for j in t.jobs]


EXPECTED_PAI = [
    # 4 workers x 1 GPU (+ a CPU ps); launch 90 .. 1110; submitted at 50 (the origin)
    ("job1", 0.0, 4, 1020.0, 1.0, 1, "V100", 26.0, 127.2, "u1", {"status": "Terminated"}),
    ("job2", 100.0, 1, 300.0, 0.5, 0, "T4", 6.0, 20.0, "u2", {"status": "Failed"}),
    # 2 instances x 2 GPUs; MISC means any type
    ("job3", 950.0, 4, 3600.0, 1.0, 2, "", 16.0, 80.0, "u1", {"status": "Terminated"}),
]


def test_pai_task_table_with_its_job_table_found_next_to_it() -> None:
    assert detect_format(TASKS) == "pai"
    t = read_pai(TASKS)
    assert pai_rows(t) == EXPECTED_PAI
    assert t.bad_rows == 1 and "line 5: excluded: job 'job4' has no task that ran" in \
        t.bad_row_messages[0]
    assert read_trace(JOBS).jobs == t.jobs  # from the job table, the task table is found


def test_pai_task_table_alone_submits_at_first_launch(tmp_path: Path) -> None:
    p = shutil.copy(TASKS, tmp_path / "pai_task_table.csv")
    t = read_pai(p)
    assert [(j.job_id, j.submit_time, j.user) for j in t.jobs] == [
        ("job1", 0.0, ""), ("job2", 110.0, ""), ("job3", 1110.0, "")]
    with pytest.raises(InvalidTrace, match="a PAI job table needs its task table"):
        read_pai(shutil.copy(JOBS, tmp_path / "pai_job_table_x.csv"))


def test_pai_tables_with_header_lines_and_bad_rows(tmp_path: Path) -> None:
    p = tmp_path / "tasks.csv"
    p.write_text("job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,"
                 "plan_gpu,gpu_type\n"
                 "a,w,1,Terminated,0,10,100,1,100,T4\n"
                 "b,w,one,Terminated,0,10,100,1,100,T4\n")
    assert detect_format(p) == "pai"
    with pytest.raises(InvalidTrace, match=r"tasks.csv, line 3, field inst_num: value 'one'"):
        read_pai(p)
    t = read_pai(p, skip_bad_rows=True)
    assert [j.job_id for j in t.jobs] == ["a"] and t.bad_rows == 1
    p.write_text("a,w,1,Terminated,20,10,100,1,100,T4\n")
    with pytest.raises(InvalidTrace, match="line 1, field end_time: value '10.*before start"):
        read_pai(p, )


def test_openb_pods_sample_exact_rows() -> None:
    p = SAMPLES / "openb_pod_list_sample.csv"
    assert detect_format(p) == "openb"
    t = read_openb_pods(p)
    got = [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.gpu_share, j.num_cpus, j.mem_gb,
            dict(j.extra)["pod_phase"]) for j in t.jobs]
    assert got == [
        ("openb-pod-0000", 0.0, 1, 12537496.0, 1.0, 12.0, 16.0, "Running"),
        ("openb-pod-0001", 427061.0, 1, 12475899.0, 0.46, 6.0, 12.0, "Running"),
        ("openb-pod-0002", 1558381.0, 1, 11344579.0, 1.0, 12.0, 24.0, "Running"),
        ("openb-pod-0003", 2690044.0, 1, 10212916.0, 0.46, 6.0, 12.0, "Running"),
        ("openb-pod-0004", 2758084.0, 1, 10144876.0, 1.0, 12.0, 16.0, "Running"),
        ("openb-pod-0005", 2759674.0, 0, 10143284.0, 1.0, 20.0, 64.0, "Running"),
        ("openb-pod-0017", 9437497.0, 8, 1332357.0, 1.0, 88.0, 320.0, "Succeeded"),
        # never scheduled: lives deletion - creation
        ("openb-pod-0061", 10001278.0, 1, 125.0, 1.0, 11.908, 46.0, "Pending"),
        ("openb-pod-0084", 10015849.0, 1, 59.0, 1.0, 11.908, 46.0, "Pending"),
    ]
    assert t.extra_columns == ("gpu_spec", "qos", "pod_phase")


def test_openb_gpu_spec() -> None:
    t = read_openb_pods(SAMPLES / "openb_pod_list_gpuspec_sample.csv")
    assert [(j.gpu_type, dict(j.extra)["gpu_spec"]) for j in t.jobs] == [
        ("", "V100M16|V100M32"), ("", "G2|P100|T4|V100M16|V100M32"), ("V100M32", "V100M32")]


def test_openb_variants_without_times_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "openb_pod_list_multigpu20.csv"
    p.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,1,1,1,1000\n")
    assert detect_format(p) == "openb"
    with pytest.raises(InvalidTrace, match="without creation_time and deletion_time"):
        read_openb_pods(p)


@pytest.mark.parametrize(("row", "fragment"), [
    ("p,1000,1024,1,0,,LS,Running,0,10,0", "field gpu_milli: value '0' is not in (0, 1000]"),
    ("p,1000,1024,1,1500,,LS,Running,0,10,0", "field gpu_milli: value '1500'"),
    ("p,1000,1024,1,500,,LS,Running,20,10,20", "field deletion_time: value '10' is before"),
    ("p,1000,1024,x,500,,LS,Running,0,10,0", "field num_gpu: value 'x' is not an integer"),
    ("p,-1,1024,1,500,,LS,Running,0,10,0", "field cpu_milli: value '-1' is not a number >= 0"),
])
def test_openb_pod_errors(tmp_path: Path, row: str, fragment: str) -> None:
    p = tmp_path / "pods.csv"
    p.write_text((SAMPLES / "openb_pod_list_sample.csv").read_text().splitlines()[0] + "\n"
                 + row + "\n")
    with pytest.raises(InvalidTrace) as e:
        read_openb_pods(p)
    assert f"pods.csv, line 2, {fragment}" in str(e.value)


def test_samples_replay_on_their_own_topologies() -> None:
    from schedlab.sim.engine import Simulation

    pods = read_openb_pods(SAMPLES / "openb_pod_list_sample.csv")
    r = Simulation(pods, read_openb_nodes(SAMPLES / "openb_node_list_sample.csv"), "fifo").run()
    assert set(r.jobs.status) == {"completed"} and len(r.jobs) == 9
    r = Simulation(read_pai(TASKS), read_pai_machines(SAMPLES / "pai_machine_spec_sample.csv"),
                   "fifo").run()
    # job1 has a ps role beside its workers: its 4 one-GPU workers and the ps all on the
    # one V100 node (the workers' node first), in one socket: full speed, 0..1020
    assert list(r.jobs.status) == ["completed", "completed", "completed"]
    assert (r.jobs.start_time[0], r.jobs.end_time[0]) == (0.0, 1020.0)
    assert r.events.detail[1] == "tasks=" + ",".join(
        f"{t}@f50778ef4a069ef07dcbf829" for t in
        ("worker[0]", "worker[1]", "worker[2]", "worker[3]", "ps[0]"))


def test_pai_jobs_of_several_task_kinds_get_roles() -> None:
    # job1 of the sample: 4 workers x 1 GPU (6 CPUs, 29.3 GB) and a CPU-only ps
    job1 = read_pai(TASKS).jobs[0]
    assert job1.tasks == (TaskRole("worker", 4, 1, 6.0, 29.3), TaskRole("ps", 1, 0, 2.0, 10.0))
    assert [j.tasks for j in read_pai(TASKS).jobs[1:]] == [(), ()]  # one task kind: one gang


def test_pai_tf_roles_exact_rows(tmp_path: Path) -> None:
    p = tmp_path / "pai_task_table.csv"
    p.write_text(
        "tf,ps,2,Terminated,10,110,800,16,,\n"
        "tf,worker,4,Terminated,12,100,400,8,200,V100\n"
        "tf,chief,1,Terminated,10,100,400,8,100,V100\n"
        "tf,evaluator,1,Terminated,20,90,200,4,50,V100\n"
        "tf,worker,1,Terminated,12,100,400,8,100,V100\n"  # a second worker row: worker-2
        "one,worker,2,Terminated,0,50,100,1,100,T4\n"
        "mixed,PyTorchWorker,1,Terminated,0,50,100,1,100,T4\n"
        "mixed,Py Torch Master,1,Terminated,0,50,100,1,100,T4\n")
    t = read_pai(p)
    tf = next(j for j in t.jobs if j.job_id == "tf")
    assert tf.tasks == (
        TaskRole("ps", 2, 0, 8.0, 16.0), TaskRole("worker", 4, 2, 4.0, 8.0),
        TaskRole("chief", 1, 1, 4.0, 8.0), TaskRole("evaluator", 1, 1, 2.0, 4.0, gang=False),
        TaskRole("worker-2", 1, 1, 4.0, 8.0))
    # the gang's GPUs (8 + 1 + 1; not the evaluator's); CPUs and memory of every task
    assert (tf.num_gpus, tf.gpus_per_task, tf.num_cpus, tf.mem_gb, tf.duration) == (
        10, 0, 42.0, 84.0, 100.0)
    one = next(j for j in t.jobs if j.job_id == "one")
    assert (one.tasks, one.num_gpus, one.gpus_per_task) == ((), 2, 1)
    mixed = next(j for j in t.jobs if j.job_id == "mixed")
    assert [r.role for r in mixed.tasks] == ["PyTorchWorker", "Py_Torch_Master"]
    assert (mixed.num_gpus, mixed.gpus_per_task) == (2, 1)
