"""Dead letters and the audit log, for operators (docs/api.md#dead-letters-and-the-audit-log)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from services.api import csv_export
from services.api.auth import Ctx, Operator
from services.api.dead_letters.excerpt import excerpt
from services.api.dead_letters.requeue import requeue_matching, requeue_one
from services.api.errors import ApiError, ErrorBody
from services.api.pagination import CursorQuery, encode_id_cursor, id_cursor
from services.api.schemas import (
    NOTE,
    AuditEntry,
    AuditPage,
    BulkRequeued,
    DeadLetter,
    DeadLetterCount,
    DeadLetterDetail,
    DeadLetterPage,
    DeadLetterStats,
    Discarded,
    Requeued,
)
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db.operators import audit
from shared.domain.disputes import says_something
from shared.domain.kinds.base import Identifier
from shared.wire.cells import Cell
from shared.wire.times import iso

router = APIRouter(tags=["dead letters"])
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},
}
# The routes take `{dead_letter_id:int}`: only digits match, so GET
# /admin/dead-letters/requeue is the POST-only route's 405, not a 422 int_parsing.
IdPath = Annotated[int, Path(ge=1, le=2**62)]
Status = Literal["dead", "requeued", "discarded"]
Text = Annotated[str | None, Query(max_length=128)]


def _letter(row: Any) -> dict[str, Any]:
    fields = {name: getattr(row, name) for name in DeadLetter.model_fields if name != "excerpt"}
    fields["excerpt"] = excerpt(row.payload, row.line_index)
    fields["first_failed_at"] = iso(row.first_failed_at)
    fields["last_failed_at"] = iso(row.last_failed_at)
    return fields


def _payload(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # an unreadable chunk: shown as it was stored


# The CSV of dead letters (``Accept: text/csv``): columns only ever added at the end.
CSV_HEADER = (
    "id",
    "job_id",
    "kind",
    "partition_key",
    "document_id",
    "line_ref",
    "reason",
    "error_class",
    "message",
    "attempts",
    "status",
    "lines",
    "first_failed_at",
    "last_failed_at",
    "requeues",
    "note",
)


def _csv_row(r: Any) -> list[Cell]:
    return [
        r.id,
        r.job_id,
        r.kind,
        r.partition_key,
        r.document_id,
        r.line_ref,
        r.reason,
        r.error_class,
        r.message,
        r.attempts,
        r.status,
        r.lines,
        iso(r.first_failed_at),
        iso(r.last_failed_at),
        r.requeues,
        r.note,
    ]


@router.get(
    "/admin/dead-letters",
    operation_id="listDeadLetters",
    response_model=DeadLetterPage,
    responses={**ERRORS, **csv_export.RESPONSE},
)
async def list_dead_letters(
    request: Request,
    ctx: Ctx,
    _: Operator,
    reason: Text = None,
    kind: Text = None,
    partition_key: Text = None,
    job_id: Text = None,
    status: Status | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: CursorQuery = None,
) -> Any:
    """Newest first; with `Accept: text/csv`, every matching one as CSV."""
    where = dl_db.Filter(reason, kind, partition_key, job_id, status)
    if csv_export.wanted(request):
        text = csv_export.chunks(CSV_HEADER, map(_csv_row, dl_db.stream(ctx.engine, where)))
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        return await csv_export.response(text, f"dead-letters-{stamp}.csv")
    rows = await run_in_threadpool(
        dl_db.page, ctx.engine, where, before_id=id_cursor(cursor), limit=limit
    )
    return DeadLetterPage(
        items=[DeadLetter.model_validate(_letter(r)) for r in rows],
        next_cursor=encode_id_cursor(rows[-1].id) if len(rows) == limit else None,
    )


@router.get("/admin/dead-letters/stats", operation_id="deadLetterStats", responses=ERRORS)
async def dead_letter_stats(ctx: Ctx, _: Operator) -> DeadLetterStats:
    rows = await run_in_threadpool(dl_db.stats, ctx.engine)
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[r.status] = by_status.get(r.status, 0) + r.count
    return DeadLetterStats(
        items=[
            DeadLetterCount(reason=r.reason, status=r.status, count=r.count, lines=r.lines or 0)
            for r in rows
        ],
        by_status=by_status,
    )


@router.get(
    "/admin/dead-letters/{dead_letter_id:int}", operation_id="getDeadLetter", responses=ERRORS
)
async def get_dead_letter(dead_letter_id: IdPath, ctx: Ctx, _: Operator) -> DeadLetterDetail:
    row = await run_in_threadpool(dl_db.get, ctx.engine, dead_letter_id)
    if row is None:
        raise ApiError(404, "dead_letter_not_found", "no such dead letter")
    return DeadLetterDetail.model_validate({**_letter(row), "payload": _payload(row.payload)})


@router.post(
    "/admin/dead-letters/{dead_letter_id:int}/requeue",
    operation_id="requeueDeadLetter",
    responses={**ERRORS, 409: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
async def requeue_dead_letter(dead_letter_id: IdPath, ctx: Ctx, who: Operator) -> Requeued:
    def run() -> bool:
        if dl_db.get(ctx.engine, dead_letter_id) is None:
            raise ApiError(404, "dead_letter_not_found", "no such dead letter")
        return requeue_one(ctx, who.actor, dead_letter_id)

    # 409 requeue_would_fail_again (raised by requeue_one) when no line of it would settle now.
    if not await run_in_threadpool(run):
        raise ApiError(409, "not_requeueable", "only a dead letter in status 'dead' is requeued")
    return Requeued(requeued=1)


class RequeueFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Identifier | None = None
    kind: Identifier | None = None
    partition_key: Identifier | None = None
    job_id: Identifier | None = None
    limit: int = Field(ge=1, le=10_000)


@router.post(
    "/admin/dead-letters/requeue",
    operation_id="requeueDeadLetters",
    responses={**ERRORS, 413: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
async def requeue_dead_letters(
    body: Annotated[RequeueFilter, Body()], ctx: Ctx, who: Operator
) -> BulkRequeued:
    """Up to `limit` matching dead letters, oldest first; those in which no line
    would settle now are skipped and counted by the reason they would fail with."""
    where = dl_db.Filter(body.reason, body.kind, body.partition_key, body.job_id)
    done = await run_in_threadpool(requeue_matching, ctx, who.actor, where, body.limit)
    return BulkRequeued(
        requeued=done.requeued,
        skipped=done.refused.total(),
        would_fail_again=dict(sorted(done.refused.items())),
    )


class DiscardNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = NOTE


@router.post(
    "/admin/dead-letters/{dead_letter_id:int}/discard",
    operation_id="discardDeadLetter",
    responses={**ERRORS, 409: {"model": ErrorBody}, 413: {"model": ErrorBody}},
)
async def discard_dead_letter(
    dead_letter_id: IdPath, body: Annotated[DiscardNote, Body()], ctx: Ctx, who: Operator
) -> Discarded:
    if not says_something(body.note):
        raise ApiError(
            422,
            "note_required",
            "a discard needs a note saying why (whitespace and invisible characters alone"
            " do not count)",
        )

    def run() -> bool:
        with ctx.engine.begin() as conn:
            if dl_db.load(conn, dead_letter_id) is None:
                raise ApiError(404, "dead_letter_not_found", "no such dead letter")
            if not dl_db.discard(conn, dead_letter_id, body.note):
                return False
            audit.record(
                conn,
                who.actor,
                "dead_letter.discard",
                f"dead_letter:{dead_letter_id}",
                {"note": body.note},
            )
        return True

    if not await run_in_threadpool(run):
        raise ApiError(409, "not_discardable", "only a dead letter in status 'dead' is discarded")
    return Discarded(discarded=1)


@router.get("/admin/audit", operation_id="listAudit", tags=["audit"], responses=ERRORS)
async def list_audit(
    ctx: Ctx,
    _: Operator,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: CursorQuery = None,
) -> AuditPage:
    rows = await run_in_threadpool(audit.page, ctx.engine, before_id=id_cursor(cursor), limit=limit)
    return AuditPage(
        items=[
            AuditEntry(
                id=r.id,
                at=iso(r.at) or "",
                actor=r.actor,
                action=r.action,
                target=r.target,
                details=json.loads(r.details),
            )
            for r in rows
        ],
        next_cursor=encode_id_cursor(rows[-1].id) if len(rows) == limit else None,
    )
