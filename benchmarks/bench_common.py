"""Helpers the benchmark scripts share: one case in a child process, rows as tables.

Each benchmark runs its cases in fresh subprocesses (`script --inproc ...`, which prints
its result row as the last line of JSON), so one case's memory and imports never
colour the next; these helpers run such a child and print what the cases return.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_child(script: str, args: list[str], timeout: float | None = None) -> dict | None:
    """Run `script --inproc ARGS` in a subprocess; its last JSON line, or None on timeout."""
    cmd = [sys.executable, script, "--inproc", *args]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.strip().splitlines()[-1])


def markdown_table(rows: list[dict]) -> str:
    """Rows as a Markdown table (columns of the first row)."""
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def text_table(rows: list[dict]) -> str:
    """Rows as a right-aligned plain-text table (columns of the first row)."""
    if not rows:
        return ""
    keys = list(rows[0])
    width = {k: max(len(k), *(len(str(r.get(k, ""))) for r in rows)) for k in keys}
    lines = ["  ".join(k.rjust(width[k]) for k in keys)]
    lines += ["  ".join(str(r.get(k, "")).rjust(width[k]) for k in keys) for r in rows]
    return "\n".join(lines)


def print_rows(rows: list[dict], json_path: str | None = None) -> None:
    """Print rows space-separated under a header line; also as JSON to `json_path` if given."""
    if not rows:
        return
    keys = list(rows[0])
    print("  ".join(keys))
    for r in rows:
        print("  ".join(str(r[k]) for k in keys))
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2) + "\n")
