"""No import cycle inside the simulation core (sim/), counting every import: those under
`if TYPE_CHECKING:` and inside functions too. Each engine part takes a narrow interface
(a Protocol or a small dataclass of what it uses), not the whole run, so no part needs to
name the engine back."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import import_cycles

SIM = Path(__file__).resolve().parents[2] / "sim"


def sim_imports() -> dict[str, set[str]]:
    """Module (stem) -> the sim modules it imports anywhere in its source."""
    mods = {p.stem: p for p in SIM.glob("*.py") if p.stem != "__init__"}
    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for full in names:
                parts = full.split(".")
                if parts[:2] == ["schedlab", "sim"] and len(parts) > 2 and parts[2] in mods:
                    found.add(parts[2])
        found.discard(name)
        out[name] = found
    return out


def test_the_graph_is_read() -> None:
    g = sim_imports()
    assert "engine" in g and "lifecycle" in g["engine"]


def test_no_import_cycle_in_sim_type_checking_imports_included() -> None:
    found = import_cycles(sim_imports())
    assert not found, "\n".join(" -> ".join(c) for c in found)
