"""Reading and marking outbox events for the relay."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select, update

from shared.db import tables

O = tables.outbox  # noqa: E741 - the table's one-letter alias, as elsewhere


def next_batch(conn: Connection, limit: int) -> Sequence[Any]:
    """Unpublished events in commit order, locked so a second relay skips them."""
    return conn.execute(
        select(O.c.id, O.c.event_id, O.c.routing_key, O.c.body)
        .where(O.c.published_at.is_(None))
        .order_by(O.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()


def mark_published(conn: Connection, ids: Sequence[int]) -> None:
    conn.execute(
        update(O).where(O.c.id.in_(list(ids))).values(published_at=dt.datetime.now(dt.UTC))
    )


def unpublished(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).where(O.c.published_at.is_(None))).scalar_one())
