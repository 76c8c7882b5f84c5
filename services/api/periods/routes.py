"""Periods, the close, balances, the journal and statements
(docs/api.md#periods-and-the-close). Viewer token to read (balances and
statements also a signed producer GET, of its own partitions); operator to close."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response, StreamingResponse
from sqlalchemy import Engine

from services.api import csv_export
from services.api.auth import Ctx, Operator, Reader, Viewer
from services.api.context import ApiContext
from services.api.errors import ApiError, ErrorBody
from services.api.params import KindName, check_kind, check_partition, readable_partitions
from services.api.periods import schemas as wire
from shared.adapters.db.periods import booking, counterparties, lines, reads, sums
from shared.adapters.db.periods import close as closing
from shared.domain import erp_journal
from shared.domain import periods as domain
from shared.domain.kinds import KINDS, shown
from shared.domain.money import BASIS, ZERO, at_quantum
from shared.wire.times import ISO_TIME, iso, parse_instant

router = APIRouter(tags=["periods"])
log = logging.getLogger("settleq.api")
UNAUTHENTICATED: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody}}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    **UNAUTHENTICATED,
    404: {"model": ErrorBody, "description": "period_not_found"},
}
SCOPED: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    403: {"model": ErrorBody, "description": "a partition the producer key may not read"},
    422: {"model": ErrorBody, "description": "a bad parameter"},
}
PeriodPath = Annotated[domain.PeriodName, Path(description="The period's name.")]
PeriodQuery = Annotated[
    domain.PeriodName | None, Query(description="A period's name; the open one by default.")
]
Format = Annotated[Literal["csv", "json"], Query(description="`csv` or `json`.")]
JournalFormat = Annotated[
    Literal["csv", "json", "netsuite", "oracle_gl", "sap"],
    Query(
        description="`csv` or `json`, or an ERP's journal import file:"
        " `netsuite`, `oracle_gl` or `sap` (docs/operations.md#the-month-end-close)."
    ),
]
CSV: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON, or with `format=csv` the CSV bytes (header row first).",
        "content": {"text/csv": {"schema": {"type": "string"}}},
    }
}


def _how(ctx: Any) -> domain.Journaling:
    return ctx.settings.journaling()  # type: ignore[no-any-return]


def _not_found(name: str) -> ApiError:
    return ApiError(404, "period_not_found", f"no period is named {name}")


@router.get("/v1/periods", operation_id="listPeriods", responses=UNAUTHENTICATED)
async def list_periods(ctx: Ctx, _: Viewer) -> wire.PeriodPage:
    """Every booking period, newest first: the open one, then the closed ones
    with their totals, what they carried over and their journal's SHA-256."""
    found = await run_in_threadpool(reads.summaries, ctx.engine, _how(ctx))
    return wire.PeriodPage(items=[wire.period(s) for s in found])


@router.post(
    "/admin/periods/close",
    operation_id="closePeriod",
    responses={
        **UNAUTHENTICATED,
        409: {
            "model": ErrorBody,
            "description": "period_not_open, or close_waiting: transactions booking"
            " into the period were still open after SETTLEQ_CLOSE_WAIT_S (nothing was cut);"
            " period_not_ended: a dated period before its ends_at;"
            " period_next_mismatch: an ended period's next is not the one its cut opened;"
            " earlier_period_not_closed",
        },
        413: {"model": ErrorBody},
        422: {
            "model": ErrorBody,
            "description": "period_name_used, next_required, or a bad name",
        },
    },
)
async def close_period(
    body: Annotated[wire.CloseRequest, Body()], ctx: Ctx, who: Operator
) -> wire.Period:
    """Close the open period, which the request names, and open `next`. Every
    transaction that booked into it has committed when this answers; none
    books into it afterwards. The same close again answers the same period.
    Settlement goes on while the close waits, and after `SETTLEQ_CLOSE_WAIT_S`
    it gives up (409 `close_waiting`, naming what it waited on), cutting nothing.
    A dated period is closed once it has `ended` (at its `ends_at`): the close
    then makes it final and cuts nothing; before, 409 `period_not_ended`."""
    try:
        done = await run_in_threadpool(
            closing.close,
            ctx.engine,
            body.period,
            body.next,
            body.note,
            who.actor,
            _how(ctx),
            ctx.settings.close_wait_s,
            ctx.settings.calendar(),
        )
    except booking.CutWaiting as exc:
        raise ApiError(409, "close_waiting", str(exc)) from None
    except closing.PeriodNotOpen as exc:
        raise ApiError(409, "period_not_open", str(exc)) from None
    except closing.PeriodNameUsed as exc:
        detail = {"loc": ["body", "next"], "type": "period_name_used", "msg": str(exc)}
        raise ApiError(422, "period_name_used", str(exc), [detail]) from None
    except closing.PeriodNotEnded as exc:
        raise ApiError(409, "period_not_ended", str(exc)) from None
    except closing.NextNotOpened as exc:
        raise ApiError(409, "period_next_mismatch", str(exc)) from None
    except closing.EarlierNotClosed as exc:
        raise ApiError(409, "earlier_period_not_closed", str(exc)) from None
    except closing.NextRequired as exc:
        detail = {"loc": ["body", "next"], "type": "next_required", "msg": str(exc)}
        raise ApiError(422, "next_required", str(exc), [detail]) from None
    summary = await run_in_threadpool(reads.summary, ctx.engine, done.name, _how(ctx))
    return wire.period(summary)


