"""Reading and marking outbox events for the relay."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BigInteger, Connection, any_, bindparam, select, update
from sqlalchemy.dialects.postgresql import ARRAY

from shared.adapters.db.tables import dispute_resolutions, ledger_entries, outbox
from shared.domain.events import event_body, event_id, occurred_at_text, routing_key

Event = tuple[str, str, bytes]  # (event_id, routing_key, body)


@dataclass
class Unit:
    """What one outbox row (one committed unit of work) holds, for the relay's log."""

    created_at: dt.datetime
    events: int = 0
    job_ids: set[str] = field(default_factory=set)
    partition_keys: set[str] = field(default_factory=set)
    correlation_ids: set[str] = field(default_factory=set)

    def add(self, job_id: Any, partition_key: Any, correlation_id: Any) -> None:
        self.events += 1
        self.job_ids.add(job_id)
        self.partition_keys.add(partition_key)
        if correlation_id:
            self.correlation_ids.add(correlation_id)


@dataclass
class Batch:
    outbox_ids: list[int]
    events: list[Event]
    units: list[Unit]


def next_batch(conn: Connection, limit: int) -> Batch:
    """The next ``limit`` unpublished outbox rows, in commit order, locked so that
    a second relay skips them; their events, in order; and what each row holds."""
    rows = conn.execute(
        select(
            outbox.c.id,
            outbox.c.event_id,
            outbox.c.routing_key,
            outbox.c.body,
            outbox.c.created_at,
            outbox.c.ledger_entry_id,
            outbox.c.ledger_entry_ids,
        )
        .where(outbox.c.published_at.is_(None))
        .order_by(outbox.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    wanted: list[int] = []
    for row in rows:
        if row.ledger_entry_ids:
            wanted += [int(i) for i in row.ledger_entry_ids.split(",")]
        elif row.ledger_entry_id is not None:
            wanted.append(row.ledger_entry_id)
    ledger = _ledger_rows(conn, wanted)
    resolutions = _resolutions(conn, [i for i, e in ledger.items() if e.outcome == "resolved"])
    events: list[Event] = []
    units: list[Unit] = []
    for row in rows:
        unit = Unit(created_at=row.created_at)
        units.append(unit)
        if row.body is not None:  # a row of the older one-event-per-row form
            events.append((row.event_id, row.routing_key, row.body.encode()))
            legacy = json.loads(row.body)
            unit.add(legacy.get("job_id"), row.partition_key, legacy.get("correlation_id"))
            continue
        ids = (
            [int(i) for i in row.ledger_entry_ids.split(",")]
            if row.ledger_entry_ids
            else [row.ledger_entry_id]
        )
        occurred_at = occurred_at_text(row.created_at)
        for ledger_id in ids:
            entry = ledger[ledger_id]
            unit.add(entry.job_id, entry.partition_key, entry.correlation_id)
            eid = event_id(entry.reconciliation_key, entry.contract_version, entry.outcome)
            events.append(
                (
                    eid,
                    routing_key(entry.outcome, entry.kind),
                    event_body(entry, eid, occurred_at, resolutions.get(ledger_id)),
                )
            )
    return Batch([row.id for row in rows], events, units)


# What an event tells of its ledger row (shared/domain/events.py), and nothing else.
_EVENT_COLUMNS = (
    ledger_entries.c.id,
    ledger_entries.c.reconciliation_key,
    ledger_entries.c.contract_version,
    ledger_entries.c.outcome,
    ledger_entries.c.kind,
    ledger_entries.c.job_id,
    ledger_entries.c.document_id,
    ledger_entries.c.line_ref,
    ledger_entries.c.partition_key,
    ledger_entries.c.correlation_id,
    ledger_entries.c.amount,
    ledger_entries.c.claimed_amount,
    ledger_entries.c.delta,
    ledger_entries.c.supersedes_id,
)


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
        # One array parameter: an IN list of thousands of binds costs more to
        # compile and send than the rows it fetches.
        wanted = ledger_entries.c.id == any_(bindparam("ids", list(ids), type_=ARRAY(BigInteger)))
        return {row.id: row for row in conn.execute(select(*_EVENT_COLUMNS).where(wanted))}
    found: dict[int, Any] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        for row in conn.execute(select(*_EVENT_COLUMNS).where(ledger_entries.c.id.in_(part))).all():
            found[row.id] = row
    return found


def oldest_unpublished(conn: Connection) -> dt.datetime | None:
    """When the oldest outbox row still to publish was committed (None: none)."""
    created = conn.execute(
        select(outbox.c.created_at)
        .where(outbox.c.published_at.is_(None))
        .order_by(outbox.c.id)
        .limit(1)
    ).scalar()
    if created is not None and created.tzinfo is None:
        created = created.replace(tzinfo=dt.UTC)
    return created


def mark_published(conn: Connection, ids: Sequence[int]) -> None:
    conn.execute(
        update(outbox)
        .where(outbox.c.id.in_(list(ids)))
        .values(published_at=dt.datetime.now(dt.UTC))
    )
