"""Shapes of the dispute queue on the wire (docs/api.md#disputes) that only the
API writes or reads: a page of disputes, their stats, and the bodies a
resolution takes. A dispute itself is in shared/wire/disputes.py, since the
webhooks process sends it too. Amounts are strings."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from services.api.schemas import NOTE, Note
from shared.adapters.db.disputes import queue as db
from shared.adapters.db.remittances.queue import Waiting
from shared.domain.disputes import BULK_LIMIT_MAX
from shared.domain.kinds import DEDUCTION_KIND, shown
from shared.domain.kinds.base import Identifier
from shared.domain.money import Money
from shared.wire.disputes import DecisionName, Dispute, StatusName
from shared.wire.times import iso


class DisputePage(BaseModel):
    items: list[Dispute]
    next_cursor: str | None


class DisputeTotals(BaseModel):
    status: StatusName
    kind: str
    count: int
    claimed: str
    model: str
    variance: str
    abs_variance: str


class PartitionVariance(BaseModel):
    kind: str
    partition_key: str
    open_count: int
    open_variance: str
    open_abs_variance: str


class DeductionDisputes(BaseModel):
    """The queue's ``deduction`` disputes: deductions waiting for a decision
    (docs/api.md#remittances-and-deductions; listed at /v1/deductions?status=disputed)."""

    open_count: int
    open_amount: str
    past_window: int  # open past their due date
    oldest_due_on: str | None


class DisputeStats(BaseModel):
    totals: list[DisputeTotals]
    top_partitions: list[PartitionVariance]  # the ten with the largest open abs variance
    oldest_open_at: str | None
    deductions: DeductionDisputes


# settle_at takes the amount to settle at, the other decisions none: the rule,
# published as the body's schema (else a 422 amount_required or amount_not_allowed).
_AMOUNT_FOR_SETTLE_AT_ONLY: JsonDict = {
    "anyOf": [
        {
            "properties": {"decision": {"const": "settle_at"}, "amount": {"type": "string"}},
            "required": ["decision", "amount"],
        },
        {
            "properties": {
                "decision": {"enum": ["accept_claim", "accept_model"]},
                "amount": {"type": "null"},
            }
        },
    ]
}


class ResolveOne(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_AMOUNT_FOR_SETTLE_AT_ONLY)

    decision: DecisionName
    amount: Money | None = None  # settle_at only, and required for it
    note: Note = NOTE


class ResolveMany(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["accept_claim", "accept_model"]
    note: Note = NOTE
    kind: Identifier | None = None
    partition_key: Identifier | None = None
    job_id: Identifier | None = None
    max_abs_variance: Money | None = None
    limit: int = Field(ge=1, le=BULK_LIMIT_MAX)


class BulkResolved(BaseModel):
    resolved: int


def stats(s: db.Stats, waiting: Waiting) -> DisputeStats:
    due = waiting.oldest_due_on
    return DisputeStats(
        deductions=DeductionDisputes(
            open_count=waiting.count,
            open_amount=shown(DEDUCTION_KIND, waiting.amount),
            past_window=waiting.past_window,
            oldest_due_on=None if due is None else due.isoformat(),
        ),
        totals=[
            DisputeTotals(
                status=t.status,
                kind=t.kind,
                count=t.count,
                claimed=shown(t.kind, t.claimed),
                model=shown(t.kind, t.model),
                variance=shown(t.kind, t.variance),
                abs_variance=shown(t.kind, t.abs_variance),
            )
            for t in s.totals
        ],
        top_partitions=[
            PartitionVariance(
                kind=p.kind,
                partition_key=p.partition_key,
                open_count=p.open_count,
                open_variance=shown(p.kind, p.open_variance),
                open_abs_variance=shown(p.kind, p.open_abs_variance),
            )
            for p in s.top_partitions
        ],
        oldest_open_at=iso(s.oldest_open_at),
    )
