"""`schedlab trace inspect` and `schedlab trace convert`, and the shared shaping options.

`shaping_options` adds `--trace-window`, `--load-scale`, `--vcs`, `--min-gpus`,
`--max-gpus`, `--remap-gpus` (and optionally `--max-jobs`) to any click command;
`shape_from_options` applies them to a loaded trace. `run` can reuse both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from schedlab.app.common import fail
from schedlab.sim.errors import SimError
from schedlab.sim.writing import json_text

__all__ = ["SHAPING_KEYS", "shape_from_options", "shaping_options", "trace",
           "trace_format_option"]

F = TypeVar("F", bound=Callable[..., Any])

SHAPING_KEYS = ("trace_window", "load_scale", "vcs", "min_gpus", "max_gpus", "remap_gpus",
                "max_jobs")
"""Keyword names the shaping options give the command function."""


def shaping_options(*, max_jobs: bool = True) -> Callable[[F], F]:
    """Click options of trace shaping (`--max-jobs` only when `max_jobs`)."""

    def wrap(f: F) -> F:
        opts = [
            click.option("--trace-window", "trace_window", default=None, metavar="START:END",
                         help="Keep jobs submitted in [START, END) and start the clock at "
                              "START; seconds (3600, 12h, 7d) or dates "
                              "('2017-10-01 12:00:00'); either side may be empty."),
            click.option("--load-scale", type=click.FloatRange(min=0, min_open=True),
                         default=None, help="Multiply the offered load: inter-arrival times "
                                            "are divided by X."),
            click.option("--vcs", default=None, metavar="A,B",
                         help="Keep jobs of these virtual clusters."),
            click.option("--min-gpus", type=click.IntRange(min=0), default=None,
                         help="Keep jobs with at least N GPUs."),
            click.option("--max-gpus", type=click.IntRange(min=0), default=None,
                         help="Keep jobs with at most N GPUs."),
            click.option("--remap-gpus", is_flag=True,
                         help="Shrink jobs larger than the topology to fit it, keeping their "
                              "GPU-time (else the engine rejects them with the reason)."),
        ]
        if max_jobs:
            opts.append(click.option("--max-jobs", type=click.IntRange(min=0), default=None,
                                     help="Keep the first N jobs by submit time."))
        for opt in reversed(opts):
            f = opt(f)
        return f

    return wrap


def shape_from_options(trace: Any, topology: Any = None, **opts: Any) -> Any:
    """Apply shaping options (keys of SHAPING_KEYS) to a trace; `--remap-gpus` needs a topology.

    Args:
        trace: The loaded trace.
        topology: The run's topology (the target of `--remap-gpus`).
        **opts: The options' values (None / False = not given).

    Returns:
        The shaped trace.

    Raises:
        SimError: A bad value, or --remap-gpus without a topology.
    """
    from schedlab.sim.errors import InvalidParameter
    from schedlab.traces.shaping import shape

    remap = opts.get("remap_gpus") or False
    if remap and topology is None:
        raise InvalidParameter("--remap-gpus needs --topology (jobs are shrunk to fit it)")
    return shape(
        trace,
        window=opts.get("trace_window"),
        load_scale=opts.get("load_scale"),
        max_jobs=opts.get("max_jobs"),
        vcs=opts.get("vcs"),
        min_gpus=opts.get("min_gpus"),
        max_gpus=opts.get("max_gpus"),
        remap_gpus_to=topology if remap else None,
    )


class _TraceFormat(click.Choice):
    """The `--trace-format` names, read from `schedlab.traces.readers` only when needed."""

    def __init__(self) -> None:
        super().__init__([], case_sensitive=False)

    @property  # type: ignore[override]
    def choices(self) -> list[str]:
        """Every key of `schedlab.traces.readers.TRACE_FORMATS`."""
        from schedlab.traces.readers import TRACE_FORMATS

        return list(TRACE_FORMATS)

    @choices.setter
    def choices(self, _: object) -> None:
        pass


def trace_format_option(f: F) -> F:
    """The `--trace-format` option: a choice of `schedlab.traces.readers.TRACE_FORMATS`."""
    return click.option("--trace-format", default=None, type=_TraceFormat(),
                        help="Trace format (default: detect from the file).")(f)


def _load(source: str, trace_format: str | None, skip_bad_rows: bool,
          topo_src: str | None) -> tuple[Any, Any]:
    from schedlab.app.inputs import load_named_trace as load_trace

    topo = None
    if topo_src is not None:
        from schedlab.app.inputs import load_named_topology as load_topology

        topo = load_topology(topo_src)
    trace = load_trace(source, skip_bad_rows=skip_bad_rows, trace_format=trace_format,
                       topology=topo)
    if trace.bad_rows:
        first = trace.bad_row_messages[0] if trace.bad_row_messages else ""
        click.echo(f"warning: skipped {trace.bad_rows} bad or excluded row(s) of {source}; "
                   f"first: {first}", err=True)
    return trace, topo


@click.group("trace", context_settings={"help_option_names": ["-h", "--help"]},
             epilog="""\b
