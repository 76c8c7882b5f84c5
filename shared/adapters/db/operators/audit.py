"""The audit log (docs/api.md#dead-letters-and-the-audit-log): who did what,
written in the transaction of what it records. Dead letters, contracts,
producer keys, webhook endpoints, partners and the close all write it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Engine, insert, select

from shared.adapters.db.tables import audit_log


def record(conn: Connection, actor: str, action: str, target: str, details: dict[str, Any]) -> None:
    conn.execute(
        audit_log.insert().values(
            at=dt.datetime.now(dt.UTC),
            actor=actor,
            action=action,
            target=target,
            details=json.dumps(details, sort_keys=True),
        )
    )


def record_many(
    conn: Connection, actor: str, action: str, entries: Sequence[tuple[str, dict[str, Any]]]
) -> None:
    """``record`` of many targets in one executemany: (target, details) each."""
    if not entries:
        return
    at = dt.datetime.now(dt.UTC)
    conn.execute(
        insert(audit_log),
        [
            {
                "at": at,
                "actor": actor,
                "action": action,
                "target": target,
                "details": json.dumps(details, sort_keys=True),
            }
            for target, details in entries
        ],
    )


def page(engine: Engine, *, before_id: int | None, limit: int) -> Sequence[Any]:
    query = select(audit_log)
    if before_id is not None:
        query = query.where(audit_log.c.id < before_id)
    with engine.connect() as conn:
        return list(conn.execute(query.order_by(audit_log.c.id.desc()).limit(limit)).all())
