"""The tightest-cell index codes its keys as ints that compare exactly as the keys do."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.sim.cluster import ClusterState
from schedlab.sim.cluster_layout import KeyCodec
from schedlab.topologies.presets import PRESETS

BITS, WIDTH = 6, 4
keys = st.lists(st.integers(0, (1 << BITS) - 2), min_size=1, max_size=WIDTH).map(tuple)


@settings(max_examples=200, deadline=None)
@given(keys, keys)
def test_codes_order_as_keys(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    codec = KeyCodec(BITS, WIDTH)
    ca, cb = codec.encode(a), codec.encode(b)
    assert (ca < cb) == (a < b) and (ca == cb) == (a == b)
    assert codec.decode(ca) == a and codec.last(ca) == a[-1]
    # the probe (n,) bisects to the first key >= (n,), as a tuple probe does
    assert (codec.probe(a[0]) <= cb) == ((a[0],) <= b)


def test_philly_index_lists_hold_the_codes_of_their_keys() -> None:
    c = ClusterState(PRESETS["philly"]())
    c.allocate(0, [0, 9, 17], 1000)
    assert c.codec.bits * c.codec.width <= 62  # a short int in compiled code
    for (t, lv), keys in c.level_index.items():
        codes = c.index_codes(t, lv)
        assert codes == sorted(codes) and [c.codec.decode(k) for k in codes] == keys
        assert keys == sorted(keys)
        for k in keys:
            assert k[0] == c.cell_free[k[-1]] > 0
        assert c.best_cell(t, lv, 2) == next((k for k in keys if k >= (2,)), None)
