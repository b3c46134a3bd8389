"""The README's promises: its test command is CI's, its code examples run, it stays a
short front page (the details live in docs/), and every link into docs/ lands."""

from __future__ import annotations

import re
from pathlib import Path

from schedlab.policies.registry import unregister

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _slug(heading: str) -> str:
    """A heading's anchor, as Python-Markdown's toc and GitHub make it (for our headings)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", text)


def _anchors(text: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # no headings in code
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_ci_runs_exactly_the_readme_test_command():
    commands = [b.strip() for b in _blocks("bash") if "pytest" in b]
    assert len(commands) == 1
    assert commands[0] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_two_commands():
    """The first command installs and runs `schedlab run` on the bundled default; the
    second is the test command; getting-started shows the same two, word for word."""
    blocks = [b.strip() for b in _blocks("bash")]
    first, second = blocks[0], blocks[1]
    assert first.splitlines()[0] == ("python3 -m venv .venv && .venv/bin/pip install -e . "
                                     "&& .venv/bin/schedlab run")
    assert "pytest" in second and '".[dev]"' in second
    started = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert first in started and second in started


def test_readme_stays_a_front_page():
    """The README introduces and points; the details live in docs/ (issue 45, part 6)."""
    assert len(README.splitlines()) <= 220, "move the detail into a docs/ page"
    assert "## Layout" in README
    for word in ("schedlab/", "SCHEDLAB_COMPILE=1", "SCHEDLAB_PURE=1", "compiled_modules()"):
        assert word in README, word


def test_readme_links_land():
    """Every relative link of the README names a file of the repository and, with an
    anchor, a heading of that file (README links are not checked by mkdocs)."""
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        if "://" in link:
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        assert target.is_file(), link
        if anchor:
            assert anchor in _anchors(target.read_text(encoding="utf-8")), link


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
