"""Reading remittances and deductions (docs/api.md#remittances-and-deductions):
``GET /v1/remittances`` (newest first) and one remittance with its lines,
adjustments, deductions and 997; ``GET /v1/deductions`` (oldest first; JSON or
CSV), one deduction, and the aging of what is still open. The viewer's or the
operator's token, as the dispute queue's reads. Money at the accrual kind's
quantum, as strings (numbers in the CSV)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from services.api import csv_export
from services.api.auth import Ctx, Viewer
from services.api.errors import ApiError, ErrorBody
from services.api.pagination import (
    CursorQuery,
    encode_id_cursor,
    encode_remittance_cursor,
    id_cursor,
    remittance_cursor,
)
from services.api.remittances.routes import BalanceCheck
from shared.adapters.db.remittances import reads as db
from shared.domain.kinds import DEDUCTION_KIND, KINDS, shown
from shared.domain.remittances.deductions import REASON_CLASSES
from shared.domain.remittances.model import Adjustment, Remittance
from shared.domain.remittances.status import FILTERS, Filter
from shared.wire.cells import Cell
from shared.wire.times import iso

router = APIRouter(tags=["remittances"])
UNAUTHENTICATED: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody}}
INVALID: dict[int | str, dict[str, Any]] = {
    422: {
        "model": ErrorBody,
        "description": "invalid_status, invalid_reason_class, invalid_cursor, a value out of range",
    }
}
RemittancePath = Annotated[
    str, Path(min_length=1, max_length=32, description="The remittance's id (rm_...).")
]
DeductionPath = Annotated[int, Path(ge=1, le=2**63 - 1, description="The deduction's id.")]
PartitionQuery = Annotated[
    str | None, Query(min_length=1, max_length=128, description="Only this partition's.")
]
STATUS_NAMES = tuple(f for f in FILTERS if f != "all")
REASON_NAMES = tuple(sorted(REASON_CLASSES))


# -- wire models --------------------------------------------------------------


class AdjustmentOut(BaseModel):
    amount: str  # signed as the payer sent it: negative takes
    reason_code: str
    reference: str | None


class LineOut(BaseModel):
    reference: str
    qualifier: str | None
    paid: str
    invoiced: str | None
    discount: str | None
    adjustments: list[AdjustmentOut]


class Booked(BaseModel):
    document_id: str
    outcome: Literal["deducted", "written_off"]
    amount: str


class Deduction(BaseModel):
    id: int
    remittance_id: str
    seq: int
    partition_key: str
    amount: str
    reason_code: str
    reason_class: str
    reference: str | None
    line_reference: str | None
    deducted_on: dt.date
    due_on: dt.date
    status: Literal["matched", "written_off", "disputed", "denied"]
    days_outstanding: int  # days since deducted_on
    past_window: bool  # open (disputed or denied) and today after due_on
    matched: str
    written_off: str
    disputed: str  # what is still open: zero once accepted or matched
    dispute_reason: str | None
    dispute_document_id: str | None
    decision: Literal["accept", "deny", "match"] | None
    decision_note: str | None
    decided_at: str | None
    matches: list[Booked]  # the ledger rows booked for it, a decision's included


class _RemittanceBase(BaseModel):
    id: str
    trace: str
    payer: str
    partition_key: str
    source_format: Literal["x12", "json"]
    currency: str
    paid_total: str
    computed_total: str
    balance_difference: BalanceCheck | None  # None: it balances
    paid_at: dt.date | None
    received_at: str
    matched: str
    written_off: str
    disputed: str


class RemittanceSummary(_RemittanceBase):
    deductions: int


class RemittancePage(BaseModel):
    remittances: list[RemittanceSummary]
    next_cursor: str | None


class RemittanceDetail(_RemittanceBase):
    lines: list[LineOut]
    adjustments: list[AdjustmentOut]  # those standing alone (ENT or header ADX)
    deductions: list[Deduction]
    acknowledgement: str | None  # the 997 sent with it


class DeductionPage(BaseModel):
    deductions: list[Deduction]
    next_cursor: str | None


class AgedOut(BaseModel):
    open_count: int
    open_amount: str
    buckets: dict[str, str]  # "0-30", "31-60", "61-90", "90+": days since deducted_on
    past_window: str  # the open amount whose due date has passed
    days_outstanding: str | None  # amount-weighted average age, "58.6"; None: nothing open


class PartitionAged(AgedOut):
    partition_key: str


class ReasonAged(BaseModel):
    reason_class: str
    open_count: int
    open_amount: str


class Aging(BaseModel):
    as_of: dt.date
    partitions: list[PartitionAged]
    by_reason: list[ReasonAged]
    totals: AgedOut


# -- conversions --------------------------------------------------------------


def _shown(value: Decimal) -> str:
    return shown(DEDUCTION_KIND, value)


def _today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def _check(r: db.Remittance) -> BalanceCheck | None:
    difference = r.paid_total - r.computed_total
    if difference == 0:
        return None
    return BalanceCheck(
        stated=_shown(r.paid_total),
        computed=_shown(r.computed_total),
        difference=_shown(difference),
    )


def _base(r: db.Remittance) -> dict[str, Any]:
    return {
        "id": r.id,
        "trace": r.trace,
        "payer": r.payer,
        "partition_key": r.partition_key,
        "source_format": r.source_format,
        "currency": r.currency,
        "paid_total": _shown(r.paid_total),
        "computed_total": _shown(r.computed_total),
        "balance_difference": _check(r),
        "paid_at": r.paid_at,
        "received_at": iso(r.received_at),
        "matched": _shown(r.matched),
        "written_off": _shown(r.written_off),
        "disputed": _shown(r.disputed),
    }


def _summary(r: db.Remittance) -> RemittanceSummary:
    return RemittanceSummary(**_base(r), deductions=r.deductions)


def _adjustment(a: Adjustment) -> AdjustmentOut:
    return AdjustmentOut(amount=_shown(a.amount), reason_code=a.reason_code, reference=a.reference)


def _deduction(d: db.Deduction, today: dt.date) -> Deduction:
    return Deduction(
        id=d.id,
        remittance_id=d.remittance_id,
        seq=d.seq,
        partition_key=d.partition_key,
        amount=_shown(d.amount),
        reason_code=d.reason_code,
        reason_class=d.reason_class,
        reference=d.reference,
        line_reference=d.line_reference,
        deducted_on=d.deducted_on,
        due_on=d.due_on,
        status=d.status,
        days_outstanding=d.days_outstanding(today),
        past_window=d.past_window(today),
        matched=_shown(d.matched),
        written_off=_shown(d.written_off),
        disputed=_shown(d.disputed),
        dispute_reason=d.dispute_reason,
        dispute_document_id=d.dispute_document_id,
        decision=d.decision,
        decision_note=d.decision_note,
        decided_at=iso(d.decided_at),
        matches=[
            Booked(document_id=m.document_id, outcome=m.outcome, amount=_shown(m.amount))
            for m in d.matches
        ],
    )


def _detail(found: db.RemittanceDetail, today: dt.date) -> RemittanceDetail:
    body = Remittance.model_validate_json(found.body)
    return RemittanceDetail(
        **_base(found.remittance),
        lines=[
            LineOut(
                reference=line.reference,
                qualifier=line.qualifier,
                paid=_shown(line.paid),
                invoiced=_shown(line.invoiced) if line.invoiced is not None else None,
                discount=_shown(line.discount) if line.discount is not None else None,
                adjustments=[_adjustment(a) for a in line.adjustments],
            )
            for line in body.lines
        ],
        adjustments=[_adjustment(a) for a in body.adjustments],
        deductions=[_deduction(d, today) for d in found.deductions],
        acknowledgement=found.acknowledgement,
    )


def _aged(a: db.Aged) -> dict[str, Any]:
    days = a.days_outstanding()
    return {
        "open_count": a.open_count,
        "open_amount": _shown(a.open_amount),
        "buckets": {name: _shown(value) for name, value in a.buckets.items()},
        "past_window": _shown(a.past_window),
        "days_outstanding": None if days is None else str(days),
    }


# -- the CSV ------------------------------------------------------------------

CSV_HEADER = (
    "id",
    "remittance_id",
    "seq",
    "partition_key",
    "amount",
    "reason_code",
    "reason_class",
    "reference",
    "line_reference",
    "deducted_on",
    "due_on",
    "status",
    "days_outstanding",
    "past_window",
    "matched",
    "written_off",
    "disputed",
    "dispute_reason",
    "dispute_document_id",
    "decision",
    "decision_note",
    "decided_at",
)


def _csv_row(d: db.Deduction, today: dt.date, quantum: Decimal) -> list[Cell]:
    money = csv_export.amount
    return [
        d.id,
        d.remittance_id,
        d.seq,
        d.partition_key,
        money(d.amount, quantum),
        d.reason_code,
        d.reason_class,
        d.reference,
        d.line_reference,
        d.deducted_on.isoformat(),
        d.due_on.isoformat(),
        d.status,
        d.days_outstanding(today),
        "true" if d.past_window(today) else "false",
        money(d.matched, quantum),
        money(d.written_off, quantum),
        money(d.disputed, quantum),
        d.dispute_reason,
        d.dispute_document_id,
        d.decision,
        d.decision_note,
        iso(d.decided_at),
    ]


async def _csv(ctx: Any, where: db.DeductionFilter, today: dt.date) -> StreamingResponse:
    quantum = KINDS[DEDUCTION_KIND].quantum
    rows = (_csv_row(d, today, quantum) for d in db.deductions_stream(ctx.engine, where, today))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return await csv_export.response(csv_export.chunks(CSV_HEADER, rows), f"deductions-{stamp}.csv")


# -- routes -------------------------------------------------------------------


@router.get(
    "/v1/remittances",
    operation_id="listRemittances",
    responses={**UNAUTHENTICATED, **INVALID},
)
async def list_remittances(
    ctx: Ctx,
    _: Viewer,
    partition_key: PartitionQuery = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: CursorQuery = None,
) -> RemittancePage:
    """Remittances received, newest first, with their deductions' sums."""
    after = remittance_cursor(cursor)
    found = await run_in_threadpool(
        lambda: db.remittances_page(
            ctx.engine, partition_key=partition_key, after=after, limit=limit
        )
    )
    last = found[-1] if len(found) == limit else None
    return RemittancePage(
        remittances=[_summary(r) for r in found],
        next_cursor=None if last is None else encode_remittance_cursor(last.received_at, last.id),
    )


