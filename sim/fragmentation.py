"""Fragmentation gradient (FGD, Weng et al. ATC'23) of a node against a job-size mix."""

from __future__ import annotations

from schedlab.sim.jobstate import plain_spec
from schedlab.sim.model import MILLI, JobSpec, job_milli


def size_distribution(jobs: tuple[JobSpec, ...]) -> tuple[tuple[int, int, float], ...]:
    """(GPUs, milli per GPU, probability) of the GPU jobs of a trace, for FGD."""
    counts: dict[tuple[int, int], int] = {}
    for s in jobs:
        n = s.num_gpus
        if n > 0:
            k = (n, MILLI) if plain_spec(s) else (s.task_gpus, job_milli(s))
            counts[k] = counts.get(k, 0) + 1
    total = sum(counts.values())
    return tuple((g, m, c / total) for (g, m), c in sorted(counts.items())) if total else ()


def unusable_gpus(capacity: int, free_whole: int, partial: tuple[int, ...], gpus: int,
                  milli: int) -> float:
    """Free GPU capacity of a node (in GPUs) that one task of `gpus` x `milli` cannot use.

    A share (milli < 1000) fits a whole free GPU or a shared one with room, and strands
    the shared GPUs too small for it; whole GPUs strand every shared GPU when enough whole
    ones are free, else everything; a task larger than the node uses only a fully free node.
    """
    free_total = free_whole + sum(partial) / MILLI
    if milli < MILLI:
        if free_whole > 0 or any(f >= milli for f in partial):
            return sum(f for f in partial if f < milli) / MILLI
        return free_total
    if gpus > capacity:
        return 0.0 if free_whole == capacity else free_total
    if gpus > free_whole:
        return free_total
    return sum(partial) / MILLI


def fgd_node(capacity: int, free_whole: int, partial: tuple[int, ...],
             dist: tuple[tuple[int, int, float], ...]) -> float:
    """Expected free GPU capacity of one node that a job from `dist` could not use."""
    if capacity == 0 or free_whole + sum(partial) <= 0:
        return 0.0
    return sum(p * unusable_gpus(capacity, free_whole, partial, gpus, milli)
               for gpus, milli, p in dist)
