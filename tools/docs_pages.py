"""Generated documentation pages: one page per registered policy, made from the registry.

A MkDocs hook (`hooks:` in mkdocs.yml): at build time it writes `policies/index.md` (every
policy, the engine parameters and the placers) and `policies/<name>.md` for each
registered policy, from the policy class (`description`, `params`, `placer`, ...) and the
docstrings of its class and module, so the pages can never fall out of step with the
code. Nothing is written to `docs/`; to read the pages without MkDocs:
`python tools/docs_pages.py OUT_DIR`.

A page needs the policy's module docstring (its first line is the "paper and scope" row,
the whole is "What it follows, and where it departs"), a summary (`description` or the
class docstring) and, for a policy or placer that names a placer, the placer's docstrings.
A missing one fails the build (`MissingDocstring`, naming the policy or placer) rather than
giving a page with an empty row or section, as a build whose docstrings were dropped
(mypyc's) once did.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the hook runs inside `mkdocs`, maybe not from the root
    sys.path.insert(0, str(ROOT))

NAV_TITLE = "Policies"
"""The nav entry (mkdocs.yml) that the generated pages are put under."""

INDEX = "policies/index.md"


class MissingDocstring(RuntimeError):
    """A docstring a generated page is made from is missing or empty."""


def _needed(doc: str | None, owner: str, what: str, fills: str) -> str:
    """`doc`, or MissingDocstring naming the policy or placer and what it would leave empty."""
    if not inspect.cleandoc(doc or "").strip():
        raise MissingDocstring(f"{owner}: {what} has no docstring, so its page would have "
                               f"an empty {fills}; write one (or, in a compiled build, "
                               "check that schedlab/_native.py put it back)")
    return str(doc)


def _show(value: Any) -> str:
    """A default as `schedlab policies` prints it (levels by their label)."""
    if isinstance(value, Mapping):
        return ",".join(f"{getattr(k, 'label', k)}={v:g}" if isinstance(v, (int, float))
                        else f"{getattr(k, 'label', k)}={v}" for k, v in value.items())
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) if value else "(none)"
    return "(none)" if value is None else str(value)


def _escape(text: str) -> str:
    """Text safe in Markdown: a `<` that could open an HTML tag is escaped outside code."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = re.sub(r"<(?=[A-Za-z/!?])", "&lt;", parts[i])
    return "`".join(parts)


def _cell(text: str) -> str:
    """Text for one table cell: one line, pipes escaped."""
    return _escape(" ".join(text.split())).replace("|", "\\|")


def _markdown(doc: str | None) -> str:
    """A docstring as Markdown: dedented, with a blank line before each list."""
    text = inspect.cleandoc(doc or "")
    out: list[str] = []
    for line in text.splitlines():
        is_item = re.match(r"\s{0,3}([*+-]|\d+[.)])\s", line) is not None
        in_list = bool(out) and bool(out[-1].strip()) and _is_item_block(out)
        if is_item and out and out[-1].strip() and not in_list:
            out.append("")  # a list needs a blank line before it
        elif in_list and not is_item and line.strip() and not line[0].isspace():
            out.append("")  # an unindented line after a list starts a paragraph
        out.append(line)
    return _escape("\n".join(out))


def _is_item_block(lines: list[str]) -> bool:
    """Whether the paragraph that ends these lines is a list (so no blank line is needed)."""
    for line in reversed(lines):
        if not line.strip():
            return False
        if re.match(r"\s{0,3}([*+-]|\d+[.)])\s", line):
            return True
    return False


def _first_line(doc: str | None) -> str:
    lines = inspect.cleandoc(doc or "").splitlines()
    return lines[0].strip() if lines else ""


def _body(doc: str | None) -> str:
    """A docstring without its summary line."""
    text = inspect.cleandoc(doc or "")
    _, _, rest = text.partition("\n")
    return _markdown(rest.strip())


def summary(cls: type) -> str:
    """A policy's one-line summary: its `description`, else its docstring's first line."""
    return str(getattr(cls, "description", "") or _first_line(cls.__doc__))


def _policy_summary(name: str) -> str:
    """A built-in policy's summary, or MissingDocstring naming it."""
    from schedlab.policies import policy_class

    cls = policy_class(name)
    if not summary(cls).strip():
        _needed(cls.__doc__, f"policy {name!r}", f"its class {cls.__qualname__} (and no "
                "`description`)", "summary line and index row")
    return summary(cls)


def _placer_doc(name: str, module: bool) -> str:
    """A placer's class or module docstring; MissingDocstring for a built-in one."""
    from schedlab.sim.registry import PLACERS

    pcls = PLACERS.get(name)
    doc = sys.modules[pcls.__module__].__doc__ if module else pcls.__doc__
    if not pcls.__module__.startswith("schedlab."):
        return doc or ""  # a plugin's placer: not ours to require
    what = f"its module {pcls.__module__}" if module else f"its class {pcls.__qualname__}"
    return _needed(doc, f"placer {name!r}", what, "section" if module else "table cell")


