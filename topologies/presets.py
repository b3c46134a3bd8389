"""Bundled topology presets: name -> loader of a file in `topologies/data`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from schedlab.sim.errors import UnknownName, unknown_name_message
from schedlab.topologies.machine_list import read_philly_machine_list
from schedlab.topologies.native import load_yaml, native_from_dict
from schedlab.topologies.tree import Topology

DATA_DIR = Path(__file__).resolve().parent / "data"


def _native(file: str, name: str) -> Callable[[], Topology]:
    def load() -> Topology:
        path = DATA_DIR / file
        return native_from_dict(load_yaml(path), path, source=name)

    return load


def _philly() -> Topology:
    return read_philly_machine_list(DATA_DIR / "philly_cluster_machine_list", "philly",
                                    source="philly")


PRESETS: dict[str, Callable[[], Topology]] = {
    "default": _native("default.yaml", "default"),
    "dgx1-v100": _native("dgx1-v100.yaml", "dgx1-v100"),
    "dgx-a100": _native("dgx-a100.yaml", "dgx-a100"),
    "philly": _philly,
    "h100-2048": _native("h100-2048.yaml", "h100-2048"),
}


def preset_names() -> list[str]:
    """Names of the bundled topology presets, sorted."""
    return sorted(PRESETS)


def load_preset(name: str) -> Topology:
    """Load a bundled preset by name; its `source` is the preset name."""
    try:
        loader = PRESETS[name]
    except KeyError:
        raise UnknownName(unknown_name_message("topology preset", name, PRESETS)) from None
    return loader()
