"""Lucid's pairwise co-location table (ASPLOS'23) as a performance model.

The file is Lucid's `simulation/data/colocate_info.csv` (S-Lab-System-Group/Lucid), one
row per measured pair: `model1,dataset1,batchsize1,amp1,speed1,model2,dataset2,
batchsize2,amp2,speed2` (other columns, such as `gpu_num1`, `gpu_util`, `gmem`, are
ignored), `speedN` = job N's speed packed over its speed alone. What this backend answers
follows Lucid's simulator (`simulation/updater.py` `ColocateUpdater`, applied in
`simulation/policy/lucid.py` `colocate_update` as `job["remain"] -= job["rate"]`):

- a job is its model, batch size and AMP flag (the dataset follows from the model), so a
  key of the trace's `model` column is `NAME@BATCH` (`ResNet18@64`) or `NAME@BATCH+amp`;
- alone, a job runs at rate 1: Lucid has no solo throughputs, a job's `remain` is its
  duration and drops by 1 per second exclusive. `throughput` is 1.0 on every shape (one
  unit of work = one second of the job alone), so a job's `duration` is its work; the
  GPU type, count and locality do not change it (Lucid's simulator is type- and
  locality-blind);
- packed, a job runs at its row's speed: the row (job, partner) gives `speed1`, else the
  row (partner, job) gives `speed2`; the GPU count is not part of the lookup (Lucid's
  `gpu_num` match is commented out) nor the GPU type (all measured on an RTX 3090);
- NeuMF, ResNet50, BERT and Transformer are "outside" models (Lucid's
  `check_outside_job`, checked first): a pair with one of them runs at 1.0 each, even
  where the table has a row (NeuMF). They are known under any batch (`BERT`, `BERT@32`);
- a pair with no row: Lucid's simulator stops (an assertion); here `pair` is None, so the
  run's co-location model applies and `gandiva` decides by its utilization heuristic.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterator
from pathlib import Path

from schedlab.sim.errors import InvalidParameter
from schedlab.sim.perf.base import STEPS, Shape, TableModel

OUTSIDE = frozenset({"NeuMF", "ResNet50", "BERT", "Transformer"})  # Lucid's updater
_REQUIRED = ("model1", "dataset1", "batchsize1", "amp1", "speed1",
             "model2", "dataset2", "batchsize2", "amp2", "speed2")
Job = tuple[str, int, int]  # model, batch size, amp (0/1)


def parse_key(key: str) -> tuple[str, int | None, int] | None:
    """`NAME@BATCH[+amp]` (or a bare `NAME`) -> (name, batch or None, amp); None: malformed."""
    text, amp = (key[:-4], 1) if key.endswith("+amp") else (key, 0)
    name, at, batch = text.partition("@")
    if not name:
        return None
    if not at:
        return name, None, amp
    try:
        b = int(batch)
    except ValueError:
        return None
    return (name, b, amp) if b >= 1 else None


def job_key(name: str, batch: int, amp: int) -> str:
    """The `model` key of a Lucid job: `NAME@BATCH`, `+amp` when it trains with AMP."""
    return f"{name}@{batch}" + ("+amp" if amp else "")


class _Names(Collection[str]):
    """The keys the table answers for: its jobs, and the outside models under any key."""

    def __init__(self, jobs: frozenset[Job]) -> None:
        self._jobs = jobs
        self._keys = sorted({job_key(*j) for j in jobs} | OUTSIDE)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        got = parse_key(key)
        if got is None:
            return False
        name, batch, amp = got
        return name in OUTSIDE or (batch is not None and (name, batch, amp) in self._jobs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


class LucidTable(TableModel):
    """Pair speeds from Lucid's co-location table; rate 1 alone."""

    name = "lucid"

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        try:
            with open(p, newline="", encoding="utf-8-sig") as f:
                reader = csv.DictReader(f)
                rows = list(reader)
                cols = list(reader.fieldnames or ())
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise InvalidParameter(f"perf_model {p}: cannot be read: {exc}") from None
        missing = [c for c in _REQUIRED if c not in cols]
        if missing:
            raise InvalidParameter(f"perf_model {p}: missing column(s) {', '.join(missing)}; "
                                   "Lucid's colocate_info.csv has " + ", ".join(_REQUIRED))
        self._speed: dict[tuple[Job, Job], tuple[float, float]] = {}
        datasets: dict[str, str] = {}
        jobs: set[Job] = set()
        for i, r in enumerate(rows, start=2):
            a = _job(p, i, r, "1", datasets)
            b = _job(p, i, r, "2", datasets)
            if (a, b) in self._speed:
                raise InvalidParameter(f"perf_model {p} line {i}: a second row for the pair "
                                       f"{job_key(*a)}, {job_key(*b)}")
            self._speed[(a, b)] = (_speed(p, i, r, "speed1"), _speed(p, i, r, "speed2"))
            jobs.update((a, b))
        self._names = _Names(frozenset(jobs))

    def models(self) -> Collection[str]:
        """`NAME@BATCH[+amp]` of every job in the table, and the outside models."""
        return self._names

    def units(self, model: str) -> str:
        """One unit is one second of the job alone (Lucid's `remain`)."""
        return STEPS

    def throughput(self, model: str, shape: Shape, batch_size: int | None) -> float:
        """1.0 on any shape: Lucid runs an exclusive job at rate 1."""
        return 1.0 if shape.num_gpus >= 1 else 0.0

    def pair(self, model: str, partner: str, shape: Shape,
             batch_size: int | None) -> float | None:
        """The job's speed packed with `partner` (None: no row for the pair)."""
        if shape.num_gpus < 1:
            return None
        a, b = parse_key(model), parse_key(partner)
        if a is None or b is None:
            return None
        if a[0] in OUTSIDE or b[0] in OUTSIDE:
            return 1.0  # Lucid: "little influence"
        ja, jb = (a[0], a[1] or 0, a[2]), (b[0], b[1] or 0, b[2])
        got = self._speed.get((ja, jb))
        if got is not None:
            return got[0]
        got = self._speed.get((jb, ja))
        return None if got is None else got[1]


