"""Speed factors are an extension point: a new one is registered, never coded into the engine."""

from __future__ import annotations

import pytest
from conftest import make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec
from schedlab.sim.registry import SPEED_FACTORS
from schedlab.topologies.build import uniform_topology

# --- the whole extension, as a user writes it outside the package (under 30 lines) ---


class HotNode:
    """GPUs of a hot node are throttled: a job touching node 0 runs at 80% speed."""

    name = "hot-node"

    def factor(self, job, gpus, run):
        topo = run.topology
        return 0.8 if any(topo.gpu_node[g] == 0 for g in gpus) else 1.0


# ------------------------------------------------------------------------------------

TWO = uniform_topology(2, gpus_per_switch=2, name="two")
JOBS = make_trace(("a", 0.0, 2, 100.0), ("b", 0.0, 2, 100.0))


def ends(result):
    return result.jobs.set_index("job_id").end_time.to_dict()


@pytest.fixture
def hot_node():
    SPEED_FACTORS.register("hot-node", HotNode)
    yield
    SPEED_FACTORS.unregister("hot-node")


def test_a_registered_factor_slows_the_jobs_it_names(hot_node):
    # a lands on node 0 (100 s of work at 0.8: 125 s), b on node 1 (100 s)
    plain = ends(Simulation(JOBS, TWO, "fifo", params={"placer": "first-fit"}).run())
    hot = ends(Simulation(JOBS, TWO, "fifo", params={"placer": "first-fit",
                                                     "speed_factors": "hot-node"}).run())
    assert plain == {"a": 100.0, "b": 100.0}
    assert hot == {"a": pytest.approx(125.0), "b": 100.0}


def test_a_factor_by_importable_path(tmp_path):
    (tmp_path / "throttle.py").write_text(
        "class Half:\n    name = 'half'\n\n"
        "    def factor(self, job, gpus, run):\n        return 0.5\n")
    sim = Simulation(make_trace(JobSpec("a", 0.0, 1, 10.0)), TWO, "fifo",
                     params={"speed_factors": f"{tmp_path / 'throttle.py'}:Half"})
    assert ends(sim.run()) == {"a": 20.0}


def test_factors_compose_with_the_built_in_chain(hot_node):
    # 2 GPUs across the two nodes (pack spreads): locality 5x and the hot node 0.8
    spread = make_trace(JobSpec("a", 0.0, 4, 100.0))
    r = Simulation(spread, TWO, "fifo", params={"speed_factors": "hot-node",
                                                "placer": "pack"}).run()
    lone = Simulation(spread, TWO, "fifo", params={"placer": "pack"}).run()
    assert ends(r)["a"] == pytest.approx(ends(lone)["a"] / 0.8)


def test_an_unknown_factor_is_a_clear_error():
    with pytest.raises(InvalidParameter, match="speed_factors.*hot-nod"):
        Simulation(JOBS, TWO, "fifo", params={"speed_factors": "hot-nod"})
