"""The C allocator of a process that runs simulations: memory freed goes back to the system.

glibc's malloc serves a block above its mmap threshold (128 KiB at first) with pages of
its own and unmaps them when the block is freed; but each such free raises the threshold
to that block's size (up to 32 MiB), and the heap's trim threshold with it. Once a trace
generator has dropped its arrays, blocks of megabytes come from the heap, where a freed
one stays resident until the blocks above it go too. A run's result build makes and
drops many of them (lists of a million values, Arrow buffers grown by doubling): at a
million jobs 80-90 MiB of its peak were such free memory. Setting the trim threshold
turns the adjustment off for both thresholds (glibc fixes them once either is set), as
Dask's nanny does for its workers (`MALLOC_TRIM_THRESHOLD_=65536`).

`schedlab` (the console script) settles its process and, through the environment, the
processes it starts (its run pool, a local Dask cluster); the Python API leaves the
process as it is: call `settle_allocator()` first in a script or notebook of large runs.
A process whose environment already sets a `MALLOC_` threshold keeps it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

TRIM_THRESHOLD = 65536
"""Bytes of free memory at the heap's top kept before it is given back (Dask's value)."""
_M_TRIM_THRESHOLD = -1  # mallopt's parameter number (malloc.h)
_ENV = "MALLOC_TRIM_THRESHOLD_"
_OWN = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
_done: list[bool] = []


def settle_allocator() -> bool:
    """Fix glibc's thresholds here and for the processes started from here (once).

    True when this call set them; False on another C library or platform, when the
    environment already chose (this process read it at start), or on a second call.
    """
    if _done:
        return False
    _done.append(True)
    if sys.platform != "linux" or any(k in os.environ for k in _OWN):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    gnu = getattr(libc, "gnu_get_libc_version", None)
    if mallopt is None or gnu is None:  # not glibc: its mallopt may mean nothing
        return False
    if mallopt(ctypes.c_int(_M_TRIM_THRESHOLD), ctypes.c_int(TRIM_THRESHOLD)) != 1:
        return False
    os.environ[_ENV] = str(TRIM_THRESHOLD)  # read by each new process at its start
    return True
