"""A user's SimPy processes beside the policy (`schedlab.sim.processes`): drains, node
downs, speed changes; batch and stepped runs agree; a process doing nothing changes
nothing; runs are deterministic."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from conftest import assert_same_run, make_trace

from schedlab.sim.cluster import ClusterState
from schedlab.sim.engine import Simulation
from schedlab.sim.processes import RunHandle
from schedlab.topologies.build import uniform_topology
from schedlab.traces import load_trace

TWO = uniform_topology(2, gpus_per_switch=4, nodes_per_rack=1, name="two")  # node0, node1
FOUR = uniform_topology(4, sockets=2, switches_per_socket=2, gpus_per_switch=2,
                        nodes_per_rack=2, name="four")  # rack0: node0-1, rack1: node2-3


def _times(result: Any) -> dict[str, tuple[float, float]]:
    return {r.job_id: (r.start_time, r.end_time) for r in result.jobs.itertuples()}


def _stepped(sim: Simulation, until: float | None = None) -> Any:
    run = sim.start(until=until)
    while run.advance():
        pass
    return sim.result(run, 0.0)


def maintenance(start: float, hours: float, where: str) -> Any:
    """Drain `where` at `start` for `hours`, every week."""
    def process(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
        yield env.timeout(start)
        while True:
            run.drain(where)
            yield env.timeout(hours * 3600.0)
            run.restore(where)
            yield env.timeout(7 * 86400.0 - hours * 3600.0)
    return process


TRACE = make_trace(("a", 0.0, 4, 10800.0), ("b", 0.0, 4, 1800.0), ("c", 4000.0, 4, 3600.0),
               ("d", 5000.0, 4, 600.0))


def test_a_drain_holds_new_jobs_off_the_node_until_restored() -> None:
    # a and b start at 0, one node each (b on node1); node1 is drained at 1000 to 8200:
    # b runs on to its end at 1800, c (4000) and d (5000) wait; at 8200 node1 is back and
    # c starts there at once; d waits behind c (fifo) until a frees node0 at 10800
    plain = _times(Simulation(TRACE, TWO, "fifo").run())
    assert plain == {"a": (0.0, 10800.0), "b": (0.0, 1800.0), "c": (4000.0, 7600.0),
                     "d": (7600.0, 8200.0)}
    result = Simulation(TRACE, TWO, "fifo", processes=[maintenance(1000.0, 2.0, "rack1")]
                        ).run()
    assert _times(result) == {"a": (0.0, 10800.0), "b": (0.0, 1800.0),
                              "c": (8200.0, 11800.0), "d": (10800.0, 11400.0)}
    assert result.nodes[["time", "node", "kind"]].values.tolist() == [
        [1000.0, "node1", "drain"], [8200.0, "node1", "restore"]]


def test_what_a_process_reads() -> None:
    seen: list[tuple[float, list[str], list[str], list[str]]] = []

    def watch(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
        yield env.timeout(4500.0)
        seen.append((run.now, run.pending(), run.running(), run.nodes("rack1")))
        run.drain("node1")
        assert run.drained() == ["node1"] and run.up("node1")
        run.restore(1)
        assert run.drained() == []
    Simulation(TRACE, TWO, "fifo", processes=[watch]).run()
    assert seen == [(4500.0, [], ["a", "c"], ["node1"])]


def test_take_down_interrupts_and_retries_as_a_failure() -> None:
    # node1 goes down at 1000 (b loses its 1000 s, no checkpoint) and comes back at 3000;
    # b is retried at once (retry_delay 0) and waits for a node: node1 at 3000
    def outage(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
        yield env.timeout(1000.0)
        run.take_down("node1")
        yield env.timeout(2000.0)
        assert not run.up("node1")
        run.bring_up("node1")
    result = Simulation(TRACE, TWO, "fifo", processes=[outage]).run()
    ev = result.events
    b = ev[ev.job_id == "b"][["time", "kind"]].values.tolist()
    assert b[:4] == [[0.0, "submit"], [0.0, "start"], [1000.0, "fail"], [1000.0, "retry"]]
    assert b[4] == [3000.0, "resume"]
    assert _times(result)["b"] == (0.0, 4800.0)
    assert result.nodes[["time", "node", "kind"]].values.tolist() == [
        [1000.0, "node1", "fail"], [3000.0, "node1", "repair"]]
    assert result.summary["node_failures"] == 1


def test_set_speed_moves_completions() -> None:
    # node0 runs at half speed from 3600: a has 7200 s of work left, done at 3600 + 14400
    def slow(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
        yield env.timeout(3600.0)
        run.set_speed("node0", 0.5)
    result = Simulation(TRACE, TWO, "fifo", processes=[slow]).run()
    assert _times(result)["a"] == (0.0, 18000.0)
    with pytest.raises(ValueError, match="> 0"):
        RunHandle.set_speed(None, "node0", 0.0)  # type: ignore[arg-type]


def test_a_drained_node_comes_back_from_a_failure_drained() -> None:
    def both(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
        yield env.timeout(100.0)
        run.drain("node1")
        run.take_down("node1")
        yield env.timeout(100.0)
        run.bring_up("node1")
        yield env.timeout(100.0)
        assert run.up("node1") and run.drained() == ["node1"]
        yield env.timeout(9700.0)
        run.restore("node1")
    result = Simulation(TRACE, TWO, "fifo", processes=[both]).run()
    # b, failed with node1 at 100, waits for it; node1 takes it back only at the restore
    ev = result.events
    assert ev[(ev.job_id == "b") & (ev.kind == "resume")].time.tolist() == [10000.0]
    assert _times(result)["c"] == (10800.0, 14400.0)  # behind b, on node0 once a ends


@pytest.mark.parametrize("policy", ["fifo", "tiresias-las", "gandiva"])
def test_batch_and_stepped_runs_are_the_same(policy: str) -> None:
    trace = load_trace("philly-like:300")

    def chaos(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
        yield env.timeout(5000.0)
        run.take_down("node3")
        run.set_speed("rack0", 0.8)
        yield env.timeout(3000.0)
        run.bring_up("node3")
        run.set_speed("node1", 1.0)
    procs = [maintenance(2000.0, 2.0, "rack1"), chaos]
    batch = Simulation(trace, FOUR, policy, seed=1, processes=procs).run()
    stepped = _stepped(Simulation(trace, FOUR, policy, seed=1, processes=procs))
    assert_same_run(batch, stepped)
    plain = Simulation(trace, FOUR, policy, seed=1).run()
    assert not plain.jobs.equals(batch.jobs)  # the processes changed the run
    assert_same_run(batch, Simulation(trace, FOUR, policy, seed=1, processes=procs).run())  # again


def _idle(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
    yield env.timeout(1.0)
    run.pending()


def _returns(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
    return
    yield


@pytest.mark.parametrize("process", [_idle, _returns])
@pytest.mark.parametrize("until", [None, 20000.0])
def test_a_process_that_does_nothing_changes_nothing(process: Any, until: Any) -> None:
    trace = load_trace("philly-like:300")
    plain = Simulation(trace, FOUR, "tiresias-las", seed=2).run(until=until)
    assert_same_run(plain, Simulation(trace, FOUR, "tiresias-las", seed=2, processes=[process]
                            ).run(until=until))
    assert_same_run(plain, _stepped(Simulation(trace, FOUR, "tiresias-las", seed=2,
                                     processes=[process]), until=until))


def test_a_process_waiting_for_ever_lets_the_run_end() -> None:
    # the drain is never lifted: c and d wait with nothing left to change; once the
    # process waits on an event nobody triggers, the run settles (they are rejected)
    def stuck(env: Any, run: RunHandle) -> Generator[Any, Any, None]:
        yield env.timeout(1000.0)
        run.drain("node1")
        run.drain("node0")
        yield env.event()
    result = Simulation(TRACE, TWO, "fifo", processes=[stuck]).run()
    assert result.jobs.set_index("job_id").loc[["c", "d"], "status"].tolist() == [
        "rejected", "rejected"]


def test_until_ends_a_run_with_a_live_process() -> None:
    result = Simulation(TRACE, TWO, "fifo", processes=[maintenance(1000.0, 2.0, "node1")]
                        ).run(until=5000.0)
    assert result.events.time.max() <= 5000.0
    assert result.jobs.status.tolist() == ["unfinished", "completed", "unfinished",
                                           "unfinished"]


def test_the_sandbox_twin_follows_drains() -> None:
    c = ClusterState(TWO)
    c.allocate(7, (4, 5), 1000)
    with c.sandbox():
        pass  # the twin exists from here: later changes are logged for it
    c.drain_node(1)
    c.release(7, (4, 5), 1000)
    c.allocate(8, (0,), 500)
    with c.sandbox() as twin:
        assert twin.gpu_free == c.gpu_free and twin.free_whole == c.free_whole
        assert twin.busy_milli == c.busy_milli and twin.drained == c.drained
        twin.release(8, (0,), 500)
    c.undrain_node(1)
    assert c.gpu_free == [500] + [1000] * 7 and c.free_whole == 7 and c.busy_milli == 500
    with c.sandbox() as twin:
        assert twin.gpu_free == c.gpu_free and twin.busy_milli == c.busy_milli
    fresh = ClusterState(TWO)
    fresh.allocate(7, (4,), 1000)
    fresh.drain_node(1)
    with fresh.sandbox() as twin:  # a twin cloned while a node is drained
        assert twin.gpu_free == fresh.gpu_free and twin.busy_milli == fresh.busy_milli
        assert twin.jobs_on_node(1) == [7]


def test_processes_must_be_functions() -> None:
    from schedlab.sim.errors import InvalidParameter
    with pytest.raises(InvalidParameter, match="expected a function"):
        Simulation(TRACE, TWO, "fifo", processes=[42])  # type: ignore[list-item]
