"""The `schedlab` command line (docs/contract.md#sec-1)."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import click

from schedlab.app.cli_trace import shape_from_options, shaping_options, trace_format_option
from schedlab.app.cli_trace import trace as trace_group
from schedlab.app.common import fail, policy_label
from schedlab.app.run_pool import (
    PolicyTask,
    ProgressBoard,
    RunInputs,
    default_jobs,
    previous_wall,
    run_tasks,
    warm_up,
)
from schedlab.sim.errors import SimError

TABLE = (
    ("policy", "policy", "{}"),
    ("done", "jobs_completed", "{:d}"),
    ("rejected", "jobs_rejected", "{:d}"),
    ("unfinished", "jobs_unfinished", "{:d}"),
    ("queue mean (s)", "queueing_delay_mean", "{:.0f}"),
    ("queue p95 (s)", "queueing_delay_p95", "{:.0f}"),
    ("JCT mean (s)", "jct_mean", "{:.0f}"),
    ("JCT p95 (s)", "jct_p95", "{:.0f}"),
    ("makespan (h)", "makespan", "{:.1f}"),
    ("util", "utilization_mean", "{:.3f}"),
    ("frag", "fragmentation_mean", "{:.3f}"),
    ("preempt", "preemptions", "{:d}"),
    ("wall (s)", "wall_seconds", "{:.2f}"),
)


def format_table(summaries: list[dict[str, Any]]) -> str:
    """A plain-text comparison table, one row per policy."""
    rows = [[h for h, _, _ in TABLE]]
    for s in summaries:
        row = []
        for _, key, fmt in TABLE:
            v = s.get(key)
            if key == "makespan" and isinstance(v, float):
                v = v / 3600.0
            if v is None or (isinstance(v, float) and math.isnan(v)):
                row.append("-")
            else:
                row.append(fmt.format(v))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                       enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog="""\b
Examples:
  schedlab run                        # every policy on the bundled trace, all cores
  schedlab report results -o report.html
  schedlab policies                   # policies, parameters, defaults
  schedlab COMMAND --help             # each command's options and examples
""")
@click.version_option(package_name="schedlab")
def main() -> None:
    """schedlab: replay GPU-cluster job traces under scheduling policies and compare them."""


RUN_EXAMPLES = """\b
Examples:
  schedlab run                                   # every policy, default trace, all cores
  schedlab run --policy fifo --policy tiresias-las -j 2 --out results/two
  schedlab run --policy fifo-backfill --param placer=pack --trace my_trace.csv
  schedlab run --trace philly-like:5000 --param load=0.8 --seed 3
  schedlab run --trace philly --topology uniform:56   # full Philly table, contended cluster
  schedlab run --policy my_policies.py:SmallestFirst --max-jobs 500
  schedlab run --policy fifo --policy drf --param drf.preempt=true   # one policy's param
