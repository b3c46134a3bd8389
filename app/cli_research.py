"""The research commands of `schedlab` (docs/contract.md#sec-1): `sweep`, `plot`, `check`, `report`.

Each is a click command that `schedlab.app.cli` adds to its group with `main.add_command`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from schedlab.app.common import fail
from schedlab.sim.errors import SimError


def _is_terminal() -> bool:
    """Whether stderr is a terminal (the progress bar is drawn only then)."""
    return sys.stderr.isatty()


class _RunBar:
    """A tqdm bar over runs (finished / total, failures) on stderr."""

    def __init__(self, total: int) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc="sweep", unit="run", file=sys.stderr,
                        leave=False, dynamic_ncols=True)
        self.failures = 0

    def __call__(self, outcome: object) -> None:
        if getattr(outcome, "status", "") == "failed":
            self.failures += 1
            self.bar.set_postfix_str(f"failed={self.failures}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


@click.command("sweep", epilog="""\b
Examples:
  schedlab sweep examples/sweep.yaml --dry-run         # list the runs
  schedlab sweep examples/sweep.yaml --out results/sweep -j 2
  schedlab sweep examples/sweep.yaml --scheduler dask-local
""")
@click.argument("sweep_file", type=click.Path(dir_okay=False))
@click.option("--out", "out", default=None, type=click.Path(file_okay=False),
              help="Sweep folder (default: results/<sweep file name>).")
@click.option("-j", "--jobs", "jobs", type=click.IntRange(min=1), default=None,
              help="Parallel runs (default: the number of CPUs; 1 runs in this process).")
@click.option("--scheduler", default=None, metavar="dask-local|tcp://HOST:PORT",
              help="Run on a Dask LocalCluster (with -j workers) or an existing Dask "
                   "cluster instead of a local process pool.")
@click.option("--dry-run", is_flag=True, help="Print the runs and their count; run nothing.")
@click.option("--quiet", is_flag=True, help="No progress bar and no closing lines.")
def sweep(sweep_file: str, out: str | None, jobs: int | None, scheduler: str | None,
          dry_run: bool, quiet: bool) -> None:
    """Run a sweep file: grid/zip/seeds of runs, one folder each, then summary.parquet."""
    from schedlab.app.sweep import (
        describe_points,
        load_sweep,
        open_executor,
        run_sweep,
        write_summary,
    )

    try:
        spec = load_sweep(sweep_file)
    except SimError as e:
        fail(e)
    root = Path(out) if out else Path("results") / Path(sweep_file).stem
    if dry_run:
        click.echo(describe_points(spec, root))
        return
    todo = sum(1 for p in spec.points if not (root / p.folder / "summary.json").is_file())
    bar = _RunBar(todo) if not quiet and todo and _is_terminal() else None
    try:
        with open_executor(scheduler, jobs) as executor:
            report = run_sweep(spec, root, executor, on_outcome=bar)
    except SimError as e:
        fail(e)
    except KeyboardInterrupt:
        write_summary(spec, root)  # again: the pool may have finished runs while closing
        done = sum(1 for p in spec.points if (root / p.folder / "summary.json").is_file())
        click.echo(f"\ninterrupted: {done} of {len(spec.points)} runs finished; run the same "
                   "command again to resume", err=True)
        sys.exit(130)
    finally:
        if bar is not None:
            bar.close()
    if not quiet:
        click.echo(f"{report.total} runs: {report.ran} ran, {report.skipped} finished before, "
                   f"{len(report.failed)} failed")
        click.echo(f"summary: {report.summary_path}")
    if report.failed:
        click.echo(f"{len(report.failed)} run(s) failed (error.json in each folder):", err=True)
        for folder, error in report.failed:
            click.echo(f"  {root / folder}: {error}", err=True)
        sys.exit(1)


@click.command("plot", epilog="""\b
Examples:
  schedlab plot results                        # every run of `schedlab run`
  schedlab plot results/fifo results/sjf --out figures
  schedlab plot results/sweep --metric makespan --metric jct_p95
