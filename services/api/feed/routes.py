"""The ledger feed (docs/api.md#the-ledger-feed): a viewer's, or a signed
producer GET that reads its own partitions only; long polls wait on the
process's one watch of the feed's end (services/api/feed_watch.py)."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool

from services.api.auth import Ctx, Reader
from services.api.errors import ApiError, ErrorBody
from services.api.feed.schemas import FeedPage, feed_item
from services.api.feed_watch import Filter
from services.api.params import KindName, check_kind, check_partition, readable_partitions
from shared.adapters.db.ledger.read import feed
from shared.domain.feed import START, InvalidCursor, Position, parse_cursor
from shared.domain.kinds.ids import MAX_LENGTH

router = APIRouter(tags=["ledger"])
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "unauthenticated"},
    403: {"model": ErrorBody, "description": "a partition the producer key may not read"},
    422: {"model": ErrorBody, "description": "a cursor settleq did not make, or a bad parameter"},
}


@router.get(
    "/v1/ledger/feed", operation_id="readLedgerFeed", responses=ERRORS, response_model=FeedPage
)
async def ledger_feed(
    ctx: Ctx,
    who: Reader,
    after: Annotated[
        str | None,
        Query(
            max_length=200,
            description="A page's `next_cursor`, or `now` for the ledger's current end;"
            " without it the feed starts at the ledger's first row.",
        ),
    ] = None,
    partition_key: Annotated[str | None, Query(description="Only this partition's rows.")] = None,
    kind: Annotated[KindName | None, Query(description="Only this settlement kind's rows.")] = None,
    line_ref: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_LENGTH,
            description="Only the rows of this line reference, across partitions and"
            " documents: a store's, for a kind whose line is a location"
            " (`line_ref_name` of `GET /v1/kinds`).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=30,
            allow_inf_nan=False,
            description="With nothing to return, wait up to this many seconds for a row.",
        ),
    ] = 0,
) -> FeedPage | Response:
    """Ledger rows in commit order, each once: a consumer that always passes the
    last `next_cursor` receives every row of its filter exactly once, never one
    of an uncommitted transaction, and never skips one that commits late."""
    if kind is not None:
        check_kind(kind, ["query", "kind"])
    if partition_key is not None:
        check_partition(partition_key, ["query", "partition_key"])
    partitions = readable_partitions(who, partition_key)
    start = _start(after)

    def read(position: Position | None) -> feed.Page:
        with ctx.engine.connect() as conn:
            where = feed.now(conn) if position is None else position
            return feed.page(
                conn, where, partitions=partitions, kind=kind, line_ref=line_ref, limit=limit
            )

    def read_rendered(position: Position) -> tuple[feed.Page, bytes]:
        # Rendered once for every identical waiter that shares the read, off the loop.
        found = read(position)
        return found, _page(found).model_dump_json().encode()

    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    where = Filter(None if partitions is None else frozenset(partitions), kind, line_ref)
    found = await run_in_threadpool(read, start)
    while not found.rows and wait > 0:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        if found.cut:
            # Cut by its scan's budget, maybe inside the last committed unit:
            # the watch, which counts whole units, would not wake it for rows
            # already there.
            found = await run_in_threadpool(read, found.next)
            continue
        woken = await ctx.feed_watch.wait_past(found.next, remaining, where)
        if woken is None:
            break
        identical = (found.next, where, limit)
        found, body = await ctx.feed_watch.read(
            identical, woken, partial(read_rendered, found.next)
        )
        if found.rows:
            return Response(body, media_type="application/json")
    return _page(found)


def _page(found: feed.Page) -> FeedPage:
    return FeedPage(items=[feed_item(r) for r in found.rows], next_cursor=found.next.cursor())


def _start(after: str | None) -> Position | None:
    """Where to read from; None for the feed's current end (``now``)."""
    if after is None:
        return START
    if after == "now":
        return None
    try:
        return parse_cursor(after)
    except InvalidCursor:
        detail = {"loc": ["query", "after"], "type": "invalid_cursor", "msg": "not a feed cursor"}
        raise ApiError(
            422, "invalid_cursor", "after is not a cursor of this feed", [detail]
        ) from None
