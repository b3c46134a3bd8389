"""`schedlab.app.allocator`: the `schedlab` command settles glibc's malloc thresholds.

Each case runs in a process of its own: the settings hold for a whole process.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

_PROBE = """
import json, os
from schedlab.app.allocator import settle_allocator
first, second = settle_allocator(), settle_allocator()
print(json.dumps([first, second, os.environ.get("MALLOC_TRIM_THRESHOLD_")]))
"""


def _probe(env: dict[str, str]) -> list:
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _glibc() -> bool:
    return sys.platform == "linux" and platform.libc_ver()[0] == "glibc"


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}


@pytest.mark.skipif(not _glibc(), reason="glibc only")
def test_settles_once_and_tells_child_processes() -> None:
    assert _probe(_clean_env()) == [True, False, "65536"]


def test_a_threshold_the_environment_chose_is_kept() -> None:
    env = {**_clean_env(), "MALLOC_MMAP_THRESHOLD_": "262144"}
    assert _probe(env) == [False, False, None]


def test_the_console_script_settles_its_process_and_main_does_not() -> None:
    code = ("import os, sys\n"
            "from schedlab.app import cli\n"
            "sys.argv = ['schedlab', '--version']\n"
            "try:\n"
            "    cli.{}()\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(os.environ.get('MALLOC_TRIM_THRESHOLD_'))\n")
    for fn, want in (("main", "None"), ("entry", "65536" if _glibc() else "None")):
        out = subprocess.run([sys.executable, "-c", code.format(fn)], env=_clean_env(),
                             check=True, capture_output=True, text=True).stdout
        assert out.strip().splitlines()[-1] == want
