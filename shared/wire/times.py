"""Timestamps on the wire: ISO-8601 in UTC (SQLite returns naive datetimes).

Written by every wire shape and read back from the API's query parameters:
one module, so that what is written is what is read.
"""

from __future__ import annotations

import datetime as dt


def iso(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


# The times parse_iso reads, as published (openapi.yaml): a date, then a time
# of day to the minute or second (microseconds at most), then Z or an offset
# (a day past its month's end, e.g. 02-30, matches and is still refused).
ISO_TIME = (
    r"^([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
    r"-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-][01][0-9]:[0-5][0-9])$"
)


def parse_instant(text: str) -> dt.datetime:
    """``text`` as an aware UTC instant (a time without an offset is read as UTC,
    like every time on the wire). Raises ``ValueError`` for text that is not a
    time, and for a time whose instant a ``datetime`` cannot hold once in UTC:
    ``0001-01-01T00:00+01:00`` is in year 0, ``9999-12-31T23:59-01:00`` in 10000.
    """
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    try:
        return value.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError(f"{text} is outside the years 0001-9999 in UTC") from None