def policy_page(name: str) -> str:
    """The Markdown page of one registered policy."""
    from schedlab.policies import policy_class
    from schedlab.sim.registry import PLACERS

    cls = policy_class(name)
    module_doc = _needed(sys.modules[cls.__module__].__doc__, f"policy {name!r}",
                         f"its module {cls.__module__}",
                         "'paper and scope' row and 'What it follows' section")
    lines = [f"# `{name}`", "", _escape(_policy_summary(name).rstrip(".")) + ".", ""]
    placer = getattr(cls, "placer", None)
    period = getattr(cls, "period", None)
    tenants = getattr(cls, "tenant_field", None)
    if tenants is not None and not isinstance(tenants, str):
        # a compiled policy (hived) keeps it as an instance attribute with a default
        tenants = getattr(cls(), "tenant_field", None)
    lines += [
        "| | |", "|---|---|",
        f"| class | `{cls.__module__}.{cls.__qualname__}` |",
        f"| paper and scope | {_cell(_first_line(module_doc))} |",
        f"| default placer | `{placer or 'consolidated'}`"
        f"{'' if placer else ' (the engine default)'} |",
        f"| wakes on | {'a timer every ' + _show(period) + ' s, and ' if period else ''}"
        "arrivals, completions and its own `ctx.wake_at` |",
        f"| shares between | {('`' + tenants + '`') if tenants else 'no tenants'} |",
        f"| usable as hived's `order` | {'yes' if getattr(cls, 'orders', True) else 'no'} |",
        "", "```bash", f"schedlab run --policy {name}", "```", "",
        "## Parameters", "",
    ]
    params = getattr(cls, "params", {})
    for key, p in params.items():
        if not str(p.doc or "").strip():
            raise MissingDocstring(f"policy {name!r}: parameter {key!r} has no doc line, so "
                                   "its page would have an empty 'meaning' cell")
    if params:
        lines += ["| parameter | default | meaning |", "|---|---|---|"]
        lines += [f"| `{key}` | `{_show(p.default)}` | {_cell(p.doc)} |"
                  for key, p in params.items()]
    else:
        lines.append("None of its own.")
    lines += ["", "Every policy also takes the [engine parameters](index.md#engine-parameters)"
              " (`--param KEY=VALUE`).", ""]
    body = _body(cls.__doc__)
    if body:
        lines += ["## How it decides", "", body, ""]
    lines += ["## What it follows, and where it departs", "",
              f"From the docstring of `{cls.__module__}`:", "",
              f"**{_escape(_first_line(module_doc))}**", "", _body(module_doc), ""]
    if placer:
        pcls = PLACERS.get(placer)
        pdoc = _needed(sys.modules[pcls.__module__].__doc__, f"policy {name!r}",
                       f"the module {pcls.__module__} of its placer {placer!r}",
                       "'Its placer' section")
        lines += [f"## Its placer: `{placer}`", "", f"From the docstring of `{pcls.__module__}`:",
                  "", _markdown(pdoc), ""]
    return "\n".join(lines)


def index_page() -> str:
    """The Markdown page listing every policy, the engine parameters and the placers."""
    from schedlab.sim.engine_params import ENGINE_PARAMS
    from schedlab.sim.registry import PLACERS

    lines = [
        "# Policies", "",
        "Generated at build time from the policy registry (`schedlab.sim.registry.POLICIES`): each "
        "page shows a policy's parameters with their defaults and the docstrings of its "
        "class and module, which say which paper it follows and where it departs from it. "
        "`schedlab policies` prints the same parameters.", "",
        "| policy | what it does |", "|---|---|",
    ]
    lines += [f"| [`{n}`]({n}.md) | {_cell(_policy_summary(n))} |"
              for n in builtin_policies()]
    lines += ["", "## Engine parameters", "",
              "Every policy takes these (`--param KEY=VALUE`, `params:` in a sweep, "
              "`params={...}` in Python).", "",
              "| parameter | default | meaning |", "|---|---|---|"]
    lines += [f"| `{key}` | `{_show(p.default)}` | {_cell(p.doc)} |"
              for key, p in ENGINE_PARAMS.items()]
    lines += ["", "## Placers", "",
              "A placer decides *where* a job goes (`--param placer=NAME`); see "
              "[Concepts](../concepts.md#placers-and-policies).", "",
              "| placer | what it does |", "|---|---|"]
    for n in PLACERS.names():
        lines.append(f"| `{n}` | {_cell(_first_line(_placer_doc(n, module=False)))} |")
    for n in PLACERS.names():
        lines += ["", f"### `{n}`", "", _markdown(_placer_doc(n, module=True))]
    return "\n".join(lines) + "\n"


