"""The `pollux-fit` backend: Pollux's analytic goodput from fitted parameters, by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import Pin, make_trace

from schedlab.sim.engine import Simulation
from schedlab.sim.errors import InvalidParameter
from schedlab.sim.model import JobSpec, Level
from schedlab.sim.perf.base import Shape
from schedlab.sim.perf.pollux_fit import PolluxFitModels
from schedlab.sim.perf.pollux_goodput import GoodputModel, GradParams, PerfParams
from schedlab.topologies.build import uniform_topology

TOPO = uniform_topology(2, gpus_per_switch=4, name="two-by-four")
ROOT = Path(__file__).resolve().parents[3]

# compute 0.1 + 0.01 x atomic batch; all-reduce 0.04 s within a node, 0.1 across;
# gamma 1 (no overlap): a step is compute + all-reduce
MODEL = """models:
  m:
    perf_params: {alpha_c: 0.1, beta_c: 0.01, alpha_n: 0.1, beta_n: 0.0,
                  alpha_r: 0.04, beta_r: 0.0, gamma: 1.0}
    gradient:
      - {from: 0, sqr: 1.0, var: 0.0}
      - {from: 3200, sqr: 1.0, var: 1.0}
    init_batch_size: 32
    max_batch_size: 64
    local_bsz_bounds: [1, 64]
    restart_cost: 0
