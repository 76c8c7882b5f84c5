"""The dispute queue: list, read, export and resolve disputed ledger rows
(docs/api.md#disputes). Viewer or operator token to read, operator to resolve."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from services.api import csv_export
from services.api.auth import Ctx, Operator, Viewer
from services.api.disputes import export as dispute_csv
from services.api.disputes import schemas as wire
from services.api.errors import ApiError, ErrorBody
from services.api.pagination import CursorQuery, encode_id_cursor, id_cursor
from shared.adapters.db.disputes import queue as db
from shared.adapters.db.remittances import queue as deduction_queue
from shared.domain.disputes import (
    DecidedAmountOutOfRange,
    DisputeConflict,
    ResolveRequest,
    says_something,
)
from shared.domain.money import Money
from shared.wire.disputes import Dispute, dispute
from shared.wire.times import ISO_TIME, parse_instant

router = APIRouter(tags=["disputes"])
UNAUTHENTICATED: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody}}
ERRORS: dict[int | str, dict[str, Any]] = {
    **UNAUTHENTICATED,
    404: {"model": ErrorBody, "description": "dispute_not_found"},
}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "dispute_already_resolved or dispute_superseded"},
    413: {"model": ErrorBody},
}
IdPath = Annotated[int, Path(ge=1, le=2**62, description="The disputed ledger row's id.")]
Text = Annotated[str | None, Query(max_length=128)]


def _opened_before(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    try:
        return parse_instant(text)
    except ValueError:
        raise ApiError(
            422,
            "invalid_datetime",
            "opened_before must be an ISO-8601 time in the years 0001-9999 UTC,"
            " e.g. 2026-01-31T00:00:00Z",
        ) from None


def _not_found() -> ApiError:
    return ApiError(404, "dispute_not_found", "no such dispute")


async def _csv(ctx: Any, where: db.Filter) -> StreamingResponse:
    source = dispute_csv.chunks(db.stream(ctx.engine, where))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return await csv_export.response(source, f"disputes-{stamp}.csv")


@router.get(
    "/v1/disputes",
    operation_id="listDisputes",
    response_model=wire.DisputePage,
    responses={**UNAUTHENTICATED, **csv_export.RESPONSE},
)
async def list_disputes(
    request: Request,
    ctx: Ctx,
    _: Viewer,
    status: Literal["open", "resolved", "superseded", "all"] = "open",
    kind: Text = None,
    partition_key: Text = None,
    job_id: Text = None,
    min_abs_variance: Annotated[
        Money | None, Query(description="Only disputes with abs(variance) >= this (money).")
    ] = None,
    opened_before: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Only disputes opened before this ISO-8601 UTC time.",
            json_schema_extra={"pattern": ISO_TIME},
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: CursorQuery = None,
) -> Any:
    """Oldest first. With `Accept: text/csv`: every matching dispute, not one page."""
    where = db.Filter(
        status=status,
        kind=kind,
        partition_key=partition_key,
        job_id=job_id,
        min_abs_variance=min_abs_variance,
        opened_before=_opened_before(opened_before),
    )
    after = id_cursor(cursor)
    if csv_export.wanted(request):
        return await _csv(ctx, where)
    rows = await run_in_threadpool(db.page, ctx.engine, where, after_id=after, limit=limit)
    return wire.DisputePage(
        items=[dispute(d) for d in rows],
        next_cursor=encode_id_cursor(rows[-1].id) if len(rows) == limit else None,
    )


@router.get("/v1/disputes/stats", operation_id="disputeStats", responses=UNAUTHENTICATED)
async def dispute_stats(ctx: Ctx, _: Viewer) -> wire.DisputeStats:
    found = await run_in_threadpool(db.stats, ctx.engine)
    today = dt.datetime.now(dt.UTC).date()
    return wire.stats(found, await run_in_threadpool(deduction_queue.waiting, ctx.engine, today))


@router.get("/v1/disputes/{dispute_id}", operation_id="getDispute", responses=ERRORS)
async def get_dispute(dispute_id: IdPath, ctx: Ctx, _: Viewer) -> Dispute:
    found = await run_in_threadpool(db.get, ctx.engine, dispute_id)
    if found is None:
        raise _not_found()
    return dispute(found)


def _request(decision: str, note: str, amount: Any = None) -> ResolveRequest:
    if not says_something(note):
        raise ApiError(
            422,
            "note_required",
            "a resolution needs a note saying why (whitespace and invisible characters alone"
            " do not count)",
        )
    if decision == "settle_at" and amount is None:
        raise ApiError(422, "amount_required", "settle_at needs the amount to settle at")
    if decision != "settle_at" and amount is not None:
        raise ApiError(422, "amount_not_allowed", f"{decision} takes no amount")
    return ResolveRequest(decision, note, amount)  # type: ignore[arg-type]


@router.post(
    "/admin/disputes/{dispute_id}/resolve",
    operation_id="resolveDispute",
    responses={**ERRORS, **CONFLICT},
)
async def resolve_dispute(
    dispute_id: IdPath, body: Annotated[wire.ResolveOne, Body()], ctx: Ctx, who: Operator
) -> Dispute:
    """Resolve one dispute, at most once: the identical request again answers the same
    resolution; a different one on a resolved dispute is 409."""
    request = _request(body.decision, body.note, body.amount)
    try:
        done = await run_in_threadpool(
            db.resolve,
            ctx.engine,
            dispute_id,
            request,
            who.actor,
            ctx.publish_events,
            ctx.settings.event_batch_max,
        )
    except LookupError:
        raise _not_found() from None
    except DisputeConflict as exc:
        raise ApiError(409, exc.code, str(exc) or exc.code.replace("_", " ")) from None
    except DecidedAmountOutOfRange as exc:  # unreachable for a Money amount; kept a 4xx
        raise ApiError(422, exc.code, str(exc) or "the amount does not fit the ledger") from None
    return dispute(done.dispute)


@router.post(
    "/admin/disputes/resolve",
    operation_id="resolveDisputes",
    responses={**UNAUTHENTICATED, 413: {"model": ErrorBody}},
)
async def resolve_disputes(
    body: Annotated[wire.ResolveMany, Body()], ctx: Ctx, who: Operator
) -> wire.BulkResolved:
    """Resolve up to `limit` open disputes matching the filter, oldest first, with one decision."""
    request = _request(body.decision, body.note)
    where = db.Filter(
        status="open",
        kind=body.kind,
        partition_key=body.partition_key,
        job_id=body.job_id,
        max_abs_variance=body.max_abs_variance,
    )
    count = await run_in_threadpool(
        db.resolve_bulk,
        ctx.engine,
        where,
        request,
        body.limit,
        who.actor,
        ctx.publish_events,
        ctx.settings.event_batch_max,
    )
    return wire.BulkResolved(resolved=count)