"""


@main.command(epilog=RUN_EXAMPLES)
@click.option("--trace", "trace_src", default="default", show_default=True,
              help="Trace file (CSV/Parquet, any reader's format) or name: default, philly "
                   "(the full Philly table from ../shared or $SCHEDLAB_SHARED), "
                   "synthetic[:N], philly-like[:N], helios-like[:N].")
@click.option("--topology", "topo_src", default="default", show_default=True,
              help="Topology file (YAML, HiveD YAML, machine list) or name: default, "
                   "dgx1-v100, dgx-a100, philly, uniform:N[:TYPE] (N 8-GPU nodes).")
@click.option("--policy", "policies", multiple=True,
              help="Policy name, module:Class or file.py:Class (repeatable). Default: every "
                   "registered policy.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Policy or engine parameter (repeatable); every policy given must take "
                   "it. POLICY.KEY=VALUE gives it to one policy only.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of the run's random numbers (random policies, failures, generated "
                   "traces): the same seed gives the same numbers.")
@click.option("--until", type=click.FloatRange(min=0), default=None,
              help="Stop at this simulated time (s); jobs still open are 'unfinished'.")
@click.option("--max-jobs", type=click.IntRange(min=1), default=None,
              help="Use only the first N jobs by submit time (N >= 1).")
@click.option("--out", "out", default="results", show_default=True,
              type=click.Path(file_okay=False), help="Results folder; one subfolder per policy.")
@click.option("-j", "--jobs", "jobs", type=click.IntRange(min=1), default=None,
              help="Policies run at once, each in its own process (default: the number of "
                   "cores; 1 runs them one after another in this process). The numbers do "
                   "not depend on it.")
@click.option("--skip-bad-rows", is_flag=True, help="Count bad trace rows instead of failing.")
@trace_format_option
@click.option("--quiet", is_flag=True, help="No progress lines, no table, no total.")
@click.option("--timeline", "timeline", default=None, metavar="full|coarse[:N]|off",
              help="timeline.parquet rows: every change (full, default), the state every "
                   "N s of simulated time (coarse:N; coarse = timeline_interval, 3600) or "
                   "none; no summary number changes. Same as --param timeline=...")
@click.option("--events", "events", default=None, type=click.Choice(["on", "off"]),
              help="events.parquet rows (off: none, for sweeps); no summary number changes. "
                   "Same as --param events=...")
@shaping_options(max_jobs=False)
def run(trace_src: str, topo_src: str, policies: tuple[str, ...], params: tuple[str, ...],
        seed: int, until: float | None, max_jobs: int | None, out: str, jobs: int | None,
        skip_bad_rows: bool, trace_format: str | None, quiet: bool, timeline: str | None,
        events: str | None, **shaping: Any) -> None:
    """Run policies on one trace and one topology; print a table; write results."""
    wall0 = time.perf_counter()
    params = tuple(params) + tuple(f"{k}={v}" for k, v in (("timeline", timeline),
                                                            ("events", events)) if v)
    try:
        summaries = run_many(trace_src, topo_src, list(policies), list(params), seed, until,
                             max_jobs, out, skip_bad_rows, trace_format, quiet, jobs=jobs,
                             **shaping)
    except SimError as e:
        fail(e)
    if not quiet:
        click.echo(format_table(summaries))
    # warnings are not progress: --quiet keeps them (on stderr, under the table)
    for line in warning_lines(summaries) + note_lines(summaries):
        click.echo(line, err=True)
    if not quiet:
        click.echo(total_line(summaries, time.perf_counter() - wall0, jobs))
        click.echo(f"results in {Path(out).resolve()}")


def total_line(summaries: list[dict[str, Any]], wall: float, jobs: int | None) -> str:
    """The closing line: runs, jobs, wall seconds of the command and of the runs summed."""
    n = len(summaries)
    workers = max(1, min(jobs or default_jobs(), n))
    runs_wall = sum(float(s.get("wall_seconds", 0.0) or 0.0) for s in summaries)
    jobs_total = sum(int(s.get("jobs_submitted", 0) or 0) for s in summaries)
    return (f"total: {n} run(s), {jobs_total} jobs simulated in {wall:.1f} s wall "
            f"({runs_wall:.1f} s of runs on {workers} process(es))")


def warning_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """`warning: POLICY: TEXT` for each entry of each summary's `warnings` list."""
    lines = []
    for s in summaries:
        found = s.get("warnings")
        if not found:
            continue
        for text in [found] if isinstance(found, str) else found:
            lines.append(f"warning: {s.get('policy', '?')}: {text}")
    return lines


def note_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """`note: TEXT (POLICY, ...)` once for each distinct entry of the summaries' `notes`."""
    seen: dict[str, list[str]] = {}
    for s in summaries:
        for text in s.get("notes") or []:
            seen.setdefault(str(text), []).append(str(s.get("policy", "?")))
    return [f"note: {text} ({', '.join(names)})" for text, names in seen.items()]


def _writable_out(out: str) -> Path:
    """The results folder, created and checked writable before anything is simulated.

    Raises:
        InvalidParameter: It cannot be created or written in (names it and the reason).
    """
    from schedlab.sim.errors import InvalidParameter
    from schedlab.sim.writing import FolderNotWritable, ensure_writable_dir

    try:
        return ensure_writable_dir(out)
    except FolderNotWritable as e:
        raise InvalidParameter(f"--out: {e}") from None


