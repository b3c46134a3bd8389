"""Shockwave (NSDI'23) jobs: Gavel throughputs with a batch size that changes by epoch.

Built from a Gavel-layout throughput file (Shockwave's `tacc_throughputs.json`; steps/s
per `('<Model> (batch size B)', scale_factor)`, the `"null"` entry). A model is a job
type with its dynamic-adaptation mode: `ResNet-18 (batch size 32)` (static),
`ResNet-18 (batch size 32) accordion` or `... gns`. Such a job's batch size follows a
schedule over its epochs (epoch = ceil(dataset / batch) steps), as Shockwave's simulator
changes it (`scheduler.py`: `_simulate_accordion`, `_simulate_gns`, `_scale_bs_and_iters`;
`utils.get_gns_bs_pattern`):

- accordion: the initial batch inside the model's critical regime, the model's largest
  batch outside it (LM epochs < 10; Recommendation < 30 for batch 512/1024, < 40 for
  2048, < 10 for 4096/8192; ResNet-50 epoch mod 30 < 10; ResNet-18 < 10 (20 for batch
  256), 150-159, 250-259; Transformer never changes);
- gns: the batch doubles at the epochs of Shockwave's GNS pattern for (model, initial
  batch, GPUs) (`GNS_DOUBLINGS`), one epoch early (the simulator looks one epoch ahead);
- a job that starts at its model's largest batch, or whose next batch has no throughput
  entry for its GPU count, keeps its batch (as the simulator refuses those changes).

Work is counted in steps of the initial batch (the trace's `total_steps`), so an epoch
is the same work at every batch: at batch b the job does
steps/s(b) x ceil(D/b0) / ceil(D/b) units per second (the epoch count is what Shockwave
preserves when it rescales a job's steps). `horizon` is the next epoch at which the
batch changes, where the engine asks again. A placement over several nodes reads the
consolidated entry, as Shockwave's simulator does.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from functools import cache
from pathlib import Path

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.base import STEPS, Shape, TableModel
from schedlab.sim.perf.gavel import GavelTable

MODES = ("static", "accordion", "gns")
"""Dynamic-adaptation modes of a Shockwave job (the trace's `mode` field)."""

DATASET_SIZE = {"ResNet-18": 50000, "ResNet-50": 100000, "Transformer": 10000,
                "LM": 59675, "Recommendation": 117907, "CycleGAN": 6287, "A3C": 4}
"""Samples per epoch per model (Shockwave's `scheduler.py` `dataset_size_dict`)."""

MAX_BATCH = {"ResNet-18": 256, "ResNet-50": 128, "Transformer": 128, "LM": 80,
             "Recommendation": 8192}
"""Largest batch a model scales to (Shockwave's `max_bs_dict` and GNS limits)."""

GNS_DOUBLINGS: dict[tuple[str, int, int], tuple[tuple[int, int], ...]] = {
    ("ResNet-18", 16, 1): ((31, 2), (41, 4), (51, 8), (71, 16)),
    ("ResNet-18", 16, 2): ((21, 2), (31, 4), (91, 8), (111, 16)),
    ("ResNet-18", 16, 4): ((11, 2), (21, 4), (81, 8), (91, 16)),
    ("ResNet-18", 32, 1): ((21, 2), (31, 4), (51, 8)),
    ("ResNet-18", 32, 2): ((11, 2), (21, 4), (41, 8)),
    ("ResNet-18", 32, 4): ((21, 2), (31, 4), (61, 8)),
    ("ResNet-18", 64, 1): ((11, 2), (31, 4)),
    ("ResNet-18", 64, 2): ((21, 2), (41, 4)),
    ("ResNet-18", 64, 4): ((11, 2), (61, 4)),
    ("ResNet-18", 128, 1): ((11, 2),),
    ("ResNet-18", 128, 2): ((41, 2),),
    ("ResNet-18", 128, 4): ((11, 2),),
    ("ResNet-50", 32, 2): ((101, 2), (111, 4)),
    ("ResNet-50", 32, 4): ((131, 2), (221, 4)),
    ("ResNet-50", 64, 1): ((101, 2),),
    ("ResNet-50", 64, 2): ((81, 2),),
    ("ResNet-50", 64, 4): ((191, 2),),
    ("LM", 5, 1): ((31, 2), (41, 4), (61, 8), (71, 16)),
    ("LM", 5, 2): ((31, 2), (51, 4), (61, 8), (71, 16)),
    ("LM", 5, 4): ((11, 2), (31, 4), (71, 8), (91, 16)),
    ("LM", 10, 1): ((11, 2), (21, 4), (41, 8)),
    ("LM", 10, 2): ((11, 2), (31, 4), (41, 8)),
    ("LM", 10, 4): ((11, 2), (31, 4), (61, 8)),
    ("LM", 20, 1): ((11, 2), (41, 4)),
    ("LM", 20, 2): ((31, 2), (41, 4)),
    ("LM", 20, 4): ((11, 2), (61, 4)),
    ("LM", 40, 1): ((11, 2),),
    ("LM", 40, 2): ((11, 2),),
    ("LM", 40, 4): ((61, 2),),
    ("Recommendation", 512, 1): ((21, 2), (41, 4), (71, 8), (91, 16)),
    ("Recommendation", 1024, 1): ((21, 2), (51, 4), (91, 8)),
    ("Recommendation", 2048, 1): ((21, 2), (41, 4)),
    ("Recommendation", 4096, 1): ((41, 2),),
}
"""(model, initial batch, GPUs) -> (first epoch, batch multiplier) of each doubling, the
values of Shockwave's `utils.get_gns_bs_pattern` (other combinations never change)."""

GNS_LEAD = 1
"""Epochs by which a GNS doubling precedes its pattern epoch: Shockwave's simulator flags
a job when the pattern one epoch past the current (ceil-counted) epoch is larger."""


def split_model(model: str) -> tuple[str, str]:
    """`'<job type> <mode>'` -> (job type, mode); a bare job type is static."""
    head, _, tail = model.rpartition(" ")
    if head and tail in MODES:
        return head, tail
    return model, "static"


def parse_job_type(job_type: str) -> tuple[str, int]:
    """`'ResNet-18 (batch size 32)'` -> ('ResNet-18', 32); (name, 0) without a batch."""
    name, sep, rest = job_type.partition(" (batch size ")
    if not sep or not rest.endswith(")") or not rest[:-1].isdigit():
        return job_type, 0
    return name, int(rest[:-1])


def critical(net: str, initial: int, epoch: int) -> bool:
    """Whether `epoch` (0-based) is in Accordion's critical regime (keep the initial batch).

    Shockwave's simulator (`_simulate_accordion`): Transformer always (never changes).
    """
    if net == "LM":
        return epoch < 10
    if net == "Recommendation":
        return epoch < (30 if initial <= 1024 else 40 if initial == 2048 else 10)
    if net == "ResNet-50":
        return epoch % 30 < 10
    if net == "ResNet-18":
        head = 20 if initial == 256 else 10
        return epoch < head or 150 <= epoch < 160 or 250 <= epoch < 260
    return True


def scheduled_batch(net: str, initial: int, mode: str, gpus: int, epoch: int) -> int:
    """The batch size Shockwave's simulator runs epoch `epoch` (0-based) with.

    Before the check against the throughput table (`ShockwaveModels.batch_at`).
    """
    top = MAX_BATCH.get(net)
    if mode == "static" or top is None or initial >= top:
        return initial
    if mode == "accordion":
        if net == "Transformer":
            return initial
        return initial if critical(net, initial, epoch) else top
    mult = 1
    for start, m in GNS_DOUBLINGS.get((net, initial, gpus), ()):
        if epoch + GNS_LEAD >= start:
            mult = m
    return min(initial * mult, top)


@cache
def change_epochs(net: str, initial: int, mode: str) -> tuple[int, ...]:
    """Epochs (0-based, ascending) at which the batch may change, for any GPU count."""
    if mode == "static" or initial >= MAX_BATCH.get(net, 0):
        return ()
    if mode == "gns":
        return tuple(sorted({max(0, s - GNS_LEAD) for (n, b, _), ds in
                             GNS_DOUBLINGS.items() if n == net and b == initial
                             for s, _ in ds}))
    if net == "Transformer":
        return ()
    out = []
    for e in range(1, 3000):  # beyond every epoch count of Shockwave's traces
        if critical(net, initial, e) != critical(net, initial, e - 1):
            out.append(e)
    return tuple(out)


class ShockwaveModels(TableModel):
    """Shockwave's throughputs, each job's batch following its mode's epoch schedule."""

    name = "shockwave"

    def __init__(self, path: str | Path, reference: str = "v100") -> None:
        self._table = GavelTable(path, reference)
        models = set()
        for jt in self._table.models():
            net, bsz = parse_job_type(jt)
            models.add(jt)
            if bsz and net in DATASET_SIZE:
                models.update(f"{jt} {mode}" for mode in MODES)
        self._models = frozenset(models)
        self._parsed = cache(self._parse)

    def models(self) -> Collection[str]:
        """Every job type of the file, bare and with each mode."""
        return self._models

    def units(self, model: str) -> str:
        """Steps at the job's initial batch size."""
        return STEPS

    def reference_type(self, model: str) -> str:
        """V100 (the throughput file's reference)."""
        return self._table.reference_type(model)

    def _parse(self, model: str) -> tuple[str, str, int, str, int]:
        """The model key -> (job type, net, initial batch, mode, steps per epoch at it)."""
        jt, mode = split_model(model)
        net, bsz = parse_job_type(jt)
        if mode != "static" and (not bsz or net not in DATASET_SIZE):
            raise InvalidParameter(f"shockwave model {model!r}: a {mode} job needs a job "
                                   "type '<Model> (batch size N)' of a known model "
                                   f"({', '.join(DATASET_SIZE)})")
        spe = math.ceil(DATASET_SIZE[net] / bsz) if bsz and net in DATASET_SIZE else 0
        return jt, net, bsz, mode, spe

    def _steps_per_s(self, net: str, bsz: int, shape: Shape) -> float:
        flat = Shape(shape.gpu_type, (shape.num_gpus,), shape.level)  # consolidated
        return self._table.throughput(f"{net} (batch size {bsz})", flat, bsz)

    def batch_at(self, model: str, num_gpus: int, progress: float) -> int | None:
        """The batch size the job runs with at `progress` (steps of its initial batch)."""
        jt, net, initial, mode, spe = self._parsed(model)
        if mode == "static" or not spe:
            return initial or None
        epoch = int(progress // spe)
        bsz = scheduled_batch(net, initial, mode, num_gpus, epoch)
        ref = Shape(self._table.reference_type(model), (num_gpus,))
        if bsz != initial and self._steps_per_s(net, bsz, ref) <= 0:
            return initial  # Shockwave refuses a batch its table has no entry for
        return bsz

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """Units (initial-batch steps) per second on `shape` at `batch_size`."""
        jt, net, initial, _, spe = self._parsed(model)
        bsz = batch_size or initial
        if not initial or bsz == initial or not spe:
            flat = Shape(shape.gpu_type, (shape.num_gpus,), shape.level)
            return self._table.throughput(jt, flat, batch_size)
        steps = self._steps_per_s(net, bsz, shape)
        return steps * spe / math.ceil(DATASET_SIZE[net] / bsz)

    def goodput(self, model: str, shape: Shape, batch_size: int | None,
                progress: float) -> float:
        """The throughput at the batch of the job's schedule at `progress`."""
        return self.throughput(model, shape, self.batch_at(model, shape.num_gpus, progress))

    def best_batch(self, model: str, shape: Shape, batch_size: int | None,
                   progress: float) -> int | None:
        """The scheduled batch (the job does not choose it; its training algorithm does)."""
        return self.batch_at(model, shape.num_gpus, progress)

    def horizon(self, model: str, batch_size: int | None, progress: float) -> float:
        """Progress of the next epoch at which the batch may change (inf: none)."""
        _, net, initial, mode, spe = self._parsed(model)
        if mode == "static" or not spe:
            return math.inf
        epoch = progress / spe
        for e in change_epochs(net, initial, mode):
            if e > epoch:
                return float(e * spe)
        return math.inf
