"""Read-side helpers for assertions: what the ledger and a job hold."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from shared.adapters.db import tables
from shared.adapters.db.ledger import LedgerWriter, writer_for
from shared.domain.pipeline.settlement import ChunkPlan
from shared.domain.pipeline.units import ChunkOutcome, ChunkRef, Unit

ledger = tables.ledger_entries


def ledger_rows(engine: Engine, job_id: str) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(ledger).where(ledger.c.job_id == job_id).order_by(ledger.c.id)
            ).all()
        )


def identity_counts(engine: Engine, keys: list[str]) -> Counter[tuple[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(ledger.c.reconciliation_key, ledger.c.contract_version).where(
                ledger.c.reconciliation_key.in_(keys)
            )
        ).all()
    return Counter((r.reconciliation_key, r.contract_version) for r in rows)


def max_rows_per_identity(engine: Engine) -> int:
    """The most posted or disputed rows of one (key, version): 1 when exactly-once
    holds (a dispute's ``resolved`` row repeats its identity, and is not counted)."""
    with engine.connect() as conn:
        counts = conn.execute(
            select(func.count())
            .select_from(ledger)
            .where(ledger.c.outcome.in_(tables.IDENTITY_OUTCOMES))
            .group_by(ledger.c.reconciliation_key, ledger.c.contract_version)
        ).scalars()
        return max(counts, default=0)


def dead_letters(engine: Engine, job_id: str) -> list[Any]:
    d = tables.dead_letters
    with engine.connect() as conn:
        return list(conn.execute(select(d).where(d.c.job_id == job_id).order_by(d.c.id)).all())


def chunk_results(engine: Engine, job_id: str) -> list[Any]:
    r = tables.chunk_results
    with engine.connect() as conn:
        return list(
            conn.execute(select(r).where(r.c.job_id == job_id).order_by(r.c.chunk_id)).all()
        )


def commit_plan(
    conn: Connection,
    ref: ChunkRef,
    plan: ChunkPlan,
    attempts: int,
    writer: LedgerWriter | None = None,
) -> ChunkOutcome | None:
    """Commit a unit through ``writer`` (by default its backend's ledger writer),
    inside ``conn``'s transaction; its counters, or None when it was already
    processed."""
    result = (writer or writer_for(conn)).commit(conn, Unit(ref, plan, attempts))
    return None if result is None else result.outcome
