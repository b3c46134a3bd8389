"""Pollux application profiles: interpolation on a tiny profile, errors, Pollux's answers."""

from __future__ import annotations

import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from schedlab.sim.perf.pollux_goodput import GradParams
from schedlab.sim.perf.pollux_profiles import (
    POLLUX_APPLICATIONS,
    InvalidProfile,
    load_profile,
    placement_key,
)


def linear(n: float, r: float, b: float) -> tuple[float, float]:
    """Step and sync time linear in (nodes, replicas, local bsz): interpolation is exact."""
    return 0.1 + 0.01 * n + 0.02 * r + 0.001 * b, 0.05 + 0.002 * n + 0.003 * r


def write_profile(root: Path, name: str = "tiny") -> Path:
    d = root / name
    d.mkdir()
    rows = ["placement,local_bsz,step_time,sync_time"]
    for placement in ("1", "2", "11", "12"):
        n, r = len(placement), sum(map(int, placement))
        for b in (8, 16):
            step, sync = linear(n, r, b)
            rows.append(f"{placement},{b},{step!r},{sync!r}")
    (d / "placements.csv").write_text("\n".join(rows) + "\n")
    rows = ["num_nodes,num_replicas,local_bsz,step_time,sync_time"]
    for n in (3, 4, 16):
        for r in (n, 2 * n, 4 * n):
            for b in (8, 16):
                step, sync = linear(n, r, b)
                rows.append(f"{n},{r},{b},{step!r},{sync!r}")
    (d / "scalability.csv").write_text("\n".join(rows) + "\n")
    (d / "validation-8.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n"
        "100,100,0.5,4.0,1.0\n200,200,0.6,2.0,2.0\n300,300,0.7,1.0,3.0\n")
    (d / "validation-32.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n"
        "90,25,0.4,8.0,2.0\n210,50,0.6,4.0,6.0\n280,75,0.7,2.0,9.0\n")
    return d


def test_defaults_from_the_files(tmp_path):
    p = load_profile(write_profile(tmp_path))
    assert (p.init_batch_size, p.max_batch_size, p.min_local_bsz, p.max_local_bsz,
            p.max_epochs) == (8, 32, 8, 16, 3)
    assert p.batch_sizes == (8, 32)
    assert p.completion_epoch(8) == 2  # no target metric: max_epochs - 1
    q = load_profile(write_profile(tmp_path, "bert"))  # Pollux's APPLICATIONS: 2 epochs
    assert q.max_epochs == POLLUX_APPLICATIONS["bert"].max_epochs == 2
    assert POLLUX_APPLICATIONS["yolov3"].max_local_bsz == 8
    r = load_profile(write_profile(tmp_path, "x"), max_batch_size=16, max_epochs=1)
    assert (r.max_batch_size, r.max_epochs) == (16, 1)


def test_placement_key_rotates_and_drops_empty_nodes():
    assert placement_key((2, 1)) == (1, 2)
    assert placement_key((0, 2, 0, 1, 1)) == (1, 1, 2)
    assert placement_key((3, 1, 2)) == (1, 2, 3)
    assert placement_key(()) == ()


def test_step_time_of_measured_placements(tmp_path):
    p = load_profile(write_profile(tmp_path))
    # placement 2 at local bsz 12: halfway between its rows at 8 and 16 (linear in b)
    assert p.step_time((2,), 12) == pytest.approx(linear(1, 2, 12), rel=1e-12)
    # (2, 1) is measured as its smallest rotation 12; an empty node is dropped
    assert p.step_time((2, 1), 16) == pytest.approx(linear(2, 3, 16), rel=1e-12)
    assert p.step_time((0, 1, 0, 1), 10) == pytest.approx(linear(2, 2, 10), rel=1e-12)
    with pytest.raises(ValueError, match="outside its measured range"):
        p.step_time((1,), 20)
    with pytest.raises(ValueError, match="has no GPU"):
        p.step_time((0,), 8)


def test_step_time_of_other_placements_interpolates(tmp_path):
    p = load_profile(write_profile(tmp_path))
    # (2, 2, 1): 3 nodes, 5 GPUs, not measured: linear over (nodes, replicas, bsz) of the
    # placement means and scalability.csv, exact for times linear in them
    assert p.step_time((2, 2, 1), 10) == pytest.approx(linear(3, 5, 10), rel=1e-9)
    # 20 nodes are looked up as 16 (Pollux's cap)
    assert p.step_time((1,) * 20, 12) == pytest.approx(linear(16, 20, 12), rel=1e-9)
    with pytest.raises(ValueError, match="outside the profiled configurations"):
        p.step_time((2, 2, 1), 20)  # local bsz 20: beyond every measurement