def params_by_policy(policies: list[str], given: dict[str, str]
                     ) -> dict[str, dict[str, str]]:
    """Each policy's parameters (engine keys and its own) of the `--param`s given.

    `KEY=VALUE` goes to every policy of the command, and each must take it: a key that
    some policies do not know is an error naming them (with one policy, as with several),
    unless it is scoped as `POLICY.KEY=VALUE` (POLICY as given to `--policy`, or its
    results label), which goes to that policy only. Every value is parsed too, so a bad
    one fails before any run.

    Raises:
        InvalidParameter: An unknown key (the closest known one named), a key some
            policies do not take, or a scope that is not a policy of the command.
    """
    from schedlab.sim.engine_params import ENGINE_PARAMS, check_params, policy_params
    from schedlab.sim.errors import InvalidParameter

    scoped: dict[str, dict[str, str]] = {n: {} for n in policies}
    common: dict[str, str] = {}
    for key, value in given.items():
        scope, dot, name = key.rpartition(".")
        if not dot:
            common[key] = value
            continue
        target = next((n for n in policies if scope in (n, policy_label(n))), None)
        if target is None or not name:
            raise InvalidParameter(
                f"--param {key}={value}: {scope!r} is not a policy of this command "
                f"({', '.join(policies)}); a parameter for one policy is written "
                "POLICY.KEY=VALUE")
        scoped[target][name] = value
    known = {n: set(ENGINE_PARAMS) | set(policy_params(n)) for n in policies}
    for key, value in common.items():
        without = [n for n in policies if key not in known[n]]
        if not without or len(without) == len(policies):
            continue  # taken by all, or by none (split_params below names the close ones)
        takers = [n for n in policies if key in known[n]]
        raise InvalidParameter(
            f"--param {key}={value}: polic{'y' if len(without) == 1 else 'ies'} "
            f"{', '.join(repr(n) for n in without)} do{'es' if len(without) == 1 else ''} "
            f"not take parameter {key!r} (taken by {', '.join(repr(n) for n in takers)}); "
            f"give it to those as POLICY.{key}=VALUE, e.g. --param "
            f"{policy_label(takers[0])}.{key}={value}")
    out: dict[str, dict[str, str]] = {}
    for name in policies:
        out[name] = {**common, **scoped[name]}
        check_params(name, out[name])  # an unknown key names the policy and close matches
    return out


def run_many(trace_src: str, topo_src: str, policies: list[str], params: list[str], seed: int,
             until: float | None, max_jobs: int | None, out: str, skip_bad_rows: bool,
             trace_format: str | None, quiet: bool, *, jobs: int | None = None,
             **shaping: Any) -> list[dict[str, Any]]:
    """Load the inputs once, shape the trace, run the policies; return the summaries.

    The policies run on `jobs` processes (default: the cores; `schedlab.app.run_pool`); the
    summaries come back in the order of `policies`.

    `--param load=X` is the target load of a calibrated generator trace (`philly-like`,
    `helios-like`) on the topology, not a policy parameter. A policy given as
    'module:Class' or 'file.py:Class' writes its results under its class's name.
    """
    from schedlab.app.inputs import load_named_topology as load_topology
    from schedlab.app.inputs import load_named_trace as load_trace
    from schedlab.policies import registered_policies
    from schedlab.sim.errors import InvalidParameter
    from schedlab.sim.params import parse_kv

    names = policies or registered_policies()
    labels = {n: policy_label(n) for n in names}  # unknown names fail before any work
    for n, label in labels.items():
        clash = [m for m in labels if m != n and labels[m] == label]
        if clash:
            raise InvalidParameter(f"policies {n!r} and {clash[0]!r} would both write their "
                                   f"results to {label!r}; run them separately")
    given = parse_kv(params)
    load = given.pop("load", None)
    per_policy = params_by_policy(names, given)
    warm_up(names, jobs or default_jobs())  # the pool's imports overlap the loading below
    from schedlab.sim.engine import quiet_collector

    with quiet_collector():  # millions of rows: the collector would rescan them all
        topo = load_topology(topo_src)
        trace = load_trace(trace_src, skip_bad_rows=skip_bad_rows, trace_format=trace_format,
                           topology=topo, load=None if load is None else _float("load", load),
                           seed=seed)
        trace = shape_from_options(trace, topo, **shaping)
    shaped = {k: v for k, v in shaping.items() if v not in (None, False)}
    if trace.bad_rows:  # a warning, not progress: --quiet keeps it
        click.echo(f"warning: skipped {trace.bad_rows} bad row(s) of {trace_src}; first: "
                   f"{trace.bad_row_messages[0] if trace.bad_row_messages else ''}", err=True)
    root = _writable_out(out)  # after the inputs are known good, before the first run
    extra: dict[str, Any] = {}
    if shaped or load is not None:
        extra = {"shaping": shaped, "trace_load": load, "trace_format": trace_format}
    tasks = [PolicyTask(name, labels[name], per_policy[name], str(root / labels[name]), extra,
                        previous_wall(root / labels[name]))
             for name in names]
    inputs = RunInputs(trace, topo, seed, until, max_jobs)
    board = ProgressBoard([t.label for t in tasks]) \
        if not quiet and sys.stderr.isatty() else None
    return run_tasks(inputs, tasks, jobs or default_jobs(), board)


