"""Values of a sweep run checked one by one: shaping numbers, windows, inputs, paths.

Each check names the run (`at`), the key and the value, and says what is allowed.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from schedlab.sim.errors import InvalidParameter, SimError

__all__ = ["check_inputs", "int_value", "portable_path", "positive_value", "resolve_path",
           "seconds_value", "text_value", "window_value"]

_PATH_SUFFIXES = (".csv", ".gz", ".parquet", ".pq", ".yaml", ".yml", ".json", ".txt", ".swf")


def text_value(v: Any, key: str, at: str) -> str:
    """A trace or topology: a non-empty name or path, stripped."""
    if not isinstance(v, str) or not v.strip():
        raise InvalidParameter(f"{at}: {key} {v!r}: expected a bundled name or a file path")
    return v.strip()


def int_value(v: Any, key: str, at: str, *, allow_none: bool = True) -> int | None:
    """An integer >= 0 (None when allowed)."""
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidParameter(f"{at}: {key} {v!r}: expected an integer >= 0")
    return int(v)


def positive_value(v: Any, key: str, at: str) -> float | None:
    """A finite number > 0, or None."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise InvalidParameter(f"{at}: {key} {v!r}: expected a number > 0 (1 = the trace's "
                               "own load, 2 = arrivals twice as fast)")
    return float(v)


def seconds_value(v: Any, key: str, at: str) -> float | None:
    """Finite seconds >= 0, or None."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise InvalidParameter(f"{at}: {key} {v!r}: expected seconds >= 0")
    return float(v)


def window_value(v: Any, at: str) -> str | None:
    """`START:END` from a string, or `START..END` from a [start, end] list (dates may hold ':')."""
    if v is None:
        return None
    if isinstance(v, list) and len(v) == 2:
        parts = ["" if x is None else (f"{x:g}" if isinstance(x, int | float)
                                       and not isinstance(x, bool) else str(x)) for x in v]
        text = f"{parts[0]}..{parts[1]}"
    elif isinstance(v, str) and (":" in v or ".." in v):
        text = v.strip()
    else:
        raise InvalidParameter(f"{at}: trace_window {v!r}: expected 'START:END' or "
                               "[start, end] (seconds from the first submission, or dates)")
    from schedlab.traces.shaping import parse_window

    try:
        parse_window(text, 0.0)  # syntax only: epoch 0 lets any date through
    except SimError as e:
        raise InvalidParameter(f"{at}: {e}") from None
    return text


def resolve_path(v: Any, root: Path) -> Any:
    """A relative path to an existing file, resolved against the sweep file's folder."""
    if not isinstance(v, str):
        return v
    text = v.strip()
    looks = os.sep in text or text.lower().endswith(_PATH_SUFFIXES)
    if looks and not Path(text).is_absolute() and (root / text).exists():
        return str((root / text).resolve())
    if looks and Path(text).exists():
        return str(Path(text).resolve())
    return v


def portable_path(v: Any, root: Path) -> Any:
    """An absolute path to an existing file, relative to `root` (POSIX); else `v` as it is.

    `root` is the sweep file's folder: run ids and labels then do not depend on where the
    checkout is (`resolve_path` reverses it).
    """
    if not isinstance(v, str) or not Path(v).is_absolute() or not Path(v).exists():
        return v
    rel = Path(os.path.relpath(v, Path(root).resolve())).as_posix()
    # a bare name without a trace suffix would read as a bundled name: mark it a path
    return rel if "/" in rel or rel.lower().endswith(_PATH_SUFFIXES) else f"./{rel}"


def check_inputs(trace: str, topology: str, at: str, checked: set[tuple[str, str]]) -> None:
    """Fail early on an unknown trace or topology name, or a missing file (each once)."""
    from schedlab.app.inputs import load_named_topology as load_topology
    from schedlab.app.inputs import philly_table
    from schedlab.traces import bundled_traces, load_trace

    if ("trace", trace) not in checked:
        if trace == "philly":
            try:
                philly_table()
            except SimError as e:
                raise InvalidParameter(f"{at}: {e}") from None
        elif not (Path(trace).is_file() or trace in bundled_traces()):
            try:
                load_trace(trace)
            except SimError as e:
                raise InvalidParameter(f"{at}: {e}") from None
        checked.add(("trace", trace))
    if ("topology", topology) not in checked:
        try:
            load_topology(topology)
        except SimError as e:
            raise InvalidParameter(f"{at}: {e}") from None
        checked.add(("topology", topology))
