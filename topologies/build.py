"""Programmatic builders for regular clusters (tests, notebooks, synthetic studies)."""

from __future__ import annotations

from schedlab.sim.model import Level
from schedlab.topologies.native import node_cell
from schedlab.topologies.tree import CellSpec, Topology


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
    disk_gb: float = 0.0,
    interconnect: str = "infiniband",
    name: str = "uniform",
) -> Topology:
    """A cluster of identical nodes, optionally grouped in racks.

    A resource of 0 (num_cpus, mem_gb, gpu_mem_gb, disk_gb) is not modelled: never a
    constraint. `interconnect` is "infiniband" or "ethernet" (see `locality_factors`).
    """
    attrs = {"gpu_type": gpu_type, "num_cpus": num_cpus, "mem_gb": mem_gb,
             "gpu_mem_gb": gpu_mem_gb, "disk_gb": disk_gb, "interconnect": interconnect}
    node_list = [node_cell(f"node{i}", attrs, sockets, switches_per_socket, gpus_per_switch)
                 for i in range(nodes)]
    if nodes_per_rack > 0:
        racks = [CellSpec(Level.RACK, f"rack{r}", node_list[i:i + nodes_per_rack])
                 for r, i in enumerate(range(0, nodes, nodes_per_rack))]
        root = CellSpec(Level.CLUSTER, name, racks)
    else:
        root = CellSpec(Level.CLUSTER, name, node_list)
    return Topology(name, root, source=f"uniform:{nodes}")
