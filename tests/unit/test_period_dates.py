"""Dated periods' calendar and settings (docs/operations.md#configuration)."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from shared.config.settings import Settings
from shared.domain import periods
from shared.domain.period_dates import Calendar, like

UTC = dt.UTC


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def test_a_month_and_a_quarter_are_named_and_ranged_by_the_calendar() -> None:
    month = Calendar("month").containing(at(2026, 12, 31, 23, 59))
    assert (month.name, month.starts_at, month.ends_at) == (
        "2026-12",
        at(2026, 12, 1),
        at(2027, 1, 1),
    )
    quarter = Calendar("quarter").containing(at(2026, 11, 5))
    assert (quarter.name, quarter.starts_at, quarter.ends_at) == (
        "2026-Q4",
        at(2026, 10, 1),
        at(2027, 1, 1),
    )
    assert Calendar("quarter").containing(at(2027, 3, 31, 23)).name == "2027-Q1"


def test_a_periods_time_zone_moves_its_midnights() -> None:
    paris = Calendar("month", "Europe/Paris")
    # 23:30 UTC on 31 December is already January in Paris.
    found = paris.containing(at(2026, 12, 31, 23, 30))
    assert (found.name, found.starts_at, found.ends_at) == (
        "2027-01",
        at(2026, 12, 31, 23),
        at(2027, 1, 31, 23),
    )
    # March ends in summer time: an hour earlier in UTC.
    assert paris.containing(at(2027, 3, 15)).ends_at == at(2027, 3, 31, 22)


def test_the_next_period_starts_where_the_last_ended() -> None:
    month = Calendar("month")
    ended = month.containing(at(2026, 12, 7))
    following = month.after(ended.ends_at)
    assert (following.name, following.starts_at) == ("2027-01", ended.ends_at)
    drill = Calendar("seconds", "UTC", 5)
    first = drill.containing(at(2026, 12, 7, 0, 0, 7))
    assert (first.name, first.ends_at - first.starts_at) == (
        f"s{int(at(2026, 12, 7, 0, 0, 5).timestamp())}",
        dt.timedelta(seconds=5),
    )
    assert periods.name_problem(first.name) is None


def test_a_dated_periods_calendar_is_read_from_its_name() -> None:
    assert like("2026-Q4", at(2026, 10, 1), at(2027, 1, 1), "UTC") == Calendar("quarter")
    assert like("2026-12", at(2026, 12, 1), at(2027, 1, 1), "UTC") == Calendar("month")
    assert like("s10", at(2026, 1, 1), at(2026, 1, 1, 0, 0, 3), "UTC") == Calendar(
        "seconds", "UTC", 3
    )


def test_the_period_settings() -> None:
    assert Settings().period == "month" and Settings().calendar() == Calendar("month")
    assert Settings(period="manual", period_seconds=5).calendar() is None
    assert Settings(period="quarter", period_tz="America/New_York").calendar() == Calendar(
        "quarter", "America/New_York"
    )
    assert Settings(period_seconds=5).calendar() == Calendar("seconds", "UTC", 5)
    with pytest.raises(ValidationError, match="not an IANA time zone"):
        Settings(period_tz="Mars/Olympus_Mons")
    with pytest.raises(ValidationError):
        Settings(period="weekly")
