"""Reader of a Slurm `slurm.conf` node list (and a `topology.conf` switch tree) as a topology.

`slurm.conf` is `Key=Value` lines (`#` comments, a trailing backslash continues a line);
`NodeName=` lines describe nodes (`Gres=gpu[:type]:N`, `Sockets`, `CoresPerSocket`,
`ThreadsPerCore`, `CPUs`, `RealMemory` in MB, `Weight`), as `src/common/read_config.c`
(`_parse_nodename`) reads them; host lists such as `gpu[01-04,07]` expand as
`hostlist_create` does. Inside a node, the GPUs are spread evenly over its sockets.
`topology.conf` (`SwitchName=... Nodes=...` / `Switches=...`, as `topology/tree` reads
it; `topology.conf` or `<stem>_topology.conf` beside the slurm.conf): each leaf switch
(one that lists `Nodes`) becomes a rack cell; switches above the
leaves are one cluster (schedlab's tree has one level above the node). A node no leaf
switch lists is an error here (Slurm only warns that the switches lack access to it).
GPU type: the GRES type (`gpu:a100:4` -> `a100`), `GPU` when none is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from schedlab.sim.errors import InvalidTopology
from schedlab.sim.model import Level
from schedlab.topologies.native import node_cell
from schedlab.topologies.tree import CellSpec, Topology

__all__ = ["ConfLine", "SlurmNode", "conf_lines", "expand_hostlist", "is_slurm_conf",
           "read_slurm_conf_topology", "slurm_nodes"]

NODE_KEYS = ("NodeName", "NodeHostname", "NodeAddr", "Port", "Gres", "Sockets",
             "SocketsPerBoard", "Boards", "CoresPerSocket", "ThreadsPerCore", "CPUs",
             "RealMemory", "Weight", "State", "Feature", "Features", "TmpDisk",
             "CpuSpecList", "MemSpecLimit", "CoreSpecCount", "Reason")
"""Keys a NodeName line may carry; those that do not shape the topology are accepted and
have no effect (`State`, `Feature`, `Port`, ...)."""
SWITCH_KEYS = ("SwitchName", "Nodes", "Switches", "LinkSpeed")
_PAIR = re.compile(r"([A-Za-z][A-Za-z0-9_/]*)=(\"[^\"]*\"|'[^']*'|\S*)")
_GRES = re.compile(r"^gpu(?::([A-Za-z0-9_.-]+))?:([0-9]+)(?:\(.*\))?$")


@dataclass(frozen=True, slots=True)
class ConfLine:
    """One logical line of a Slurm config file: its `Key=Value` pairs in order."""

    lineno: int
    pairs: tuple[tuple[str, str], ...]

    @property
    def head(self) -> tuple[str, str]:
        """The first pair (`NodeName=...`, `PartitionName=...`, or a lone setting)."""
        return self.pairs[0]

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of `key` (case-insensitive, as Slurm reads keys), or `default`."""
        low = key.lower()
        for k, v in self.pairs:
            if k.lower() == low:
                return v
        return default


def conf_lines(path: str | Path) -> Iterator[ConfLine]:
    """The logical lines of a Slurm config file (comments dropped, continued lines joined)."""
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidTopology(f"{p}: cannot read: {exc}") from None
    pending, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = n
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if not line:
            continue
        pairs = tuple((k, v.strip("\"'")) for k, v in _PAIR.findall(line))
        rest = _PAIR.sub("", line).strip()
        if rest or not pairs:
            raise InvalidTopology(f"{p}: line {start}: {line!r}: expected Key=Value pairs")
        yield ConfLine(start, pairs)


def expand_hostlist(text: str) -> list[str]:
    """A Slurm host list (`gpu[01-04,07],cpu1`) as names, in order (`hostlist_create`)."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]*(?:\[[^\]]*\][^,\[]*)*", text):
        if not part:
            continue
        names = [""]
        for lit, rng in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", part):
            names = [n + lit for n in names]
            if rng:
                items: list[str] = []
                for r in rng.split(","):
                    lo, _, hi = r.partition("-")
                    if not lo.isdigit() or (hi and not hi.isdigit()):
                        raise ValueError(f"host list {text!r}: bad range {r!r}")
                    width = len(lo)
                    items.extend(str(i).zfill(width) for i in range(int(lo), int(hi or lo) + 1))
                names = [n + i for n in names for i in items]
        out.extend(names)
    return out


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node of a slurm.conf NodeName line."""

    name: str
    gpus: int
    gpu_type: str
    sockets: int
    cpus: int
    mem_gb: float
    weight: int


def _int(file: Path, line: ConfLine, key: str, value: str, lo: int = 0) -> int:
    if not value.isdigit() or int(value) < lo:
        raise InvalidTopology(f"{file}: line {line.lineno}: {key}={value!r}: expected an "
                              f"integer >= {lo}")
    return int(value)


