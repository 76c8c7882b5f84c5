"""Reading and marking outbox events for the relay."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from shared.db import tables
from shared.events import event_body, routing_key

O = tables.outbox  # noqa: E741 - the table's one-letter alias, as elsewhere


Event = tuple[str, str, bytes]  # (event_id, routing_key, body)


def next_batch(conn: Connection, limit: int) -> tuple[list[int], list[Event]]:
    """The next ``limit`` unpublished outbox rows, in commit order, locked so that
    a second relay skips them; and their events, in order."""
    rows = conn.execute(
        select(
            O.c.id,
            O.c.event_id,
            O.c.routing_key,
            O.c.body,
            O.c.created_at,
            O.c.ledger_entry_id,
            O.c.ledger_entry_ids,
        )
        .where(O.c.published_at.is_(None))
        .order_by(O.c.id)
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
    events: list[Event] = []
    for row in rows:
        if row.body is not None:
            events.append((row.event_id, row.routing_key, row.body.encode()))
            continue
        ids = (
            [int(i) for i in row.ledger_entry_ids.split(",")]
            if row.ledger_entry_ids
            else [row.ledger_entry_id]
        )
        for ledger_id in ids:
            entry = ledger[ledger_id]
            body = event_body(entry, row.created_at)
            events.append(
                (
                    body["event_id"],
                    routing_key(entry.outcome, entry.kind),
                    json.dumps(body, separators=(",", ":")).encode(),
                )
            )
    return [row.id for row in rows], events


def _ledger_rows(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    L = tables.ledger_entries
    found: dict[int, Any] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        for row in conn.execute(select(L).where(L.c.id.in_(part))).all():
            found[row.id] = row
    return found


def mark_published(conn: Connection, ids: Sequence[int]) -> None:
    conn.execute(
        update(O).where(O.c.id.in_(list(ids))).values(published_at=dt.datetime.now(dt.UTC))
    )