def _job(p: Path, line: int, r: dict[str, str], n: str, datasets: dict[str, str]) -> Job:
    name = (r.get(f"model{n}") or "").strip()
    if not name or "@" in name or name.endswith("+amp"):
        raise InvalidParameter(f"perf_model {p} line {line}: model{n} {name!r}: expected a "
                               "model name (without '@' or '+amp')")
    ds = (r.get(f"dataset{n}") or "").strip()
    if datasets.setdefault(name, ds) != ds:
        raise InvalidParameter(f"perf_model {p} line {line}: dataset{n} {ds!r}: model "
                               f"{name} is keyed by name, so it must have one dataset "
                               f"(earlier rows: {datasets[name]!r})")
    batch = _int(p, line, f"batchsize{n}", r.get(f"batchsize{n}"), 1)
    amp = _int(p, line, f"amp{n}", r.get(f"amp{n}"), 0)
    if amp > 1:
        raise InvalidParameter(f"perf_model {p} line {line}: amp{n} {amp}: expected 0 or 1")
    return name, batch, amp


def _int(p: Path, line: int, col: str, text: str | None, lo: int) -> int:
    t = (text or "").strip()
    try:
        v = float(t)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= lo and v == int(v)):
        raise InvalidParameter(f"perf_model {p} line {line}: {col} {t!r}: expected an "
                               f"integer >= {lo}")
    return int(v)


def _speed(p: Path, line: int, r: dict[str, str], col: str) -> float:
    t = (r.get(col) or "").strip()
    try:
        v = float(t)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise InvalidParameter(f"perf_model {p} line {line}: {col} {t!r}: expected a "
                               "number > 0 (speed packed over speed alone)")
    return v
