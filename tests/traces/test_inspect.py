"""Trace statistics, plots, convert, and the `trace` click group."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_trace

from schedlab.app.cli_trace import trace as trace_group
from schedlab.sim.model import JobSpec
from schedlab.topologies.build import uniform_topology
from schedlab.traces import DATA_DIR, read_canonical
from schedlab.traces.inspect import convert, format_stats, plot_stats, size_class, trace_stats

SAMPLES = DATA_DIR / "samples"


def small():
    return make_trace(
        JobSpec("a", 0.0, 1, 3600.0, user="u1", vc="x"),
        JobSpec("b", 10.0, 2, 1800.0, user="u1", vc="x"),
        JobSpec("c", 30.0, 8, 900.0, user="u2", vc="y"),
        JobSpec("d", 3600.0, 1, 600.0, vc="y", gpu_share=0.5),
    )


def test_stats_hand_computed() -> None:
    s = trace_stats(small(), uniform_topology(1, gpus_per_switch=4))
    assert (s.jobs, s.span_s, s.first_submit, s.last_submit) == (4, 3600.0, 0.0, 3600.0)
    assert s.arrival_rate_per_hour == 3.0  # 3 gaps in one hour
    gaps = [10.0, 20.0, 3570.0]
    mean = sum(gaps) / 3
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / 3)
    assert s.interarrival_mean_s == mean and s.interarrival_cv == pytest.approx(sd / mean)
    assert s.interarrival_median_s == 20.0
    assert s.gpus_mix == ((1, 2), (2, 1), (8, 1)) and s.shared_gpu_jobs == 1
    # GPU-hours: 1 + 1 + 2 + 600 s x 0.5 GPU
    assert s.gpu_hours == pytest.approx(4 + 300 / 3600)
    assert dict(s.gpu_hours_by_size) == pytest.approx(
        {"<1": 300 / 3600, "1": 1.0, "2": 1.0, "5-8": 2.0})
    assert (s.users, s.top_users, s.vcs) == (2, (("u1", 2), ("u2", 1)), 2)
    assert s.offered_load == pytest.approx((4 + 300 / 3600) / 1.0 / 4)
    text = format_stats(s)
    for fragment in ("trace inline: 4 jobs", "CV 1.40", "1: 50.0%", "p50 ",
                     "offered load on uniform (4 GPUs): 1.021"):
        assert fragment in text
    assert json.loads(json.dumps(s.as_dict()))["gpus_mix"] == {"1": 2, "2": 1, "8": 1}


def test_size_class() -> None:
    assert [size_class(g) for g in (0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 64, 65)] == [
        "0", "1", "2", "3-4", "3-4", "5-8", "5-8", "9-16", "9-16", "17-64", "17-64", ">64"]
    assert size_class(1, 0.3) == "<1"


def test_static_trace_has_no_load() -> None:
    t = make_trace(("a", 0.0, 1, 10.0), ("b", 0.0, 1, 10.0))
    s = trace_stats(t, uniform_topology(1))
    assert s.offered_load is None and math.isnan(s.arrival_rate_per_hour)
    assert "all jobs arrive at once" in format_stats(s)


def test_plots(tmp_path: Path) -> None:
    paths = plot_stats(small(), tmp_path / "plots")
    assert [p.name for p in paths] == ["inline_sizes.png", "inline_durations.png",
                                       "inline_arrivals.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def test_convert_with_shaping(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    t = convert(SAMPLES / "tiresias_sample.csv", out, window="50:", max_jobs=3)
    assert [j.job_id for j in read_canonical(out).jobs] == ["2", "3", "4"] == \
        [j.job_id for j in t.jobs]
    assert read_canonical(out).jobs[0].submit_time == 3.0


def test_cli_inspect_and_convert(tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(trace_group, ["inspect", str(SAMPLES / "openb_pod_list_sample.csv"),
                                    "--topology", "default", "--plot", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "trace openb_pod_list_sample: 9 jobs" in r.output and "offered load on" in r.output
    assert "jobs share a GPU" in r.output and len(list(tmp_path.glob("*.png"))) == 3
    r = runner.invoke(trace_group, ["inspect", str(SAMPLES / "helios_cluster_log_sample.csv"),
                                    "--json", "--vcs", "vcA"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["jobs"] == 2
    assert "skipped 1 bad or excluded row" in r.stderr
    out = tmp_path / "o.parquet"
    r = runner.invoke(trace_group, ["convert", str(SAMPLES / "nasa_ipsc_sample.swf.gz"),
                                    str(out), "--max-gpus", "32", "--load-scale", "2"])
    assert r.exit_code == 0, r.output
    assert "wrote 13 jobs" in r.output
    assert [j.submit_time for j in read_canonical(out).jobs][:2] == [25574 / 2, 26613 / 2]
    r = runner.invoke(trace_group, ["convert", str(SAMPLES / "nasa_ipsc_sample.swf.gz"),
                                    str(out), "--remap-gpus"])
    assert r.exit_code == 2 and "--remap-gpus needs --topology" in r.stderr
    r = runner.invoke(trace_group, ["convert", str(SAMPLES / "nasa_ipsc_sample.swf.gz"),
                                    str(out), "--remap-gpus", "--topology", "dgx1-v100"])
    assert r.exit_code == 0, r.output
    assert max(j.num_gpus for j in read_canonical(out).jobs) == 8
    r = runner.invoke(trace_group, ["inspect", "nowhere.csv"])
    assert r.exit_code == 2 and "trace file 'nowhere.csv' not found" in r.stderr
    r = runner.invoke(trace_group, ["inspect", "x", "--trace-format", "nope"])
    assert r.exit_code == 2 and "nope" in r.output


def test_cli_convert_to_an_unwritable_place_is_a_clean_error(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    r = CliRunner().invoke(trace_group, ["convert", str(SAMPLES / "tiresias_sample.csv"),
                                         str(blocker / "t.parquet")])
    assert r.exit_code == 2
    assert "cannot write" in r.output and "t.parquet" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
