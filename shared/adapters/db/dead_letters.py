"""Dead letters: what operators inspect, requeue and discard
(docs/api.md#dead-letters-and-the-audit-log)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, func, select, update

from shared.adapters.db.tables import chunks, dead_letters, line_outcomes


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


def load_settled(conn: Connection, dead_letter_id: int) -> Any:
    """``load``, once no transaction is marking it any more: on PostgreSQL a
    shared row lock waits for the requeue that holds it (it marks, publishes,
    then commits: services/api/dead_letters/requeue.py) and reads what it committed. SQLite
    has no row locks: ``load`` (the caller polls)."""
    query = select(dead_letters).where(dead_letters.c.id == dead_letter_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(read=True)
    return conn.execute(query).first()


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


def ids_matching(
    engine: Engine, where: Filter, limit: int, after_id: int | None = None
) -> list[int]:
    """Dead ones matching ``where``, oldest first, after ``after_id``; at most ``limit``."""
    query = (
        where.apply(select(dead_letters.c.id))
        .where(dead_letters.c.status == "dead")
        .order_by(dead_letters.c.id)
        .limit(limit)
    )
    if after_id is not None:
        query = query.where(dead_letters.c.id > after_id)
    with engine.connect() as conn:
        ids: Sequence[Any] = conn.execute(query).scalars().all()
    return [int(i) for i in ids]


# What a requeue needs of a dead letter to judge it (shared/domain/requeue/check.py).
_TO_JUDGE = (
    dead_letters.c.id,
    dead_letters.c.kind,
    dead_letters.c.reason,
    dead_letters.c.document_id,
    dead_letters.c.line_ref,
    dead_letters.c.line_index,
    dead_letters.c.lines,
    dead_letters.c.payload,
)


def still_dead(conn: Connection, ids: Sequence[int]) -> list[Any]:
    """Those of ``ids`` still dead, with what judging their requeue needs: one query."""
    if not ids:
        return []
    query = select(*_TO_JUDGE).where(dead_letters.c.id.in_(ids), dead_letters.c.status == "dead")
    return list(conn.execute(query.order_by(dead_letters.c.id)).all())


def line_keys(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """``line_key`` of many dead letters at once (those stored before line positions)."""
    if not ids:
        return {}
    rows = conn.execute(
        select(line_outcomes.c.dead_letter_id, line_outcomes.c.reconciliation_key).where(
            line_outcomes.c.dead_letter_id.in_(ids)
        )
    ).all()
    return {int(r.dead_letter_id): str(r.reconciliation_key) for r in rows}


@dataclass(frozen=True)
class Marked:
    id: int
    job_id: str
    chunk_id: str
    kind: str
    requeues: int
    digest: str  # its chunk's payload_sha256, which the message names


def mark_requeued_many(conn: Connection, ids: Sequence[int]) -> list[Marked]:
    """``mark_requeued`` of many in one statement: the ones this transaction won
    (still dead), each with its chunk's digest; of two racing requests each
    letter is won by one."""
    if not ids:
        return []
    marked = conn.execute(
        update(dead_letters)
        .where(dead_letters.c.id.in_(ids), dead_letters.c.status == "dead")
        .values(status="requeued", requeues=dead_letters.c.requeues + 1)
        .returning(
            dead_letters.c.id,
            dead_letters.c.job_id,
            dead_letters.c.chunk_id,
            dead_letters.c.kind,
            dead_letters.c.requeues,
        )
    ).all()
    wanted = sorted({m.chunk_id for m in marked})
    digests = (
        dict(
            conn.execute(
                select(chunks.c.id, chunks.c.payload_sha256).where(chunks.c.id.in_(wanted))
            ).all()
        )
        if wanted
        else {}
    )
    return sorted(
        (
            Marked(m.id, m.job_id, m.chunk_id, m.kind, m.requeues, digests[m.chunk_id])
            for m in marked
        ),
        key=lambda m: m.id,
    )


def unmark_requeued_many(conn: Connection, letters: Sequence[Marked]) -> None:
    """Undo ``mark_requeued_many`` for letters whose message was not confirmed."""
    if not letters:
        return
    conn.execute(
        update(dead_letters)
        .where(
            dead_letters.c.id.in_([m.id for m in letters]),
            dead_letters.c.status == "requeued",
        )
        .values(status="dead", requeues=dead_letters.c.requeues - 1)
    )


def mark_requeued(conn: Connection, dead_letter_id: int) -> Marked | None:
    """Move one dead letter from dead to requeued; None if it is not dead (any more).

    The conditional update is what makes a repeated requeue harmless: only one
    request wins the row (``mark_requeued_many``, which this is for one).
    """
    found = mark_requeued_many(conn, [dead_letter_id])
    return found[0] if found else None


def discard(conn: Connection, dead_letter_id: int, note: str) -> bool:
    result = conn.execute(
        update(dead_letters)
        .where(dead_letters.c.id == dead_letter_id, dead_letters.c.status == "dead")
        .values(status="discarded", note=note)
        .returning(dead_letters.c.id)
    ).first()
    return result is not None
