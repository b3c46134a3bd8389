"""Build: the engine's hot modules compiled to C extensions by mypyc, else pure Python.

The modules in `COMPILED` are the engine's per-event path (the loop, the cluster state
and its indexes, the queue, the agenda, progress, recording, the base placer). mypyc
compiles them from the same typed source, with the same semantics (the whole test suite
and the golden baselines run on either build), and that cuts the engine's time per event
by about 40 % (fifo on full Philly: 19.4 -> 11.5 us). Everything else (policies,
readers, metrics, the CLI) stays interpreted, but for HiveD's cell algorithm (its
per-pass cost is walking its own cell trees: hived on full Philly 7.8 -> 6.7 CPU s in
the loop) and its policy's per-pass bookkeeping (5.3-5.5 -> 4.2 CPU s in the loop), and
the priority policies' pass: `PriorityPolicy`'s walk and index, the victim searches, and
Tiresias and SJF/SRTF built on them (tiresias-las on 200,000 jobs: 18.1 -> 13.4 CPU s in
the loop), fifo and fifo-backfill (the baseline: their pass runs at every event), and
the mirrors of the engine that the multi-tenant and quota policies (drf, capacity, hai,
quota-priority) bring up to date at every pass, and gandiva's, hai's and capacity's own
pass (full Philly engine: gandiva 3.6-3.7 -> 2.6-2.7, hai 3.4-3.7 -> 2.3-2.5, capacity
3.8-3.9 -> 2.5-2.6 CPU s), Gavel's rounds (gavel-mmf 4.5-4.6 -> 4.1 CPU s), Themis'
auctions and EASY and conservative backfilling (on `uniform:56`: themis-ftf 15.5-16.0 ->
13.8-14.0, conservative 17.7 -> 13.1-13.5, EASY 8.2-8.8 -> 7.1-7.3 CPU s). Researchers'
own policies, placers and speed factors subclass the compiled classes as before (each is marked
`allow_interpreted_subclasses`; what a subclass overrides, class attributes included, is
what the compiled code calls and reads). A compiled module checks a class-typed argument
on entry, so where a caller may hand in an object of another class with the same methods
(hived's narrowed per-VC context), the parameter is typed by a protocol
(`sim.interfaces.PolicyContext`) or `Any`.

Set `SCHEDLAB_PURE=1` when installing to skip compilation (pure Python throughout, e.g. to
edit these modules without rebuilding); without a C compiler or mypyc, or if compilation
fails, the install falls back to pure Python on its own and says so. An editable install
that was compiled must be rebuilt (`pip install -e .`) after editing a compiled module:
`sim/__init__.py` refuses to import a compiled module older than its source.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "sim/agenda.py",
    "sim/cfuncs.py",
    "sim/cluster.py",
    "sim/cluster_layout.py",
    "sim/colocation.py",
    "sim/context.py",
    "sim/engine.py",
    "sim/instant.py",
    "sim/jobstate.py",
    "sim/lifecycle.py",
    "sim/progress.py",
    "sim/queue.py",
    "sim/recorder.py",
    "sim/speed.py",
    # a placement's lowest common cell: at every start, resume and multi-node placement
    "topologies/walk.py",
    "policies/placement/base.py",
    # fifo and fifo-backfill: the baseline every policy is measured against
    "policies/fifo.py",
    # the priority walk and its victim searches (every `PriorityPolicy`, researchers'
    # included, and themis-ftf run their passes in them), and the two policies built on
    # them whose hooks run at every event (Tiresias' timers, SRTF's running columns)
    "policies/priority.py",
    # the multi-tenant policies' (drf, capacity) mirror of the engine, synced every pass
    "policies/queues.py",
    # hai's and quota-priority's mirror of the engine, polled at every pass
    "policies/quota_files.py",
    # gandiva's per-pass bookkeeping (affinity and time-share indexes re-keyed per pass)
    "policies/gandiva.py",
    # hai's pass: its node groups, plan buckets and quota levels, kept per event
    "policies/hai.py",
    # capacity's pass: its queue tree's shares and leaves, walked at every event
    "policies/capacity.py",
    # EASY and conservative backfilling: the reservation profile and the class scan,
    # built and walked at every pass
    "policies/backfill.py",
    # Themis' auctions: rho, the worst-first walk and the fitting starts per lease
    "policies/themis.py",
    # Gavel's rounds: the per-round gathering, choice and decisions around its numpy
    "policies/gavel.py",
    "policies/victims.py",
    "policies/tiresias.py",
    "policies/sjf.py",
    # HiveD's cell algorithm (buddy allocation, cell binding, VC bookkeeping) and its
    # topology-aware search (nodes by rank, leaves by affinity): pure Python data
    # structures walked per pass, with no extension point of their own; and its
    # policy's per-pass bookkeeping (queues, job tracking, the orderings' contexts)
    "policies/hived/algorithm.py",
    "policies/hived/cells.py",
    "policies/hived/policy.py",
    "policies/hived/topology_aware.py",
    "policies/hived/tracking.py",
]


def _say(msg: str) -> None:
    print(f"schedlab build: {msg}", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """build_ext that falls back to pure Python when the C build fails."""

    def run(self) -> None:
        """Build the extensions; on a failure, none (the .py modules are installed)."""
        try:
            super().run()
        except Exception as e:  # a compiler error: install the pure-Python modules
            _say(f"compiling the engine failed ({e}); installing pure Python")
            self.extensions = []

    def copy_extensions_to_source(self) -> None:
        """Copy the built modules into the source tree (an editable install), stamped now.

        The copy keeps the build's own time, which an unchanged module's skipped rebuild
        leaves older than an edit (of a docstring, say): `sim/__init__.py` would then
        refuse it as stale although it was just rebuilt.
        """
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            inplace_file, _ = self._get_inplace_equivalent(build_py, ext)
            if os.path.exists(inplace_file):
                os.utime(inplace_file)


# the commands that build modules: metadata queries (egg_info, dist_info) need none, and
# mypyc's analysis (about 15 s) runs only once per install instead of at every query
_BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def _ext_modules() -> list:
    if not _BUILDS & set(sys.argv[1:]):
        return []
    if os.environ.get("SCHEDLAB_PURE"):
        _say("SCHEDLAB_PURE is set: pure Python")
        return []
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        _say(f"no C compiler ({cc}): pure Python")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _say("mypyc is not available: pure Python")
        return []
    try:
        return mypycify(COMPILED, opt_level="3", group_name="schedlab_native")
    except BaseException as e:  # mypy found an error (it exits), or mypyc failed
        _say(f"mypyc could not compile the engine ({e!r}): pure Python")
        return []


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
