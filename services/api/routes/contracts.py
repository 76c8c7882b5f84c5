"""Contract versions (docs/api.md#contracts): operator token; versions are immutable.

A contract's partition is read from the path exactly as the client sent it
(``raw_path``, each segment percent-decoded once) and judged by the one rule
of ``shared.domain.kinds.ids``: a partition the rule refuses is 422
``partition_key_invalid`` on every route, never a 404. The routes take the
rest of the path as the partition (``{partition_key:path}``), so that ``A/B``
sent as ``A%2FB`` (which the server decodes before routing) or as is reaches
a route and is refused by name, rather than matching no route at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from services.api.auth import Ctx, Operator
from services.api.errors import ApiError, ErrorBody, validation_error
from services.api.pagination import CursorQuery, contract_cursor, encode_contract_cursor
from services.api.params import KindName, check_kind, check_partition, not_a_kind
from services.api.schemas import Contract, ContractList, ContractPage
from shared.adapters.db import contracts as contracts_db
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Kind
from shared.domain.kinds.ids import AddressSchema
from shared.wire.times import iso

router = APIRouter(tags=["contracts"])

KindPath = Annotated[str, Path(max_length=32)]
# Published with the rule; judged as sent (the raw path) by ``_address``.
PartitionPath = Annotated[str, AddressSchema(), Path()]
VersionPath = Annotated[int, Path(ge=1, le=2**31 - 1)]
# A kind as a filter, published as the registry's names (checked by the route).
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody, "description": "unknown_kind, or no such contract version"},
    422: {"model": ErrorBody, "description": "partition_key_invalid, or another invalid value"},
}
_PREFIX = b"/v1/contracts/"


def _kind(name: str) -> Kind[Any, Any]:
    kind = KINDS.get(name)
    if kind is None:
        raise ApiError(404, "unknown_kind", not_a_kind(name))
    return kind


def _sent_segments(request: Request) -> list[str] | None:
    """The path after ``/v1/contracts/`` as sent, split at its own slashes, each
    segment decoded once; None when the server gives no raw path."""
    raw = request.scope.get("raw_path")
    if not isinstance(raw, bytes) or (at := raw.find(_PREFIX)) < 0:
        return None
    return [
        unquote_to_bytes(segment).decode("utf-8", "replace")
        for segment in raw[at + len(_PREFIX) :].split(b"/")
    ]


@dataclass(frozen=True)
class Address:
    """A contract route's kind and partition."""

    kind: Kind[Any, Any]
    partition_key: str


def _address(request: Request, kind: str, routed: str, versioned: bool) -> Address:
    """The kind, then the partition: the one the client sent (``routed`` is what
    the router made of the decoded path, which may have cut it at a ``%2F``)."""
    found = _kind(kind)
    partition_key = routed
    sent = _sent_segments(request)
    if sent is not None and len(sent) >= 2:
        if versioned and len(sent) == 2:
            # /v1/contracts/{kind}/A%2FB: the versions of "A/B", which the router
            # read as version "B" of "A".
            partition_key = sent[1]
        else:
            partition_key = "/".join(sent[1:-1] if versioned else sent[1:])
    return Address(found, check_partition(partition_key, ["path", "partition_key"]))


def version_address(request: Request, kind: KindPath, partition_key: PartitionPath) -> Address:
    return _address(request, kind, partition_key, versioned=True)


def partition_address(request: Request, kind: KindPath, partition_key: PartitionPath) -> Address:
    return _address(request, kind, partition_key, versioned=False)


# After the token (Operator first): an unknown kind or a partition no rule allows is
# answered before the version is read, so "A%2FB" is never a version "B".
VersionAt = Annotated[Address, Depends(version_address)]
PartitionAt = Annotated[Address, Depends(partition_address)]


def contract_refused(exc: ValidationError) -> ApiError:
    """The body's refusal; a contract that cannot price sensibly names the field
    in the message too (``tolerance must not be negative...``)."""
    error = validation_error(list(exc.errors()))
    if error.code == "contract_invalid":
        first = next(d for d in error.details if d["type"] == "contract_invalid")
        error.message = f"{'.'.join(first['loc'])} {first['msg']}"
    return error


def _conflict(version: int, exc: contracts_db.ContractConflict) -> ApiError:
    message = f"{exc}: publish it as version {exc.next_version}, the next free one"
    detail = {"version": version, "next_version": exc.next_version, "msg": message}
    return ApiError(409, "contract_version_conflict", message, [detail])


