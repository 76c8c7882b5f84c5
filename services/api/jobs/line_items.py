"""A line on the wire, as a job's lines page and a document's lines show it
(``schemas.LineOutcome``): its fields, its dispute's status read once a page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine

from shared.adapters.db.disputes import queue as disputes_db
from shared.domain.kinds import shown


def line_fields(
    engine: Engine, rows: Sequence[Any], kind: str | None = None
) -> list[dict[str, Any]]:
    """Each row's ``LineOutcome`` fields, amounts at ``kind``'s quantum (None:
    each row's own ``kind``, for rows of several jobs). A row is a ledger row
    (``source`` ``"ledger"``) or a line the ledger did not take; only a ledger
    row is a dispute, so only its id is looked up (the other table's ids are
    its own)."""
    disputed = [r.id for r in rows if r.source == "ledger" and r.outcome == "disputed"]
    status = disputes_db.statuses(engine, disputed)
    return [
        {
            "document_id": r.document_id,
            "line_ref": r.line_ref,
            "outcome": r.outcome,
            "reason": r.reason,
            "amount": shown(k, r.amount),
            "claimed_amount": shown(k, r.claimed_amount),
            "ledger_claimed_amount": shown(k, r.ledger_claimed_amount),
            "delta": shown(k, r.delta),
            "reconciliation_key": r.reconciliation_key,
            "contract_version": r.contract_version,
            "dispute_status": status.get(r.id)
            if r.source == "ledger" and r.outcome == "disputed"
            else None,
            "correlation_id": r.correlation_id,
        }
        for r, k in ((r, kind or r.kind) for r in rows)
    ]
