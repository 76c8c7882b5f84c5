"""Dated booking periods' calendar (docs/architecture.md#dated-periods-the-cut-at-ends_at):
which period an instant falls in, its name and its range ``[starts_at, ends_at)``.

A month is named ``2026-12``, a quarter ``2026-Q4``, both taken in the
period's time zone, so a month in ``Europe/Paris`` ends at its local midnight.
A drill's periods (``SETTLEQ_PERIOD_SECONDS``) are that many seconds long,
aligned to the epoch, and named ``s<unix start>``, which no calendar name
can be mistaken for.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Unit = Literal["month", "quarter", "seconds"]
_QUARTER = re.compile(r"^\d{4}-Q[1-4]$")
_SECONDS = re.compile(r"^s\d+$")


def zone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone this machine knows, or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not an IANA time zone (e.g. UTC, Europe/Paris, America/New_York)"
    return None


@dataclass(frozen=True)
class Dated:
    """A dated period: its name and its range, in UTC."""

    name: str
    starts_at: dt.datetime
    ends_at: dt.datetime


@dataclass(frozen=True)
class Calendar:
    unit: Unit
    tz: str = "UTC"
    seconds: int | None = None

    def containing(self, when: dt.datetime) -> Dated:
        """The period ``when`` falls in."""
        if self.unit == "seconds":
            length = int(self.seconds or 1)
            start = int(when.timestamp()) // length * length
            return Dated(
                f"s{start}",
                dt.datetime.fromtimestamp(start, dt.UTC),
                dt.datetime.fromtimestamp(start + length, dt.UTC),
            )
        zone = ZoneInfo(self.tz)
        local = when.astimezone(zone)
        if self.unit == "quarter":
            first = (local.month - 1) // 3 * 3 + 1
            name = f"{local.year:04d}-Q{(first - 1) // 3 + 1}"
            months = 3
        else:
            first = local.month
            name = f"{local.year:04d}-{local.month:02d}"
            months = 1
        year, month = local.year + (first - 1 + months) // 12, (first - 1 + months) % 12 + 1
        starts = dt.datetime(local.year, first, 1, tzinfo=zone)
        ends = dt.datetime(year, month, 1, tzinfo=zone)
        return Dated(name, starts.astimezone(dt.UTC), ends.astimezone(dt.UTC))

    def after(self, ends_at: dt.datetime) -> Dated:
        """The period that follows one ending at ``ends_at``: it starts there,
        whatever the calendar was when the ended one was made."""
        found = self.containing(ends_at)
        return Dated(found.name, ends_at, found.ends_at)


def like(name: str, starts_at: dt.datetime, ends_at: dt.datetime, tz: str) -> Calendar:
    """The calendar a dated period was made by, read from its name and range:
    what its successor follows when the setting no longer says (``manual``)."""
    if _SECONDS.fullmatch(name):
        return Calendar("seconds", tz, max(int((ends_at - starts_at).total_seconds()), 1))
    return Calendar("quarter" if _QUARTER.fullmatch(name) else "month", tz)
