"""The FGD authors' node-scoring baselines (best-fit, gpu-packing, dot-product) and FGD's
placement of CPU-only jobs, on one hand-built state; every score is worked out below.

State (3 nodes of 4 GPUs and 32 CPUs, largest node normalisers 128 CPUs and 8 GPUs):
node0: GPU 0 half used, 4 CPUs used  -> 3 whole GPUs + a 500-milli room, 28 CPUs free
node1: GPUs 4, 5 used, 24 CPUs used  -> 2 whole GPUs (6, 7), 8 CPUs free
node2: all free                      -> 4 whole GPUs, 32 CPUs free
"""

from __future__ import annotations

import pytest

from schedlab.policies.placement.fgd import FgdPlacer
from schedlab.sim.cluster import ClusterState
from schedlab.sim.model import MILLI, HostPlacement, JobSpec
from schedlab.sim.registry import PLACERS
from schedlab.topologies.build import uniform_topology


def state() -> ClusterState:
    c = ClusterState(uniform_topology(3, gpus_per_switch=4, num_cpus=32, mem_gb=64))
    c.allocate(0, [0], 500, 4.0)
    c.allocate(1, [4, 5], MILLI, 24.0)
    return c


SHARE = JobSpec("s", 0.0, 1, 10.0, gpu_share=0.3, num_cpus=2)
PAIR = JobSpec("p", 0.0, 2, 10.0, num_cpus=4)
CPU = JobSpec("c", 0.0, 0, 10.0, num_cpus=6)


@pytest.mark.parametrize(("placer", "job", "want"), [
    # best-fit: 0.5 CPUs left / 128 + 0.5 GPUs left / 8
    # share: node0 26/256 + 3.2/16 = .302, node1 6/256 + 1.7/16 = .130, node2 .348
    ("best-fit", SHARE, (6,)),
    # pair: node0 24/256 + 1.5/16 = .188, node1 4/256 + 0 = .016, node2 .234
    ("best-fit", PAIR, (6, 7)),
    # cpu: node0 22/256 + 3.5/16 = .305, node1 2/256 + 2/16 = .133, node2 .352
    ("best-fit", CPU, HostPlacement(1)),
    # gpu-packing: share on node0's 500 room: 100 - (500 x 100 // 1000) // 10 = 95;
    # node1 (whole GPU of a used node) 50 - 1 = 49; node2 (all free) max(33 - 4, 4) = 29
    ("gpu-packing", SHARE, (0,)),
    # pair: node0 and node1 48 (used nodes), node2 29; tie to the least left: node1
    ("gpu-packing", PAIR, (6, 7)),
    # cpu: 0 everywhere; tie to the least GPU capacity left: node1 (2 GPUs)
    ("gpu-packing", CPU, HostPlacement(1)),
    # dot-product: (CPUs free/128 x CPUs/128 + GPUs free/8 x GPUs/8) / 2
    # share: node0 (28x2/16384 + 3.5x.3/64)/2 = .0099, node1 .0052, node2 .0113
    ("dot-product", SHARE, (6,)),
    # pair: node0 .0581, node1 .0322, node2 .0664
    ("dot-product", PAIR, (6, 7)),
    # cpu: the fewest free CPUs: node1 (8 x 6 < 28 x 6 < 32 x 6)
    ("dot-product", CPU, HostPlacement(1)),
])
def test_baseline_scores(placer, job, want):
    c = state()
    got = PLACERS[placer]().place(job, c)
    assert got == want
    # the state read is unchanged
    assert c.gpu_free[:8] == [500, MILLI, MILLI, MILLI, 0, 0, MILLI, MILLI]


def test_fgd_places_a_cpu_only_job_where_fragmentation_grows_least():
    # workload: one task shape, 1 GPU and 8 CPUs. Taking 6 CPUs from node1 leaves 2 < 8:
    # its 2 free GPUs become unusable (gradient +2); node0 (22 left) and node2 (26) keep
    # theirs (gradient 0); tie to the least free GPU capacity left: node0 (3.5 < 4).
    # best-fit by free CPUs (the other placers) would take node1.
    fgd = FgdPlacer(workload=[((1, MILLI, 8.0, ""), 1.0)])
    assert fgd.place(CPU, state()) == HostPlacement(0)
    assert PLACERS["pack"]().place(CPU, state()) == HostPlacement(1)


def test_fgd_cpu_only_job_with_no_room_says_why():
    c = state()
    got = FgdPlacer().place(JobSpec("c", 0.0, 0, 10.0, num_cpus=40), c)
    assert not isinstance(got, HostPlacement) and not got.resolvable
    assert FgdPlacer().place(JobSpec("c", 0.0, 0, 10.0), c) == ()
