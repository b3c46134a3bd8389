"""`check_policy`: the invariants every policy must keep, run over small seeded scenarios.

Like Gymnasium's `check_env`: one function a plugin author runs on their policy, and one
test runs it over every registered policy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from schedlab.policies.base import Policy
from schedlab.sim.errors import InvalidDecision
from schedlab.sim.model import JobSpec, Level, TaskRole
from schedlab.sim.roles import has_roles, role_of, with_tasks
from schedlab.topologies.build import uniform_topology
from schedlab.topologies.tree import Topology
from schedlab.traces.base import Trace

FINAL = {"completed", "failed", "killed", "rejected"}
HOLD = {"start", "resume", "migrate", "resize"}
DROP = {"preempt", "suspend", "finish", "fail", "kill"}


class ConformanceError(AssertionError):
    """A policy broke an invariant; the message says which, for which job and when."""


class InvalidDecisionError(ConformanceError, InvalidDecision):
    """A policy made a decision the engine refused, in a `check_policy` scenario.

    Both a ConformanceError (what `check_policy` documents) and the engine's
    InvalidDecision (what it raised before), so either `except` clause catches it.
    """


def _cells(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, str(text).split(";")):
        node, _, k = part.rpartition(":")
        out[node] = out.get(node, 0) + int(k)
    return out


def _host_node(detail: str) -> str:
    """The node a CPU-only job's start names in its detail ('node=NAME'), or ''."""
    for part in str(detail).split(";"):
        if part.startswith("node="):
            return part[5:]
    return ""


def _holder(job_id: str, detail: str) -> str:
    """Who holds the resources of an event: the job, or its task run (`run=k` detail)."""
    for part in str(detail).split(";"):
        if part.startswith("run="):
            return f"{job_id}#{part[4:]}"
    return job_id


def _task_hosts(s: JobSpec, detail: str) -> dict[str, tuple[float, float, float]] | None:
    """Host asks per node of a job with roles' gang tasks, from 'tasks=ps[0]@node0,...'.

    None when the detail names no tasks.
    """
    for part in str(detail).split(";"):
        if part.startswith("tasks="):
            out: dict[str, list[float]] = {}
            for item in part[6:].split(","):
                task, _, node = item.rpartition("@")
                r = role_of(s, task.rpartition("[")[0])
                if r is None:
                    return None
                v = out.setdefault(node, [0.0, 0.0, 0.0])
                v[0] += r.cpus
                v[1] += r.mem_gb
                v[2] += r.disk_gb
            return {n: (v[0], v[1], v[2]) for n, v in out.items()}
    return None


def _host_ask(s: JobSpec, count: int) -> tuple[float, float, float]:
    """CPUs, memory, disk a job holds on `count` GPUs (the engine's `host_ask`)."""
    f = count / s.num_gpus if s.num_gpus and count != s.num_gpus else 1.0
    return (s.num_cpus * f, s.mem_gb * f, s.disk_gb * s.num_tasks * f)


