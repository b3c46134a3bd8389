"""The documentation: the site builds strictly, every page's Python examples run, the
generated policy pages cover the registry, and the contract page keeps every line of the
shared SPEC.

A Python block that is not meant to run (a fragment of a method, a signature sketch) is
preceded by the line `<!-- docs-test: skip: WHY -->`; the reason is required. The blocks
of one page run in order in one namespace (a page reads like one session), in a fresh
folder holding a copy of `examples/`, with the bundled trace and topology only.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from schedlab.sim.registry import PLACERS, POLICIES, SPEED_FACTORS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]
SKIP = re.compile(r"<!-- docs-test: skip: (?P<why>\S.*?) -->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```\s*$", re.M | re.S)


def code_blocks(text: str, lang: str = "python") -> list[tuple[int, str, str]]:
    """(line, code, skip reason or '') of each fenced block of `lang` in a Markdown text."""
    out = []
    for m in FENCE.finditer(text):
        if m.group("lang") != lang:
            continue
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.fullmatch(before.strip())
        if "docs-test" in before and skip is None:
            raise AssertionError(f"line {line - 1}: a docs-test marker must read "
                                 "'<!-- docs-test: skip: WHY -->'")
        out.append((line, m.group("body"), skip.group("why") if skip else ""))
    return out


def _load_docs_pages():
    spec = importlib.util.spec_from_file_location("docs_pages", ROOT / "tools" / "docs_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_python_examples_run(page, tmp_path, monkeypatch):
    blocks = code_blocks(page.read_text(encoding="utf-8"))
    runnable = [(line, code) for line, code, why in blocks if not why]
    if not runnable:
        pytest.skip("no runnable Python block")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    registries = (POLICIES, PLACERS, SPEED_FACTORS)
    before = [set(r.names()) for r in registries]
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    try:
        for line, code in runnable:
            name = f"{page.relative_to(ROOT)}:{line}"
            exec(compile(code, name, "exec"), namespace)  # noqa: S102 - the page's own code
    finally:
        for registry, names in zip(registries, before, strict=True):
            for extra in set(registry.names()) - names:
                registry.unregister(extra)


def test_skip_markers_are_well_formed():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for lang in ("python", "bash", "yaml"):
            code_blocks(text, lang)  # raises on a malformed marker


def test_every_policy_has_a_generated_page():
    from schedlab.policies import policy_class, registered_policies

    module = _load_docs_pages()
    pages = module.pages()
    assert "policies/index.md" in pages
    assert len(module.builtin_policies()) >= 20
    assert set(module.builtin_policies()) <= set(registered_policies())
    for name in module.builtin_policies():
        text = pages[f"policies/{name}.md"]
        cls = policy_class(name)
        assert text.startswith(f"# `{name}`")
        for key in cls.params:
            assert f"| `{key}` |" in text, (name, key)
        assert f"[`{name}`]({name}.md)" in pages["policies/index.md"]
    assert not (DOCS / "policies").exists(), "policy pages are generated; docs/policies/ " \
        "would hide them"


def _table_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line, cells) of every body row of every Markdown table (header rows left out)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
            continue
        if i + 1 < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1]):
            continue  # a header row (the policy page's first table has an empty one)
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        out.append((i + 1, [c.strip() for c in cells]))
    return out


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of every `##`/`###` section, code fences left out of the split."""
    text = re.sub(r"^```.*?^```", "```code```", text, flags=re.S | re.M)
    parts = re.split(r"^(#{2,3} .+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_generated_policy_pages_have_no_empty_part():
    """No generated page has an empty table cell or an empty section.

    A build whose docstrings were dropped (mypyc's, before _native put them back) once gave
    every compiled policy an empty "paper and scope" row and an empty "What it follows,
    and where it departs" section, and the strict build passed regardless.
    """
    for path, text in _load_docs_pages().pages().items():
        for line, cells in _table_rows(text):
            assert all(cells), f"{path}:{line}: an empty table cell: {cells}"
        for heading, body in _sections(text):
            words = re.sub(r"^From the docstring of `[^`]+`:$", "", body, flags=re.M)
            assert re.search(r"\w", words), f"{path}: section {heading!r} is empty"
        assert re.search(r"\| paper and scope \| \S", text) or path == "policies/index.md"


def test_a_missing_policy_docstring_fails_the_build(monkeypatch):
    """tools/docs_pages.py refuses to make a page from a missing docstring, naming the policy."""
    from schedlab.policies import policy_class

    module = _load_docs_pages()
    cls = policy_class("fifo-backfill")
    monkeypatch.setattr(sys.modules[cls.__module__], "__doc__", None)
    with pytest.raises(module.MissingDocstring, match="policy 'fifo-backfill'.*paper and scope"):
        module.policy_page("fifo-backfill")
    with pytest.raises(module.MissingDocstring, match=f"its module {cls.__module__}"):
        module.pages()  # the whole site: the first policy of that module is named
    monkeypatch.undo()

    monkeypatch.setattr(cls, "__doc__", "")
    monkeypatch.setattr(cls, "description", "", raising=False)
    with pytest.raises(module.MissingDocstring, match="policy 'fifo-backfill'"):
        module.policy_page("fifo-backfill")
    monkeypatch.undo()

    from schedlab.sim.registry import PLACERS

    placer = PLACERS.get("pack")
    monkeypatch.setattr(sys.modules[placer.__module__], "__doc__", "")
    with pytest.raises(module.MissingDocstring, match="placer 'pack'"):
        module.index_page()


def test_docstrings_become_markdown_lists():
    md = _load_docs_pages()._markdown("""Summary.

    Modes:
    * one,
      continued;
    * two.
    After the list.
    """)
    assert md == "Summary.\n\nModes:\n\n* one,\n  continued;\n* two.\n\nAfter the list."


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")  # the docs extra (in dev); its plugins must then be there
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    from schedlab.policies import registered_policies

    for name in registered_policies():
        assert (site / "policies" / name / "index.html").is_file(), name
    traces_page = (site / "traces" / "index.html").read_text(encoding="utf-8")
    assert "generated: trace-formats" not in traces_page
    assert "include: traces/data" not in traces_page
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "Usage: schedlab run [OPTIONS]" in cli
    api = (site / "api" / "sim" / "index.html").read_text(encoding="utf-8")
    assert 'id="schedlab.sim.engine.Simulation"' in api


def _schedlab_commands(text: str) -> list[tuple[int, list[str]]]:
    """(line, arguments) of every `schedlab ...` command in the bash blocks of a page."""
    out = []
    for line, code, _ in code_blocks(text, "bash"):
        for i, row in enumerate(code.splitlines()):
            for part in row.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0] in ("schedlab", ".venv/bin/schedlab"):
                    out.append((line + 1 + i, words[1:]))
    return out


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_shell_commands_parse(page):
    """Every `schedlab` command shown parses: its subcommand, options and choices exist.

    Nothing is run; a path that exists only after an earlier command is not an error.
    """
    import click

    from schedlab.app.cli import main

    for line, args in _schedlab_commands(page.read_text(encoding="utf-8")):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # click's protected_args
                cmd: click.Command = main
                ctx = main.make_context("schedlab", list(args))
                while isinstance(cmd, click.Group):
                    rest = [*ctx.protected_args, *ctx.args]
                    name, sub, rest = cmd.resolve_command(ctx, rest)
                    assert sub is not None and name is not None
                    ctx = sub.make_context(name, rest, parent=ctx)
                    cmd = sub
        except click.UsageError as e:
            if "does not exist" not in e.format_message():
                raise AssertionError(f"{page.name}:{line}: schedlab {shlex.join(args)}: "
                                     f"{e.format_message()}") from None


