"""Producer keys managed at runtime (docs/api.md#producer-keys), operator
token: create, list, show, scope, rotate, revoke. Every write is audited
(never with a secret); a secret is shown once, in the answer that made it;
the API honours each change within seconds (shared/adapters/db/operators/producer_keys.py).
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from services.api.auth import Ctx, Operator
from services.api.context import ApiContext
from services.api.errors import ApiError, ErrorBody
from shared.adapters.db.operators import producer_keys as keys_db
from shared.config.settings import ProducerKey
from shared.domain.kinds.ids import PartitionKey
from shared.logs import mask
from shared.wire.times import iso

router = APIRouter(tags=["producer keys"])
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody, "description": "producer_key_not_found"},
    409: {
        "model": ErrorBody,
        "description": "producer_key_exists, producer_key_revoked, producer_key_from_environment",
    },
    422: {"model": ErrorBody, "description": "partition_key_invalid, or another invalid value"},
}
KEY_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
KeyIdPath = Annotated[str, Path(max_length=128, description="The key's id.")]
# How long a rotated-out secret signs unless the rotation says otherwise.
PREVIOUS_VALID_FOR_S = 24 * 3600
Partitions = Annotated[
    list[PartitionKey],
    Field(
        min_length=1,
        max_length=1000,
        description="Partition keys it may submit for, each as it is (a comma is part of"
        ' one), or ["*"] for all.',
    ),
]


def _whole(value: Any) -> Any:
    """``60.0`` is an integer to JSON Schema, so to the server too (as the kinds'
    ``Ordinal``); a fraction, a string or a boolean is still refused (strict)."""
    return int(value) if type(value) is float and value.is_integer() else value


def _partitions(value: list[str]) -> list[str]:
    """``*`` alone stands for all; each other partition once, in order."""
    return ["*"] if "*" in value else list(dict.fromkeys(value))


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key_id: str | None = Field(
        None, pattern=KEY_ID_PATTERN, description="Default: key- and 8 random hex digits."
    )
    partitions: Partitions

    _scope = field_validator("partitions")(_partitions)


class ScopeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    partitions: Partitions

    _scope = field_validator("partitions")(_partitions)


class RotateIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    previous_valid_for_s: Annotated[int, BeforeValidator(_whole)] = Field(
        PREVIOUS_VALID_FOR_S,
        ge=0,
        le=30 * 24 * 3600,
        description="How long the secret it replaces still signs (0: not at all).",
    )


class ProducerKeyOut(BaseModel):
    key_id: str
    partitions: list[str]
    status: Literal["active", "revoked"]
    # environment: a bootstrap key of SETTLEQ_PRODUCER_KEYS, managed there only.
    source: Literal["database", "environment"]
    created_at: str | None
    updated_at: str | None
    revoked_at: str | None
    previous_until: str | None  # until when a rotated-out secret still signs


class ProducerKeyCreated(ProducerKeyOut):
    secret: str = Field(description="Shown this once: never returned again.")


class ProducerKeyList(BaseModel):
    items: list[ProducerKeyOut]


def _stored(found: keys_db.StoredKey) -> ProducerKeyOut:
    now = dt.datetime.now(dt.UTC)
    until = found.previous_until if found.previous_until and found.previous_until > now else None
    return ProducerKeyOut(
        key_id=found.key_id,
        partitions=list(found.partitions),
        status="active" if found.status == keys_db.ACTIVE else "revoked",
        source="database",
        created_at=iso(found.created_at),
        updated_at=iso(found.updated_at),
        revoked_at=iso(found.revoked_at),
        previous_until=iso(until),
    )


def _configured(key: ProducerKey) -> ProducerKeyOut:
    return ProducerKeyOut(
        key_id=key.key_id,
        partitions=list(key.partitions),
        status="active",
        source="environment",
        created_at=None,
        updated_at=None,
        revoked_at=None,
        previous_until=None,
    )


def _new_secret() -> str:
    secret = secrets.token_urlsafe(32)
    mask(secret)  # never in a log line, whatever logs what
    return secret


def _write(ctx: ApiContext, key_id: str, change: Any) -> keys_db.StoredKey:
    """Run one write, its refusals said as the API's errors."""
    try:
        found: keys_db.StoredKey = change()
    except keys_db.KeyMissing:
        if key_id in ctx.keys.configured:
            why = f"{key_id} is a key of SETTLEQ_PRODUCER_KEYS: change it there"
            raise ApiError(409, "producer_key_from_environment", why) from None
        raise ApiError(404, "producer_key_not_found", f"no producer key {key_id}") from None
    except keys_db.KeyRevoked:
        raise ApiError(409, "producer_key_revoked", f"{key_id} is revoked") from None
    ctx.keys.expire()
    return found


