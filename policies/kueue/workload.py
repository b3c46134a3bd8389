"""One job as Kueue sees it: a workload in a ClusterQueue with a priority and requests."""

from __future__ import annotations

from schedlab.policies.kueue.quota import FR, Node
from schedlab.policies.kueue.tas import Pods, Request


class Workload:
    """A job's Kueue state: its ClusterQueue, priority, requests, and what it holds."""

    __slots__ = ("idx", "job_id", "cq", "priority", "timestamp", "requests", "usage",
                 "admitted_at", "gpu_type", "tas", "pods", "out")

    def __init__(self, idx: int, job_id: str, cq: Node, priority: int, timestamp: float,
                 requests: dict[str, float], gpu_type: str) -> None:
        self.idx = idx
        self.job_id = job_id
        self.cq = cq
        self.priority = priority
        self.timestamp = timestamp  # queue order: creation (submission) time
        self.requests = requests  # resource name -> amount (internal units)
        self.usage: dict[FR, float] = {}  # flavor-resources held while admitted
        self.admitted_at = 0.0
        self.gpu_type = gpu_type  # the trace's gpu_type ('' : any)
        self.tas: Request | None = None  # its topology request (TAS), if any
        self.pods: Pods | None = None  # its pods, when it has a topology request
        self.out = False  # its usage taken out of the quota tree (`remove`), not put back

    def __repr__(self) -> str:
        return f"Workload({self.job_id}, {self.cq.name}, prio={self.priority})"

    def uses(self, frs: set[FR]) -> bool:
        """WorkloadUsesResources."""
        if len(frs) == 1:
            for fr in frs:
                return fr in self.usage
        return any(fr in frs for fr in self.usage)

    def remove(self) -> None:
        """Release its usage from the quota tree (admission undone or simulated)."""
        self.out = True
        for fr, v in self.usage.items():
            self.cq.remove_usage(fr, v)

    def add(self) -> None:
        """Charge its usage to the quota tree."""
        self.out = False
        for fr, v in self.usage.items():
            self.cq.add_usage(fr, v)


def candidates_order(w: Workload) -> tuple[int, float, int]:
    """CandidatesOrdering within one list: lower priority, recently admitted first.

    Ties: the job index, oldest first (Kueue breaks them by UID; in its tests UIDs
    follow the workloads' creation order, as the index does here).
    """
    return (w.priority, -w.admitted_at, w.idx)
