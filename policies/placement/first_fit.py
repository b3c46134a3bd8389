"""`first-fit`: the lowest-numbered node that fits, a baseline with no locality search."""

from __future__ import annotations

from collections.abc import Iterator

from schedlab.policies.placement.base import BasePlacer
from schedlab.sim.interfaces import ClusterView
from schedlab.sim.model import JobSpec


class FirstFitPlacer(BasePlacer):
    """The lowest-numbered node that fits, lowest-numbered GPUs in it; spreads if it must."""

    name = "first-fit"
    spread = True

    def _single_node(self, job: JobSpec, cluster: ClusterView, types: list[str], n: int,
                     avoid: frozenset[int]) -> list[int] | None:
        topo = cluster.topo
        cpus, mem, disk = self._host_need(job, n)
        best: int | None = None
        for t in types:
            buckets = cluster.node_buckets[t]
            for k in range(n, len(buckets)):
                for node in buckets[k]:
                    if best is not None and node >= best:
                        break
                    if node not in avoid and cluster.node_fits_host(node, cpus, mem, disk):
                        best = node
                        break
        if best is None:
            return None
        return cluster.free_gpus_in(topo.nodes[best].cell)[:n]

    def _nodes_by_free(self, cluster: ClusterView, t: str) -> Iterator[int]:
        """Nodes of type t with free GPUs, lowest index first."""
        nodes = sorted(nd for k, b in enumerate(cluster.node_buckets[t]) if k for nd in b)
        yield from nodes
