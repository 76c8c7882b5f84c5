"""The feed's wire shapes: a ledger row with every column of the stable schema
(docs/architecture.md#ledger-schema), money as strings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from shared.domain.kinds import shown
from shared.domain.pipeline.events import LedgerOutcome
from shared.wire.times import iso


class FeedItem(BaseModel):
    id: int
    reconciliation_key: str
    contract_version: int
    kind: str
    partition_key: str
    document_id: str
    line_ref: str
    job_id: str
    outcome: LedgerOutcome
    amount: str
    claimed_amount: str | None
    delta: str
    supersedes_id: int | None
    correlation_id: str | None
    created_at: str
    period: str  # the booking period


class FeedPage(BaseModel):
    """Rows in commit order. ``next_cursor`` is always there: pass it as
    ``after`` to go on, also after a page with no items."""

    items: list[FeedItem]
    next_cursor: str


def feed_item(row: Any) -> FeedItem:
    return FeedItem(
        id=row.id,
        reconciliation_key=row.reconciliation_key,
        contract_version=row.contract_version,
        kind=row.kind,
        partition_key=row.partition_key,
        document_id=row.document_id,
        line_ref=row.line_ref,
        job_id=row.job_id,
        outcome=row.outcome,
        amount=shown(row.kind, row.amount),
        claimed_amount=shown(row.kind, row.claimed_amount),
        delta=shown(row.kind, row.delta),
        supersedes_id=row.supersedes_id,
        correlation_id=row.correlation_id,
        created_at=iso(row.created_at) or "",
        period=row.period,
    )
