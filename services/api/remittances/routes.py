"""``POST /v1/remittances`` and its reads (docs/api.md#remittances-and-deductions).

A remittance is matched where it is received, in the request's one
transaction (shared/adapters/db/remittances/store.py): it answers with its
deductions decided, and a client that loses the answer sends the same file
again and gets the same remittance (docs/architecture.md#remittances-and-deductions
says why the API, not the settling tier).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel

from services.api.auth import Ctx, Producer
from services.api.context import ApiContext
from services.api.edi.refusal import refusal, text_of, write_997
from services.api.errors import ApiError, ErrorBody
from services.api.remittances.intake import (
    JsonRemittance,
    check_partition,
    parse_json,
    profile_of,
)
from shared.adapters.db.edi import partners as partners_db
from shared.adapters.db.remittances import store
from shared.config.settings import ProducerKey
from shared.domain.kinds import DEDUCTION_KIND, shown
from shared.domain.remittances.deductions import balance
from shared.domain.remittances.model import Remittance
from shared.domain.remittances.x12_820 import read_820
from shared.domain.x12 import EdiRefused, Interchange, Problem

router = APIRouter(tags=["remittances"])
EDI_X12, JSON = "application/edi-x12", "application/json"

_ERRORS: dict[int | str, dict[str, Any]] = {
    200: {"description": "the same remittance(s) again: nothing changed"},
    401: {"model": ErrorBody, "description": "signature missing, invalid, stale or unknown key"},
    403: {"model": ErrorBody, "description": "partition_not_allowed: not the key's partition"},
    409: {
        "model": ErrorBody,
        "description": "remittance_duplicate_trace: the trace was received with other content",
    },
    415: {"model": ErrorBody, "description": "neither application/edi-x12 nor application/json"},
    422: {
        "model": ErrorBody,
        "description": (
            "remittance_invalid (JSON); an 820 refused (edi_*), with its 997 in"
            " error.acknowledgement; edi_partner_unknown: a payer without a profile"
        ),
    },
}


class BalanceCheck(BaseModel):
    stated: str  # BPR02 / paid_total
    computed: str  # the lines' paid plus the standalone adjustments
    difference: str  # stated - computed: reported, never refused


class RemittanceReceived(BaseModel):
    id: str
    trace: str
    payer: str
    partition_key: str
    created: bool  # false: recorded before (the same remittance again)
    deductions: int
    matched: str
    written_off: str
    disputed: str
    balance_difference: BalanceCheck | None  # None: it balances


class RemittancesReceived(BaseModel):
    remittances: list[RemittanceReceived]
    acknowledgement: str | None = None  # the 997, when the partner's profile asks for one


def _shown(value: Decimal) -> str:
    """Money as every read shows it: at the accrual kind's quantum."""
    return shown(DEDUCTION_KIND, value)


def _check(remittance: Remittance) -> BalanceCheck | None:
    found = balance(remittance)
    if found.balanced:
        return None
    return BalanceCheck(
        stated=_shown(found.stated),
        computed=_shown(found.computed),
        difference=_shown(found.difference),
    )


def _answer(recorded: store.Recorded, incoming: store.Incoming) -> RemittanceReceived:
    return RemittanceReceived(
        id=recorded.remittance_id,
        trace=incoming.remittance.trace,
        payer=incoming.payer,
        partition_key=incoming.profile.partition_key,
        created=recorded.created,
        deductions=recorded.deductions,
        matched=_shown(recorded.matched),
        written_off=_shown(recorded.written_off),
        disputed=_shown(recorded.disputed),
        balance_difference=_check(incoming.remittance),
    )


def _record(ctx: ApiContext, incoming: store.Incoming) -> RemittanceReceived:
    now = dt.datetime.now(dt.UTC)
    try:
        recorded = store.record(ctx.engine, incoming, now)
    except store.DuplicateTrace as exc:
        raise ApiError(
            409,
            exc.code,
            f"trace {incoming.remittance.trace} of payer {incoming.payer} was received before"
            f" with other content, as remittance {exc.remittance_id}",
            extra={"remittance_id": exc.remittance_id},
        ) from None
    return _answer(recorded, incoming)


