"""Issue 18's speed targets, judged on `bench_scale.py`'s rows: one verdict line each.

- full Philly under fifo within `FLOOR_X` times the idiomatic SimPy floor (CPU): 1.5x
  compiled (issue 18), 3x pure Python (issue 45: the editable development build);
- a million jobs under fifo, fifo-backfill and tiresias-las each under `MILLION_CPU_S`
  CPU seconds and `MILLION_PEAK_GIB` peak, and the cost per job flat from the smallest
  size to the largest: grown at most `FLAT` times, or no more than the floor's own
  (a larger run's memory is slower to reach, for any Python loop);
- every policy on full Philly within `X_FIFO[topology]` times fifo's CPU.

`EVENT_BOUND` policies are judged by their cost per engine event against fifo's
(`x_fifo_event`) instead: their event count is their algorithm's own, not overhead
(Gavel's rounds move jobs between GPU types and, on a contended cluster, rotate them
off their GPUs: 45-67 events a job against fifo's 3; `RESULTS_scale.md`, the targets).
Their whole-run ratio is still printed, so the reading is never hidden.
"""

from __future__ import annotations

from typing import Any

FLOOR_X = {"compiled": 1.5, "pure": 3.0}
MILLION_CPU_S = 60.0
MILLION_PEAK_GIB = 1.5
MILLION_POLICIES = ("fifo", "fifo-backfill", "tiresias-las")
FLAT = 1.25
X_FIFO = {"philly": 3.0, "uniform:56": 10.0}
EVENT_BOUND = frozenset({"gavel-mmf", "gavel-mmf-agnostic"})


def _mark(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def size_verdicts(rows: list[dict[str, Any]]) -> list[tuple[bool, str]]:
    """The million-job and flat-cost targets on the philly-like sizes' rows."""
    out: list[tuple[bool, str]] = []
    by = {(r["policy"], r["jobs"]): r for r in rows if r.get("jobs")}
    sizes = sorted({n for _, n in by})
    if not sizes:
        return out
    lo, hi = sizes[0], sizes[-1]
    floor_lo, floor_hi = by.get(("floor-procs", lo)), by.get(("floor-procs", hi))
    floor_growth = (floor_hi["ms_per_job"] / floor_lo["ms_per_job"]
                    if floor_lo and floor_hi and floor_lo.get("ms_per_job")
                    and floor_hi.get("ms_per_job") else None)
    for p in MILLION_POLICIES:
        big = by.get((p, 1_000_000))
        if big is not None:
            cpu, peak = big.get("run_cpu_s"), big.get("peak_rss_gb")
            ok = cpu is not None and peak is not None and cpu < MILLION_CPU_S \
                and peak < MILLION_PEAK_GIB
            out.append((ok, f"{_mark(ok)} 1M jobs, {p}: {cpu} CPU s (< {MILLION_CPU_S:g}), "
                            f"peak {peak} GiB (< {MILLION_PEAK_GIB:g})"))
        first, last = by.get((p, lo)), by.get((p, hi))
        if hi > lo and first and last and first.get("ms_per_job") and last.get("ms_per_job"):
            growth = last["ms_per_job"] / first["ms_per_job"]
            ok = growth <= FLAT or (floor_growth is not None and growth <= floor_growth)
            floor_txt = f"{floor_growth:.2f}x" if floor_growth is not None else "-"
            out.append((ok, f"{_mark(ok)} cost per job {lo:,} -> {hi:,} jobs, {p}: "
                            f"{first['ms_per_job']} -> {last['ms_per_job']} ms "
                            f"({growth:.2f}x; flat: <= {FLAT:g}x or the floor's "
                            f"{floor_txt})"))
    return out


def philly_verdicts(rows: list[dict[str, Any]], topology: str,
                    build: str = "compiled") -> list[tuple[bool, str]]:
    """The floor target (fifo, by `build`: compiled or pure) and each policy's ratio to fifo."""
    out: list[tuple[bool, str]] = []
    fifo = next((r for r in rows if r["policy"] == "fifo"), None)
    if fifo is not None and fifo.get("x_floor") is not None:
        bar = FLOOR_X[build]
        ok = fifo["x_floor"] <= bar
        out.append((ok, f"{_mark(ok)} fifo on full Philly ({topology}, {build} build): "
                        f"{fifo['x_floor']}x floor-procs (<= {bar:g}x)"))
    bar = X_FIFO.get(topology)
    if bar is None:
        return out  # no bar for this cluster: the table says it all
    for r in rows:
        p = r["policy"]
        if p in ("floor", "floor-procs", "fifo"):
            continue
        x, xe = r.get("x_fifo"), r.get("x_fifo_event")
        if x is None:
            out.append((False, f"FAIL {p}: no measurement ({r.get('note') or 'cut'})"))
        elif p in EVENT_BOUND:
            ok = xe is not None and xe <= bar
            out.append((ok, f"{_mark(ok)} {p}: {xe}x fifo per event (<= {bar:g}x; "
                            f"{r.get('events_per_job')} events a job, {x}x the whole run)"))
        else:
            ok = x <= bar
            out.append((ok, f"{_mark(ok)} {p}: {x}x fifo (<= {bar:g}x)"))
    return out
