"""Contract versions (docs/api.md#contracts): operator token; versions are immutable."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from services.api.auth import Ctx, Operator
from services.api.errors import ApiError, ErrorBody, validation_error
from services.api.schemas import Contract, ContractList
from services.api.timefmt import iso
from shared.adapters.db import contracts as contracts_db
from shared.domain.kinds import KINDS

router = APIRouter(tags=["contracts"])

KindPath = Annotated[str, Path(max_length=32)]
PartitionPath = Annotated[str, Path(min_length=1, max_length=128)]
VersionPath = Annotated[int, Path(ge=1, le=2**31 - 1)]
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},
}


def _kind(name: str) -> Any:
    kind = KINDS.get(name)
    if kind is None:
        raise ApiError(404, "unknown_kind", f"no settlement kind {name!r}")
    return kind


@router.put(
    "/v1/contracts/{kind}/{partition_key}/{version}",
    operation_id="putContract",
    response_model=Contract,
    status_code=201,
    responses={
        **ERRORS,
        200: {"model": Contract, "description": "identical content already published"},
        409: {"model": ErrorBody, "description": "different content under this version"},
        413: {"model": ErrorBody, "description": "body above 1 MiB"},
        422: {"model": ErrorBody},
    },
)
async def put_contract(
    kind: KindPath,
    partition_key: PartitionPath,
    version: VersionPath,
    ctx: Ctx,
    who: Operator,
    body: Annotated[dict[str, Any], Body()],
) -> JSONResponse:
    model = _kind(kind).contract_model
    try:
        contract = model.model_validate(body)
    except ValidationError as exc:
        raise validation_error(list(exc.errors())) from None
    canonical = contract.model_dump(mode="json")

    def store() -> tuple[str, dict[str, Any] | None]:
        try:
            result = contracts_db.put_contract(
                ctx.engine, kind, partition_key, version, canonical, actor=who.actor
            )
        except contracts_db.ContractConflict as exc:
            raise ApiError(409, "contract_version_conflict", str(exc)) from None
        return result, contracts_db.get_contract(ctx.engine, kind, partition_key, version)

    result, stored = await run_in_threadpool(store)
    assert stored is not None
    payload = Contract(
        kind=kind,
        partition_key=partition_key,
        version=version,
        body=stored["body"],
        created_at=iso(stored["created_at"]) or "",
    )
    return JSONResponse(payload.model_dump(), status_code=201 if result == "created" else 200)


@router.get(
    "/v1/contracts/{kind}/{partition_key}/{version}",
    operation_id="getContract",
    responses=ERRORS,
)
async def get_contract(
    kind: KindPath, partition_key: PartitionPath, version: VersionPath, ctx: Ctx, _: Operator
) -> Contract:
    _kind(kind)
    stored = await run_in_threadpool(
        contracts_db.get_contract, ctx.engine, kind, partition_key, version
    )
    if stored is None:
        raise ApiError(404, "contract_not_found", "no such contract version")
    return Contract(
        kind=kind,
        partition_key=partition_key,
        version=version,
        body=stored["body"],
        created_at=iso(stored["created_at"]) or "",
    )


@router.get(
    "/v1/contracts/{kind}/{partition_key}", operation_id="listContractVersions", responses=ERRORS
)
async def list_contract_versions(
    kind: KindPath, partition_key: PartitionPath, ctx: Ctx, _: Operator
) -> ContractList:
    _kind(kind)
    rows = await run_in_threadpool(contracts_db.list_versions, ctx.engine, kind, partition_key)
    return ContractList.model_validate(
        {
            "kind": kind,
            "partition_key": partition_key,
            "items": [{**r, "created_at": iso(r["created_at"])} for r in rows],
        }
    )