@router.get(
    "/v1/remittances/{remittance_id}",
    operation_id="getRemittance",
    responses={**UNAUTHENTICATED, 404: {"model": ErrorBody, "description": "remittance_not_found"}},
)
async def get_remittance(remittance_id: RemittancePath, ctx: Ctx, _: Viewer) -> RemittanceDetail:
    """One remittance: its lines and adjustments as read, its deductions with
    their matches, the balance check and the 997 sent with it."""
    found = await run_in_threadpool(db.remittance, ctx.engine, remittance_id)
    if found is None:
        raise ApiError(404, "remittance_not_found", f"no remittance {remittance_id}")
    return _detail(found, _today())


def _filter(
    status: str | None, reason_class: str | None, partition_key: str | None, aged_over: int | None
) -> db.DeductionFilter:
    if status is not None and status not in STATUS_NAMES:
        raise ApiError(
            422,
            "invalid_status",
            f"status must be one of {', '.join(STATUS_NAMES)}",
            [{"loc": ["query", "status"], "type": "invalid_status"}],
        )
    if reason_class is not None and reason_class not in REASON_CLASSES:
        raise ApiError(
            422,
            "invalid_reason_class",
            f"reason_class must be one of {', '.join(REASON_NAMES)}",
            [{"loc": ["query", "reason_class"], "type": "invalid_reason_class"}],
        )
    wanted: Filter = "all" if status is None else status  # type: ignore[assignment]
    return db.DeductionFilter(wanted, partition_key, reason_class, aged_over)