@router.get(
    "/v1/periods/{period}/journal",
    operation_id="readJournal",
    responses={
        **NOT_FOUND,
        **CSV,
        409: {
            "model": ErrorBody,
            "description": "journal_format_unfit: an entry cannot go in that ERP's file as it"
            " is (SETTLEQ_JOURNAL_ENTITY or an account longer than its column)",
        },
    },
    response_model=wire.Journal,
)
async def read_journal(
    period: PeriodPath, ctx: Ctx, _: Viewer, format: JournalFormat = "json"
) -> Response:
    """The period's balanced entries per kind and partition. A closed period's
    is the same bytes on every export (its CSV's SHA-256 is the close's); the
    open one's is a preview, `"final": false`. `format=netsuite|oracle_gl|sap`:
    the same entries as that ERP's journal import file."""
    if format in erp_journal.FORMATS:
        return await _erp_journal(ctx, period, format)
    engine = await _closed_reader(ctx, period)
    try:
        found = await run_in_threadpool(reads.journal, engine, period, _how(ctx))
    except reads.NoSuchPeriod:
        raise _not_found(period) from None
    if format == "csv":
        return Response(
            found.csv,
            media_type=csv_export.MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="journal-{period}.csv"'},
        )
    body = domain.journal_json(found.period, found.final, found.entries, found.sha256)
    return Response(json.dumps(body, separators=(",", ":")), media_type="application/json")


async def _closed_reader(ctx: ApiContext, period: str) -> Engine:
    """A period's journal and lines: from the replica once it shows the period
    closed, its rows and entries fixed; an open or ended one from the primary."""
    return await ctx.settled_reader(lambda engine: reads.closed_on(engine, period), period)


async def _erp_journal(ctx: Any, period: str, fmt: str) -> Response:
    engine = await _closed_reader(ctx, period)
    try:
        data = await run_in_threadpool(reads.erp_journal, engine, period, _how(ctx), fmt)
    except reads.NoSuchPeriod:
        raise _not_found(period) from None
    except ValueError as exc:
        # The configuration, not the request: an entity or account longer than
        # the ERP's column, which a cut would book elsewhere.
        raise ApiError(409, "journal_format_unfit", str(exc)) from None
    return Response(
        data,
        media_type=csv_export.MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="journal-{period}-{fmt}.csv"'},
    )


