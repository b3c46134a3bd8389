"""Fragmentation gradient (FGD, Weng et al. ATC'23) of a node against a job-size mix."""

from __future__ import annotations

from policies.placers import job_milli
from sim.cluster import MILLI
from sim.model import JobSpec


def size_distribution(jobs: tuple[JobSpec, ...]) -> tuple[tuple[int, int, float], ...]:
    """(GPUs, milli per GPU, probability) of the GPU jobs of a trace, for FGD."""
    counts: dict[tuple[int, int], int] = {}
    for s in jobs:
        if s.num_gpus > 0:
            k = (s.task_gpus, job_milli(s))
            counts[k] = counts.get(k, 0) + 1
    total = sum(counts.values())
    return tuple((g, m, c / total) for (g, m), c in sorted(counts.items())) if total else ()


def fgd_node(capacity: int, free_whole: int, partial: tuple[int, ...],
              dist: tuple[tuple[int, int, float], ...]) -> float:
    """Expected free GPU capacity of one node that a job from `dist` could not use."""
    free_total = free_whole + sum(partial) / MILLI
    if free_total <= 0 or capacity == 0:
        return 0.0
    frag = 0.0
    for gpus, milli, p in dist:
        if milli < MILLI:  # a fraction fits a whole free GPU or a partial one with room
            fits = free_whole > 0 or any(f >= milli for f in partial)
            unusable = free_total if not fits else sum(f for f in partial if f < milli) / MILLI
        elif gpus > capacity:  # multi-node task: only a fully free node is usable
            unusable = 0.0 if free_whole == capacity else free_total
        elif gpus > free_whole:
            unusable = free_total
        else:
            unusable = sum(partial) / MILLI
        frag += p * unusable
    return frag