def test_every_trace_format_is_documented():
    from schedlab.traces import trace_formats

    text = (DOCS / "traces.md").read_text(encoding="utf-8")
    for name in trace_formats():
        assert f"| `{name}` |" in text, name


def test_contract_page_keeps_the_shared_spec():
    """docs/contract.md holds every line of the shared SPEC, in order; it may add more.

    The project owns the contract now: additions (new commands, parameters, columns) go
    on the page; a line of the shared SPEC is never dropped or reworded there.
    """
    shared = Path(os.environ.get("SCHEDLAB_SHARED", ROOT.parent / "shared")) / "SPEC.md"
    if not shared.is_file():
        pytest.skip("no shared SPEC.md beside the repository: the page is the contract")
    page = (DOCS / "contract.md").read_text(encoding="utf-8")
    page = re.sub(r"<!-- not-in-spec -->.*?<!-- /not-in-spec -->\n", "", page, flags=re.S)
    page = SKIP.sub("", page)

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines() if line.strip()]

    have = iter(lines(page))
    missing = [line for line in lines(shared.read_text(encoding="utf-8"))
               if not any(line == got for got in have)]
    assert not missing, f"SPEC lines missing from docs/contract.md (or out of order): {missing[:5]}"


def test_readme_points_to_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/contract.md" in readme
    assert "mkdocs serve" in readme
    assert "kept in the shared folder" not in readme
