"""Reading and marking outbox events for the relay."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

from sqlalchemy import Connection, func, select, update

from shared.db import tables
from shared.events import event_body

O = tables.outbox  # noqa: E741 - the table's one-letter alias, as elsewhere


def next_batch(conn: Connection, limit: int) -> list[tuple[int, str, str, bytes]]:
    """Unpublished events in commit order as (id, event_id, routing_key, body),
    locked so that a second relay skips them."""
    L = tables.ledger_entries
    rows = conn.execute(
        select(
            O.c.id.label("outbox_id"),
            O.c.event_id,
            O.c.routing_key,
            O.c.body,
            O.c.created_at.label("event_created_at"),
            L,
        )
        .join_from(O, L, L.c.id == O.c.ledger_entry_id, isouter=True)
        .where(O.c.published_at.is_(None))
        .order_by(O.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True, of=O)
    ).all()
    return [
        (
            row.outbox_id,
            row.event_id,
            row.routing_key,
            row.body.encode()
            if row.body is not None
            else json.dumps(event_body(row, row.event_created_at), separators=(",", ":")).encode(),
        )
        for row in rows
    ]


def mark_published(conn: Connection, ids: Sequence[int]) -> None:
    conn.execute(
        update(O).where(O.c.id.in_(list(ids))).values(published_at=dt.datetime.now(dt.UTC))
    )


def unpublished(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).where(O.c.published_at.is_(None))).scalar_one())
