"""Dates and instants on the wire: ISO-8601 strings, and nothing else
(docs/architecture.md#decimal-limits).

Pydantic's own ``date``/``datetime`` also take numbers (Unix seconds or
milliseconds), numeric strings and midnight datetimes where a date is meant,
so these types read their text themselves: one regex, then the standard
library's parser for the calendar (February 30th, hour 24 and second 60 are
refused). What they refuse is one code per type: 422 ``date_invalid`` or
``datetime_invalid``, as ``shared.domain.money`` answers ``decimal_invalid``.

- ``IsoDate``: ``YYYY-MM-DD``.
- ``UtcDateTime``: ``YYYY-MM-DDTHH:MM[:SS[.ffffff]]`` then ``Z`` or ``+00:00``:
  an upper-case ``T``, at most microseconds (a finer fraction would be cut, so
  two instants could become one), and UTC written as such (``-00:00`` means
  "offset unknown" in RFC 3339; ``+0000`` and other offsets are refused).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_UTC_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|\+00:00)"
)
_UTC = dt.timedelta(0)
# As published (openapi.yaml), with the ranges the calendar checks afterwards:
# years 0001-9999, months 01-12, days 01-31, hours 00-23, no leap second (a day
# past its month's end matches and is still refused).
_DAY = (
    r"([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
)
DATE_PATTERN = rf"^{_DAY}$"
UTC_DATETIME_PATTERN = (
    rf"^{_DAY}T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{{1,6}})?)?(Z|\+00:00)$"
)


def _date(raw: Any) -> dt.date:
    if type(raw) is str and _ISO_DATE.fullmatch(raw):
        try:
            return dt.date.fromisoformat(raw)
        except ValueError:
            pass  # a day the calendar does not have
    elif type(raw) is dt.date:  # already parsed (internal round trips)
        return raw
    raise PydanticCustomError(
        "date_invalid", "a date must be an ISO-8601 string YYYY-MM-DD, e.g. 2026-07-01"
    )


def _datetime(raw: Any) -> dt.datetime:
    if type(raw) is str and _UTC_DATETIME.fullmatch(raw):
        try:
            return dt.datetime.fromisoformat(raw)
        except ValueError:
            pass
    elif isinstance(raw, dt.datetime) and raw.utcoffset() == _UTC:
        return raw
    raise PydanticCustomError(
        "datetime_invalid",
        "a date-time must be an ISO-8601 string in UTC, e.g. 2026-07-01T06:00:00Z",
    )


IsoDate = Annotated[
    dt.date,
    PlainValidator(_date),
    PlainSerializer(dt.date.isoformat, return_type=str),
    WithJsonSchema({"type": "string", "format": "date", "pattern": DATE_PATTERN}),
]
UtcDateTime = Annotated[
    dt.datetime,
    PlainValidator(_datetime),
    PlainSerializer(lambda v: v.isoformat().replace("+00:00", "Z"), return_type=str),
    # No "format": RFC 3339 needs the seconds, which the reader lets a producer omit.
    WithJsonSchema({"type": "string", "pattern": UTC_DATETIME_PATTERN}),
]
