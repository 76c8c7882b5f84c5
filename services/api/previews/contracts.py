"""``POST /v1/contracts/{kind}/{partition_key}/preview`` (operator): a contract
version before it is published (docs/api.md#previewing-a-contract-version)."""

from __future__ import annotations

from typing import Annotated, Any, Self

from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from services.api.auth import Ctx, Operator
from services.api.errors import ApiError, ErrorBody
from services.api.routes.contracts import ERRORS, VersionAt, contract_refused
from shared.adapters.db.previews import contracts as previews
from shared.domain import previews as domain
from shared.domain.kinds.ids import DocumentId
from shared.domain.periods import PeriodName

router = APIRouter(tags=["contracts"])

MAX_IDS = 10_000


class Select(BaseModel):
    """Exactly one of: a period's documents (booked in it), some jobs', these."""

    model_config = ConfigDict(extra="forbid")
    period: PeriodName | None = None
    # As jobs.id holds them (uuid4().hex; services/api/pagination.py's rule).
    job_ids: list[Annotated[str, Field(pattern=r"^[0-9A-Za-z_-]{1,32}$")]] | None = Field(
        default=None, min_length=1, max_length=MAX_IDS
    )
    document_ids: list[DocumentId] | None = Field(default=None, min_length=1, max_length=MAX_IDS)

    @model_validator(mode="after")
    def one(self) -> Self:
        named = [n for n in ("period", "job_ids", "document_ids") if getattr(self, n) is not None]
        if len(named) != 1:
            raise ValueError("select exactly one of period, job_ids, document_ids")
        return self


class PreviewRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    contract: dict[str, Any] = Field(
        description="a contract body, as published (docs/api.md#contracts)"
    )
    select: Select


class DocumentChange(BaseModel):
    partition_key: str
    document_id: str
    lines: int
    amount_now: str
    amount_preview: str
    delta: str
    changes: dict[str, int] = Field(description="outcome now→under the preview: lines")


class PartitionChange(BaseModel):
    documents: int
    lines: int
    amount_now: str
    amount_preview: str
    delta: str
    changes: dict[str, int]


class ContractPreview(BaseModel):
    kind: str
    partition_key: str
    version: int = Field(description="the version the body would be published as")
    currency: str
    documents: list[DocumentChange]
    not_stored: list[str] = Field(description="selected documents whose stored lines are gone")
    totals: dict[str, PartitionChange] = Field(description="per partition")
    outcomes: dict[str, Any] = Field(description="the selected lines' outcomes under the preview")
    digest: str = Field(description="sha256 of the answer's canonical JSON, this field aside")


@router.post(
    "/v1/contracts/{kind}/{partition_key:path}/preview",
    operation_id="previewContract",
    response_model=ContractPreview,
    responses={
        **ERRORS,
        404: {"model": ErrorBody, "description": "unknown_kind, period_not_found"},
        409: {
            "model": ErrorBody,
            "description": "contract_currency_changed: another currency than the partition's",
        },
    },
)
async def preview_contract(
    ctx: Ctx, who: Operator, at: VersionAt, request: Annotated[PreviewRequest, Body()]
) -> JSONResponse:
    kind, partition_key = at.kind, at.partition_key
    try:
        canonical = kind.contract_for_publication(request.contract).model_dump(mode="json")
    except ValidationError as exc:
        raise contract_refused(exc) from None
    # Read back as a worker reads a published body: the same contract.
    contract = kind.contract_model.model_validate(canonical)
    currency = canonical.get("currency") or ctx.settings.currency
    selection = previews.Selection(
        period=request.select.period,
        job_ids=tuple(request.select.job_ids or ()),
        document_ids=tuple(request.select.document_ids or ()),
    )

    def run() -> previews.ContractPreview:
        with ctx.engine.connect() as conn:
            held = previews.partition_currency(conn, kind.name, partition_key)
        if held is not None and held != currency:
            raise ApiError(
                409,
                "contract_currency_changed",
                f"{kind.name}/{partition_key}'s contract is in {held}: a version in {currency}"
                " cannot be published there",
            )
        try:
            return previews.preview_contract(
                ctx.engine,
                kind,
                partition_key,
                contract,
                selection,
                actor=who.actor,
                audit_details={"select": request.select.model_dump(exclude_none=True)},
            )
        except previews.UnknownPeriod as exc:
            raise ApiError(404, "period_not_found", f"no period {exc}") from None

    found = await run_in_threadpool(run)
    docs = domain.document_changes(found.lines, found.now)
    whole, _ = domain.totals(found.lines)
    answer: dict[str, Any] = {
        "kind": kind.name,
        "partition_key": partition_key,
        "version": found.version,
        "currency": currency,
        "documents": [d.wire() for d in sorted(docs, key=lambda d: d.document_id)],
        "not_stored": found.not_stored,
        "totals": domain.change_totals(docs),
        "outcomes": whole.wire(),
    }
    # As built: a model of a hundred thousand documents would validate each again.
    return JSONResponse({**answer, "digest": domain.digest(answer)})