@router.put(
    "/v1/contracts/{kind}/{partition_key:path}/{version}",
    operation_id="putContract",
    response_model=Contract,
    status_code=201,
    responses={
        **ERRORS,
        200: {"model": Contract, "description": "identical content already published"},
        409: {
            "model": ErrorBody,
            "description": "contract_version_conflict: different content under this version"
            " (details give next_version); contract_currency_changed: another currency than"
            " the partition's versions",
        },
        413: {"model": ErrorBody, "description": "body above 1 MiB"},
        422: {
            "model": ErrorBody,
            "description": "contract_invalid (a body that cannot price sensibly),"
            " partition_key_invalid, or another invalid value",
        },
    },
)
async def put_contract(
    ctx: Ctx,
    who: Operator,
    at: VersionAt,
    version: VersionPath,
    body: Annotated[dict[str, Any], Body()],
) -> JSONResponse:
    kind, partition_key = at.kind.name, at.partition_key
    try:
        contract = at.kind.contract_for_publication(body)
    except ValidationError as exc:
        raise contract_refused(exc) from None
    canonical = contract.model_dump(mode="json")

    def store() -> contracts_db.Published:
        try:
            return contracts_db.put_contract(
                ctx.engine,
                kind,
                partition_key,
                version,
                canonical,
                actor=who.actor,
                currency=ctx.settings.currency,
            )
        except contracts_db.ContractConflict as exc:
            raise _conflict(version, exc) from None
        except contracts_db.CurrencyChanged as exc:
            raise ApiError(409, "contract_currency_changed", str(exc)) from None

    stored = await run_in_threadpool(store)
    payload = Contract(
        kind=kind,
        partition_key=partition_key,
        version=version,
        body=stored.body,
        created_at=iso(stored.created_at) or "",
        currency=stored.currency,
    )
    return JSONResponse(
        payload.model_dump(), status_code=201 if stored.result == "created" else 200
    )


@router.get(
    "/v1/contracts/{kind}/{partition_key:path}/{version}",
    operation_id="getContract",
    responses=ERRORS,
)
async def get_contract(ctx: Ctx, _: Operator, at: VersionAt, version: VersionPath) -> Contract:
    kind, partition_key = at.kind.name, at.partition_key
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
        currency=stored["currency"],
    )


@router.get(
    "/v1/contracts/{kind}/{partition_key:path}",
    operation_id="listContractVersions",
    responses=ERRORS,
)
async def list_contract_versions(ctx: Ctx, _: Operator, at: PartitionAt) -> ContractList:
    kind, partition_key = at.kind.name, at.partition_key
    rows = await run_in_threadpool(contracts_db.list_versions, ctx.engine, kind, partition_key)
    return ContractList.model_validate(
        {
            "kind": kind,
            "partition_key": partition_key,
            "items": [{**r, "created_at": iso(r["created_at"])} for r in rows],
        }
    )


@router.get(
    "/v1/contracts",
    operation_id="listContracts",
    responses={
        401: {"model": ErrorBody},
        403: {"model": ErrorBody},
        422: {
            "model": ErrorBody,
            "description": "unknown_kind, partition_key_invalid, invalid_cursor, or another"
            " invalid value",
        },
    },
)
async def list_contracts(
    ctx: Ctx,
    _: Operator,
    kind: Annotated[KindName | None, Query(description="Only this settlement kind's.")] = None,
    partition_key: Annotated[
        Annotated[str, AddressSchema()] | None, Query(description="Only this partition's.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: CursorQuery = None,
) -> ContractPage:
    """Every published contract version, oldest first, filtered by kind or partition."""
    if kind is not None:
        check_kind(kind, ["query", "kind"])
    if partition_key is not None:
        check_partition(partition_key, ["query", "partition_key"])
    after = contract_cursor(cursor)
    position = None if after is None else contracts_db.Position(*after)

    def load() -> ContractPage:
        try:
            rows = contracts_db.list_contracts(
                ctx.engine, kind=kind, partition_key=partition_key, after=position, limit=limit
            )
        except contracts_db.UnknownPosition:
            raise ApiError(422, "invalid_cursor", "cursor is not valid") from None
        last = rows[-1] if len(rows) == limit else None
        next_cursor = None
        if last is not None:
            digest = contracts_db.partition_digest(last["partition_key"])
            next_cursor = encode_contract_cursor(
                last["created_at"], last["kind"], last["version"], digest
            )
        items = [{**r, "created_at": iso(r["created_at"])} for r in rows]
        return ContractPage.model_validate({"items": items, "next_cursor": next_cursor})

    return await run_in_threadpool(load)
