"""Every `--help` page ends with examples; `run`'s options say what they do."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from schedlab.app.cli import main


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.mark.parametrize("path", _commands(main), ids=lambda p: " ".join(p) or "schedlab")
def test_every_help_page_has_examples(path: tuple[str, ...]) -> None:
    r = CliRunner().invoke(main, [*path, "--help"])
    assert r.exit_code == 0, r.output
    examples = r.output.split("Examples:", 1)
    assert len(examples) == 2, r.output
    lines = [x.strip() for x in examples[1].splitlines() if x.strip()]
    assert lines and all(x.startswith("schedlab") for x in lines)
    if path:  # each example is of the command itself
        assert any(x.startswith("schedlab " + " ".join(path)) for x in lines)


def test_run_options_have_help_and_trace_format_is_a_choice(tmp_path) -> None:
    r = CliRunner().invoke(main, ["run", "--help"])
    assert "Seed of the run's random numbers" in r.output
    flat = r.output.replace("\n", "").replace(" ", "")
    assert "--trace-format[canonical|" in flat and "|swf|" in flat
    r = CliRunner().invoke(main, ["run", "--trace-format", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "Invalid value for '--trace-format'" in r.output
    assert "'nope' is not one of" in r.output and "'swf'" in r.output
