"""Ledger history and search (docs/api.md#ledger-history-and-search), viewer
token: a line's whole story by its reconciliation key, and a document's lines
across every job that carried it."""

from __future__ import annotations

from decimal import localcontext
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool

from services.api.auth import Ctx, Viewer
from services.api.errors import ApiError, ErrorBody
from services.api.jobs.line_items import line_fields
from services.api.pagination import CursorQuery, document_line_cursor, encode_document_line_cursor
from services.api.schemas import DocumentLine, DocumentLinePage, Identity, IdentityEntry
from shared.adapters.db.disputes import queue as disputes_db
from shared.adapters.db.ledger.read import history
from shared.adapters.db.types import EXACT_SUMS
from shared.domain.kinds import shown
from shared.domain.kinds.base import Identifier
from shared.domain.money import ZERO
from shared.wire.disputes import dispute
from shared.wire.times import iso

router = APIRouter(tags=["history"])
UNAUTHENTICATED: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "unauthenticated"},
}
KeyPath = Annotated[
    str,
    Path(
        min_length=64,
        max_length=64,
        pattern=r"^[0-9a-f]{64}$",
        description="A line's reconciliation key (64 lower-case hex digits).",
    ),
]


@router.get(
    "/v1/identities/{reconciliation_key}",
    operation_id="getIdentity",
    responses={
        **UNAUTHENTICATED,
        404: {"model": ErrorBody, "description": "no ledger row has this key"},
    },
)
async def get_identity(reconciliation_key: KeyPath, ctx: Ctx, _: Viewer) -> Identity:
    """Every ledger row of one line, oldest first (posted, disputed, resolved,
    re-priced), `amount_now` (the sum of their deltas), its open dispute, and
    every dispute it had with its resolution (decision, amount, note, decider)."""

    def load() -> Identity:
        # History may lag: the replica's, if there is one
        # (docs/operations.md#reads-from-a-replica).
        rows = history.identity(ctx.reader, reconciliation_key)
        if not rows:
            raise ApiError(404, "identity_not_found", "no ledger row has this reconciliation key")
        disputed = [r.id for r in rows if r.outcome == "disputed"]
        # A line has a dispute per contract version at most: a few reads.
        every = [d for d in (disputes_db.get(ctx.reader, i) for i in disputed) if d is not None]
        seen = [dispute(d) for d in every]
        open_ones = [d for d in seen if d.status == "open"]
        with localcontext(EXACT_SUMS):
            now = sum((r.delta for r in rows), ZERO)
        first = rows[0]
        return Identity(
            reconciliation_key=reconciliation_key,
            kind=first.kind,
            partition_key=first.partition_key,
            document_id=first.document_id,
            line_ref=first.line_ref,
            entries=[_entry(r) for r in rows],
            amount_now=shown(first.kind, now),
            open_dispute=open_ones[-1] if open_ones else None,
            disputes=seen,
        )

    return await run_in_threadpool(load)


def _entry(r: history.IdentityRow) -> IdentityEntry:
    return IdentityEntry(
        ledger_entry_id=r.id,
        job_id=r.job_id,
        contract_version=r.contract_version,
        outcome=r.outcome,
        amount=shown(r.kind, r.amount),
        claimed_amount=shown(r.kind, r.claimed_amount),
        delta=shown(r.kind, r.delta),
        supersedes_id=r.supersedes_id,
        correlation_id=r.correlation_id,
        created_at=iso(r.created_at) or "",
    )


@router.get(
    "/v1/lines",
    operation_id="findLines",
    responses=UNAUTHENTICATED,
)
async def find_lines(
    ctx: Ctx,
    _: Viewer,
    document_id: Annotated[Identifier, Query(description="The document's id, as sent.")],
    partition_key: Annotated[Identifier | None, Query(description="Its partition.")] = None,
    outcome: Literal["posted", "disputed", "duplicate", "dead_lettered"] | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: CursorQuery = None,
) -> DocumentLinePage:
    """A document's lines across every job that carried it, in line order: by
    line reference (a shorter one first: line 2 before line 10), the ledger's
    row before a duplicate or dead-lettered line of the same line, then oldest
    first."""
    after = document_line_cursor(cursor)

    def load() -> DocumentLinePage:
        rows = history.document_lines(
            ctx.reader,
            document_id,
            partition_key=partition_key,
            outcome=outcome,
            after=after,
            limit=limit,
        )
        items = [
            DocumentLine(**fields, job_id=r.job_id, kind=r.kind, partition_key=r.partition_key)
            for r, fields in zip(rows, line_fields(ctx.reader, rows), strict=True)
        ]
        last = rows[-1] if len(rows) == limit else None
        next_cursor = encode_document_line_cursor(*last.cursor) if last else None
        return DocumentLinePage(items=items, next_cursor=next_cursor)

    return await run_in_threadpool(load)