def check_invariants(result: Any, topology: Topology, trace: Trace,
                     *, finished: bool = True) -> None:
    """Raise ConformanceError when a result breaks an invariant every policy must keep."""
    jobs = result.jobs.set_index("job_id")
    specs = {s.job_id: s for s in trace.jobs}
    bad: list[str] = []
    if finished and (jobs.status == "unfinished").any():
        left = list(jobs.index[jobs.status == "unfinished"])[:5]
        bad.append(f"jobs never reached a final status: {left}")
    silent = jobs[jobs.status.isin(["failed", "killed", "rejected"])
                  & (jobs.reason.fillna("").astype(str) == "")]
    if len(silent):
        bad.append(f"jobs ended without a reason: {list(silent.index[:5])}")
    started = jobs[jobs.start_time.notna()]
    early = started[started.start_time < started.submit_time - 1e-9]
    if len(early):
        bad.append(f"jobs start before submission: {list(early.index[:5])}")
    ended = jobs[jobs.end_time.notna() & jobs.start_time.notna()]
    late = ended[ended.end_time < ended.start_time - 1e-9]
    if len(late):
        bad.append(f"jobs end before they start: {list(late.index[:5])}")
    done = jobs[jobs.status == "completed"]
    for jid, row in done.iterrows():
        spec = specs[jid]
        elastic = spec.min_gpus is not None or spec.max_gpus is not None
        if not spec.gpu_speeds and not elastic and row.run_time < spec.duration - 1e-6:
            bad.append(f"job {jid} completed {spec.duration}s of work in {row.run_time}s")
    # GPU time conserved: what jobs held equals the integral of busy GPUs
    tl = result.timeline
    t = tl.time.to_numpy(dtype=float)
    end = max(float(t[-1]) if len(t) else 0.0, float(jobs.end_time.max() if len(jobs) else 0))
    busy = tl.gpus_busy.to_numpy(dtype=float)
    area = float((np.diff(np.append(t, end)) * busy).sum()) if len(t) else 0.0
    held = float(jobs.gpu_seconds.sum())
    if abs(area - held) > 1e-6 * max(1.0, held):
        bad.append(f"GPU-time not conserved: jobs held {held:.6f} GPU-s, "
                   f"timeline shows {area:.6f}")
    if (tl.gpus_busy > tl.gpus_total + 1e-9).any():
        bad.append("more GPUs busy than the cluster has")
    # per node: never more than its GPUs, CPUs, memory or disk (capacity 0: not modelled),
    # never while failed; every start holds its gang
    cap = {n.name: n.num_gpus * 1000 for n in topology.nodes}
    use = dict.fromkeys(cap, 0)
    host_cap = {n.name: (n.num_cpus, n.mem_gb, n.disk_gb) for n in topology.nodes}
    host_use = {n: [0.0, 0.0, 0.0] for n in host_cap}
    host_holding: dict[str, dict[str, tuple[float, float, float]]] = {}

    def host_drop(job: str) -> None:
        for node, v in host_holding.pop(job, {}).items():
            for r in range(3):
                host_use[node][r] -= v[r]

    def host_take(ev: Any, job: str, per_node: dict[str, tuple[float, float, float]]
                  ) -> None:
        host_holding[job] = per_node
        for node, v in per_node.items():
            for r, what in enumerate(("CPUs", "memory", "disk")):
                host_use[node][r] += v[r]
                c = host_cap[node][r]
                if c > 0 and host_use[node][r] > c + 1e-6:
                    bad.append(f"t={ev.time}: node {node} {what} over-committed by {job} "
                               f"({host_use[node][r]:g} of {c:g})")
                    return
    down: set[str] = set()
    holding: dict[str, dict[str, int]] = {}
    nodes = getattr(result, "nodes", None)
    node_events = [] if nodes is None else list(nodes.itertuples())
    k = 0
    for i, ev in enumerate(result.events.itertuples()):
        while k < len(node_events) and node_events[k].event_index <= i:
            ne = node_events[k]
            k += 1
            if ne.kind == "fail":
                if use[ne.node] or any(ne.node in h for h in host_holding.values()):
                    bad.append(f"t={ne.time}: node {ne.node} failed with jobs still on it")
                down.add(ne.node)
            else:
                down.discard(ne.node)
        s = specs.get(ev.job_id)
        if s is None or str(ev.detail).startswith("task="):
            # a non-gang task's own start: the engine's cluster state guards its GPUs
            # (its end has no event of its own), so its job's gang is checked alone
            continue
        who = _holder(ev.job_id, ev.detail)
        milli = 1000 if s.gpu_share >= 1 else round(s.gpu_share * 1000)
        if ev.kind in HOLD and str(ev.detail).startswith(("timeshare", "pack")):
            # joins GPUs a running job holds (time-slicing or packing): the cluster state
            # guards their capacity; here only the gang size is checked
            holding.pop(who, None)
            host_drop(who)
            count = sum(_cells(ev.cells).values())
            if count != s.num_gpus and s.min_gpus is None and s.max_gpus is None:
                bad.append(f"t={ev.time}: {ev.job_id} shares {count} of {s.num_gpus} GPUs")
            continue
        if ev.kind in HOLD:
            prev = holding.pop(who, {})
            for node, n in prev.items():
                use[node] -= n * milli
            cells = _cells(ev.cells)
            count = sum(cells.values())
            host_drop(who)
            ask = _host_ask(s, count)
            per_task = _task_hosts(s, ev.detail) if s.tasks and has_roles(s) else None
            if s.tasks and has_roles(s) and ev.kind in ("start", "resume") and (
                    per_task is None):
                bad.append(f"t={ev.time}: {ev.kind} of {ev.job_id} (task roles) names no "
                           "tasks")
            if per_task is not None:
                host_take(ev, who, per_task)
            elif count:
                host_take(ev, who, {
                    nd: (ask[0] * k / count, ask[1] * k / count, ask[2] * k / count)
                    for nd, k in cells.items()})
            elif _host_node(ev.detail):
                node = _host_node(ev.detail)
                if node in down:
                    bad.append(f"t={ev.time}: {ev.job_id} placed on failed node {node}")
                host_take(ev, who, {node: ask})
            elif any(v > 0 for v in ask) and ev.kind in ("start", "resume"):
                bad.append(f"t={ev.time}: CPU-only {ev.job_id} asks for host resources "
                           "and holds no node")
            lo = s.min_gpus or s.num_gpus
            hi = s.max_gpus or s.num_gpus
            if not lo <= count <= hi:
                bad.append(f"t={ev.time}: {ev.kind} of {ev.job_id} holds {count} GPUs, "
                           f"allowed {lo}..{hi} (gang broken)")
            for node, n in cells.items():
                use[node] += n * milli
                if use[node] > cap[node]:
                    bad.append(f"t={ev.time}: node {node} over-committed by {ev.job_id}")
                if node in down:
                    bad.append(f"t={ev.time}: {ev.job_id} placed on failed node {node}")
            holding[who] = cells
        elif ev.kind in DROP:
            for node, n in holding.pop(who, {}).items():
                use[node] -= n * milli
            host_drop(who)
    # dependencies: nobody starts before all it depends on completed
    for jid, row in started.iterrows():
        for dep in specs[jid].depends_on:
            if dep not in jobs.index or jobs.loc[dep, "status"] != "completed":
                bad.append(f"{jid} started though its dependency {dep} did not complete")
            elif jobs.loc[dep, "end_time"] > row.start_time + 1e-9:
                bad.append(f"{jid} started at {row.start_time} before {dep} ended")
    if bad:
        raise ConformanceError("; ".join(bad[:10]))


