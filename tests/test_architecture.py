"""The layers of the code base: imports point down, never up, and never in a cycle.

model (schedlab.sim.model, schedlab.sim.errors, ...) -> topologies, traces -> simulation
core (schedlab.sim.cluster, the engine and its parts, the context) -> policies ->
application (schedlab.app). Edges are read from the source with ast; imports under
`if TYPE_CHECKING:` do not count (they never run). Function-level imports count: they run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import import_cycles

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("sim", "policies", "topologies", "traces", "app")
"""The subpackages' top-level folders (each linked from schedlab/)."""

MODEL = {f"schedlab.sim.{m}" for m in ("model", "compact", "errors", "params", "jobstate",
                                       "interfaces", "roles", "registry")}
MODEL |= {"schedlab", "schedlab._native"}
# the application lives in schedlab.app; everything else in schedlab.sim is the core


def layer(module: str) -> int:
    """0 model, 1 topologies/traces, 2 core, 3 policies, 4 application."""
    if module in MODEL:
        return 0
    if module.startswith(("schedlab.topologies", "schedlab.traces")):
        return 1
    if module.startswith("schedlab.policies"):
        return 3
    if module.startswith("schedlab.app") or module == "schedlab.__main__":
        return 4
    return 2


def subpackage(module: str) -> str:
    """`schedlab.traces.base` -> "traces" ("" for the root package itself)."""
    return module.split(".")[1] if "." in module else ""


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "schedlab").glob("*.py")):
        out["schedlab" if path.stem == "__init__" else f"schedlab.{path.stem}"] = path
    for pkg in FOLDERS:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = ["schedlab", *path.relative_to(ROOT).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """Modules of ours that `module` imports at run time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    is_pkg = path.name == "__init__.py"

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for n in node.orelse:
                visit(n)
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "schedlab":
                    m = resolve(a.name)
                    if m:
                        found.add(m)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module if is_pkg else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            if base.split(".")[0] == "schedlab":
                for a in node.names:
                    full = f"{base}.{a.name}"
                    m = resolve(full) if full in known else resolve(base)
                    if m:
                        found.add(m)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports_of(p, m, known) for m, p in mods.items()}


def test_imports_point_down_the_layers():
    upward = [f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
              for m, deps in graph().items() for d in sorted(deps) if layer(d) > layer(m)]
    assert not upward, "\n".join(upward)


def test_topologies_and_traces_do_not_import_each_other():
    bad = [f"{m} imports {d}" for m, deps in graph().items() for d in sorted(deps)
           if {subpackage(m), subpackage(d)} == {"topologies", "traces"}]
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    cycles = import_cycles(graph())
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles[:10])


def test_importing_the_engine_stays_light():
    """The engine needs no pandas, matplotlib, trace reader, policy or application code."""
    code = ("import sys, schedlab.sim.engine; "
            "print('\\n'.join(sorted(m for m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    heavy = [m for m in out if m.split(".")[0] in ("pandas", "matplotlib", "pyarrow", "scipy")
             or m.startswith(("schedlab.traces.readers", "schedlab.policies", "schedlab.app",
                              "schedlab.sim.results"))]
    assert not heavy, heavy
