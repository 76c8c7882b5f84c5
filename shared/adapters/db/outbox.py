"""Reading and marking outbox events for the relay."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Text, any_, bindparam, cast, func, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import NullType

from shared.adapters.db.tables import dispute_resolutions, ledger_entries, outbox
from shared.domain.events import (
    LEDGER_FIELDS,
    Event,
    Message,
    encoded_message,
    event,
    occurred_at_text,
    unit_messages,
)


@dataclass
class Unit:
    """What one outbox row (one committed unit of work) holds, for the relay's log."""

    created_at: dt.datetime
    events: int = 0
    messages: int = 0
    job_ids: set[str] = field(default_factory=set)
    partition_keys: set[str] = field(default_factory=set)
    correlation_ids: set[str] = field(default_factory=set)

    def add(self, events: Sequence[Event]) -> None:
        self.events += len(events)
        self.job_ids.update({e.job_id for e in events})
        self.partition_keys.update({e.partition_key for e in events})
        self.correlation_ids.update({e.correlation_id for e in events if e.correlation_id})


@dataclass
class Batch:
    """Outbox rows locked for publication, their messages in commit order (each
    unit's in turn) and what each row holds."""

    outbox_ids: list[int]
    messages: list[Message]
    units: list[Unit]


def next_batch(conn: Connection, limit: int, event_batch_max: int, grace_s: float = 0.0) -> Batch:
    """The next ``limit`` outbox rows left unpublished for more than ``grace_s``
    seconds (their committing process publishes them first:
    docs/architecture.md#events-at-commit-and-the-relay), in commit order,
    locked so that a second relay skips them; their events as messages of at
    most ``event_batch_max`` events (shared/domain/events.py); what each row
    holds."""
    rows = conn.execute(
        select(
            outbox.c.id,
            outbox.c.event_id,
            outbox.c.routing_key,
            outbox.c.partition_key,
            outbox.c.body,
            outbox.c.created_at,
            outbox.c.ledger_entry_id,
            outbox.c.ledger_entry_ids,
        )
        .where(outbox.c.published_at.is_(None), outbox.c.created_at < _cutoff(conn, grace_s))
        .order_by(outbox.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    wanted = [i for row in rows for i in _entry_ids(row)]
    ledger = _ledger_rows(conn, wanted)
    resolutions = _resolutions(conn, [i for i, e in ledger.items() if e[_OUTCOME] == "resolved"])
    messages: list[Message] = []
    units: list[Unit] = []
    for row in rows:
        unit = Unit(created_at=row.created_at)
        units.append(unit)
        if row.body is not None:  # a row of the older one-event-per-row form
            legacy = json.loads(row.body)
            unit.events = 1
            unit.job_ids.add(legacy.get("job_id"))
            unit.partition_keys.add(row.partition_key)
            if legacy.get("correlation_id"):
                unit.correlation_ids.add(legacy["correlation_id"])
            found = [encoded_message(row.event_id, row.routing_key, row.body.encode())]
        else:
            occurred_at = occurred_at_text(row.created_at)
            events = [event(ledger[i], occurred_at, resolutions.get(i)) for i in _entry_ids(row)]
            unit.add(events)
            found = unit_messages(events, event_batch_max)
        unit.messages = len(found)
        messages += found
    return Batch([row.id for row in rows], messages, units)


def _entry_ids(row: Any) -> list[int]:
    """The ledger rows an outbox row lists (none for a row of the older form)."""
    if row.ledger_entry_ids:
        return list(row.ledger_entry_ids)
    if row.body is None and row.ledger_entry_id is not None:
        return [row.ledger_entry_id]
    return []


# What an event tells of its ledger row (shared/domain/events.py), and nothing else,
# in the order the event unpacks it.
_EVENT_COLUMNS = tuple(ledger_entries.c[name] for name in LEDGER_FIELDS)
# On PostgreSQL the amounts come as NUMERIC(20,4)'s text: plain notation at the
# column's scale, the wire form itself (shared/domain/money.py::to_wire of the
# Decimal read back), without making a Decimal of each to format it again.
_AMOUNTS = ("amount", "claimed_amount", "delta")
_PG_EVENT_COLUMNS = tuple(
    cast(column, Text) if column.name in _AMOUNTS else column for column in _EVENT_COLUMNS
)
_ID, _OUTCOME = LEDGER_FIELDS.index("id"), LEDGER_FIELDS.index("outcome")


def _resolutions(conn: Connection, ids: list[int]) -> dict[int, Any]:
    """The decision behind each of these ``resolved`` rows (usually none are)."""
    found: dict[int, Any] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        query = select(
            dispute_resolutions.c.ledger_entry_id,
            dispute_resolutions.c.decision,
            dispute_resolutions.c.note,
        ).where(dispute_resolutions.c.ledger_entry_id.in_(part))
        found.update((row.ledger_entry_id, row) for row in conn.execute(query))
    return found


def _ledger_rows(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    if conn.dialect.name == "postgresql":
        return _pg_ledger_rows(conn, ids)
    found: dict[int, Any] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        for row in conn.execute(select(*_EVENT_COLUMNS).where(ledger_entries.c.id.in_(part))).all():
            found[row[_ID]] = row
    return found


# The relay's read of its events' ledger rows on PostgreSQL: executed by
# SQLAlchemy (its errors wrapped, a lost connection invalidated, as the relay's
# handlers expect), fetched as the driver's tuples, which are all ``event``
# reads: SQLAlchemy's result rows would add a Python object and its lookups
# per row that the relay never uses (bench.stages --profile relay). Amounts as
# NUMERIC text (see _PG_EVENT_COLUMNS).
_PG_EVENT_SELECT = str(
    select(*_PG_EVENT_COLUMNS)
    .where(ledger_entries.c.id == any_(bindparam("ids", type_=NullType())))
    .compile(dialect=postgresql.dialect(paramstyle="pyformat"))  # type: ignore[no-untyped-call]
)


def _pg_ledger_rows(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    # One array parameter: an IN list of thousands of binds costs more to
    # compile and send than the rows it fetches. It goes as its text, untyped
    # (psycopg sends a str as "unknown"), so PostgreSQL reads it as the bigint[]
    # that ``id = ANY(...)`` wants (the plan of a typed array), without the
    # driver adapting a list of ints element by element.
    result = conn.exec_driver_sql(_PG_EVENT_SELECT, {"ids": "{" + ",".join(map(str, ids)) + "}"})
    try:
        # psycopg has the whole result once executed: fetching only converts it.
        return {row[_ID]: row for row in result.cursor.fetchall()}
    finally:
        result.close()


def _cutoff(conn: Connection, grace_s: float) -> Any:
    """``grace_s`` seconds ago. On PostgreSQL by the server's clock, the one a
    unit's row is stamped with (ledger/writer.py::claim_marker), whichever host
    the relay runs on; on SQLite, one host's."""
    if conn.dialect.name == "postgresql":
        return func.now() - func.make_interval(0, 0, 0, 0, 0, 0, grace_s)
    return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=grace_s)


def mark_published(conn: Connection, ids: Sequence[int], skip_locked: bool = False) -> None:
    """Mark outbox rows published. ``skip_locked``: leave a row a relay holds
    (it is publishing it too, and marks it when its confirms come) rather
    than wait for its confirms."""
    target = outbox.c.id.in_(list(ids))
    if skip_locked and conn.dialect.name == "postgresql":
        held = (
            select(outbox.c.id)
            .where(target, outbox.c.published_at.is_(None))
            .with_for_update(skip_locked=True)
        )
        target = outbox.c.id.in_(held.scalar_subquery())
    conn.execute(update(outbox).where(target).values(published_at=dt.datetime.now(dt.UTC)))