"""


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    p = tmp_path / "m.yaml"
    p.write_text(MODEL)
    return p


def _run(model_file: Path, job: JobSpec, gpus: tuple[int, ...]):  # type: ignore[no-untyped-def]
    return Simulation(make_trace(job), TOPO, Pin({job.job_id: gpus}),
                      params={"perf_model": f"pollux-fit={model_file}"}).run()


def test_one_gpu_runs_at_batch_over_step_time(model_file: Path) -> None:
    # 1 GPU, batch 32: a step is 0.1 + 0.32 = 0.42 s (no all-reduce): 32 / 0.42 samples/s,
    # efficiency 1 at the initial batch in both segments (var / scale + sqr = sqr + var)
    job = JobSpec("j", 0.0, 1, math.nan, model="m", samples=3000, batch_size=32)
    end = _run(model_file, job, (0,)).jobs.end_time.iloc[0]
    # (Pollux's all-reduce term of one GPU is about 1e-8 s, not 0)
    assert end == pytest.approx(3000 * 0.42 / 32, rel=1e-7)


def test_two_gpus_pay_the_intra_node_all_reduce(model_file: Path) -> None:
    # 2 GPUs of one node, batch 32: 16 each, 0.1 + 0.16 + 0.04 = 0.30 s a step
    job = JobSpec("j", 0.0, 2, math.nan, model="m", samples=3000, batch_size=32)
    end = _run(model_file, job, (0, 1)).jobs.end_time.iloc[0]
    assert end == pytest.approx(3000 * 0.30 / 32, rel=1e-12)
    # over two nodes: the inter-node all-reduce, 0.1 + 0.16 + 0.1 = 0.36 s
    end = _run(model_file, job, (0, 4)).jobs.end_time.iloc[0]
    assert end == pytest.approx(3000 * 0.36 / 32, rel=1e-12)


def test_efficiency_changes_at_the_gradient_segment(model_file: Path) -> None:
    # batch 64 on 2 GPUs: 32 each, a step 0.1 + 0.32 + 0.04 = 0.46 s: 64 / 0.46 samples/s.
    # Efficiency at scale 2: (var + sqr) / (var / 2 + sqr) / 2 = 1/2 until 3,200
    # samples of progress, then (1 + 1) / (1/2 + 1) / 2 = 2/3
    job = JobSpec("j", 0.0, 2, math.nan, model="m", samples=6400, batch_size=64)
    res = _run(model_file, job, (0, 1))
    tput = 64 / 0.46
    first = 3200 / (tput * 0.5)
    second = 3200 / (tput * 2 / 3)
    assert res.jobs.end_time.iloc[0] == pytest.approx(first + second, rel=1e-9)
    rates = res.events[res.events.kind == "rate"]
    assert list(rates.time) == pytest.approx([0.0, first])
    assert [d.split(";")[-1] for d in rates.detail] == ["batch=64", "batch=64"]


def test_adaptive_batch_is_pollux_optimize_choice(model_file: Path) -> None:
    b = PolluxFitModels(model_file)
    perf = PerfParams(0.1, 0.01, 0.1, 0.0, 0.04, 0.0, 1.0)
    for per, nodes in (((1,), 1), ((2,), 1), ((1, 1), 2)):
        shape = Shape("V100", per, Level.NODE if nodes == 1 else Level.CLUSTER)
        for progress, grad in ((0.0, GradParams(1.0, 0.0)), (5000.0, GradParams(1.0, 1.0))):
            want = GoodputModel(perf, grad, 32).optimize(nodes, sum(per), 64, 1, 64, True)
            assert b.best_batch("m", shape, 32, progress) == want.batch_size
            assert b.goodput("m", shape, want.batch_size, progress) == pytest.approx(
                want.goodput, rel=1e-12)


def test_per_type_parameters_and_unknown_type(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text(MODEL.replace(
        "    perf_params: {alpha_c: 0.1, beta_c: 0.01, alpha_n: 0.1, beta_n: 0.0,\n"
        "                  alpha_r: 0.04, beta_r: 0.0, gamma: 1.0}",
        "    perf_params:\n      V100: [0.1, 0.01, 0.1, 0.0, 0.04, 0.0, 1.0]\n"
        "      K80: [0.3, 0.03, 0.1, 0.0, 0.04, 0.0, 1.0]"))
    b = PolluxFitModels(p)
    one = Shape.packed("V100", 1, 4)
    assert b.throughput("m", one, 32) == pytest.approx(32 / 0.42)
    assert b.throughput("m", Shape.packed("K80", 1, 4), 32) == pytest.approx(32 / 1.26)
    assert b.throughput("m", Shape.packed("T4", 1, 4), 32) == 0.0  # no parameters there


@pytest.mark.parametrize(("edit", "message"), [
    (("    init_batch_size: 32\n", ""), r"models\.m: init_batch_size is required"),
    (("gamma: 1.0", "gamma: 20"), r"gamma = 20; allowed: 1 to 10"),
    (("- {from: 3200", "- {from: 0"), r"gradient\[1\]: from = 0 is not after 0"),
    (("    restart_cost: 0\n", "    restart: 0\n"), r"unknown field 'restart'"),
    (("beta_c: 0.01", "beta_c: fast"), r"beta_c = 'fast' is not a number"),
])
def test_bad_file_names_the_field(tmp_path: Path, edit: tuple[str, str], message: str
                                  ) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(MODEL.replace(*edit))
    with pytest.raises(InvalidParameter, match=message) as got:
        PolluxFitModels(p)
    assert str(p) in str(got.value)


def test_bundled_models_load() -> None:
    b = PolluxFitModels(ROOT / "examples" / "pollux-models.yaml")
    assert sorted(b.models()) == ["bert", "cifar10", "deepspeech2", "imagenet", "ncf",
                                  "yolov3"]
    assert all(b.default_work(m) for m in b.models())


def test_rate_series_steps_and_figure(model_file: Path) -> None:
    from schedlab.app.perf_plots import job_rates_figure, rate_series

    job = JobSpec("j", 0.0, 2, math.nan, model="m", samples=6400, batch_size=64)
    res = _run(model_file, job, (0, 1))
    s = rate_series(res.events, "j")
    tput = 64 / 0.46
    assert list(s.goodput) == pytest.approx([tput / 2, tput * 2 / 3, 0.0], rel=1e-5)
    assert list(s.num_gpus) == [2, 2, 0]
    assert list(s.batch) == [64, 64, 64]
    assert job_rates_figure(res.events).axes[0].get_legend() is not None
