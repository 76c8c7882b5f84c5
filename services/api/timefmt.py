"""Timestamps on the wire: ISO-8601 in UTC (SQLite returns naive datetimes)."""

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


def parse_iso(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