def scenarios(seed: int = 0) -> list[tuple[str, Topology, Trace]]:
    """Small seeded traces on three shapes of cluster, exercising gangs and sharing."""
    rng = np.random.default_rng(seed)
    topos = [
        uniform_topology(1, gpus_per_switch=4, name="one-node"),
        uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2, name="dgx2"),
        uniform_topology(4, switches_per_socket=2, gpus_per_switch=2, nodes_per_rack=2,
                         name="racks"),
    ]
    out = []
    for topo in topos:
        jobs = []
        t = 0.0
        for i in range(40):
            t += float(rng.exponential(20.0))
            g = int(rng.choice([0, 1, 1, 1, 2, 4, 8]))
            g = min(g, topo.num_gpus)
            share = 0.5 if g == 1 and rng.random() < 0.2 else 1.0
            tasks = 2 if g >= 4 and rng.random() < 0.3 else 1
            jobs.append(JobSpec(
                f"j{i}", round(t, 3), g, float(rng.integers(5, 300)),
                user=f"u{int(rng.integers(0, 3))}", vc=f"vc{int(rng.integers(0, 2))}",
                gpu_share=share, gpus_per_task=g // tasks if g else 0,
                checkpoint_interval=60.0 if rng.random() < 0.5 else None,
            ))
        out.append((topo.name, topo, Trace(f"conformance-{topo.name}", tuple(jobs))))
    # lifecycle: a DAG, retries, lifetimes and elastic jobs on nodes that fail
    topo = uniform_topology(3, switches_per_socket=2, gpus_per_switch=2, name="lifecycle")
    jobs = []
    t = 0.0
    for i in range(40):
        t += float(rng.exponential(15.0))
        g = int(rng.choice([0, 1, 2, 4]))
        deps = tuple(sorted({f"k{int(d)}" for d in rng.integers(0, i, size=2)})) \
            if i > 2 and rng.random() < 0.3 else ()
        elastic = g >= 2 and rng.random() < 0.4
        jobs.append(JobSpec(
            f"k{i}", round(t, 3), g, float(rng.integers(20, 400)), user=f"u{i % 3}",
            depends_on=deps,
            min_gpus=1 if elastic else None, max_gpus=g + 2 if elastic else None,
            fail_at=float(rng.integers(10, 200)) if rng.random() < 0.15 else None,
            max_retries=int(rng.integers(0, 3)),
            max_lifetime=300.0 if rng.random() < 0.1 else None,
            checkpoint_interval=50.0 if rng.random() < 0.5 else None,
        ))
    out.append((topo.name, topo, Trace("conformance-lifecycle", tuple(jobs))))
    out.append(_vc_scenario(rng))
    out.append(_host_scenario(rng))
    out.append(_roles_scenario(rng))
    out.append(_container_scenario(rng))
    return out