@router.get(
    "/v1/periods/{period}/journal/lines",
    operation_id="readJournalLines",
    responses={**NOT_FOUND, **CSV},
)
async def read_journal_lines(
    period: PeriodPath,
    ctx: Ctx,
    _: Viewer,
    format: Format = "csv",
    kind: Annotated[KindName | None, Query(description="Only this kind's rows.")] = None,
    partition_key: Annotated[str | None, Query(description="Only this partition's rows.")] = None,
) -> StreamingResponse:
    """One line per ledger row booked in the period, in id order, with its
    entry's `external_id`: the lines of an entry add up to it. Streamed."""
    if kind is not None:
        check_kind(kind, ["query", "kind"])
    if partition_key is not None:
        check_partition(partition_key, ["query", "partition_key"])
    how = _how(ctx)
    engine = await _closed_reader(ctx, period)
    try:
        # The period's row, read once; never its summary, which would tally
        # an open period's every row before the first line is sent.
        row, booked_on, heading = await run_in_threadpool(reads.lines_made, engine, period, how)
    except reads.NoSuchPeriod:
        raise _not_found(period) from None
    partitions = None if partition_key is None else [partition_key]
    filename = f"journal-lines-{row.name}.csv"
    if format == "csv" and engine.dialect.name == "postgresql":
        blocks = lines.csv_blocks(engine, row, kind, partitions, booked_on, heading)
        return await csv_export.response(blocks, filename)
    rows = reads.journal_lines(engine, row.name, sums.Scope(kind, partitions), how)
    if format == "csv":
        cells = _line_cells(row.name, booked_on, heading, rows)
        return await csv_export.response(csv_export.chunks(lines.HEADER, cells), filename)
    return await _json_stream(_line_json(row.name, booked_on, heading, rows))


def _external_id(period: str, booked_on: domain.Accounts, r: Any) -> str | None:
    return domain.line_entry(period, booked_on, r.kind, r.partition_key, r.outcome)


def _line_cells(
    period: str, booked_on: domain.Accounts, heading: domain.Heading, rows: Iterator[Any]
) -> Iterator[Any]:
    quanta = {name: kind.quantum for name, kind in KINDS.items()}
    date = heading.accounting_date.isoformat()
    for r in rows:
        yield (
            period,
            _external_id(period, booked_on, r),
            r.id,
            r.kind,
            r.partition_key,
            r.correlation_id,
            r.reconciliation_key,
            r.document_id,
            r.line_ref,
            r.job_id,
            r.outcome,
            at_quantum(r.delta, quanta.get(r.kind, BASIS)),
            r.supersedes_id,
            iso(r.created_at),
            date,
            heading.entity,
            r.currency or heading.currency,
            heading.counterparties.get(r.partition_key, ""),
        )


def _line_json(
    period: str, booked_on: domain.Accounts, heading: domain.Heading, rows: Iterator[Any]
) -> Iterator[str]:
    yield '{"period":' + json.dumps(period) + ',"items":['
    first = True
    for r in rows:
        item = {
            "period": period,
            "external_id": _external_id(period, booked_on, r),
            "id": r.id,
            "kind": r.kind,
            "partition_key": r.partition_key,
            "correlation_id": r.correlation_id,
            "reconciliation_key": r.reconciliation_key,
            "document_id": r.document_id,
            "line_ref": r.line_ref,
            "job_id": r.job_id,
            "outcome": r.outcome,
            "delta": shown(r.kind, r.delta),
            "supersedes_id": r.supersedes_id,
            "created_at": iso(r.created_at),
            "accounting_date": heading.accounting_date.isoformat(),
            "entity": heading.entity,
            "currency": r.currency or heading.currency,
            "counterparty": heading.counterparties.get(r.partition_key) or None,
        }
        yield ("" if first else ",") + json.dumps(item, separators=(",", ":"))
        first = False
    yield "]}"


async def _json_stream(source: Iterator[str]) -> StreamingResponse:
    first = await run_in_threadpool(next, source)

    async def body() -> Any:
        yield first
        async for chunk in csv_export.in_threads(_batched(source)):
            yield chunk

    return StreamingResponse(body(), media_type="application/json")


def _batched(source: Iterator[str], size: int = 1000) -> Iterator[str]:
    """``size`` pieces of text at a time: one thread hop per batch, not per row."""
    batch: list[str] = []
    for piece in source:
        batch.append(piece)
        if len(batch) == size:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)


def _as_of(text: str) -> dt.datetime:
    try:
        return parse_instant(text)
    except ValueError:
        raise ApiError(
            422,
            "invalid_datetime",
            "as_of must be an RFC 3339 time in the years 0001-9999 UTC, e.g. 2026-12-31T23:59:59Z",
            [{"loc": ["query", "as_of"], "type": "invalid_datetime", "msg": "not a time"}],
        ) from None