@router.get(
    "/v1/deductions",
    operation_id="listDeductions",
    response_model=DeductionPage,
    responses={**UNAUTHENTICATED, **INVALID, **csv_export.RESPONSE},
)
async def list_deductions(
    request: Request,
    ctx: Ctx,
    _: Viewer,
    status: Annotated[
        str | None,
        Query(
            max_length=32,
            description="open (disputed or denied), matched, written_off, disputed or denied;"
            " none: all.",
            json_schema_extra={"enum": list(STATUS_NAMES)},
        ),
    ] = None,
    partition_key: PartitionQuery = None,
    reason_class: Annotated[
        str | None,
        Query(max_length=32, json_schema_extra={"enum": list(REASON_NAMES)}),
    ] = None,
    aged_over: Annotated[
        int | None, Query(ge=0, le=36500, description="Only those deducted more than N days ago.")
    ] = None,
    format: Annotated[
        Literal["json", "csv"], Query(description="`csv`: every match as CSV, not one page.")
    ] = "json",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: CursorQuery = None,
) -> Any:
    """Deductions, oldest first. With `format=csv` or `Accept: text/csv`: every
    matching deduction as CSV (text neutralised against formulas)."""
    where = _filter(status, reason_class, partition_key, aged_over)
    after = id_cursor(cursor)
    today = _today()
    if format == "csv" or csv_export.wanted(request):
        return await _csv(ctx, where, today)
    found = await run_in_threadpool(
        lambda: db.deductions_page(ctx.engine, where, today, after_id=after, limit=limit)
    )
    return DeductionPage(
        deductions=[_deduction(d, today) for d in found],
        next_cursor=encode_id_cursor(found[-1].id) if len(found) == limit else None,
    )


