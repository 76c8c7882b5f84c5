"""The relay's count of publisher confirms: a batch is marked published only
when every one of its delivery tags is acked, in whatever order acks come."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.relay.confirms import Confirms


def test_in_order_single_acks_raise_the_floor() -> None:
    confirms = Confirms()
    for tag in (1, 2, 3):
        confirms.ack(tag, multiple=False)
    assert confirms.floor == 3


def test_an_out_of_order_ack_waits_for_the_gap() -> None:
    confirms = Confirms()
    confirms.ack(2, multiple=False)
    confirms.ack(3, multiple=False)
    assert confirms.floor == 0  # tag 1 is still unconfirmed
    confirms.ack(1, multiple=False)
    assert confirms.floor == 3


def test_a_multiple_ack_covers_every_tag_up_to_it() -> None:
    confirms = Confirms()
    confirms.ack(5, multiple=False)
    confirms.ack(3, multiple=True)
    assert confirms.floor == 3
    confirms.ack(4, multiple=False)
    assert confirms.floor == 5


@given(st.integers(1, 60).flatmap(lambda n: st.permutations(range(1, n + 1))), st.data())
def test_the_floor_is_the_longest_acked_prefix(order: list[int], data: st.DataObject) -> None:
    confirms = Confirms()
    acked: set[int] = set()
    for tag in order:
        multiple = data.draw(st.booleans())
        confirms.ack(tag, multiple)
        acked |= set(range(1, tag + 1)) if multiple else {tag}
        floor = 0
        while floor + 1 in acked:
            floor += 1
        assert confirms.floor == floor
    assert confirms.floor == len(order)