def test_grad_stats_progress_and_epochs(tmp_path):
    p = load_profile(write_profile(tmp_path))
    # batch 20 in epoch 1: between 8 (sqr 2, var 2) and 32 (sqr 4, var 6), 12/24 of the way
    assert p.grad_stats(20, 1) == GradParams(3.0, 4.0)
    assert p.grad_stats(32, 2) == GradParams(2.0, 9.0)
    assert p.iteration(14, 0) == (6 * 25 + 18 * 100) / 24
    # progress at the start of epoch e: the least of the files' progress after e - 1
    assert [p.progress(e) for e in range(4)] == [0.0, 90.0, 200.0, 280.0]
    # the epoch of a progress: the greatest over the files
    assert [p.epoch(x) for x in (0.0, 95.0, 100.0, 205.0, 290.0, 400.0)] == [0, 1, 1, 2, 3, 3]
    with pytest.raises(ValueError, match="outside the validated ones"):
        p.grad_stats(40, 0)
    with pytest.raises(ValueError, match="epoch 3 is outside 0..2"):
        p.grad_stats(8, 3)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: (d / "scalability.csv").unlink(), "scalability.csv: missing"),
    (lambda d: (d / "placements.csv").write_text("placement,local_bsz,step_time\n1,8,0.1\n"),
     "placements.csv: missing column sync_time"),
    (lambda d: (d / "validation-8.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n1,1,0.5,x,1\n"),
     "validation-8.csv: line 2, column grad_sqr: value 'x' is not a finite number"),
    (lambda d: (d / "validation-big.csv").write_text("progress\n1\n"),
     "validation-big.csv: name is not validation-<batch size>.csv"),
    (lambda d: (d / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n102,8,0.1,0.01\n"),
     "placements.csv: line 2, column placement: value 102 is not a placement"),
    (lambda d: (d / "validation-8.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n5,1,0.5,1,1\n3,2,0.5,1,1\n"),
     "validation-8.csv: line 3, column progress: value 3 is below the line before"),
])
def test_bad_files_say_which_and_why(tmp_path, edit, message):
    d = write_profile(tmp_path)
    edit(d)
    with pytest.raises(InvalidProfile, match="^.*" + message.replace("(", r"\(")) as err:
        load_profile(d)
    assert "\n" not in str(err.value)


def test_bad_directory_and_settings(tmp_path):
    with pytest.raises(InvalidProfile, match="is not a directory"):
        load_profile(tmp_path / "nope")
    with pytest.raises(InvalidProfile, match="max_epochs 5 is not in 1..3"):
        load_profile(write_profile(tmp_path), max_epochs=5)


# ---- Pollux's own answers on its profiles ------------------------------------------------
# Computed by petuum/adaptdl's simulator/applications.py (osdi21-artifact) with numpy
# 1.23.5, pandas 1.5.3 (read_csv float_precision="round_trip": pandas 1.x's default float
# parser is 1 ulp off on some cells, which moves some answers by an ulp), scipy 1.10.1.
MIRROR = Path("/work/.mirror/petuum+adaptdl/repo")

POLLUX_STEP = [
    ('cifar10', (1,), 100, 0.08253016032670674, 0.0005246517907632024),
    ('cifar10', (2, 1), 64, 0.17025303840637207, 0.11205555114746091),
    ('bert', (1, 1, 2, 4), 6, 1.457910105586052, 0.9360682945251465),
    ('bert', (4, 2, 1, 1), 7.5, 1.47713016346097, 0.8559489879608154),
    ('imagenet', (3, 3, 3, 3, 3, 3, 3), 150, 0.8046554431319237, 0.07534188232024511),
    ('yolov3', (2, 0, 2), 5, 1.2402832061052322, 0.8879225444793701),
]
# (deepspeech2 (1,) * 6 at 30 -> (1.0053573300441105, 0.15053752760092418), cifar10
# (4,) * 5 at 128 -> (0.18352501455106235, 0.07563238503305536), (2,) * 20 at 64 ->
# (0.28031680583953855, 0.22089264221191404) and ncf (4,) * 8 at 500 ->
# (0.03268249739540948, 0.024230908338193538) agree too; left out for time: each builds a
# triangulation of 700-1000 points)
POLLUX_GRAD = [
    ('cifar10', 128, 0, 8.947307535897329, 5.066593295150894),
    ('cifar10', 300, 7, 0.22813053442307296, 1.827145283631287),
    ('imagenet', 1000, 10, 0.13971547536190665, 5.169978087767365),
    ('yolov3', 100, 3, 1002.5711641792202, 29843.70258394935),
    ('bert', 12, 1, 408336357954.4091, 38257633123936.53),
    ('ncf', 20000, 9, 1014.0270824301668, 163851010.62094617),
]
POLLUX_ITERATION = [
    ('cifar10', 300, 7, 1885.46875), ('imagenet', 1000, 10, 17861.25),
    ('yolov3', 100, 3, 1236.4375), ('ncf', 20000, 9, 2733.310546875),
]
POLLUX_PROGRESS = [
    ('cifar10', 0, 0.0), ('cifar10', 5, 1953.7368217515561), ('imagenet', 90, 576525.594895604),
    ('bert', 2, 14774.0), ('yolov3', 17, 35171.0),
]
POLLUX_EPOCH = [('cifar10', 0.0, 0), ('cifar10', 5000.0, 12), ('imagenet', 1000000.0, 90),
                ('yolov3', 123.4, 0)]