@router.get(
    "/v1/deductions/aging",
    operation_id="deductionAging",
    responses=UNAUTHENTICATED,
)
async def deduction_aging(ctx: Ctx, _: Viewer, partition_key: PartitionQuery = None) -> Aging:
    """What is still open (disputed and undecided, or denied: owed by the payer),
    per partition and per reason class: amounts by age (days since deducted_on),
    past its window, and the amount-weighted average age (days_outstanding)."""
    today = _today()
    found = await run_in_threadpool(db.aging, ctx.engine, today, partition_key)
    return Aging(
        as_of=found.as_of,
        partitions=[
            PartitionAged(partition_key=key, **_aged(aged))
            for key, aged in found.partitions.items()
        ],
        by_reason=[
            ReasonAged(
                reason_class=r.reason_class,
                open_count=r.open_count,
                open_amount=_shown(r.open_amount),
            )
            for r in found.by_reason
        ],
        totals=AgedOut(**_aged(found.totals)),
    )


@router.get(
    "/v1/deductions/{deduction_id}",
    operation_id="getDeduction",
    responses={**UNAUTHENTICATED, 404: {"model": ErrorBody, "description": "deduction_not_found"}},
)
async def get_deduction(deduction_id: DeductionPath, ctx: Ctx, _: Viewer) -> Deduction:
    """One deduction: where it stands, its dates, its decision and its matches."""
    found = await run_in_threadpool(db.deduction, ctx.engine, deduction_id)
    if found is None:
        raise ApiError(404, "deduction_not_found", f"no deduction {deduction_id}")
    return _deduction(found, _today())
