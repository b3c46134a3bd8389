"""A HiveD queue under strict fifo keeps no class index until an ordering asks for it.

Strict fifo walks `pending()` only, so its queues skip the per-request-class index; a
`pending_classes()` call on such a queue must still answer with every pending job of the
queue grouped as the kept index would (and keep it from then on).
"""

from __future__ import annotations

from typing import Any

from schedlab.policies.hived.policy import HivedPolicy, _class_key
from schedlab.sim.engine import Simulation


class _Asking(HivedPolicy):
    """hived that, every pass, asks each class-less queue for its classes and checks them."""

    asked = 0

    def schedule(self, ctx: Any) -> Any:
        for q in self.queues.values():
            if q.by_class or q.ctx is None or not q.keys:
                continue
            want: dict[tuple, set[tuple[float, int]]] = {}
            for _, submit, idx in q.keys:
                job = ctx.job_at(idx)
                ck = _class_key(job.spec, self._known_request(job).pinned)
                want.setdefault(ck, set()).add((submit, idx))
            got = q.ctx.pending_classes()
            assert {ck: set(lst) for ck, lst in got.items()} == want
            assert q.by_class  # kept from now on
            type(self).asked += 1
        return super().schedule(ctx)


def test_a_strict_fifo_queue_builds_its_class_index_when_asked() -> None:
    plain = Simulation("default", "default", HivedPolicy()).run()
    asking = Simulation("default", "default", _Asking()).run()
    assert _Asking.asked > 0
    assert asking.summary["queueing_delay_mean"] == plain.summary["queueing_delay_mean"]
