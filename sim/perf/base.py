"""The performance-model protocol: a job's throughput for a placement shape and batch size.

A backend answers for the models it knows (keys of the trace's `model` column). Work is
counted in the backend's unit (`steps` or `samples`); goodput is the work done per
second, which for a job that does not adapt its batch size is its throughput. Backends
that model statistical efficiency (Pollux) return less than the raw throughput and may
say at which progress their answer changes (`horizon`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from schedlab.sim.model import Level

STEPS = "steps"
SAMPLES = "samples"
UNITS = (STEPS, SAMPLES)


@dataclass(frozen=True, slots=True)
class Shape:
    """What a backend sees of a placement: GPU type, GPUs per node and the common level.

    `per_node` lists the GPUs on each node the job spans, largest first; `level` is the
    lowest cell level holding all of them (`consolidated`: on one node).
    """

    gpu_type: str
    per_node: tuple[int, ...]
    level: Level = Level.NODE

    @property
    def num_gpus(self) -> int:
        """GPUs of the placement."""
        return sum(self.per_node)

    @property
    def num_nodes(self) -> int:
        """Nodes the placement spans."""
        return len(self.per_node)

    @property
    def consolidated(self) -> bool:
        """All GPUs on one node."""
        return len(self.per_node) <= 1

    @staticmethod
    def packed(gpu_type: str, num_gpus: int, per_node: int) -> Shape:
        """`num_gpus` on as few nodes of `per_node` GPUs as hold them (a best placement)."""
        full, rest = divmod(num_gpus, max(1, per_node))
        nodes = (per_node,) * full + ((rest,) if rest else ())
        level = Level.NODE if len(nodes) <= 1 else Level.CLUSTER
        return Shape(gpu_type, nodes or (0,), level)


@runtime_checkable
class PerfModel(Protocol):
    """A backend of performance models (`schedlab.sim.registry.PERF_MODELS`).

    Built with the path of its file or folder. Every answer is deterministic.
    """

    name: str

    def models(self) -> Collection[str]:
        """The model names this backend answers for."""
        ...

    def units(self, model: str) -> str:
        """`steps` or `samples`: what one unit of the model's throughput is."""
        ...

    def reference_type(self, model: str) -> str:
        """The GPU type a job of the model that names none is measured on."""
        ...

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """Units per second on `shape` at this global batch size (0: cannot run so)."""
        ...

    def pair(self, model: str, partner: str, shape: Shape,
             batch_size: int | None) -> float | None:
        """Units per second when packed with a job of `partner` (None: not measured)."""
        ...

    def restart_cost(self, model: str) -> float | None:
        """Seconds of no progress when a job of the model (re)starts (None: the run's)."""
        ...

    def default_work(self, model: str) -> float | None:
        """Work (in `units`) of a job of the model that gives none (None: must be given)."""
        ...

    def default_batch(self, model: str) -> int | None:
        """The batch size of a job that gives none (None: the model has no batch size)."""
        ...

    def goodput(self, model: str, shape: Shape, batch_size: int | None,
                progress: float) -> float:
        """Useful work per second at `progress` units done.

        The throughput, unless the backend models statistical efficiency.
        """
        ...

    def best_batch(self, model: str, shape: Shape, batch_size: int | None,
                   progress: float) -> int | None:
        """The batch size an adaptive job picks on `shape` at `progress` (goodput-optimal)."""
        ...

    def horizon(self, model: str, batch_size: int | None, progress: float) -> float:
        """Progress at which `goodput` may next change on the same shape (inf: never)."""
        ...

    def max_gpus(self, model: str, batch_size: int | None, adaptive: bool) -> int | None:
        """Most GPUs a job of the model can use (None: no limit of the model's)."""
        ...


class TableModel:
    """Defaults for a backend of measured throughputs: no efficiency, no adaptation.

    A subclass sets `name` and implements `models`, `throughput` (and `pair` when it has
    packed pairs); the rest answer as a plain table does.
    """

    name = "table"

    def models(self) -> Collection[str]:
        """No models."""
        return ()

    def units(self, model: str) -> str:
        """Throughputs are in steps per second."""
        return STEPS

    def reference_type(self, model: str) -> str:
        """No reference type of its own (the topology's first)."""
        return ""

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """Nothing measured."""
        return 0.0

    def pair(self, model: str, partner: str, shape: Shape,
             batch_size: int | None) -> float | None:
        """No packed pairs."""
        return None

    def restart_cost(self, model: str) -> float | None:
        """The run's `restore_overhead`."""
        return None

    def default_work(self, model: str) -> float | None:
        """Work must be given."""
        return None

    def default_batch(self, model: str) -> int | None:
        """No batch size of its own."""
        return None

    def goodput(self, model: str, shape: Shape, batch_size: int | None,
                progress: float) -> float:
        """The throughput: every step counts."""
        return self.throughput(model, shape, batch_size)

    def best_batch(self, model: str, shape: Shape, batch_size: int | None,
                   progress: float) -> int | None:
        """A table job keeps its batch size."""
        return batch_size

    def horizon(self, model: str, batch_size: int | None, progress: float) -> float:
        """Its answers never change with progress."""
        return math.inf

    def max_gpus(self, model: str, batch_size: int | None, adaptive: bool) -> int | None:
        """No limit of its own."""
        return None
