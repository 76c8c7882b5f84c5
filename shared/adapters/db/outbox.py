"""Reading and marking outbox events for the relay. The ledger rows its events
are built from are read by the ledger's read side (ledger/read/events.py)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, select, update

from shared.adapters.db.ledger.read import events as ledger_events
from shared.adapters.db.tables import PUBLISHED_TYPES, outbox
from shared.domain.pipeline.events import (
    PERIOD_CLOSED,
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
    most ``event_batch_max`` events (shared/domain/pipeline/events.py); what each row
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
            outbox.c.type,
        )
        .where(
            outbox.c.published_at.is_(None),
            outbox.c.type.in_(PUBLISHED_TYPES),
            outbox.c.created_at < _cutoff(conn, grace_s),
        )
        .order_by(outbox.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    wanted = [i for row in rows for i in _entry_ids(row)]
    ledger = ledger_events.event_rows(conn, wanted)
    resolutions = ledger_events.resolutions(conn, ledger_events.resolved(ledger))
    messages: list[Message] = []
    units: list[Unit] = []
    for row in rows:
        unit = Unit(created_at=row.created_at)
        units.append(unit)
        if row.type == PERIOD_CLOSED:  # a message of its own, id and body as written
            unit.events = 1
            found = [Message(row.event_id, row.routing_key, row.body.encode(), (row.event_id,))]
        elif row.body is not None:  # a row of the older one-event-per-row form
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
