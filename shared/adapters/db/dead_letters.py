"""Dead letters: what operators inspect, requeue and discard
(docs/api.md#dead-letters-and-the-audit-log)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, func, select, update

from shared.adapters.db.tables import audit_log, dead_letters, line_outcomes


@dataclass(frozen=True)
class Filter:
    reason: str | None = None
    kind: str | None = None
    partition_key: str | None = None
    job_id: str | None = None
    status: str | None = None

    def apply(self, query: Any) -> Any:
        for name in ("reason", "kind", "partition_key", "job_id", "status"):
            value = getattr(self, name)
            if value is not None:
                query = query.where(dead_letters.c[name] == value)
        return query


def load(conn: Connection, dead_letter_id: int) -> Any:
    return conn.execute(select(dead_letters).where(dead_letters.c.id == dead_letter_id)).first()


def line_key(conn: Connection, dead_letter_id: int) -> str | None:
    """The reconciliation key of a line-level dead letter's line, from its outcome row."""
    return conn.execute(
        select(line_outcomes.c.reconciliation_key)
        .where(line_outcomes.c.dead_letter_id == dead_letter_id)
        .limit(1)
    ).scalar()


def get(engine: Engine, dead_letter_id: int) -> Any:
    with engine.connect() as conn:
        return load(conn, dead_letter_id)


def page(engine: Engine, where: Filter, *, before_id: int | None, limit: int) -> list[Any]:
    """Newest first; the cursor is the id of the last row seen."""
    query = where.apply(select(dead_letters))
    if before_id is not None:
        query = query.where(dead_letters.c.id < before_id)
    with engine.connect() as conn:
        return list(conn.execute(query.order_by(dead_letters.c.id.desc()).limit(limit)).all())


# Everything listed but the payload (a chunk's documents): what an export shows.
_LISTED = [column for column in dead_letters.c if column.name != "payload"]


def stream(engine: Engine, where: Filter, *, batch: int = 1000) -> Iterator[Any]:
    """Every matching dead letter without its payload, newest first, ``batch``
    a short transaction (on SQLite a long one would hold the write lock)."""
    before_id: int | None = None
    while True:
        query = where.apply(select(*_LISTED))
        if before_id is not None:
            query = query.where(dead_letters.c.id < before_id)
        with engine.connect() as conn:
            rows = conn.execute(query.order_by(dead_letters.c.id.desc()).limit(batch)).all()
        yield from rows
        if len(rows) < batch:
            return
        before_id = rows[-1].id


def stats(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(
                    dead_letters.c.reason,
                    dead_letters.c.status,
                    func.count().label("count"),
                    func.sum(dead_letters.c.lines).label("lines"),
                )
                .group_by(dead_letters.c.reason, dead_letters.c.status)
                .order_by(dead_letters.c.reason, dead_letters.c.status)
            ).all()
        )


def ids_matching(engine: Engine, where: Filter, limit: int) -> list[int]:
    query = (
        where.apply(select(dead_letters.c.id))
        .where(dead_letters.c.status == "dead")
        .order_by(dead_letters.c.id)
        .limit(limit)
    )
    with engine.connect() as conn:
        ids: Sequence[Any] = conn.execute(query).scalars().all()
    return [int(i) for i in ids]


def mark_requeued(conn: Connection, dead_letter_id: int) -> Any:
    """Move one dead letter from dead to requeued; None if it is not dead (any more).

    The conditional update is what makes a repeated requeue harmless: only one
    request wins the row.
    """
    return conn.execute(
        update(dead_letters)
        .where(dead_letters.c.id == dead_letter_id, dead_letters.c.status == "dead")
        .values(status="requeued", requeues=dead_letters.c.requeues + 1)
        .returning(
            dead_letters.c.id,
            dead_letters.c.job_id,
            dead_letters.c.chunk_id,
            dead_letters.c.kind,
            dead_letters.c.requeues,
        )
    ).first()


def unmark_requeued(conn: Connection, dead_letter_id: int, requeues: int) -> None:
    """Undo ``mark_requeued`` when its message could not be enqueued."""
    conn.execute(
        update(dead_letters)
        .where(
            dead_letters.c.id == dead_letter_id,
            dead_letters.c.status == "requeued",
            dead_letters.c.requeues == requeues,
        )
        .values(status="dead", requeues=requeues - 1)
    )


def discard(conn: Connection, dead_letter_id: int, note: str) -> bool:
    result = conn.execute(
        update(dead_letters)
        .where(dead_letters.c.id == dead_letter_id, dead_letters.c.status == "dead")
        .values(status="discarded", note=note)
        .returning(dead_letters.c.id)
    ).first()
    return result is not None


def audit(conn: Connection, actor: str, action: str, target: str, details: dict[str, Any]) -> None:
    conn.execute(
        audit_log.insert().values(
            at=dt.datetime.now(dt.UTC),
            actor=actor,
            action=action,
            target=target,
            details=json.dumps(details, sort_keys=True),
        )
    )


def audit_page(engine: Engine, *, before_id: int | None, limit: int) -> Sequence[Any]:
    query = select(audit_log)
    if before_id is not None:
        query = query.where(audit_log.c.id < before_id)
    with engine.connect() as conn:
        return list(conn.execute(query.order_by(audit_log.c.id.desc()).limit(limit)).all())
