"""Per-line outcomes of a job, paged (docs/api.md#jobs).

A posted or disputed line's outcome is its ledger row (``ledger_entries``
keeps the job id); ``line_outcomes`` holds the rest: duplicates, dead-lettered
lines, and the note (e.g. ``document_type_corrected``) of a posted or disputed
line that has one. A page lists the job's ledger rows by id, then its other
outcomes by id; a cursor names the source and the last id shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from sqlalchemy import Engine, and_, select

from shared.adapters.db import tables

LO = tables.line_outcomes
L = tables.ledger_entries

Source = Literal["ledger", "other"]
IN_LEDGER = ("posted", "disputed")
NOT_IN_LEDGER = ("duplicate", "dead_lettered")


@dataclass(frozen=True)
class LineRow:
    source: Source
    id: int
    document_id: str
    line_ref: str
    outcome: str
    reason: str | None
    amount: Decimal | None
    claimed_amount: Decimal | None
    delta: Decimal | None
    reconciliation_key: str | None
    contract_version: int


def _line(source: Source, r: Any) -> LineRow:
    return LineRow(
        source,
        r.id,
        r.document_id,
        r.line_ref,
        r.outcome,
        r.reason,
        r.amount,
        r.claimed_amount,
        r.delta,
        r.reconciliation_key,
        r.contract_version,
    )


def list_lines(
    engine: Engine,
    job_id: str,
    *,
    outcome: str | None,
    after: tuple[Source, int] | None,
    limit: int,
) -> list[LineRow]:
    """Up to ``limit`` lines of a job after the cursor ``(source, last id)``."""
    rows: list[LineRow] = []
    with engine.connect() as conn:
        if (outcome is None or outcome in IN_LEDGER) and (after is None or after[0] == "ledger"):
            notes = LO.alias("notes")
            query = (
                select(L, notes.c.reason)
                .outerjoin(
                    notes,
                    and_(
                        notes.c.job_id == L.c.job_id,
                        notes.c.outcome == L.c.outcome,
                        notes.c.reconciliation_key == L.c.reconciliation_key,
                        notes.c.contract_version == L.c.contract_version,
                    ),
                )
                .where(L.c.job_id == job_id)
            )
            if outcome is not None:
                query = query.where(L.c.outcome == outcome)
            if after is not None:
                query = query.where(L.c.id > after[1])
            rows += [_line("ledger", r) for r in conn.execute(query.order_by(L.c.id).limit(limit))]
            after = None
        if len(rows) < limit and (outcome is None or outcome in NOT_IN_LEDGER):
            wanted = NOT_IN_LEDGER if outcome is None else (outcome,)
            query = select(LO).where(LO.c.job_id == job_id, LO.c.outcome.in_(wanted))
            if after is not None:
                query = query.where(LO.c.id > after[1])
            query = query.order_by(LO.c.id).limit(limit - len(rows))
            rows += [_line("other", r) for r in conn.execute(query)]
    return rows