def slurm_nodes(path: str | Path) -> list[SlurmNode]:
    """The nodes of a slurm.conf's NodeName lines, in file order (`NodeName=DEFAULT` applies)."""
    file = Path(path)
    nodes: list[SlurmNode] = []
    defaults: dict[str, str] = {}
    for line in conf_lines(file):
        key, value = line.head
        if key.lower() != "nodename":
            continue
        given = {k: v for k, v in line.pairs[1:]}
        for k, v in given.items():
            if k not in NODE_KEYS:
                raise InvalidTopology(f"{file}: line {line.lineno}: {k}={v!r}: not a NodeName "
                                      f"key schedlab reads; allowed: {', '.join(NODE_KEYS)}")
        if value.upper() == "DEFAULT":
            defaults.update(given)
            continue
        attrs = {**defaults, **given}
        gpus, gpu_type = 0, ""
        for g in attrs.get("Gres", "").split(",") if attrs.get("Gres") else []:
            m = _GRES.match(g.strip())
            if not m:
                raise InvalidTopology(f"{file}: line {line.lineno}: Gres={g!r}: expected "
                                      "gpu:N or gpu:TYPE:N (other GRES are not modelled)")
            gpus += int(m.group(2))
            gpu_type = m.group(1) or gpu_type or "GPU"
        sockets = _int(file, line, "Sockets", attrs.get("Sockets", "1"), 1)
        cores = _int(file, line, "CoresPerSocket", attrs.get("CoresPerSocket", "1"), 1)
        threads = _int(file, line, "ThreadsPerCore", attrs.get("ThreadsPerCore", "1"), 1)
        cpus = _int(file, line, "CPUs", attrs.get("CPUs", str(sockets * cores * threads)), 1)
        mem = _int(file, line, "RealMemory", attrs.get("RealMemory", "1"), 1)
        weight = _int(file, line, "Weight", attrs.get("Weight", "1"), 0)
        try:
            names = expand_hostlist(value)
        except ValueError as exc:
            raise InvalidTopology(f"{file}: line {line.lineno}: NodeName: {exc}") from None
        nodes.extend(SlurmNode(n, gpus, gpu_type, sockets, cpus, mem / 1024.0, weight)
                     for n in names)
    if not nodes:
        raise InvalidTopology(f"{file}: no NodeName line; allowed: a slurm.conf with nodes")
    seen: set[str] = set()
    for n in nodes:
        if n.name in seen:
            raise InvalidTopology(f"{file}: node {n.name!r} is defined twice")
        seen.add(n.name)
    return nodes


def is_slurm_conf(path: str | Path) -> bool:
    """Whether a file looks like a slurm.conf (a `NodeName=` line near the top of its keys)."""
    p = Path(path)
    if p.name.endswith("slurm.conf") or p.suffix == ".conf":
        try:
            return any(ln.head[0].lower() == "nodename" for ln in conf_lines(p))
        except InvalidTopology:
            return False
    return False


def _leaf_switches(file: Path, names: set[str]) -> dict[str, list[str]]:
    """Leaf switch -> its nodes, from a topology.conf (higher switches are checked, not kept)."""
    leaves: dict[str, list[str]] = {}
    switches: set[str] = set()
    for line in conf_lines(file):
        key, value = line.head
        if key.lower() != "switchname":
            raise InvalidTopology(f"{file}: line {line.lineno}: {key}: allowed: SwitchName "
                                  "lines (tree topology)")
        for k, v in line.pairs[1:]:
            if k not in SWITCH_KEYS:
                raise InvalidTopology(f"{file}: line {line.lineno}: {k}={v!r}: allowed keys: "
                                      f"{', '.join(SWITCH_KEYS)}")
        switches.add(value)
        nodes = line.get("Nodes")
        if nodes:
            listed = expand_hostlist(nodes)
            unknown = [n for n in listed if n not in names]
            if unknown:
                raise InvalidTopology(f"{file}: line {line.lineno}: switch {value}: nodes "
                                      f"{unknown[:3]} are not in slurm.conf")
            leaves[value] = listed
    return leaves


def read_slurm_conf_topology(path: str | Path, topology_conf: str | Path | None = None
                             ) -> Topology:
    """A topology from a slurm.conf's nodes; racks from `topology_conf` or one beside it."""
    file = Path(path)
    nodes = slurm_nodes(file)
    cells = {}
    for i, n in enumerate(nodes):
        sockets = n.sockets if n.gpus and n.gpus % n.sockets == 0 else 1
        attrs = {"gpu_type": n.gpu_type, "num_cpus": float(n.cpus), "mem_gb": n.mem_gb,
                 "gpu_mem_gb": 0.0, "disk_gb": 0.0, "interconnect": "infiniband"}
        cell = node_cell(n.name, attrs, sockets, 1, n.gpus // sockets if n.gpus else 0)
        cells[n.name] = cell
        del i
    topo_file = Path(topology_conf) if topology_conf else file.with_name("topology.conf")
    if topology_conf is None and not topo_file.is_file():
        topo_file = file.with_name(f"{file.stem}_topology.conf")
    top: list[CellSpec]
    if topology_conf is not None or topo_file.is_file():
        leaves = _leaf_switches(topo_file, set(cells))
        placed = [n for ns in leaves.values() for n in ns]
        missing = [n for n in cells if n not in placed]
        if missing:
            raise InvalidTopology(f"{topo_file}: nodes {missing[:3]} are under no leaf switch")
        dup = {n for n in placed if placed.count(n) > 1}
        if dup:
            raise InvalidTopology(f"{topo_file}: nodes {sorted(dup)[:3]} are under two switches")
        top = [CellSpec(Level.RACK, sw, [cells[n] for n in ns]) for sw, ns in leaves.items()]
    else:
        top = list(cells.values())
    root = CellSpec(Level.CLUSTER, file.stem, top)
    return Topology(file.stem, root, source=str(file))