""")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--out", "out", default=None, type=click.Path(file_okay=False),
              help="Folder for the PNGs (default: RESULTS/figures for one RESULTS, "
                   "else ./figures).")
@click.option("--metric", "metrics", multiple=True,
              help="Summary metric of the sweep line plots (repeatable; default jct_mean "
                   "and queueing_delay_mean).")
@click.option("--gantt-max-jobs", default=300, show_default=True,
              type=click.IntRange(min=0), help="Draw a Gantt chart for runs this small.")
@click.option("--max-lines", default=12, show_default=True, type=click.IntRange(min=1),
              help="Most runs in one CDF or timeline panel; more runs are drawn in "
                   "several panels (up to 6) and the tenant figure becomes a heatmap.")
def plot(results: tuple[str, ...], out: str | None, metrics: tuple[str, ...],
         gantt_max_jobs: int, max_lines: int) -> None:
    """The standard figures (docs/contract.md#sec-6) for a run folder, several, or a sweep (PNG)."""
    from schedlab.app.plots import render_all

    target = Path(out) if out else (Path(results[0]) / "figures" if len(results) == 1
                                    else Path("figures"))
    try:
        made = render_all([Path(r) for r in results], target, metrics=list(metrics) or None,
                          gantt_max_jobs=gantt_max_jobs, max_lines=max_lines,
                          note=lambda m: click.echo(f"note: {m}", err=True))
    except SimError as e:
        fail(e)
    for path in made:
        click.echo(str(path))


@click.command("check", epilog="""\b
Examples:
  schedlab run --quiet --out results/golden
  schedlab check results/golden --baseline baselines/default.json
  schedlab check results/golden --baseline mine.json --update --rtol 0.01
  schedlab check results/sweep2 --baseline sweep.json --tolerance replicas
""")
@click.argument("results", type=click.Path(exists=True))
@click.option("--baseline", "baseline", required=True, type=click.Path(dir_okay=False),
              help="Baseline JSON file.")
@click.option("--update", is_flag=True,
              help="Write the baseline from RESULTS (keeping its tolerances) instead.")
@click.option("--rtol", type=click.FloatRange(min=0), default=None,
              help="With --update: the default relative tolerance.")
@click.option("--atol", type=click.FloatRange(min=0), default=None,
              help="With --update: the default absolute tolerance.")
@click.option("--only-failures", is_flag=True, help="List only the rows that fail.")
@click.option("--tolerance", type=click.Choice(["baseline", "replicas"]), default="baseline",
              show_default=True,
              help="baseline: each run within the baseline's rtol/atol; replicas: each "
                   "configuration's mean over its replicas within the replicas' 95% "
                   "intervals (a baseline written from a sweep with replicas:).")
@click.option("--widen", type=click.FloatRange(min=0), default=2.5, show_default=True,
              help="With --tolerance replicas: factor on the combined interval half-width.")
def check(results: str, baseline: str, update: bool, rtol: float | None, atol: float | None,
          only_failures: bool, tolerance: str, widen: float) -> None:
    """Compare summary metrics with a baseline; exit 1 on drift or a missing run."""
    from schedlab.app.check import (
        collect_runs,
        compare_all,
        compare_replicas,
        format_report,
        make_baseline,
        read_baseline,
        write_baseline,
    )

    try:
        runs = collect_runs(Path(results))
        if update:
            previous = read_baseline(baseline) if Path(baseline).is_file() else None
            data = make_baseline(runs, previous, rtol=rtol, atol=atol)
            write_baseline(baseline, data)
            n = sum(len(r["metrics"]) for r in data["runs"].values())
            click.echo(f"wrote {baseline}: {len(data['runs'])} run(s), {n} metrics")
            return
        data = read_baseline(baseline)
        rows = compare_replicas(data, runs, widen=widen) if tolerance == "replicas" \
            else compare_all(data, runs)
    except SimError as e:
        fail(e)
    bad = [r for r in rows if r.failed]
    click.echo(format_report(bad if only_failures else rows))
    if bad:
        click.echo(f"{len(bad)} problem(s) against {baseline}; if the change is intended: "
                   f"schedlab check {results} --baseline {baseline} --update", err=True)
        sys.exit(1)
    click.echo(f"all {len(rows)} metric(s) within tolerance of {baseline}")


@click.command("report", epilog="""\b
Examples:
  schedlab run && schedlab report results                 # every policy, one file
  schedlab report results/fifo -o fifo.html
  schedlab report results/sweep -o sweep.html --metric makespan
""")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--out", "out", default="report.html", show_default=True,
              type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--title", default=None, help="Title of the report (default: the folder names).")
@click.option("--metric", "metrics", multiple=True,
              help="Summary metric of the sweep plots (repeatable; default jct_mean and "
                   "queueing_delay_mean).")
@click.option("--max-lines", default=12, show_default=True, type=click.IntRange(min=1),
              help="Most runs in one CDF or timeline panel (more runs: more panels).")
def report(results: tuple[str, ...], out: str, title: str | None, metrics: tuple[str, ...],
           max_lines: int) -> None:
    """One self-contained HTML file (table, figures, configs) for runs or a sweep.

    RESULTS is a run folder, a folder of runs (as `schedlab run` writes) or a sweep
    folder. The file needs no network: figures are inline PNG, sorting is inline script.
    """
    from schedlab.app.report import write_report

    try:
        path = write_report(list(results), out, title=title, max_lines=max_lines,
                            metrics=list(metrics) or None,
                            note=lambda m: click.echo(f"note: {m}", err=True))
    except SimError as e:
        fail(e)
    click.echo(f"wrote {Path(path).resolve()}")
