"""Build: pure Python by default; `SCHEDLAB_COMPILE=1` compiles the hot modules with mypyc.

The editable install a researcher works in is the source itself: nothing is built, and an
edit is in the next run. The compiled build is for long sweeps and benchmarks: the same
typed source compiled to C, the same results (CI runs the golden baselines and the engine
tests on both). It compiles one extension per module, on every core, and reuses the
objects of modules whose generated C did not change (`build/native-cache`), so a rebuild
after an edit compiles only what the edit changed (mypy's analysis of the whole build,
about half a minute, runs every time). It records the SHA-256 of every file
it was built from (`schedlab/_native_build.json`): at import, a compiled build whose
sources changed is skipped for the source, with a warning (`schedlab/_native.py`). Which
modules pay for compiling, and by how much, is in docs/performance.md.

`SCHEDLAB_COMPILE=1 pip install -e .` (or `pip install .` for a wheel); a pure install
removes the compiled modules an earlier compiled build left in the source tree.
`SCHEDLAB_OPT_LEVEL` (0-3, default 3) is the C compiler's optimisation level: CI builds
at 1, which compiles in about two thirds of the CPU time and runs the same code.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "schedlab"
MANIFEST = PACKAGE / "_native_build.json"
CACHE = ROOT / "build" / "native-cache"

COMPILED = [
    # the engine's per-event path: the loop, the agenda, progress, the cluster state and
    # its indexes, the queue, recording, the context policies see, the speed factors
    "schedlab/sim/agenda.py",
    "schedlab/sim/cfuncs.py",
    "schedlab/sim/cluster.py",
    "schedlab/sim/cluster_layout.py",
    "schedlab/sim/colocation.py",
    "schedlab/sim/context.py",
    "schedlab/sim/engine.py",
    "schedlab/sim/instant.py",
    "schedlab/sim/jobstate.py",
    "schedlab/sim/lifecycle.py",
    "schedlab/sim/progress.py",
    "schedlab/sim/queue.py",
    "schedlab/sim/recorder.py",
    "schedlab/sim/speed.py",
    # a placement's lowest common cell: at every start, resume and multi-node placement
    "schedlab/topologies/walk.py",
    "schedlab/policies/placement/base.py",
    # fifo and fifo-backfill: the baseline every policy is measured against
    "schedlab/policies/fifo.py",
    # the priority walk and its victim searches (every `PriorityPolicy`, researchers'
    # included, and themis-ftf run their passes in them), and the two policies built on
    # them whose hooks run at every event (Tiresias' timers, SRTF's running columns)
    "schedlab/policies/priority.py",
    "schedlab/policies/victims.py",
    "schedlab/policies/tiresias.py",
    "schedlab/policies/sjf.py",
    # the multi-tenant policies' (drf, capacity) mirror of the engine, synced every pass
    "schedlab/policies/queues.py",
    # hai's and quota-priority's mirror of the engine, polled at every pass
    "schedlab/policies/quota_files.py",
    # gandiva's per-pass bookkeeping (affinity and time-share indexes re-keyed per pass)
    "schedlab/policies/gandiva.py",
    # hai's pass: its node groups, plan buckets and quota levels, kept per event
    "schedlab/policies/hai.py",
    # capacity's pass: its queue tree's shares and leaves, walked at every event
    "schedlab/policies/capacity.py",
    # EASY and conservative backfilling: the reservation profile and the class scan
    "schedlab/policies/backfill.py",
    # Themis' auctions: rho, the worst-first walk and the fitting starts per lease
    "schedlab/policies/themis.py",
    # Gavel's rounds: the per-round gathering, choice and decisions around its numpy
    "schedlab/policies/gavel.py",
    # HiveD's cell algorithm, its topology-aware search and its policy's bookkeeping
    "schedlab/policies/hived/algorithm.py",
    "schedlab/policies/hived/cells.py",
    "schedlab/policies/hived/policy.py",
    "schedlab/policies/hived/topology_aware.py",
    "schedlab/policies/hived/tracking.py",
]


def _say(msg: str) -> None:
    print(f"schedlab build: {msg}", file=sys.stderr)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _module_file(module: str) -> Path | None:
    """The source of one of schedlab's modules, or None (not ours, or an attribute)."""
    base = PACKAGE.joinpath(*module.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def built_from(paths: list[str]) -> dict[str, str]:
    """SHA-256 of each compiled module and every module of ours it imports, transitively.

    Imports under TYPE_CHECKING and inside functions count: mypy reads them all, and mypyc
    inlines the constants it finds there.
    """
    todo = [ROOT / p for p in paths]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name == "schedlab" or name.startswith("schedlab."):
                    # the package __init__s on the way are imported too
                    parts = name.split(".")
                    for i in range(1, len(parts) + 1):
                        found = _module_file(".".join(parts[:i]))
                        if found is not None:
                            todo.append(found)
    return {str(p.relative_to(ROOT).relative_to("schedlab")): _digest(p) for p in sorted(seen)}


def docstrings(paths: list[str]) -> dict[str, dict[str, str]]:
    """Each compiled module's docstring ("") and its classes' (by qualified name).

    mypyc drops them; `schedlab._native` puts them back when it loads a compiled module,
    so `help()` and the docs read the same text in both builds.
    """
    out: dict[str, dict[str, str]] = {}
    for path in paths:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        docs = {"": ast.get_docstring(tree, clean=False) or ""}
        todo: list[tuple[ast.AST, str]] = [(tree, "")]
        while todo:
            node, prefix = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    name = prefix + child.name
                    docs[name] = ast.get_docstring(child, clean=False) or ""
                    todo.append((child, name + "."))
        out[path.removesuffix(".py").replace("/", ".")] = {k: v for k, v in docs.items() if v}
    return out


def _remove_compiled() -> None:
    """A pure install: drop the compiled modules and manifest an earlier build left here."""
    removed = 0
    for folder in [PACKAGE, *(d.resolve() for d in PACKAGE.iterdir() if d.is_dir())]:
        for so in folder.rglob("*.so"):  # rglob does not follow the subpackages' links
            so.unlink()
            removed += 1
    if MANIFEST.exists():
        MANIFEST.unlink()
    if removed:
        _say(f"pure Python: removed {removed} compiled modules of an earlier build")


class CachedBuildExt(build_ext):
    """build_ext on every core, reusing an extension whose inputs did not change.

    It writes the build's manifest beside the package it builds (the wheel's, or the
    source tree's for an editable install).
    """

    manifest: dict | None = None

    def initialize_options(self) -> None:
        """Compile on every core unless told otherwise (`--parallel`)."""
        super().initialize_options()
        self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        """Build every extension, then the manifest `schedlab._native` reads."""
        super().run()
        if self.manifest is None or not self.extensions:
            return
        text = json.dumps(self.manifest, indent=1, sort_keys=True) + "\n"
        folders = [Path(self.build_lib) / "schedlab"]
        if self.inplace or getattr(self, "editable_mode", False):
            folders.append(PACKAGE)
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / MANIFEST.name).write_text(text, encoding="utf-8")

    def _key(self, ext) -> str:  # noqa: ANN001 - setuptools' Extension
        h = hashlib.sha256()
        h.update(repr((ext.name, ext.extra_compile_args, sys.version,
                       sysconfig.get_config_var("CC"))).encode())
        for f in sorted(set(ext.sources) | set(ext.depends)):
            h.update(f.encode())
            h.update(Path(f).read_bytes())
        return h.hexdigest()[:24]

    def build_extension(self, ext) -> None:  # noqa: ANN001
        """Copy a cached build of the same inputs, else compile and keep a copy."""
        target = Path(self.get_ext_fullpath(ext.name))
        cached = CACHE / f"{ext.name}-{self._key(ext)}{target.suffix}"
        if cached.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cached, target)
            return
        super().build_extension(ext)
        CACHE.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, cached)