def _roles_scenario(rng: np.random.Generator) -> tuple[str, Topology, Trace]:
    """Jobs of roles among plain gangs, on two 8-GPU nodes with 32 CPUs each.

    TensorFlow ps/worker/chief(/evaluator, not in the gang), PyTorch master + workers.
    """
    topo = uniform_topology(2, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                            num_cpus=32.0, mem_gb=256.0, name="roles")
    jobs = []
    t = 0.0
    for i in range(24):
        t += float(rng.exponential(20.0))
        base = JobSpec(f"r{i}", round(t, 3), 0, float(rng.integers(10, 300)),
                       user=f"u{i % 3}", vc=f"vc{i % 2}",
                       checkpoint_interval=60.0 if rng.random() < 0.5 else None)
        kind = int(rng.integers(0, 3))
        if kind == 0:  # TensorFlow
            roles = [TaskRole("ps", int(rng.integers(1, 3)), 0, cpus=float(rng.choice([2, 8])),
                              mem_gb=16.0),
                     TaskRole("worker", int(rng.integers(1, 4)), int(rng.choice([1, 2])),
                              cpus=4.0),
                     TaskRole("chief", 1, 1, cpus=2.0)]
            if rng.random() < 0.5:
                dur = float(rng.integers(5, 100)) if rng.random() < 0.5 else None
                roles.append(TaskRole("evaluator", 1, 1, gang=False, duration=dur))
            jobs.append(with_tasks(base, tuple(roles)))
        elif kind == 1:  # PyTorch master + workers
            roles = [TaskRole("master", 1, 1, cpus=4.0),
                     TaskRole("worker", int(rng.integers(1, 4)), int(rng.choice([2, 4])),
                              cpus=4.0)]
            jobs.append(with_tasks(base, tuple(roles)))
        else:
            g = int(rng.choice([1, 2, 4, 8]))
            jobs.append(JobSpec(base.job_id, base.submit_time, g, base.duration,
                                user=base.user, vc=base.vc, num_cpus=2.0 * g,
                                checkpoint_interval=base.checkpoint_interval))
    return topo.name, topo, Trace("conformance-roles", tuple(jobs))