# init bsz, max bsz, min local bsz, max local bsz, max_epochs, completion epoch
POLLUX_META = {
    'bert': (12, 384, 4, 12, 2, 1),
    'cifar10': (128, 4096, 32, 1024, 100, 99),
    'ncf': (256, 32768, 32, 32768, 10, 9),
    'imagenet': (200, 12800, 20, 200, 90, 89),
    'deepspeech2': (20, 640, 10, 80, 80, 79),
    'yolov3': (8, 512, 4, 8, 50, 49),
}


@pytest.fixture(scope="module")
def pollux_traces(tmp_path_factory):
    if not MIRROR.is_dir():
        pytest.skip("no petuum/adaptdl mirror on this machine")
    out = subprocess.run(["git", f"--git-dir={MIRROR}", "archive", "osdi21-artifact",
                          "simulator/traces"], capture_output=True, check=False)
    if out.returncode != 0:
        pytest.skip("the mirror has no osdi21-artifact branch")
    root = tmp_path_factory.mktemp("pollux")
    with tarfile.open(fileobj=BytesIO(out.stdout)) as tar:
        tar.extractall(root, filter="data")
    return root / "simulator" / "traces"


def test_profiles_equal_pollux(pollux_traces):
    pollux_traces = {name: load_profile(pollux_traces / name) for name in POLLUX_META}
    for name, meta in POLLUX_META.items():
        p = pollux_traces[name]
        assert (p.init_batch_size, p.max_batch_size, p.min_local_bsz, p.max_local_bsz,
                p.max_epochs, p.completion_epoch(p.init_batch_size)) == meta, name
    for name, placement, bsz, step, sync in POLLUX_STEP:
        assert pollux_traces[name].step_time(placement, bsz) == (step, sync), name
    for name, bsz, epoch, sqr, var in POLLUX_GRAD:
        assert pollux_traces[name].grad_stats(bsz, epoch) == GradParams(sqr, var), name
    for name, bsz, epoch, it in POLLUX_ITERATION:
        assert pollux_traces[name].iteration(bsz, epoch) == it, name
    for name, epoch, progress in POLLUX_PROGRESS:
        assert pollux_traces[name].progress(epoch) == progress, name
    for name, progress, epoch in POLLUX_EPOCH:
        assert pollux_traces[name].epoch(progress) == epoch, name


def test_progress_rate_by_hand(tmp_path):
    p = load_profile(write_profile(tmp_path))
    # placement (1, 1) at atomic 10 with 1 accumulation step, epoch 1: batch 2 * 10 * 2 = 40
    # is above the largest validated 32, so use atomic 8 with 1 step: batch 32 (sqr 4, var 6),
    # scale 32 / 8 = 4, gain = (6 + 4) / (6 / 4 + 4) = 10 / 5.5; step, sync = linear(2, 2, 8);
    # rate = gain / (step + 1 * (step - sync))
    step, sync = linear(2, 2, 8)
    assert p.progress_rate((1, 1), 8, 1, 1) == pytest.approx(
        (10 / 5.5) / (step + (step - sync)), rel=1e-12)
    with pytest.raises(ValueError, match="outside the validated ones"):
        p.progress_rate((1, 1), 10, 1, 1)


# Pollux's Job.update_local_bsz (fixed target batch) and Job.step's goodput formula, run on
# its profiles (simulator.py, same versions as above): (model, batch, placement, epoch,
# atomic_bsz, accum_steps, progress per second)
POLLUX_JOBS = [
    ('cifar10', 2048, (4, 2), 3, 342, 0, 19.702871207768784),
    ('bert', 384, (2,), 1, 12, 15, 2.2396472949997226),
    ('yolov3', 512, (1,), 4, 8, 63, 1.191860433809871),
]


def test_fixed_batch_jobs_progress_as_pollux(pollux_traces):
    from schedlab.sim.perf.pollux_goodput import cap_atomic_bsz, split_batch

    for name, batch, placement, epoch, atomic, accum, rate in POLLUX_JOBS:
        p = load_profile(pollux_traces / name)
        got = split_batch(batch, sum(placement), p.init_batch_size, p.max_local_bsz)
        got = (cap_atomic_bsz(got[0], got[1], sum(placement), p.max_batch_size), got[1])
        assert got == (atomic, accum), name
        assert p.progress_rate(placement, atomic, accum, epoch) == rate, name