Examples:
  schedlab trace inspect default
  schedlab trace convert my_trace.swf.gz my_trace.parquet
""")
def trace() -> None:
    """Inspect and convert traces."""


@trace.command("inspect", epilog="""\b
Examples:
  schedlab trace inspect default --topology default
  schedlab trace inspect philly_jobs.csv --trace-format philly --plot figures/trace
  schedlab trace inspect my_trace.parquet --trace-window 0:24h --json
""")
@click.argument("source")
@trace_format_option
@click.option("--topology", "topo_src", default=None,
              help="Topology file or preset: report the offered load against it.")
@click.option("--plot", "plot_dir", default=None, type=click.Path(file_okay=False),
              help="Write the distributions as PNG files into this folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--skip-bad-rows", is_flag=True, help="Count bad rows instead of failing.")
@shaping_options()
def inspect_cmd(source: str, trace_format: str | None, topo_src: str | None,
                plot_dir: str | None, as_json: bool, skip_bad_rows: bool,
                **shaping: Any) -> None:
    """Statistics of a trace: jobs, span, arrivals, sizes, durations, users, load."""
    from schedlab.traces.inspect import format_stats, plot_stats, trace_stats

    try:
        t, topo = _load(source, trace_format, skip_bad_rows, topo_src)
        t = shape_from_options(t, topo, **shaping)
        stats = trace_stats(t, topo)
        if as_json:
            click.echo(json_text(stats.as_dict()))
        else:
            click.echo(format_stats(stats))
        if plot_dir is not None:
            for p in plot_stats(t, plot_dir):
                click.echo(f"wrote {p}")
    except SimError as e:
        fail(e)


@trace.command("convert", epilog="""\b
Examples:
  schedlab trace convert cluster_log.csv helios.parquet --trace-format helios
  schedlab trace convert default day1.csv --trace-window 0:24h --load-scale 1.5
""")
@click.argument("source")
@click.argument("out", type=click.Path(dir_okay=False))
@trace_format_option
@click.option("--topology", "topo_src", default=None,
              help="Topology (for --remap-gpus and calibrated generators).")
@click.option("--skip-bad-rows", is_flag=True, help="Count bad rows instead of failing.")
@shaping_options()
def convert_cmd(source: str, out: str, trace_format: str | None, topo_src: str | None,
                skip_bad_rows: bool, **shaping: Any) -> None:
    """Convert a trace to the canonical schema (OUT: .parquet, .csv or .csv.gz)."""
    from schedlab.traces.canonical import write_canonical

    try:
        t, topo = _load(source, trace_format, skip_bad_rows, topo_src)
        t = shape_from_options(t, topo, **shaping)
        path = write_canonical(t, out)
    except SimError as e:
        fail(e)
    except OSError as e:  # an unwritable OUT: say where and why, no traceback
        fail(SimError(f"cannot write {out!r}: {e.strerror or e}"))
    click.echo(f"wrote {len(t)} jobs to {Path(path).resolve()}")
