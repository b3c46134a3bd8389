"""The README's promises: its test command is CI's, and its code examples run."""

from __future__ import annotations

import re
from pathlib import Path

from schedlab.policies.registry import unregister

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    commands = [b.strip() for b in _blocks("bash") if "pytest" in b]
    assert len(commands) == 1
    assert commands[0] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_add_a_policy_example_runs_and_conforms(tmp_path):
    example = next(b for b in _blocks("python") if "class SmallestFirst" in b)
    assert len(example.strip().splitlines()) < 50
    try:
        exec(compile(example, "README-example", "exec"), {})
        from schedlab.policies.conformance import check_policy

        check_policy("smallest-first")
    finally:
        unregister("smallest-first")


def test_python_api_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    example = next(b for b in _blocks("python") if "result.summary" in b)
    ns: dict = {}
    exec(compile(example.replace("trace = load_trace(\"default\")",
                                 "trace = load_trace(\"synthetic:100\")"),
                 "README-api", "exec"), ns)
    assert (tmp_path / "results" / "my-run" / "summary.json").exists()