def _container_scenario(rng: np.random.Generator) -> tuple[str, Topology, Trace]:
    """Container jobs (task runs, both restart policies, deadlines) among plain gangs."""
    from schedlab.sim.model import RestartPolicy

    topo = uniform_topology(2, switches_per_socket=2, gpus_per_switch=2, name="containers")
    jobs = []
    t = 0.0
    for i in range(30):
        t += float(rng.exponential(20.0))
        g = int(rng.choice([0, 1, 1, 2, 4]))
        ckpt = 40.0 if rng.random() < 0.5 else None
        if rng.random() < 0.5:
            failing = rng.random() < 0.5
            jobs.append(JobSpec(
                f"c{i}", round(t, 3), g, float(rng.integers(10, 120)), user=f"u{i % 3}",
                vc=f"vc{i % 2}", checkpoint_interval=ckpt,
                completions=int(rng.integers(1, 6)), parallelism=int(rng.integers(1, 4)),
                restart_policy=RestartPolicy.ON_FAILURE if rng.random() < 0.5
                else RestartPolicy.NEVER,
                backoff_limit=int(rng.integers(0, 3)),
                active_deadline=float(rng.integers(100, 600)) if rng.random() < 0.3 else None,
                fail_at=float(rng.integers(5, 60)) if failing else None,
                extra=(("failed_runs", int(rng.integers(1, 3))),) if failing else (),
            ))
        else:
            jobs.append(JobSpec(
                f"p{i}", round(t, 3), g, float(rng.integers(10, 200)), user=f"u{i % 3}",
                vc=f"vc{i % 2}", checkpoint_interval=ckpt, gpus_per_task=g // 2 if g >= 4
                else 0))
    return topo.name, topo, Trace("conformance-containers", tuple(jobs))


def _host_scenario(rng: np.random.Generator) -> tuple[str, Topology, Trace]:
    """CPUs, memory and disk asked on ethernet nodes and a CPU-only node, with gangs."""
    from schedlab.topologies.native import node_cell
    from schedlab.topologies.tree import CellSpec

    attrs = {"gpu_type": "V100", "num_cpus": 16.0, "mem_gb": 64.0, "gpu_mem_gb": 0.0,
             "disk_gb": 100.0, "interconnect": "ethernet"}
    nodes = [node_cell(f"node{i}", attrs, 1, 2, 2) for i in range(2)]
    nodes.append(node_cell("node2", {**attrs, "gpu_type": ""}, 1, 1, 0))
    topo = Topology("host", CellSpec(Level.CLUSTER, "host", nodes))
    jobs = []
    t = 0.0
    for i in range(40):
        t += float(rng.exponential(15.0))
        g = int(rng.choice([0, 0, 1, 2, 4, 8]))
        tasks = 2 if g >= 2 and rng.random() < 0.4 else 1
        jobs.append(JobSpec(
            f"h{i}", round(t, 3), g, float(rng.integers(10, 300)), user=f"u{i % 3}",
            vc=f"vc{i % 2}", gpus_per_task=g // tasks if g else 0,
            num_cpus=float(rng.choice([0, 2, 4, 8, 16])),
            mem_gb=float(rng.choice([0, 8, 32])), disk_gb=float(rng.choice([0, 20, 60])),
            # spans over ethernet run up to 12.5x slower: without checkpoints, policies
            # that preempt every round (gavel, stop=preempt) would never finish them
            checkpoint_interval=float(rng.choice([30.0, 60.0])),
        ))
    return topo.name, topo, Trace("conformance-host", tuple(jobs))