@router.get("/v1/balances", operation_id="readBalances", responses=SCOPED)
async def read_balances(
    ctx: Ctx,
    who: Reader,
    kind: Annotated[KindName | None, Query(description="Only this kind.")] = None,
    partition_key: Annotated[str | None, Query(description="Only this partition.")] = None,
    period: PeriodQuery = None,
    as_of: Annotated[
        str | None,
        Query(
            pattern=ISO_TIME,
            description="Instead of `period`: the sum of the deltas committed up to this instant.",
        ),
    ] = None,
) -> wire.BalancePage:
    """Per kind and partition: the opening balance, the period's activity
    (posted, disputed, repriced, resolved, and a remittance's deducted and
    written_off), the closing balance and what is in dispute. A producer reads
    its own partitions only."""
    if kind is not None:
        check_kind(kind, ["query", "kind"])
    if partition_key is not None:
        check_partition(partition_key, ["query", "partition_key"])
    if period is not None and as_of is not None:
        raise ApiError(
            422,
            "period_and_as_of",
            "give period or as_of, not both",
            [{"loc": ["query", "as_of"], "type": "period_and_as_of", "msg": "with period"}],
        )
    scope = sums.Scope(kind, readable_partitions(who, partition_key))
    if as_of is not None:
        when = _as_of(as_of)
        found = await run_in_threadpool(reads.balances_as_of, ctx.engine, when, scope)
        items = [wire.balance(b) for b in found]
        return wire.BalancePage(period=None, final=False, as_of=iso(when), items=items)
    try:
        row, found = await run_in_threadpool(reads.balances, ctx.engine, period, scope, _how(ctx))
    except reads.NoSuchPeriod:
        raise _not_found(period or "") from None
    return wire.BalancePage(
        period=row.name,
        final=row.status == "closed",
        status=row.status,
        as_of=None,
        items=[wire.balance(b) for b in found],
    )


STATEMENT_HEADER = (
    "row",
    "kind",
    "partition_key",
    "period",
    "document_id",
    "line_ref",
    "outcome",
    "amount",
    "claimed_amount",
    "delta",
    "balance",
    "supersedes_id",
    "correlation_id",
    "reconciliation_key",
    "job_id",
    "created_at",
    # Added last, so a reader of the columns above by position reads them still.
    "contract_version",
    "activity",
    "currency",
)


@router.get(
    "/v1/partitions/{partition_key}/statement",
    operation_id="readStatement",
    responses={**SCOPED, **CSV},
    response_model=wire.Statement,
)
async def read_statement(
    partition_key: Annotated[str, Path(description="A vendor, carrier or recipe.")],
    ctx: Ctx,
    who: Reader,
    period: PeriodQuery = None,
    kind: Annotated[KindName | None, Query(description="Only this kind.")] = None,
    format: Format = "json",
) -> Response:
    """One partition's statement for a period: its opening balance, each
    document's lines booked in the period, and its closing balance: what is owed."""
    check_partition(partition_key, ["path", "partition_key"])
    if kind is not None:
        check_kind(kind, ["query", "kind"])
    readable_partitions(who, partition_key)
    scope = sums.Scope(kind, [partition_key])
    how = _how(ctx)
    try:
        row, found = await run_in_threadpool(reads.balances, ctx.engine, period, scope, how)
        lines = await run_in_threadpool(
            reads.statement_lines, ctx.engine, row.name, partition_key, kind, how
        )
    except reads.NoSuchPeriod:
        raise _not_found(period or "") from None
    made = _statement(partition_key, row, found, lines)
    if format == "json":
        return Response(made.model_dump_json(), media_type="application/json")
    source = csv_export.chunks(STATEMENT_HEADER, _statement_cells(made))
    return await csv_export.response(source, f"statement-{row.name}.csv")


def _owed(kind: str, partition_key: str, closing: Decimal) -> str | None:
    direction = KINDS[kind].direction if kind in KINDS else None
    if direction is None:
        return None
    if closing.is_zero():
        return "nothing is owed"
    amount = shown(kind, closing.copy_abs())
    to_us = (direction == "owed_to_us") == (closing > 0)
    return f"{partition_key} owes us {amount}" if to_us else f"we owe {partition_key} {amount}"


