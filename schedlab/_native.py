"""Which modules run compiled, and a stale compiled build never runs.

An opt-in compiled build (`SCHEDLAB_COMPILE=1`, see setup.py) leaves `_native_build.json`
beside this file: the modules it compiled and a SHA-256 of every source file it was built
from (each compiled module and everything it imports, since mypyc inlines constants of
imported modules). When any of those files differs, or `SCHEDLAB_PURE` is set, the
compiled modules are skipped and their source runs instead: an edit is never ignored and
never blocks an import. mypyc drops docstrings, so the manifest keeps each compiled
module's and class's, and they are put back as the module loads. A pure install has no
manifest and pays nothing here.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

MANIFEST = Path(__file__).with_name("_native_build.json")
_ROOT = Path(__file__).parent


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _source(module: str) -> Path:
    """The source file of one of schedlab's modules (`schedlab.sim.engine` -> sim/engine.py)."""
    return _ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py")


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Loads the named modules from their .py files even where a compiled one sits beside."""

    def __init__(self, modules: set[str]) -> None:
        self.modules = modules

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.modules:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname))


class _Documented(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads the compiled modules as usual, then gives back their docstrings."""

    def __init__(self, docs: dict[str, dict[str, str]]) -> None:
        self.docs = docs
        self.loaders: dict[str, importlib.abc.Loader] = {}

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.docs:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        self.loaders[fullname] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loaders[spec.name].create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loaders[module.__name__].exec_module(module)
        for qualname, doc in self.docs[module.__name__].items():
            if not qualname:
                module.__doc__ = doc
                continue
            obj: object = module
            for part in qualname.split("."):
                obj = getattr(obj, part, None)
            if isinstance(obj, type):
                try:
                    obj.__doc__ = doc
                except (AttributeError, TypeError):  # a type that will not take one
                    pass


def _check() -> tuple[list[str], str | None, bool, dict[str, dict[str, str]]]:
    """(compiled modules here, why they are not used or None, whether stale, docstrings)."""
    if not MANIFEST.is_file():
        return [], None, False, {}
    try:
        build = json.loads(MANIFEST.read_text(encoding="utf-8"))
        modules = sorted(build["modules"])
        sources: dict[str, str] = build["sources"]
        docs: dict[str, dict[str, str]] = build.get("docs", {})
    except (OSError, ValueError, KeyError, TypeError):
        return [], f"{MANIFEST} is unreadable", False, {}
    modules = [m for m in modules if any(_source(m).with_suffix(suffix).is_file()
                                         for suffix in importlib.machinery.EXTENSION_SUFFIXES)]
    if not modules:
        return [], None, False, {}  # a manifest without its modules: nothing compiled here
    if os.environ.get("SCHEDLAB_PURE"):
        return modules, "SCHEDLAB_PURE is set", False, docs
    for rel, digest in sorted(sources.items()):
        if _digest(_ROOT / rel) != digest:
            return modules, f"stale: {rel} changed since the compiled build", True, docs
    return modules, None, False, docs


def _install() -> tuple[list[str], str | None]:
    modules, why, stale, docs = _check()
    if not modules:
        return [], why
    if why is None:
        sys.meta_path.insert(0, _Documented({m: docs.get(m, {}) for m in modules}))
        return modules, None
    sys.meta_path.insert(0, _SourceFirst(set(modules)))
    if stale:
        warnings.warn(
            f"schedlab's compiled build is {why}; running pure Python (rebuild with "
            "`SCHEDLAB_COMPILE=1 pip install -e .`, or install without it)",
            RuntimeWarning, stacklevel=2)
    return [], why


_IN_USE, WHY_PURE = _install()
"""The compiled modules in use, and why a compiled build is not used (None: it is, or none)."""


def compiled_modules() -> list[str]:
    """The modules running compiled (empty: pure Python)."""
    return list(_IN_USE)
