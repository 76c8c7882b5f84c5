"""Per-line outcomes of a job, paged (docs/api.md#jobs).

A posted or disputed line's outcome is its ledger row (``ledger_entries``
keeps the job id; the job's ``resolved`` rows, resolutions of its disputes,
are not lines); ``line_outcomes`` holds the rest: duplicates, dead-lettered
lines, and the note (e.g. ``document_type_corrected``) of a posted or disputed
line that has one. A page lists the job's ledger rows by id, then its other
outcomes by id; a cursor names the source and the last id shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from sqlalchemy import Engine, and_, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.tables import IDENTITY_OUTCOMES, ledger_entries, line_outcomes

Source = Literal["ledger", "other"]
IN_LEDGER = IDENTITY_OUTCOMES
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
    correlation_id: str | None  # the document's (an X12 set's control numbers)


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
        r.correlation_id,
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
            notes = line_outcomes.alias("notes")
            query = (
                select(ledger_entries, notes.c.reason)
                .outerjoin(
                    notes,
                    and_(
                        notes.c.job_id == ledger_entries.c.job_id,
                        notes.c.outcome == ledger_entries.c.outcome,
                        notes.c.reconciliation_key == ledger_entries.c.reconciliation_key,
                        notes.c.contract_version == ledger_entries.c.contract_version,
                    ),
                )
                .where(ledger_entries.c.job_id == job_id)
            )
            # A job's lines are its posted and disputed rows: a ``resolved`` row
            # is a dispute's resolution, not a line (the job's line count stays).
            query = query.where(
                outcome_in(
                    ledger_entries.c.outcome, *(IN_LEDGER if outcome is None else (outcome,))
                )
            )
            if after is not None:
                query = query.where(ledger_entries.c.id > after[1])
            rows += [
                _line("ledger", r)
                for r in conn.execute(query.order_by(ledger_entries.c.id).limit(limit))
            ]
            after = None
        if len(rows) < limit and (outcome is None or outcome in NOT_IN_LEDGER):
            wanted = NOT_IN_LEDGER if outcome is None else (outcome,)
            query = select(line_outcomes).where(
                line_outcomes.c.job_id == job_id, line_outcomes.c.outcome.in_(wanted)
            )
            if after is not None:
                query = query.where(line_outcomes.c.id > after[1])
            query = query.order_by(line_outcomes.c.id).limit(limit - len(rows))
            rows += [_line("other", r) for r in conn.execute(query)]
    return rows