@main.command("policies", epilog="""\b
Examples:
  schedlab policies
  schedlab policies | grep -A8 '^tiresias-las'
""")
def policies_cmd() -> None:
    """List the registered policies (plugins included), their parameters and defaults."""
    from schedlab.policies import policy_class, registered_policies
    from schedlab.sim.engine_params import ENGINE_PARAMS
    from schedlab.sim.registry import PLACERS

    for name in registered_policies():
        try:
            cls = policy_class(name)
        except SimError as e:  # a broken plugin must not hide the others
            click.echo(f"{name}: (cannot be loaded: {e})")
            continue
        doc = (cls.__doc__ or "").strip().splitlines()
        click.echo(f"{name}: {cls.description or (doc[0] if doc else '')}")
        for key, p in cls.params.items():
            click.echo(f"    {key} = {_show(p.default)}    {p.doc}")
    click.echo("\nengine parameters (every policy):")
    for key, p in ENGINE_PARAMS.items():
        click.echo(f"    {key} = {_show(p.default)}    {p.doc}")
    click.echo(f"\nplacers: {', '.join(PLACERS.names())}")
    click.echo("\nother policies: --policy module:Class or --policy path/to/file.py:Class")


def _float(key: str, v: str) -> float:
    from schedlab.sim.errors import InvalidParameter

    try:
        return float(v)
    except ValueError:
        raise InvalidParameter(f"--param {key}={v!r}: expected a number") from None


def _show(v: Any) -> str:
    if isinstance(v, dict):
        return ",".join(f"{getattr(k, 'label', k)}={x:g}" for k, x in v.items())
    return str(v)


@main.group(epilog="""\b
Examples:
  schedlab topology show philly
  schedlab topology show my_cluster.yaml
""")
def topology() -> None:
    """Inspect topologies."""


@topology.command("show", epilog="""\b
Examples:
  schedlab topology show                 # the default topology
  schedlab topology show dgx-a100
  schedlab topology show hivedscheduler.yaml
""")
@click.argument("source", default="default")
def topology_show(source: str) -> None:
    """The cell tree, level counts and GPU types of a topology file or preset."""
    from schedlab.app.inputs import load_named_topology as load_topology
    from schedlab.topologies import describe

    try:
        click.echo(describe(load_topology(source)))
    except SimError as e:
        fail(e)


main.add_command(trace_group)

from schedlab.app.cli_research import check, plot, report, sweep  # noqa: E402

for _cmd in (sweep, plot, check, report):
    main.add_command(_cmd)


def entry(prog_name: str | None = None) -> None:
    """The `schedlab` console script: `main` in a process settled for large runs.

    Its C allocator gives freed memory back (`schedlab.app.allocator`); `main` itself, as the
    tests and embedding code call it, leaves the calling process as it is.
    """
    from schedlab.app.allocator import settle_allocator

    settle_allocator()
    main(prog_name=prog_name)


if __name__ == "__main__":  # pragma: no cover
    entry()
