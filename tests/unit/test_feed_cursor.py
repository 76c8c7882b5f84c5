"""The feed's cursors: what settleq makes reads back as the same position, and
nothing else reads as a position at all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.feed import START, InvalidCursor, Position, end_of, parse_cursor

BIGINT = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(BIGINT, BIGINT, BIGINT)
def test_a_cursor_reads_back_as_its_position(xid: int, unit: int, entry: int) -> None:
    position = Position(xid, unit, entry)
    assert parse_cursor(position.cursor()) == position


@given(st.text(max_size=80))
def test_text_settleq_did_not_make_is_no_cursor(text: str) -> None:
    try:
        position = parse_cursor(text)
    except InvalidCursor:
        return
    assert position.cursor() == text  # only by finding one settleq makes


@pytest.mark.parametrize("cut", [1, 2, 5])
def test_a_cursor_cut_short_or_altered_is_refused(cut: int) -> None:
    text = Position(7, 8, 9).cursor()
    with pytest.raises(InvalidCursor):
        parse_cursor(text[:-cut])
    # Another row's number with this cursor's check.
    other = Position(7, 8, 10).cursor()
    with pytest.raises(InvalidCursor):
        parse_cursor(other[:-cut] + text[-cut:])


def test_positions_order_by_transaction_then_unit_then_row() -> None:
    assert START < Position(-1, 5, 5) < Position(0, 1, 1) < Position(0, 1, 2) < end_of(0, 1)
    assert end_of(0, 1) < Position(0, 2, 0) < end_of(3)
