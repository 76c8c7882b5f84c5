"""A disputed deduction decided (docs/api.md#remittances-and-deductions),
operator token: ``accept``, ``deny`` or ``match``, one at a time or in bulk
(``accept`` and ``deny`` only: a match names its documents)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from services.api.auth import Ctx, Operator
from services.api.errors import ApiError, ErrorBody
from services.api.schemas import NOTE, Note
from shared.adapters.db.remittances import decisions as db
from shared.domain.disputes import BULK_LIMIT_MAX, says_something
from shared.domain.kinds.base import Identifier
from shared.domain.money import Money
from shared.domain.remittances.deductions import ReasonClass

router = APIRouter(tags=["remittances"])
ERRORS: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody},
    404: {"model": ErrorBody, "description": "deduction_not_found"},
    409: {
        "model": ErrorBody,
        "description": (
            "deduction_already_decided, deduction_not_disputed, or match_exceeds_open: a"
            " document has less open than the match takes"
        ),
    },
    422: {"model": ErrorBody, "description": "match_invalid, note_required"},
}
DeductionPath = Annotated[int, Path(ge=1, le=2**63 - 1, description="The deduction's id.")]


class MatchTo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    document_id: Identifier
    amount: Money


# match takes its documents, accept and deny none: the rule, published as the
# body's schema (else a 422 match_invalid).
_MATCHES_FOR_MATCH_ONLY: JsonDict = {
    "anyOf": [
        {
            "properties": {"decision": {"const": "match"}, "matches": {"type": "array"}},
            "required": ["decision", "matches"],
        },
        {
            "properties": {
                "decision": {"enum": ["accept", "deny"]},
                "matches": {"type": "null"},
            }
        },
    ]
}


class DecideOne(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_MATCHES_FOR_MATCH_ONLY)

    decision: Literal["accept", "deny", "match"]
    note: Note = NOTE
    matches: list[MatchTo] | None = Field(
        None, min_length=1, max_length=1000, description="match only: documents and amounts"
    )


class DecideMany(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["accept", "deny"]
    note: Note = NOTE
    partition_key: Identifier | None = None
    reason_class: ReasonClass | None = None
    max_amount: Money | None = Field(None, description="only deductions disputing at most this")
    limit: int = Field(ge=1, le=BULK_LIMIT_MAX)


class DeductionDecided(BaseModel):
    deduction_id: int
    decision: str
    again: bool  # true: decided so before; nothing booked now
    ledger_ids: list[int]


class DeductionsDecided(BaseModel):
    decided: int


def _note(note: str) -> str:
    if not says_something(note):
        raise ApiError(422, "note_required", "a note needs at least one visible character")
    return note


def _request(decision: str, note: str, matches: list[MatchTo] | None) -> db.Request:
    if (matches is not None) != (decision == "match"):
        raise ApiError(422, "match_invalid", "match takes its matches; accept and deny take none")
    pairs = tuple((m.document_id, m.amount) for m in matches or ())
    return db.Request(decision, _note(note), pairs)


@router.post(
    "/admin/deductions/{deduction_id}/decide",
    operation_id="decideDeduction",
    responses=ERRORS,
)
async def decide_deduction(
    deduction_id: DeductionPath, body: Annotated[DecideOne, Body()], ctx: Ctx, who: Operator
) -> DeductionDecided:
    """Decide a disputed deduction (operator token; audited): ``accept`` writes
    its disputed part off, ``deny`` books nothing (the payer still owes it),
    ``match`` takes it from the named documents."""
    request = _request(body.decision, body.note, body.matches)
    now = dt.datetime.now(dt.UTC)
    try:
        found = await run_in_threadpool(
            db.decide_one, ctx.engine, deduction_id, request, who.actor, now
        )
    except db.DecisionRefused as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from None
    if found is None:
        raise ApiError(404, "deduction_not_found", f"no deduction {deduction_id}")
    return DeductionDecided(
        deduction_id=found.deduction_id,
        decision=found.decision,
        again=found.again,
        ledger_ids=[r.id for r in found.ledger_rows],
    )


@router.post("/admin/deductions/decide", operation_id="decideDeductions", responses=ERRORS)
async def decide_deductions(
    body: Annotated[DecideMany, Body()], ctx: Ctx, who: Operator
) -> DeductionsDecided:
    """Accept or deny, oldest first, up to ``limit`` disputed deductions the
    filter selects (operator token; each audited)."""
    request = db.Request(body.decision, _note(body.note))
    decided = await run_in_threadpool(
        lambda: db.decide_many(
            ctx.engine,
            request,
            who.actor,
            dt.datetime.now(dt.UTC),
            limit=body.limit,
            partition_key=body.partition_key,
            reason_class=body.reason_class,
            max_amount=body.max_amount,
        )
    )
    return DeductionsDecided(decided=decided)
