"""The `tasks` column and the container-job columns (issue 16, docs/contract.md#sec-2): parsing,
every rule with its exact message, the job-level totals, CSV and Parquet round trips."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.errors import InvalidTrace
from schedlab.sim.model import JobSpec, RestartPolicy, TaskRole
from schedlab.sim.roles import role_totals
from schedlab.traces import load_trace, read_canonical, write_canonical
from schedlab.traces.roles import format_tasks, parse_tasks
from schedlab.traces.synthetic import from_records

TF = [{"role": "ps", "count": 2, "gpus": 0, "cpus": 8, "mem_gb": 32},
      {"role": "worker", "count": 4, "gpus": 2, "cpus": 8},
      {"role": "chief", "count": 1, "gpus": 1},
      {"role": "evaluator", "count": 1, "gpus": 1, "gang": False}]


def cell(obj: object) -> str:
    """A JSON cell as a CSV field (quotes doubled)."""
    return '"' + json.dumps(obj).replace('"', '""') + '"'


def write(tmp_path: Path, header: str, *rows: str) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


def error_of(p: Path) -> str:
    with pytest.raises(InvalidTrace) as e:
        load_trace(p)
    return str(e.value)


def test_tf_job_roles_and_totals(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,tasks",
              f"tf,0,9,100,{cell(TF)}")
    (j,) = load_trace(p).jobs
    assert j.tasks == (TaskRole("ps", 2, 0, 8.0, 32.0), TaskRole("worker", 4, 2, 8.0),
                       TaskRole("chief", 1, 1), TaskRole("evaluator", 1, 1, gang=False))
    # num_gpus: gang GPUs (8 + 1; the evaluator is not in the gang); CPUs, memory: all roles
    assert (j.num_gpus, j.gpus_per_task, j.num_cpus, j.mem_gb, j.disk_gb) == (
        9, 0, 48.0, 64.0, 0.0)
    assert j.completions is None and j.restart_policy == RestartPolicy.NEVER


def test_single_role_fills_the_gang_columns(tmp_path: Path) -> None:
    roles = [{"role": "worker", "count": 4, "gpus": 2, "cpus": 6, "mem_gb": 20,
              "disk_gb": 50}]
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,tasks,num_cpus",
              f"w,0,8,100,{cell(roles)},", f"x,1,8,100,{cell(roles)},24")
    a, b = load_trace(p).jobs
    assert (a.num_gpus, a.gpus_per_task, a.num_tasks, a.num_cpus, a.mem_gb, a.disk_gb) == (
        8, 2, 4, 24.0, 80.0, 50.0)
    assert b.num_cpus == 24.0  # given, and what the roles say


def test_traces_without_the_new_columns_are_unchanged(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration", "a,0,2,10")
    (j,) = load_trace(p).jobs
    assert j == JobSpec("a", 0.0, 2, 10.0)
    assert (j.tasks, j.completions, j.parallelism, j.active_deadline, j.restart_policy,
            j.backoff_limit) == ((), None, 1, None, "Never", 6)
    assert hash(j) == hash(JobSpec("a", 0.0, 2, 10.0))


@pytest.mark.parametrize(("value", "why"), [
    ("[{", "bad JSON: Expecting property name enclosed in double quotes"),
    ("{}", "is not a non-empty JSON list"),
    ("[]", "is not a non-empty JSON list"),
    ('[{"role":"w","count":1,"count":2,"gpus":1}]', "bad JSON: key 'count' is given twice"),
    ('[{"role":"w","gpus":1,"replicas":2}]',
     "role 1: unknown key 'replicas'; keys: role, count, gpus, cpus, mem_gb, disk_gb, gang, "
     "duration"),
    ('[{"count":1,"gpus":1}]', "role 1: role null is not a name of letters, digits"),
    ('[{"role":"a b","gpus":1}]', 'role 1: role "a b" is not a name'),
    ('[{"role":"w","count":0,"gpus":1}]', "role 'w': count 0 is not an integer >= 1 and <= 1e6"),
    ('[{"role":"w","count":1.5,"gpus":1}]', "role 'w': count 1.5 is not an integer >= 1"),
    ('[{"role":"w","gpus":-1}]', "role 'w': gpus -1 is not an integer >= 0 and <= 1e6"),
    ('[{"role":"w","gpus":true}]', "role 'w': gpus true is not an integer >= 0"),
    ('[{"role":"w","gpus":1,"cpus":"8"}]', "role 'w': cpus \"8\" is not a number >= 0"),
    ('[{"role":"w","gpus":1,"mem_gb":1e10}]', "role 'w': mem_gb 1e+10 is not a number >= 0 "
                                               "and <= 1e9"),
    ('[{"role":"w","gpus":1,"duration":0}]', "role 'w': duration 0 is not a number > 0"),
    ('[{"role":"w","gpus":1,"gang":"yes"}]', "role 'w': gang \"yes\" is not true or false"),
    ('[{"role":"w","gpus":1},{"role":"w","gpus":1}]', "role 'w' is given twice"),
    ('[{"role":"e","gpus":1,"gang":false}]', "has no gang role (every role has gang false)"),
    ('[1]', "role 1 is not a JSON object"),
])
def test_bad_tasks_cell(tmp_path: Path, value: str, why: str) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,tasks",
              "a,0,1,10,", f"b,0,1,10,{_q(value)}")
    msg = error_of(p)
    assert msg.startswith("t.csv, row 2 (line 3), column tasks: value "), msg
    assert "is not a JSON list of roles" in msg and why in msg, msg


def _q(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def test_num_gpus_must_be_the_gang_gpu_total(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,tasks", f"tf,0,10,100,{cell(TF)}")
    assert error_of(p).startswith(
        "t.csv, row 1 (line 2), column num_gpus: value '10' is not the gang roles' GPU total "
        "9 of column tasks (sum of count x gpus over roles with gang true)")


@pytest.mark.parametrize(("column", "value", "rule"), [
    ("num_cpus", "10", "is not 48, what column tasks gives (sum of count x cpus over every "
                       "role); leave it empty or give that"),
    ("mem_gb", "1", "is not 64, what column tasks gives (sum of count x mem_gb over every role)"),
    ("gpus_per_task", "1", "is not 0, what column tasks gives (the GPUs per task of the "
                           "gang's GPU roles when they agree, else empty)"),
])
def test_job_level_request_must_agree_with_the_roles(tmp_path: Path, column: str, value: str,
                                                    rule: str) -> None:
    p = write(tmp_path, f"job_id,submit_time,num_gpus,duration,tasks,{column}",
              f"tf,0,9,100,{cell(TF)},{value}")
    msg = error_of(p)
    assert msg.startswith(f"t.csv, row 1 (line 2), column {column}: value '{value}' {rule}"), msg


@pytest.mark.parametrize(("cols", "vals", "column", "value", "rule"), [
    ("completions,parallelism", "5,0", "parallelism", "0", "is not an integer >= 1 and <= 1e6"),
    ("completions,restart_policy", "5,Always", "restart_policy", "Always",
     "is not one of Never, OnFailure"),
    ("completions,restart_policy", "5,onfailure", "restart_policy", "onfailure",
     "is not one of Never, OnFailure"),
    ("completions,backoff_limit", "5,-1", "backoff_limit", "-1",
     "is not an integer >= 0 and <= 1e6"),
    ("completions,active_deadline", "5,0", "active_deadline", "0",
     "is not a number of seconds > 0"),
    ("completions", "0", "completions", "0", "is not an integer >= 1 and <= 1e6"),
    ("parallelism", "2", "parallelism", "2",
     "is set but completions is empty; parallelism applies only to container jobs"),
    ("completions,parallelism", ",3", "parallelism", "3", "is set but completions is empty"),
    ("restart_policy", "OnFailure", "restart_policy", "OnFailure",
     "is set but completions is empty; restart_policy applies only to container jobs"),
    ("active_deadline", "60", "active_deadline", "60", "is set but completions is empty"),
    ("backoff_limit", "2", "backoff_limit", "2", "is set but completions is empty"),
    ("completions,min_gpus", "3,1", "min_gpus", "1",
     "is set on a container job (completions 3); each task run of a container job is one "
     "task of the row's num_gpus"),
    ("completions,gpus_per_task", "3,1", "gpus_per_task", "1", "is set on a container job"),
])
def test_bad_container_cell(tmp_path: Path, cols: str, vals: str, column: str, value: str,
                            rule: str) -> None:
    p = write(tmp_path, f"job_id,submit_time,num_gpus,duration,{cols}",
              "a,0,2,10" + "," * cols.count(",") + ",", f"b,0,2,10,{vals}")
    msg = error_of(p)
    assert msg.startswith(f"t.csv, row 2 (line 3), column {column}: value '{value}' {rule}"), msg


def test_container_job_with_tasks_is_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,tasks,completions",
              f"c,0,9,10,{cell(TF)},3")
    assert "column tasks: value '[{\"role\"" in error_of(p)
    assert "is set on a container job (completions given)" in error_of(p)


def test_container_job_values_and_defaults(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration,completions,parallelism,"
                        "active_deadline,restart_policy,backoff_limit",
              "c,0,1,60,5,2,600,OnFailure,1", "d,0,1,60,4,,,,", "e,0,1,60,,1,,Never,6",
              "f,0,1,60,2,7,,,")  # parallelism > completions is fine
    c, d, e, f = load_trace(p).jobs
    assert (c.completions, c.parallelism, c.active_deadline, c.restart_policy,
            c.backoff_limit, c.is_container) == (5, 2, 600.0, RestartPolicy.ON_FAILURE, 1, True)
    assert (d.completions, d.parallelism, d.active_deadline, d.restart_policy,
            d.backoff_limit) == (4, 1, None, "Never", 6)
    assert not e.is_container and e == JobSpec("e", 0.0, 1, 60.0)
    assert f.parallelism == 7


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_round_trip_csv_and_parquet(tmp_path: Path, suffix: str) -> None:
    t = from_records([
        {"job_id": "tf", "submit_time": 0, "num_gpus": 9, "duration": 100,
         "tasks": json.dumps(TF)},
        {"job_id": "pt", "submit_time": 1, "num_gpus": 4, "duration": 100,
         "tasks": json.dumps([{"role": "master", "count": 1, "gpus": 1, "cpus": 4},
                              {"role": "worker", "count": 3, "gpus": 1, "cpus": 4,
                               "duration": 90.5}])},
        {"job_id": "c", "submit_time": 2, "num_gpus": 1, "duration": 30, "completions": 5,
         "parallelism": 2, "active_deadline": 900, "restart_policy": "OnFailure",
         "backoff_limit": 2},
        {"job_id": "plain", "submit_time": 3, "num_gpus": 2, "duration": 30},
    ])
    out = write_canonical(t, tmp_path / f"out.{suffix}")
    back = read_canonical(out)
    assert back.jobs == t.jobs
    assert [j.tasks for j in back.jobs] == [j.tasks for j in t.jobs]
    if suffix == "parquet":
        df = pd.read_parquet(out)
        assert json.loads(df["tasks"][0])[3] == {"role": "evaluator", "count": 1, "gpus": 1,
                                                 "gang": False}


def test_parse_and_format_are_inverse() -> None:
    roles, why = parse_tasks(json.dumps(TF))
    assert roles is not None and why == ""
    assert parse_tasks(format_tasks(roles)) == (roles, "")
    assert role_totals(roles).num_gpus == 9


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "roles.csv"


def test_bundled_example_has_every_role_kind_and_inspect_reports_them() -> None:
    from schedlab.traces.inspect import format_stats, trace_stats

    t = load_trace(EXAMPLE)
    by = {j.job_id: j for j in t.jobs}
    assert [r.role for r in by["tf-ps"].tasks] == ["ps", "worker", "chief", "evaluator"]
    assert [r.role for r in by["pytorch-ddp"].tasks] == ["master", "worker"]
    assert [r.role for r in by["paddle-ps"].tasks] == ["pserver", "trainer"]
    assert (by["elastic-workers"].min_gpus, by["elastic-workers"].max_gpus) == (2, 8)
    assert (by["container-batch"].completions, by["container-batch"].restart_policy) == (
        5, "OnFailure")
    s = trace_stats(t)
    assert (s.role_jobs, s.container_jobs) == (6, 2)
    assert s.role_kinds == (("worker", 5), ("master", 2), ("chief", 1), ("evaluator", 1),
                            ("ps", 1), ("pserver", 1), ("trainer", 1))
    assert ("task roles: 6 jobs (jobs per role: worker 5, master 2, chief 1, evaluator 1, "
            "ps 1, pserver 1, trainer 1); container jobs: 2") in format_stats(s)
    assert s.as_dict()["role_kinds"]["worker"] == 5
    assert "task roles" not in format_stats(trace_stats(from_records(
        [{"job_id": "a", "submit_time": 0, "num_gpus": 1, "duration": 1}])))


def test_bundled_example_replays_honestly() -> None:
    from schedlab.sim import Simulation, load_topology

    r = Simulation(load_trace(EXAMPLE), load_topology("default"), "fifo", seed=0).run()
    j = r.jobs.set_index("job_id")
    assert dict(j.status) == {
        "tf-ps": "completed", "pytorch-ddp": "completed", "pytorch-master": "completed",
        "paddle-ps": "completed", "workers-only": "completed", "elastic-workers": "completed",
        "container-batch": "completed", "container-never": "completed", "plain": "completed"}
    # container jobs run as task runs (schedlab.sim.containers): 5 runs of 600 s, 2 at once, from
    # 360: 360..960 twice, 960..1560 twice, 1560..2160; 3 runs of 300 s one at a time
    # from 420: 420..1320
    assert (j.end_time["container-batch"], j.gpu_seconds["container-batch"]) == (2160.0,
                                                                                 3000.0)
    assert (j.end_time["container-never"], j.gpu_seconds["container-never"]) == (1320.0,
                                                                                 900.0)
    # a policy without `supports_roles` rejects the jobs of several roles with the reason
    g = Simulation(load_trace(EXAMPLE), load_topology("default"), "gandiva", seed=0).run()
    k = g.jobs.set_index("job_id")
    assert {i for i in k.index if k.reason[i] == "policy gandiva does not support task "
            "roles"} == {"tf-ps", "pytorch-master", "paddle-ps"}


def test_trace_convert_round_trips_the_example(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from schedlab.app.cli_trace import trace as trace_group

    out = tmp_path / "roles.parquet"
    r = CliRunner().invoke(trace_group, ["convert", str(EXAMPLE), str(out)])
    assert r.exit_code == 0, r.output
    assert read_canonical(out).jobs == load_trace(EXAMPLE).jobs
    r = CliRunner().invoke(trace_group, ["inspect", str(EXAMPLE)])
    assert r.exit_code == 0 and "container jobs: 2" in r.output


def test_records_take_role_dicts_or_task_roles() -> None:
    roles = (TaskRole("worker", 2, 1, cpus=2.0),)
    a = from_records([{"job_id": "a", "submit_time": 0, "num_gpus": 2, "duration": 5,
                       "tasks": [{"role": "worker", "count": 2, "gpus": 1, "cpus": 2}]}])
    b = from_records([{"job_id": "a", "submit_time": 0, "num_gpus": 2, "duration": 5,
                       "tasks": list(roles)}])
    assert a.jobs == b.jobs and a.jobs[0].tasks == roles


_role = st.builds(
    TaskRole, role=st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True),
    count=st.integers(1, 64), gpus=st.integers(0, 8),
    cpus=st.sampled_from([0.0, 0.5, 4.0, 12.25]), mem_gb=st.sampled_from([0.0, 29.3, 64.0]),
    disk_gb=st.sampled_from([0.0, 100.0]), gang=st.booleans(),
    duration=st.one_of(st.none(), st.floats(1.0, 1e6)))


@settings(max_examples=40, deadline=None)
@given(st.lists(_role, min_size=1, max_size=5, unique_by=lambda r: r.role))
def test_tasks_round_trip_property(roles: list[TaskRole]) -> None:
    roles[0] = replace(roles[0], gang=True)  # a job needs a gang role
    tasks = tuple(roles)
    assert parse_tasks(format_tasks(tasks)) == (tasks, "")
    totals = role_totals(tasks)
    t = from_records([{"job_id": "j", "submit_time": 0, "num_gpus": totals.num_gpus,
                       "duration": 10, "tasks": format_tasks(tasks)}])
    (j,) = t.jobs
    assert (j.tasks, j.num_gpus, j.num_cpus, j.mem_gb) == (
        tasks, totals.num_gpus, totals.num_cpus, totals.mem_gb)
    # CSV keeps every value exactly
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        assert read_canonical(write_canonical(t, Path(d) / "r.csv")).jobs == t.jobs


def test_parquet_roles_stored_natively(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "n.parquet"
    pq.write_table(pa.table({
        "job_id": ["a", "b"], "submit_time": [0, 1], "num_gpus": [2, 1], "duration": [5.0, 5.0],
        "tasks": [[{"role": "w", "count": 2, "gpus": 1, "gang": None}],
                  [{"role": "c", "count": 1, "gpus": 1, "gang": True},
                   {"role": "e", "count": 1, "gpus": 1, "gang": False}]]}), p)
    a, b = read_canonical(p).jobs
    assert a.tasks == (TaskRole("w", 2, 1),)
    assert b.tasks == (TaskRole("c", 1, 1), TaskRole("e", 1, 1, gang=False))


def test_remap_keeps_role_mixes_and_flattens_a_plain_gang() -> None:
    from schedlab.traces.shaping import remap_job

    t = from_records([
        {"job_id": "tf", "submit_time": 0, "num_gpus": 9, "duration": 100, "tasks": TF},
        {"job_id": "w", "submit_time": 0, "num_gpus": 16, "duration": 100,
         "tasks": [{"role": "worker", "count": 8, "gpus": 2, "cpus": 4}]}])
    tf, w = t.jobs
    assert remap_job(tf, 8) is tf  # not a plain gang: kept (the engine rejects it)
    r = remap_job(w, 8)
    assert (r.tasks, r.num_gpus, r.gpus_per_task, r.duration) == ((), 8, 2, 200.0)
