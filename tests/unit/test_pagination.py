"""services.api.pagination: one cursor scheme for every paged endpoint. A page's
``next_cursor`` decodes to the position it was made from; anything else a
client sends is a 422 ``invalid_cursor``, never a value that reaches SQL."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.api.errors import ApiError
from services.api.pagination import (
    encode_id_cursor,
    encode_job_cursor,
    encode_line_cursor,
    id_cursor,
    job_cursor,
    line_cursor,
)

BIGINT = 2**63 - 1
CREATED = dt.datetime(2026, 12, 1, 11, 30, 5, 123456, tzinfo=dt.UTC)


def _raw(text: str | bytes) -> str:
    """A cursor made by hand in the same encoding (as a client might forge one)."""
    data = text.encode() if isinstance(text, str) else text
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@given(st.integers(min_value=0, max_value=10**18 - 1))
def test_id_cursors_round_trip(last_id: int) -> None:
    assert id_cursor(encode_id_cursor(last_id)) == last_id


@given(
    st.none() | st.integers(min_value=0, max_value=10**18 - 1),
    st.sampled_from(["ledger", "other"]),
    st.integers(min_value=0, max_value=10**18 - 1),
)
def test_line_cursors_round_trip(position: int | None, source: Any, last_id: int) -> None:
    cursor = encode_line_cursor(position, source, last_id)
    assert line_cursor(cursor) == (position, source, last_id)


def test_job_cursors_round_trip() -> None:
    job_id = "0123456789abcdef0123456789abcdef"
    assert job_cursor(encode_job_cursor(CREATED, job_id)) == (CREATED, job_id)
    naive = CREATED.replace(tzinfo=None)  # SQLite hands back naive UTC times
    assert job_cursor(encode_job_cursor(naive, job_id)) == (CREATED, job_id)


def test_no_cursor_is_the_first_page() -> None:
    assert id_cursor(None) is None
    assert line_cursor(None) is None
    assert job_cursor(None) is None


def test_cursors_are_opaque_url_safe_text() -> None:
    for cursor in (
        encode_id_cursor(BIGINT // 10),
        encode_line_cursor(7 << 32, "other", 42),
        encode_line_cursor(None, "ledger", 42),
        encode_job_cursor(CREATED, "f" * 32),
    ):
        assert cursor.replace("-", "").replace("_", "").isalnum() and cursor.isascii()
        assert "|" not in cursor and not cursor.isdigit()


MALFORMED: list[tuple[Callable[[str | None], object], str]] = [
    (id_cursor, "12"),  # the plain ids of the old dead-letter scheme
    (id_cursor, "²"),  # passes str.isdigit(), not int()
    (id_cursor, "9" * 19),
    (id_cursor, ""),
    (id_cursor, "MTI="),  # padding is not part of a cursor
    (id_cursor, "MT I"),
    (id_cursor, "a"),  # one character more than a multiple of four
    (id_cursor, _raw("9" * 19)),  # above a BIGINT
    (id_cursor, _raw("-1")),
    (id_cursor, _raw("1|2")),
    (id_cursor, _raw("١٢")),  # Arabic-Indic digits
    (id_cursor, _raw(b"\xff\xfe")),  # not UTF-8
    (line_cursor, "l12"),  # the old line scheme
    (line_cursor, _raw("ledger|3")),  # the (source, id) scheme of before batch order
    (line_cursor, _raw("ledger")),
    (line_cursor, _raw("|ledger|")),
    (line_cursor, _raw("5|posted|3")),
    (line_cursor, _raw("5|ledger|9" + "9" * 18)),
    (line_cursor, _raw("9" * 19 + "|ledger|3")),  # a position above a BIGINT
    (line_cursor, _raw("-1|ledger|3")),
    (line_cursor, _raw("ledger|3|4")),
    (line_cursor, _raw("1|ledger|3|4")),
    (line_cursor, _raw("null|other|3")),
    (job_cursor, _raw("yesterday|" + "a" * 32)),
    (job_cursor, _raw("2026-12-01T11:30:05Z")),
    (job_cursor, _raw("2026-12-01T11:30:05Z|")),
    (job_cursor, _raw("2026-12-01T11:30:05Z|V\x00NUL")),  # NUL never reaches SQL
    (job_cursor, _raw("2026-12-01T11:30:05Z|" + "a" * 33)),  # longer than jobs.id
]


@pytest.mark.parametrize(("decode", "cursor"), MALFORMED)
def test_a_malformed_cursor_is_a_422_invalid_cursor(
    decode: Callable[[str | None], object], cursor: str
) -> None:
    with pytest.raises(ApiError) as raised:
        decode(cursor)
    assert (raised.value.status, raised.value.code) == (422, "invalid_cursor")


@given(st.text(max_size=128))
def test_no_text_is_anything_but_a_position_or_invalid_cursor(cursor: str) -> None:
    for decode in (id_cursor, line_cursor, job_cursor):
        try:
            decode(cursor)
        except ApiError as exc:
            assert exc.code == "invalid_cursor"