def _json(ctx: ApiContext, key: ProducerKey, body: bytes) -> RemittancesReceived:
    given = parse_json(body)
    check_partition(key, given.partition_key)
    partner = partners_db.of_payer_partition(ctx.engine, given.partition_key)
    remittance = given.remittance()
    incoming = store.Incoming(
        key_id=key.key_id,
        payer=remittance.payer.id or given.partition_key,
        remittance=remittance,
        profile=profile_of(partner, given.partition_key),
        source_format="json",
    )
    return RemittancesReceived(remittances=[_record(ctx, incoming)])


def _unknown(remittance: Remittance, interchange: Interchange) -> Problem:
    payer = remittance.payer.id or interchange.sender_id
    command = f"settleq partners put {interchange.sender_qualifier} {payer}"
    return Problem(
        "edi_partner_unknown",
        f"payer {payer} of trace {remittance.trace} has no trading-partner profile that maps it"
        f" to a partition: have an operator put one with a payer_partition_key ({command}"
        " --payer-partition-key KEY)",
        control_number=remittance.control_number,
    )


def _x12(ctx: ApiContext, key: ProducerKey, body: bytes) -> RemittancesReceived:
    read = read_820(body)
    if read.refused:
        raise refusal(ctx, EdiRefused(list(read.problems), read.interchanges))
    assert read.interchanges is not None
    # Each set's interchange, in the order read_820 gave the remittances.
    places = [
        ic
        for ic in read.interchanges
        for group in ic.groups
        for transaction_set in group.sets
        if transaction_set.st is not None
    ]
    found: list[tuple[Remittance, partners_db.Partner | None, Interchange]] = []
    unknown: list[Problem] = []
    for remittance, interchange in zip(read.remittances, places, strict=False):
        payer = remittance.payer
        qualifier = interchange.sender_qualifier if payer.from_sender else None
        partner = partners_db.payer_profile(
            ctx.engine,
            payer.id or interchange.sender_id,
            qualifier,
            (interchange.sender_qualifier, interchange.sender_id),
        )
        if partner is None or partner.payer_partition_key is None:
            unknown.append(_unknown(remittance, interchange))
        found.append((remittance, partner, interchange))
    if unknown:
        raise refusal(ctx, EdiRefused(unknown, read.interchanges))
    policies = {p.acknowledge for _, p, _ in found if p is not None}
    ack = None
    if "always" in policies:
        ack = text_of(write_997(ctx, read.interchanges, []))
    answers = []
    for _, partner, _ in found:
        assert partner is not None and partner.payer_partition_key is not None
        check_partition(key, partner.payer_partition_key)
    for remittance, partner, interchange in found:
        assert partner is not None and partner.payer_partition_key is not None
        incoming = store.Incoming(
            key_id=key.key_id,
            payer=remittance.payer.id or interchange.sender_id,
            remittance=remittance,
            profile=profile_of(partner, partner.payer_partition_key),
            source_format="x12",
            acknowledgement=ack,
        )
        answers.append(_record(ctx, incoming))
    return RemittancesReceived(remittances=answers, acknowledgement=ack)


def request_body() -> tuple[dict[str, Any], dict[str, Any]]:
    """The body's OpenAPI description and the component schemas it refers to:
    it is read raw (an 820's exact bytes are signed), so FastAPI sees no model."""
    schema = JsonRemittance.model_json_schema(ref_template="#/components/schemas/{model}")
    components: dict[str, Any] = schema.pop("$defs", {})
    components["JsonRemittance"] = schema
    body = {
        "required": True,
        "content": {
            JSON: {"schema": {"$ref": "#/components/schemas/JsonRemittance"}},
            EDI_X12: {
                "schema": {
                    "type": "string",
                    "description": "an ANSI X12 820, 004010 or 005010, as the payer sent it",
                }
            },
        },
    }
    return body, components


@router.post(
    "/v1/remittances",
    status_code=201,
    operation_id="submitRemittance",
    responses=_ERRORS,
)
async def submit_remittance(
    request: Request, ctx: Ctx, who: Producer, response: Response
) -> RemittancesReceived:
    """Record what a payer paid and took off, an X12 820 or JSON, and match its
    deductions (signed by a producer key): 201 when any is new, 200 when every
    one was recorded before."""
    assert who.key is not None
    body = await request.body()
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == EDI_X12:
        answer = await run_in_threadpool(_x12, ctx, who.key, body)
    elif media == JSON:
        answer = await run_in_threadpool(_json, ctx, who.key, body)
    else:
        raise ApiError(415, "unsupported_media_type", f"content type must be {JSON} or {EDI_X12}")
    if not any(r.created for r in answer.remittances):
        response.status_code = 200
    return answer
