"""`llm-like`: a workload of an LLM-development cluster (pre-training, fine-tuning, eval, debug).

Four kinds of job, each with its share of jobs, its GPU-count mix and a lognormal
duration (median, sigma, cap), arriving as one Poisson stream over `span_days`. The
shape follows the published summaries: on Acme's LLM clusters (Hu et al., NSDI'24,
"Characterization of Large Language Model Development in the Datacenter", summary in
InternLM/AcmeTrace) evaluation and debugging jobs are most of the jobs but a sliver of
the GPU time, while a few pre-training jobs of hundreds to thousands of GPUs running for
days to weeks take most of it; Llama 3's pre-training ran on up to 16,384 GPUs for
weeks (Dubey et al., 2024); Meta's research clusters run jobs from 1 GPU to thousands
(Kokolis et al., HPCA 2025). The exact shares, sizes and durations below are our
choices matching those headlines, not fitted numbers: each `Kind` says so.
Deterministic for a seed (one `numpy.random.default_rng(seed)`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from schedlab.sim.errors import InvalidParameter
from schedlab.traces.base import Trace
from schedlab.traces.validate import frame_to_trace

__all__ = ["KINDS", "Kind", "llm_like"]

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of job: share of jobs, GPU counts (-> probability), lognormal duration."""

    name: str
    share: float
    sizes: tuple[tuple[int, float], ...]
    median_s: float
    sigma: float
    cap_s: float


KINDS: tuple[Kind, ...] = (
    # a few jobs, most GPU time (Acme: pre-training is a few % of jobs, most GPU time)
    Kind("pretrain", 0.005, ((1024, 0.3), (2048, 0.3), (4096, 0.25), (8192, 0.15)),
         7 * DAY, 0.6, 30 * DAY),
    Kind("finetune", 0.10, ((8, 0.4), (16, 0.25), (32, 0.2), (64, 0.1), (128, 0.05)),
         6 * 3600.0, 1.0, 7 * DAY),
    # Acme: evaluation is most of the jobs, short and small
    Kind("eval", 0.70, ((1, 0.3), (2, 0.1), (4, 0.2), (8, 0.4)), 900.0, 1.0, DAY),
    Kind("debug", 0.195, ((1, 0.3), (8, 0.5), (16, 0.2)), 600.0, 1.2, 6 * 3600.0),
)
"""The mix (our choices after the summaries above; shares add up to 1)."""


def llm_like(n_jobs: int, *, span_days: float = 54.0, seed: int = 0,
             max_gpus: int | None = None, name: str = "llm-like") -> Trace:
    """`n_jobs` jobs of the `KINDS` mix submitted over `span_days` (Poisson).

    `max_gpus`: leave out sizes larger (e.g. the topology's GPUs; a kind none of whose
    sizes fits takes `max_gpus`); `vc` and the pass-through column `kind` name each
    job's kind.
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int | np.integer) or n_jobs < 1:
        raise InvalidParameter(f"llm-like n_jobs {n_jobs!r}: expected an integer >= 1")
    if max_gpus is not None and max_gpus < 1:
        raise InvalidParameter(f"llm-like max_gpus {max_gpus!r}: expected an integer >= 1")
    if not span_days > 0 or not math.isfinite(span_days):
        raise InvalidParameter(f"llm-like span_days {span_days!r}: expected a number > 0")
    rng = np.random.default_rng(int(seed))
    n = int(n_jobs)
    shares = np.array([k.share for k in KINDS])
    kind_idx = rng.choice(len(KINDS), size=n, p=shares / shares.sum())
    submit = np.sort(rng.uniform(0.0, span_days * DAY, size=n))
    submit[0] = 0.0
    gpus = np.zeros(n, dtype=np.int64)
    dur = np.zeros(n)
    for i, k in enumerate(KINDS):
        rows = np.flatnonzero(kind_idx == i)
        sizes = [(s, p) for s, p in k.sizes if max_gpus is None or s <= max_gpus]
        if not len(rows):
            continue
        if not sizes:  # none fits: the kind's jobs take the whole cluster
            sizes = [(int(max_gpus or 1), 1.0)]
        ps = np.array([p for _, p in sizes])
        gpus[rows] = rng.choice([s for s, _ in sizes], size=len(rows), p=ps / ps.sum())
        d = rng.lognormal(math.log(k.median_s), k.sigma, size=len(rows))
        dur[rows] = np.maximum(np.round(np.minimum(d, k.cap_s), 3), 1.0)
    df = pd.DataFrame({
        "job_id": [f"{name}-{i}" for i in range(n)],
        "submit_time": np.round(submit, 3),
        "num_gpus": gpus,
        "duration": dur,
        "user": [f"{KINDS[k].name}-user{u}" for k, u in
                 zip(kind_idx.tolist(), rng.integers(0, 8, size=n).tolist(), strict=True)],
        "vc": [KINDS[k].name for k in kind_idx.tolist()],
        "kind": [KINDS[k].name for k in kind_idx.tolist()],
    })
    return frame_to_trace(df, label=name, name=name, source=f"llm-like(seed={int(seed)})")
