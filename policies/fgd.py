"""The `fgd` policy: arrival order with backfilling, placed by FGD.

Fragmentation gradient descent (Weng et al., USENIX ATC 2023) is a placement rule, so it
lives in the `fgd` placer (`schedlab.policies.placement.fgd`, with its choices and departures from
the paper). This policy is `fifo-backfill` whose default placer is `fgd`: every job goes
through the run's placer (`ctx.place`), and the engine shows that placer each submitted
job (`FgdPlacer.observe`), so the workload it scores against is learned online from every
submission (the authors compute it from the whole trace beforehand). Passing another
`placer` to the engine runs the same order with that placer instead.
"""

from __future__ import annotations

from schedlab.policies.fifo import FifoBackfillPolicy


class FgdPolicy(FifoBackfillPolicy):
    """Arrival order with backfilling, every job placed by the run's (default FGD) placer."""
    supports_roles = False  # its FGD workload counts jobs as shapes of identical tasks

    name = "fgd"
    description = "FGD placement (fragmentation gradient descent), arrival order + backfill"
    placer = "fgd"