def _vc_scenario(rng: np.random.Generator) -> tuple[str, Topology, Trace]:
    """Two tenants' virtual clusters (HiveD cells) on two nodes, jobs of both VCs."""
    from schedlab.topologies.native import native_from_dict

    topo = native_from_dict({
        "name": "vcs",
        "nodes": [{"count": 2, "sockets": 1, "switches_per_socket": 2, "gpus_per_switch": 2}],
        "vcs": {"vc0": {"node": 1}, "vc1": {"switch": 1, "gpu": 2}},
    }, "<conformance vcs>")
    jobs = []
    t = 0.0
    for i in range(30):
        t += float(rng.exponential(25.0))
        g = int(rng.choice([1, 1, 2, 4]))
        jobs.append(JobSpec(
            f"v{i}", round(t, 3), g, float(rng.integers(20, 300)), user=f"u{i % 2}",
            vc=f"vc{int(rng.integers(0, 2))}", priority=int(rng.choice([0, 0, 1])),
            checkpoint_interval=60.0 if rng.random() < 0.5 else None,
        ))
    return topo.name, topo, Trace("conformance-vcs", tuple(jobs))


# engine parameters per scenario (node failures for the lifecycle one)
SCENARIO_PARAMS: dict[str, dict[str, Any]] = {
    "lifecycle": {"mtbf": 1500.0, "mttr": 200.0, "retry_delay": 5.0},
    "containers": {"mtbf": 3000.0, "mttr": 150.0, "failure_rate": 3.0},
}


def compositions() -> list[tuple[str, dict[str, Any]]]:
    """Every (policy, params) that composes a registered policy with another's ordering."""
    from schedlab.policies.registry import orderings, policy_class, registered_policies

    out: list[tuple[str, dict[str, Any]]] = []
    for name in registered_policies():
        param = policy_class(name).ordering_param
        if param:
            out.extend((name, {param: o}) for o in orderings())
    return out


def _watch(policy: Any) -> list[Any]:
    """Keep the decision a policy yielded last (the engine applies each as it comes).

    A policy whose `schedule` cannot be replaced (a compiled class) is not watched.
    """
    seen: list[Any] = []
    inner = policy.schedule

    def schedule(ctx: Any) -> Any:
        for d in inner(ctx):
            seen[:] = [d]
            yield d

    try:
        policy.schedule = schedule
    except (AttributeError, TypeError):
        pass
    return seen


def check_policy(policy: str | Callable[[], Policy], *, seed: int = 0,
                 params: dict[str, Any] | None = None, repeat: bool = True) -> None:
    """Run a policy (name or factory) over the scenarios; raise ConformanceError on a breach.

    A decision the engine refuses raises InvalidDecisionError (a ConformanceError and an
    InvalidDecision) naming the scenario, the policy, the job and the decision.

    Checks every invariant of `check_invariants` and (`repeat`, the default) that the
    same seed gives identical jobs and events tables.
    Engine parameters (e.g. `placer`) and policy parameters both go in `params`.
    """
    from schedlab.policies.registry import make_policy
    from schedlab.sim.engine import Simulation

    def fresh() -> Policy | str:
        return policy if isinstance(policy, str) else policy()

    if isinstance(policy, str):
        make_policy(policy)  # fails early, with did-you-mean, on an unknown name
    for name, topo, trace in scenarios(seed):
        run_params = {**SCENARIO_PARAMS.get(name, {}), **(params or {})}
        try:
            a = Simulation(trace, topo, fresh(), seed=seed, params=run_params).run()
        except InvalidDecision as e:
            # the same seed makes the same decision again: watched, it is named
            sim = Simulation(trace, topo, fresh(), seed=seed, params=run_params)
            seen = _watch(sim.policy)
            try:
                sim.run()
            except InvalidDecision:
                pass
            d = seen[0] if seen else None
            what = f"{type(d).__name__} of job {d.job_id!r} ({d!r})" if d is not None \
                else "a decision"
            raise InvalidDecisionError(
                f"scenario {name}: policy {sim.policy.name!r} made an invalid decision, "
                f"{what}: {e}") from None
        try:
            check_invariants(a, topo, trace)
        except ConformanceError as e:
            raise ConformanceError(f"scenario {name}: {e}") from None
        if not repeat:
            continue
        b = Simulation(trace, topo, fresh(), seed=seed, params=run_params).run()
        if not a.jobs.equals(b.jobs) or not a.events.equals(b.events):
            raise ConformanceError(f"scenario {name}: same seed, different results")