def _statement(partition_key: str, row: Any, found: list[Any], lines: list[Any]) -> wire.Statement:
    sections = []
    for b in found:
        documents: dict[str, list[Any]] = {}
        for line in lines:
            if line.kind == b.kind:
                documents.setdefault(line.document_id, []).append(line)
        sections.append(
            wire.StatementSection(
                kind=b.kind,
                currency=b.currency,
                direction=KINDS[b.kind].direction if b.kind in KINDS else None,
                opening=shown(b.kind, b.opening),
                documents=[
                    wire.StatementDocument(
                        document_id=document_id,
                        lines=[wire.statement_line(r) for r in rows],
                        total=shown(b.kind, sum((r.delta for r in rows), ZERO)),
                    )
                    for document_id, rows in documents.items()
                ],
                closing=shown(b.kind, b.closing),
                in_dispute=wire.InDispute(
                    count=b.in_dispute_count,
                    variance=shown(b.kind, b.in_dispute_variance),
                ),
                owed=_owed(b.kind, partition_key, b.closing),
            )
        )
    return wire.Statement(
        partition_key=partition_key,
        period=row.name,
        final=row.status == "closed",
        sections=sections,
    )


def _statement_cells(made: wire.Statement) -> Iterator[Any]:
    p, period = made.partition_key, made.period

    def balance(row: str, s: wire.StatementSection, amount: str) -> tuple[Any, ...]:
        """An opening or closing row: the amount in the ``balance`` column."""
        return (row, s.kind, p, period, *(None,) * 6, Decimal(amount), *(None,) * 7, s.currency)

    for s in made.sections:
        yield balance("opening", s, s.opening)
        for d in s.documents:
            for line in d.lines:
                yield (
                    "line",
                    s.kind,
                    p,
                    period,
                    d.document_id,
                    line.line_ref,
                    line.outcome,
                    Decimal(line.amount),
                    None if line.claimed_amount is None else Decimal(line.claimed_amount),
                    Decimal(line.delta),
                    None,
                    line.supersedes_id,
                    line.correlation_id,
                    line.reconciliation_key,
                    line.job_id,
                    line.created_at,
                    line.contract_version,
                    line.activity,
                    s.currency,
                )
        yield balance("closing", s, s.closing)


PartitionPath = Annotated[str, Path(description="A vendor, carrier or recipe.")]


def _partition(found: counterparties.PartitionProfile) -> wire.Partition:
    return wire.Partition(
        partition_key=found.partition_key,
        erp_counterparty=found.erp_counterparty,
        updated_at=iso(found.updated_at) or "",
    )


@router.put(
    "/v1/partitions/{partition_key}",
    operation_id="putPartition",
    responses={
        **UNAUTHENTICATED,
        200: {"model": wire.Partition, "description": "replaced"},
        403: {"model": ErrorBody, "description": "not an operator token"},
        422: {"model": ErrorBody, "description": "partition_key_invalid, or a bad body"},
    },
    status_code=201,
)
async def put_partition(
    partition_key: PartitionPath,
    body: Annotated[wire.PartitionIn, Body()],
    ctx: Ctx,
    who: Operator,
    response: Response,
) -> wire.Partition:
    """Name a partition's counterparty in the ERP (operator token; audited):
    its journal entries carry it. 201 the first time, 200 when replaced."""
    check_partition(partition_key, ["path", "partition_key"])
    now = dt.datetime.now(dt.UTC)

    def store() -> wire.Partition:
        created = counterparties.put(
            ctx.engine, partition_key, body.erp_counterparty, who.actor, now
        )
        response.status_code = 201 if created else 200
        found = counterparties.get(ctx.engine, partition_key)
        assert found is not None
        return _partition(found)

    return await run_in_threadpool(store)


@router.get(
    "/v1/partitions/{partition_key}",
    operation_id="readPartition",
    responses={
        **UNAUTHENTICATED,
        404: {"model": ErrorBody, "description": "partition_not_found: none was put"},
        422: {"model": ErrorBody, "description": "partition_key_invalid"},
    },
)
async def read_partition(partition_key: PartitionPath, ctx: Ctx, _: Viewer) -> wire.Partition:
    """A partition's ERP counterparty, as an operator put it (viewer token)."""
    check_partition(partition_key, ["path", "partition_key"])
    found = await run_in_threadpool(counterparties.get, ctx.engine, partition_key)
    if found is None:
        raise ApiError(404, "partition_not_found", f"no profile was put for {partition_key}")
    return _partition(found)