def builtin_policies() -> list[str]:
    """The registered policies that ship with schedlab (plugins are not documented here)."""
    from schedlab.policies import policy_class, registered_policies
    from schedlab.sim.errors import SimError

    out = []
    for name in registered_policies():
        try:
            cls = policy_class(name)
        except SimError:  # a broken plugin is not ours to document
            continue
        if cls.__module__.startswith("schedlab.policies."):
            out.append(name)
    return out


def pages() -> dict[str, str]:
    """Every generated page: its path under docs/ -> its Markdown."""
    out = {INDEX: index_page()}
    for name in builtin_policies():
        out[f"policies/{name}.md"] = policy_page(name)
    return out


def _nav(pages_: Mapping[str, str]) -> list[Any]:
    entries: list[Any] = [INDEX]
    entries += [{path.removeprefix("policies/").removesuffix(".md"): path}
                for path in pages_ if path != INDEX]
    return entries


_CACHE: dict[str, str] = {}


def on_config(config: Any, **_: Any) -> Any:
    """MkDocs hook: put the generated pages in the nav under `Policies`."""
    _CACHE.clear()
    _CACHE.update(pages())
    nav = config.get("nav") or []
    for i, entry in enumerate(nav):
        if isinstance(entry, dict) and NAV_TITLE in entry:
            nav[i] = {NAV_TITLE: _nav(_CACHE)}
    return config


def on_files(files: Any, config: Any, **_: Any) -> Any:
    """MkDocs hook: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for path, text in (_CACHE or pages()).items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} exists: policy pages are generated, remove it")
        files.append(File.generated(config, path, content=text))
    return files


INCLUDE = re.compile(r"^<!-- include: (?P<path>[^ ]+) -->$", re.M)
"""A line that a page replaces with a file of the repository (its headings demoted)."""


def include(path: str, depth: int = 2) -> str:
    """A Markdown file of the repository, its headings `depth` levels down (fences kept)."""
    file = (ROOT / path).resolve()
    if ROOT not in file.parents or not file.is_file():
        raise FileNotFoundError(f"include: no file {path} in the repository")
    out, fence = [], False
    for line in file.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            line = "#" * depth + line
        out.append(line)
    return "\n".join(out)


FORMATS = "<!-- generated: trace-formats -->"
"""The line of a page that becomes the reader of each trace format, from its docstring."""


def formats_markdown() -> str:
    """One section per reader module: its formats, their options and its docstring."""
    from schedlab.traces.readers import TRACE_FORMATS

    by_module: dict[str, list[Any]] = {}
    for fmt in TRACE_FORMATS.values():
        module = fmt.read.__module__
        if module == "schedlab.traces.readers":  # the canonical reader: schedlab.traces.canonical
            module = "schedlab.traces.canonical"
        by_module.setdefault(module, []).append(fmt)
    lines: list[str] = []
    for module, formats in by_module.items():
        names = ", ".join(f"`{f.name}`" for f in formats)
        lines += [f"### {names}", ""]
        for f in formats:
            options = ", ".join(f"`{o}`" for o in f.options)
            lines.append(f"- `--trace-format {f.name}`: {_escape(f.description)}"
                         + (f"; options (`options={{...}}` of `load_trace`): {options}"
                            if options else ""))
        lines += ["", f"From the docstring of `{module}`:", "",
                  _markdown(sys.modules[module].__doc__), ""]
    return "\n".join(lines)


CLI = "<!-- generated: cli -->"
"""The line of a page that becomes the `--help` of every command."""


def cli_markdown() -> str:
    """One section per command and subcommand of `schedlab`: its `--help`, as printed."""
    import click

    from schedlab.app.cli import main

    lines: list[str] = []

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(cmd, info_name=path[-1], parent=parent, terminal_width=96,
                            max_content_width=96)
        name = " ".join(path)
        lines.extend([f"## `{name}`", "", "```text", cmd.get_help(ctx), "```", ""])
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                child = cmd.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    walk(child, [*path, sub], ctx)

    walk(main, ["schedlab"], None)
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs hook: fill the include lines (READMEs of the data) and the generated lines."""
    if FORMATS in markdown:
        markdown = markdown.replace(FORMATS, formats_markdown())
    if CLI in markdown:
        markdown = markdown.replace(CLI, cli_markdown())
    return INCLUDE.sub(lambda m: include(m.group("path")), markdown)


def main(argv: list[str]) -> int:
    """Write the generated pages under the folder given, to read them without MkDocs."""
    if len(argv) != 1:
        print("usage: python tools/docs_pages.py OUT_DIR", file=sys.stderr)
        return 2
    for path, text in pages().items():
        target = Path(argv[0]) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
