"""Programmatic builders for regular clusters (tests, notebooks, synthetic studies)."""

from __future__ import annotations

from sim.model import Level
from topologies.tree import CellSpec, Topology


def node_cells(name: str, sockets: int, switches_per_socket: int, gpus_per_switch: int,
               attrs: dict) -> CellSpec:
    """One node's cell subtree; a level that would hold the same GPUs as its parent is omitted.

    A node with one socket has no socket cells, a socket with one switch no switch cells.
    """
    def gpus(prefix: str) -> list[CellSpec]:
        return [CellSpec(Level.GPU, f"{prefix}/g{g}") for g in range(gpus_per_switch)]

    def switches(prefix: str) -> list[CellSpec]:
        if switches_per_socket == 1:
            return gpus(prefix)
        return [CellSpec(Level.SWITCH, f"{prefix}/w{w}", gpus(f"{prefix}/w{w}"))
                for w in range(switches_per_socket)]

    if sockets == 1:
        kids = switches(name)
    else:
        kids = [CellSpec(Level.SOCKET, f"{name}/s{s}", switches(f"{name}/s{s}"))
                for s in range(sockets)]
    # a single switch of several GPUs directly under the node is the node itself
    return CellSpec(Level.NODE, name, kids, node=dict(attrs))


def uniform_topology(
    nodes: int,
    *,
    sockets: int = 1,
    switches_per_socket: int = 1,
    gpus_per_switch: int = 1,
    gpu_type: str = "V100",
    nodes_per_rack: int = 0,
    num_cpus: float = 0.0,
    mem_gb: float = 0.0,
    gpu_mem_gb: float = 0.0,
    name: str = "uniform",
) -> Topology:
    """A cluster of identical nodes, optionally grouped in racks."""
    attrs = {"gpu_type": gpu_type, "num_cpus": num_cpus, "mem_gb": mem_gb,
             "gpu_mem_gb": gpu_mem_gb}
    node_list = [node_cells(f"node{i}", sockets, switches_per_socket, gpus_per_switch, attrs)
                 for i in range(nodes)]
    if nodes_per_rack > 0:
        racks = [CellSpec(Level.RACK, f"rack{r}", node_list[i:i + nodes_per_rack])
                 for r, i in enumerate(range(0, nodes, nodes_per_rack))]
        root = CellSpec(Level.CLUSTER, name, racks)
    else:
        root = CellSpec(Level.CLUSTER, name, node_list)
    return Topology(name, root, source=f"uniform:{nodes}")
