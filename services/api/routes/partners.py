"""Trading-partner profiles (docs/api.md#trading-partners): an operator puts a
partner's profile (audited); a viewer reads them."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from services.api.auth import Ctx, Operator, Viewer
from services.api.edi.refusal import text_of
from services.api.errors import ApiError, ErrorBody
from shared.adapters.db.edi import partners as partners_db
from shared.domain.kinds import KINDS, shown_over
from shared.domain.kinds.base import Identifier
from shared.domain.kinds.ids import address_problem, refusal_message
from shared.domain.money import Money, Quantity, plain
from shared.domain.partners import Acknowledge, sender_problem
from shared.domain.remittances.deductions import ReasonClass
from shared.domain.remittances.matching import MatchingRefused
from shared.domain.remittances.model import Code as ReasonCode
from shared.domain.remittances.profile import tolerance_of
from shared.wire.times import iso

router = APIRouter(tags=["partners"])
# The kinds a partner's X12 files settle as: its disputes' money is theirs.
_X12_KINDS = tuple(name for name, kind in KINDS.items() if kind.x12_set)
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody, "description": "partner_not_found"},
    422: {"model": ErrorBody, "description": "partner_sender_invalid, or another invalid value"},
}
QualifierPath = Annotated[str, Path(max_length=8, description="ISA05, e.g. ZZ or 02.")]
SenderPath = Annotated[str, Path(max_length=32, description="ISA06, without its padding.")]


class PartnerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]*$")
    # Strict: a JSON true is no version (it would be stored as 1), nor is "2".
    contract_version: int = Field(ge=1, le=2**31 - 1, strict=True)
    partition_key: Identifier | None = Field(None, description="810s: the vendor")
    period: Identifier | None = Field(None, description="810s: e.g. 2026-Q3")
    acknowledge: Acknowledge = "always"
    key_ids: list[Identifier] | None = Field(
        None,
        min_length=1,
        max_length=100,
        description=(
            "The producer keys that alone may send this partner's files (others: 403"
            " edi_sender_not_allowed); absent: any key"
        ),
    )
    payer_partition_key: Identifier | None = Field(
        None, description="820s: the partition the payer's deductions are matched in"
    )
    tolerance: ToleranceIn | None = None
    deduction_reasons: dict[ReasonCode, ReasonClass] | None = Field(
        None, max_length=1000, description="the partner's own reason codes: {code: class}"
    )
    dispute_window_days: int | None = Field(
        None, ge=0, le=3650, strict=True, description="days a deduction may be disputed in (30)"
    )


class ToleranceIn(BaseModel):
    """How far a promotion deduction may be from an open amount and still match
    it; with both set, the smaller limit applies (docs/api.md#remittances-and-deductions)."""

    model_config = ConfigDict(extra="forbid")

    absolute: Money | None = Field(None, description="money, e.g. 5.00")
    percent: Quantity | None = Field(None, description="percent points of the open amount: 2 is 2%")


class Partner(BaseModel):
    isa_qualifier: str
    isa_id: str
    name: str
    contract_version: int
    partition_key: str | None
    period: str | None
    acknowledge: Acknowledge
    key_ids: list[str] | None  # None: any producer key may send its files
    payer_partition_key: str | None = None
    tolerance: dict[str, str] | None = None
    deduction_reasons: dict[str, str] | None = None
    dispute_window_days: int | None = None
    updated_at: str


class PartnerFile(BaseModel):
    received_at: str
    job_id: str | None  # None: refused
    sets_accepted: int  # as its 997 counts them (a refusal's: the 997 it carried)
    sets_refused: int
    refusal_codes: list[str]
    refusal_message: str | None = None  # a refusal's 422 message
    # The 997 a refusal carried; an accepted file's is its job's acknowledgement.
    acknowledgement: str | None = None


class OpenDisputes(BaseModel):
    count: int
    variance: str  # claimed - model, summed


class PartnerHealth(BaseModel):
    files: list[PartnerFile]  # the latest, newest first
    accepted_files: int
    refused_files: int
    refusal_rate: float  # refused / all files
    dead_letters: dict[str, int]  # the lines of its jobs waiting, by reason
    open_disputes: OpenDisputes


class PartnerPage(Partner):
    health: PartnerHealth


class PartnerSummary(Partner):
    last_file_at: str | None
    refusal_rate: float


class PartnerList(BaseModel):
    items: list[PartnerSummary]


def _wire(found: partners_db.Partner) -> Partner:
    return Partner(
        isa_qualifier=found.sender_qualifier,
        isa_id=found.sender_id,
        name=found.name,
        contract_version=found.contract_version,
        partition_key=found.partition_key,
        period=found.period,
        acknowledge=found.acknowledge,
        key_ids=list(found.key_ids) or None,
        payer_partition_key=found.payer_partition_key,
        tolerance=found.tolerance,
        deduction_reasons=found.deduction_reasons,
        dispute_window_days=found.dispute_window_days,
        updated_at=iso(found.updated_at) or "",
    )


def _tolerance(given: ToleranceIn | None) -> dict[str, str] | None:
    """The tolerance as stored (money strings), once the matching rule takes it."""
    if given is None:
        return None
    stored = {
        name: plain(value)
        for name, value in (("absolute", given.absolute), ("percent", given.percent))
        if value is not None
    }
    try:
        tolerance_of(stored)
    except MatchingRefused as exc:
        raise ApiError(422, "tolerance_invalid", str(exc)) from None
    return stored


def _rate(accepted: int, refused: int) -> float:
    total = accepted + refused
    return round(refused / total, 4) if total else 0.0


def _health(found: partners_db.Health) -> PartnerHealth:
    return PartnerHealth(
        files=[
            PartnerFile(
                received_at=iso(f.received_at) or "",
                job_id=f.job_id,
                sets_accepted=f.sets_accepted,
                sets_refused=f.sets_refused,
                refusal_codes=list(f.codes),
                refusal_message=f.message,
                acknowledgement=None if f.acknowledgement is None else text_of(f.acknowledgement),
            )
            for f in found.files
        ],
        accepted_files=found.accepted_files,
        refused_files=found.refused_files,
        refusal_rate=_rate(found.accepted_files, found.refused_files),
        dead_letters=found.dead_letters,
        open_disputes=OpenDisputes(
            count=found.open_disputes,
            variance=shown_over(_X12_KINDS, found.open_variance),
        ),
    )


def _sender(qualifier: str, sender_id: str) -> None:
    problem = sender_problem(qualifier, sender_id)
    if problem is not None:
        detail = {"loc": ["path"], "type": "partner_sender_invalid", "msg": problem}
        raise ApiError(422, "partner_sender_invalid", problem, [detail])


@router.put(
    "/v1/partners/{isa_qualifier}/{isa_id}",
    operation_id="putPartner",
    responses={**ERRORS, 200: {"model": Partner, "description": "replaced"}},
    status_code=201,
)
async def put_partner(
    isa_qualifier: QualifierPath,
    isa_id: SenderPath,
    body: Annotated[PartnerIn, Body()],
    ctx: Ctx,
    who: Operator,
    response: Response,
) -> Partner:
    """Create (201) or replace (200) a trading partner's profile (operator token; audited)."""
    _sender(isa_qualifier, isa_id)
    if body.partition_key is not None and (problem := address_problem(body.partition_key)):
        message = refusal_message("partition_key", body.partition_key, problem)
        raise ApiError(422, "partition_key_invalid", message)
    new = partners_db.Partner(
        isa_qualifier,
        isa_id,
        body.name,
        body.contract_version,
        body.partition_key,
        body.period,
        body.acknowledge,
        key_ids=tuple(body.key_ids or ()),
        payer_partition_key=body.payer_partition_key,
        tolerance=_tolerance(body.tolerance),
        deduction_reasons=None if body.deduction_reasons is None else dict(body.deduction_reasons),
        dispute_window_days=body.dispute_window_days,
    )

    def store() -> Partner:
        created = partners_db.put(ctx.engine, new, who.actor, dt.datetime.now(dt.UTC))
        response.status_code = 201 if created else 200
        found = partners_db.get(ctx.engine, isa_qualifier, isa_id)
        assert found is not None
        return _wire(found)

    return await run_in_threadpool(store)


@router.get("/v1/partners", operation_id="listPartners", responses=ERRORS)
async def list_partners(ctx: Ctx, _: Viewer) -> PartnerList:
    """Every trading partner's profile, by name, with its last file and the share
    of its files refused (viewer token)."""

    def load() -> PartnerList:
        return PartnerList(
            items=[
                PartnerSummary(
                    **_wire(found.partner).model_dump(),
                    last_file_at=iso(found.last_file_at),
                    refusal_rate=_rate(found.accepted_files, found.refused_files),
                )
                for found in partners_db.summaries(ctx.engine)
            ]
        )

    return await run_in_threadpool(load)


@router.get("/v1/partners/{isa_qualifier}/{isa_id}", operation_id="getPartner", responses=ERRORS)
async def get_partner(
    isa_qualifier: QualifierPath, isa_id: SenderPath, ctx: Ctx, _: Viewer
) -> PartnerPage:
    """A trading partner's profile and health: its latest files, accepted and
    refused, the lines of its jobs waiting in dead letters, its open disputes
    (viewer token)."""
    _sender(isa_qualifier, isa_id)

    def load() -> PartnerPage:
        found = partners_db.get(ctx.engine, isa_qualifier, isa_id)
        if found is None:
            why = f"no profile for sender {isa_qualifier}/{isa_id}"
            raise ApiError(404, "partner_not_found", why)
        health = partners_db.health(ctx.engine, isa_qualifier, isa_id)
        return PartnerPage(**_wire(found).model_dump(), health=_health(health))

    return await run_in_threadpool(load)