@router.post(
    "/admin/producer-keys",
    operation_id="createProducerKey",
    responses=ERRORS,
    status_code=201,
)
async def create_producer_key(
    body: Annotated[KeyIn, Body()], ctx: Ctx, who: Operator
) -> ProducerKeyCreated:
    """A new producer key, active within seconds (operator token; audited). Its
    secret is in this answer only."""
    key_id = body.key_id or f"key-{secrets.token_hex(4)}"
    secret = _new_secret()

    def store() -> keys_db.StoredKey:
        try:
            return keys_db.create(
                ctx.engine,
                key_id,
                body.partitions,
                secret,
                ctx.internal_key,
                who.actor,
                dt.datetime.now(dt.UTC),
                reserved=ctx.keys.configured,
            )
        except keys_db.KeyExists:
            raise ApiError(409, "producer_key_exists", f"{key_id} is taken") from None

    found = await run_in_threadpool(_write, ctx, key_id, store)
    return ProducerKeyCreated(**_stored(found).model_dump(), secret=secret)


@router.get("/admin/producer-keys", operation_id="listProducerKeys", responses=ERRORS)
async def list_producer_keys(ctx: Ctx, _: Operator) -> ProducerKeyList:
    """Every producer key: the database's (revoked ones too) and the
    environment's, by id; never a secret (operator token)."""
    stored = await run_in_threadpool(keys_db.listing, ctx.engine)
    items = {k.key_id: _stored(k) for k in stored}
    for key in ctx.keys.configured.values():
        items.setdefault(key.key_id, _configured(key))
    return ProducerKeyList(items=[items[k] for k in sorted(items)])


@router.get("/admin/producer-keys/{key_id}", operation_id="getProducerKey", responses=ERRORS)
async def get_producer_key(key_id: KeyIdPath, ctx: Ctx, _: Operator) -> ProducerKeyOut:
    """One producer key, never its secret (operator token)."""
    found = await run_in_threadpool(keys_db.get, ctx.engine, key_id)
    if found is not None:
        return _stored(found)
    configured = ctx.keys.configured.get(key_id)
    if configured is not None:
        return _configured(configured)
    raise ApiError(404, "producer_key_not_found", f"no producer key {key_id}")


@router.put(
    "/admin/producer-keys/{key_id}/partitions",
    operation_id="scopeProducerKey",
    responses=ERRORS,
)
async def scope_producer_key(
    key_id: KeyIdPath, body: Annotated[ScopeIn, Body()], ctx: Ctx, who: Operator
) -> ProducerKeyOut:
    """Replace the partitions a key may submit for, within seconds (operator
    token; audited)."""
    now = dt.datetime.now(dt.UTC)
    found = await run_in_threadpool(
        _write,
        ctx,
        key_id,
        lambda: keys_db.scope(ctx.engine, key_id, body.partitions, who.actor, now),
    )
    return _stored(found)


@router.post(
    "/admin/producer-keys/{key_id}/rotate",
    operation_id="rotateProducerKey",
    responses=ERRORS,
)
async def rotate_producer_key(
    key_id: KeyIdPath, ctx: Ctx, who: Operator, body: Annotated[RotateIn | None, Body()] = None
) -> ProducerKeyCreated:
    """A new secret for the key (in this answer only); the one it replaces still
    signs for ``previous_valid_for_s`` (default a day), so that producers can
    switch (operator token; audited)."""
    valid_for = dt.timedelta(seconds=(body or RotateIn()).previous_valid_for_s)
    secret = _new_secret()
    now = dt.datetime.now(dt.UTC)
    found = await run_in_threadpool(
        _write,
        ctx,
        key_id,
        lambda: keys_db.rotate(
            ctx.engine, key_id, secret, ctx.internal_key, valid_for, who.actor, now
        ),
    )
    return ProducerKeyCreated(**_stored(found).model_dump(), secret=secret)


@router.post(
    "/admin/producer-keys/{key_id}/revoke",
    operation_id="revokeProducerKey",
    responses=ERRORS,
)
async def revoke_producer_key(key_id: KeyIdPath, ctx: Ctx, who: Operator) -> ProducerKeyOut:
    """Revoke a key: refused within seconds, for good; its id is never given
    again. Revoking a revoked key changes nothing (operator token; audited)."""
    now = dt.datetime.now(dt.UTC)
    found = await run_in_threadpool(
        _write, ctx, key_id, lambda: keys_db.revoke(ctx.engine, key_id, who.actor, now)
    )
    return _stored(found)
