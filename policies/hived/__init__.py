"""HiveD (OSDI'20): virtual clusters of multi-level cells with buddy cell allocation.

`cells` holds the physical/virtual cell model and the buddy free list, `config` turns a
topology into chains and VC assignments, `safety` checks that VCs fit, `topology_aware`
places pods inside a cluster view, `algorithm` binds virtual cells to physical ones and
tracks bad hardware, and `policy` is the `hived` scheduling policy.
"""

from schedlab.policies.hived.policy import HivedPolicy

__all__ = ["HivedPolicy"]