# the commands that build modules: metadata queries (egg_info, dist_info) need none, and
# mypyc's analysis runs only once per install instead of at every query
_BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def _ext_modules() -> list:
    if not _BUILDS & set(sys.argv[1:]):
        return []
    if not os.environ.get("SCHEDLAB_COMPILE"):
        _remove_compiled()
        return []
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        raise SystemExit(f"schedlab build: SCHEDLAB_COMPILE is set but there is no C "
                         f"compiler ({cc})")
    from mypyc.build import mypycify

    # mypy's analysis starts afresh each build, in a cache of its own: its incremental
    # cache (which separate compilation turns on) crashed mypyc after an edit, and a
    # `mypy` type-check's cache has other options. Unchanged modules still compile
    # nothing: their generated C is the same, and `CachedBuildExt` reuses their objects.
    cache = os.path.join("build", "mypyc-cache")
    shutil.rmtree(cache, ignore_errors=True)
    opt = os.environ.get("SCHEDLAB_OPT_LEVEL", "3")
    if opt not in {"0", "1", "2", "3"}:
        raise SystemExit(f"schedlab build: SCHEDLAB_OPT_LEVEL={opt!r}; allowed: 0, 1, 2, 3")
    extensions = mypycify([f"--cache-dir={cache}", *COMPILED], opt_level=opt, separate=True,
                          target_dir=os.path.join("build", "mypyc"))
    modules = [p.removesuffix(".py").replace("/", ".") for p in COMPILED]
    CachedBuildExt.manifest = {"modules": modules, "sources": built_from(COMPILED),
                               "docs": docstrings(COMPILED)}
    return extensions


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": CachedBuildExt})
