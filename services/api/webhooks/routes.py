"""Webhook endpoints (docs/api.md#webhooks): a producer key registers, reads,
tests, rotates and deletes its own with signed requests, and reads each
one's delivery log; an operator lists and disables every key's. Another
key's endpoint reads as no such endpoint."""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from services.api.auth import Ctx, Operator, Principal, Producer
from services.api.context import ApiContext
from services.api.errors import ApiError, ErrorBody
from services.api.pagination import CursorQuery, delivery_cursor, encode_delivery_cursor
from services.api.webhooks import schemas as wire
from shared.adapters.db.webhooks import deliveries as deliveries_db
from shared.adapters.db.webhooks import endpoints as endpoints_db
from shared.adapters.db.webhooks import events as events_db
from shared.adapters.webhook_delivery import Refused, destination
from shared.domain.webhooks import ROTATION_GRACE_S
from shared.wire.times import iso

router = APIRouter(tags=["webhooks"])
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody, "description": "a bearer token on a producer's route"},
    404: {"model": ErrorBody, "description": "webhook_endpoint_not_found"},
}
RATE_LIMITED: dict[str, Any] = {
    "model": ErrorBody,
    "description": "rate_limited: more than 10 pings and manual retries a minute (Retry-After)",
}
IdPath = Annotated[str, Path(max_length=32, pattern=r"^we_[0-9a-f]{24}$")]
DeliveryPath = Annotated[str, Path(max_length=32, pattern=r"^dlv_[0-9a-f]{24}$")]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _not_found() -> ApiError:
    return ApiError(404, "webhook_endpoint_not_found", "no such webhook endpoint")


def _manual_send(ctx: ApiContext, endpoint_id: str) -> None:
    """Count a ping or manual retry; 429 ``rate_limited`` beyond 10 a minute."""
    wait = endpoints_db.take_manual_send(ctx.engine, endpoint_id, _now())
    if wait is not None:
        seconds = max(1, math.ceil(wait.total_seconds()))
        raise ApiError(
            429,
            "rate_limited",
            f"an endpoint is sent at most {endpoints_db.MANUAL_SENDS} pings and manual retries"
            f" a minute: retry after {seconds} s",
            headers={"Retry-After": str(seconds)},
        )


def _own(ctx: ApiContext, who: Principal, endpoint_id: str) -> endpoints_db.Endpoint:
    assert who.key_id is not None
    found = endpoints_db.get(ctx.engine, endpoint_id, who.key_id)
    if found is None:
        raise _not_found()
    return found


@router.post(
    "/v1/webhook-endpoints",
    operation_id="createWebhookEndpoint",
    status_code=201,
    responses={
        **ERRORS,
        422: {
            "model": ErrorBody,
            "description": "webhook_url_invalid, webhook_url_refused, webhook_endpoint_limit",
        },
    },
)
async def create_endpoint(
    body: Annotated[wire.EndpointIn, Body()], ctx: Ctx, who: Producer
) -> wire.CreatedEndpoint:
    """Register an endpoint of the signing key; its secret is in this answer only."""

    def create() -> wire.CreatedEndpoint:
        found = destination(body.url, ctx.settings.webhook_allow_private)
        if isinstance(found, Refused):
            detail = {"loc": ["body", "url"], "type": found.error, "msg": found.detail}
            # A URL that does not parse is invalid; one that parses but may not
            # be reached (scheme, credentials, DNS, address) is refused.
            code = "webhook_url_invalid" if found.error == "url_invalid" else "webhook_url_refused"
            raise ApiError(422, code, found.detail, [detail])
        assert who.key_id is not None
        limit = ctx.settings.webhook_max_endpoints
        try:
            made, secret = endpoints_db.create(
                ctx.engine,
                who.key_id,
                body.url,
                body.events,
                body.description,
                _now(),
                who.actor,
                limit=limit,
            )
        except endpoints_db.EndpointLimit as exc:
            raise ApiError(
                422,
                "webhook_endpoint_limit",
                f"{exc} (SETTLEQ_WEBHOOK_MAX_ENDPOINTS); delete one to register another",
            ) from None
        return wire.created(made, secret)

    return await run_in_threadpool(create)


@router.get("/v1/webhook-endpoints", operation_id="listWebhookEndpoints", responses=ERRORS)
async def list_endpoints(ctx: Ctx, who: Producer) -> wire.EndpointList:
    found = await run_in_threadpool(endpoints_db.list_for, ctx.engine, who.key_id)
    return wire.EndpointList(items=[wire.endpoint(e) for e in found])


@router.get(
    "/v1/webhook-endpoints/{endpoint_id}", operation_id="getWebhookEndpoint", responses=ERRORS
)
async def get_endpoint(endpoint_id: IdPath, ctx: Ctx, who: Producer) -> wire.WebhookEndpoint:
    return wire.endpoint(await run_in_threadpool(_own, ctx, who, endpoint_id))


@router.delete(
    "/v1/webhook-endpoints/{endpoint_id}",
    operation_id="deleteWebhookEndpoint",
    status_code=204,
    responses=ERRORS,
)
async def delete_endpoint(endpoint_id: IdPath, ctx: Ctx, who: Producer) -> Response:
    """Delete the endpoint and its delivery log; nothing more is sent to it."""
    assert who.key_id is not None
    gone = await run_in_threadpool(
        endpoints_db.remove, ctx.engine, endpoint_id, who.key_id, who.actor
    )
    if not gone:
        raise _not_found()
    return Response(status_code=204)


@router.post(
    "/v1/webhook-endpoints/{endpoint_id}/test",
    operation_id="testWebhookEndpoint",
    status_code=202,
    responses={
        **ERRORS,
        409: {"model": ErrorBody, "description": "webhook_endpoint_disabled"},
        429: RATE_LIMITED,
    },
)
async def test_endpoint(endpoint_id: IdPath, ctx: Ctx, who: Producer) -> wire.TestSent:
    """Send the endpoint a ``ping`` event; its delivery is in the endpoint's log."""

    def send() -> wire.TestSent:
        found = _own(ctx, who, endpoint_id)
        if found.status != "enabled":
            raise ApiError(
                409,
                "webhook_endpoint_disabled",
                f"the endpoint is disabled ({found.disabled_reason})",
            )
        _manual_send(ctx, endpoint_id)
        with ctx.engine.begin() as conn:
            event_id = events_db.ping(conn, endpoint_id, _now())
        return wire.TestSent(event_id=event_id)

    return await run_in_threadpool(send)


@router.post(
    "/v1/webhook-endpoints/{endpoint_id}/rotate-secret",
    operation_id="rotateWebhookSecret",
    responses=ERRORS,
)
async def rotate_secret(endpoint_id: IdPath, ctx: Ctx, who: Producer) -> wire.RotatedSecret:
    """A new secret, shown once; the old one signs too for 24 hours."""
    now = _now()
    assert who.key_id is not None
    secret = await run_in_threadpool(
        endpoints_db.rotate, ctx.engine, endpoint_id, who.key_id, now, who.actor
    )
    if secret is None:
        raise _not_found()
    until = now + dt.timedelta(seconds=ROTATION_GRACE_S)
    return wire.RotatedSecret(
        id=endpoint_id, secret=secret, previous_secret_expires_at=iso(until) or ""
    )


@router.get(
    "/v1/webhook-endpoints/{endpoint_id}/deliveries",
    operation_id="listWebhookDeliveries",
    responses=ERRORS,
)
async def list_deliveries(
    endpoint_id: IdPath,
    ctx: Ctx,
    who: Producer,
    status: Literal["pending", "delivered", "failed"] | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: CursorQuery = None,
) -> wire.DeliveryPage:
    """The endpoint's deliveries, newest first, each with every attempt."""
    before = delivery_cursor(cursor)

    def load() -> wire.DeliveryPage:
        _own(ctx, who, endpoint_id)
        return _deliveries(ctx, endpoint_id, status, before, limit)

    return await run_in_threadpool(load)


def _deliveries(
    ctx: ApiContext,
    endpoint_id: str,
    status: str | None,
    before: tuple[dt.datetime, str] | None,
    limit: int,
) -> wire.DeliveryPage:
    found = deliveries_db.page(ctx.engine, endpoint_id, status=status, before=before, limit=limit)
    last = found[-1] if len(found) == limit else None
    return wire.DeliveryPage(
        items=[wire.delivery(d) for d in found],
        next_cursor=None if last is None else encode_delivery_cursor(last.created_at, last.id),
    )


@router.post(
    "/v1/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/retry",
    operation_id="retryWebhookDelivery",
    status_code=202,
    responses={
        **ERRORS,
        404: {"model": ErrorBody, "description": "no such endpoint or delivery"},
        429: RATE_LIMITED,
    },
)
async def retry_delivery(
    endpoint_id: IdPath, delivery_id: DeliveryPath, ctx: Ctx, who: Producer
) -> wire.Delivery:
    """Send a delivery again now, whatever became of it: one more attempt, same webhook-id."""

    def retry() -> wire.Delivery:
        _own(ctx, who, endpoint_id)
        _manual_send(ctx, endpoint_id)
        if not deliveries_db.retry(ctx.engine, endpoint_id, delivery_id, _now()):
            raise ApiError(404, "webhook_delivery_not_found", "no such delivery of this endpoint")
        found = deliveries_db.get(ctx.engine, endpoint_id, delivery_id)
        assert found is not None
        return wire.delivery(found)

    return await run_in_threadpool(retry)


@router.get("/admin/webhook-endpoints", operation_id="listAllWebhookEndpoints", responses=ERRORS)
async def list_all_endpoints(ctx: Ctx, who: Operator) -> wire.EndpointList:
    """Every key's endpoints (operator token)."""
    found = await run_in_threadpool(endpoints_db.list_for, ctx.engine, None)
    return wire.EndpointList(items=[wire.endpoint(e) for e in found])


@router.get(
    "/admin/webhook-endpoints/{endpoint_id}/deliveries",
    operation_id="listAnyWebhookDeliveries",
    responses=ERRORS,
)
async def list_any_deliveries(
    endpoint_id: IdPath,
    ctx: Ctx,
    who: Operator,
    status: Literal["pending", "delivered", "failed"] | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: CursorQuery = None,
) -> wire.DeliveryPage:
    """Any key's endpoint's delivery log (operator token): the runbook's first look."""
    before = delivery_cursor(cursor)

    def load() -> wire.DeliveryPage:
        if endpoints_db.get(ctx.engine, endpoint_id, None) is None:
            raise _not_found()
        return _deliveries(ctx, endpoint_id, status, before, limit)

    return await run_in_threadpool(load)


@router.post(
    "/admin/webhook-endpoints/{endpoint_id}/disable",
    operation_id="disableWebhookEndpoint",
    responses=ERRORS,
)
async def disable_endpoint(endpoint_id: IdPath, ctx: Ctx, who: Operator) -> wire.WebhookEndpoint:
    """Stop deliveries to an endpoint (operator token; audited). Its pending
    deliveries fail at their next attempt."""

    def disable() -> wire.WebhookEndpoint:
        if not endpoints_db.disable(ctx.engine, endpoint_id, "operator", who.actor):
            raise _not_found()
        found = endpoints_db.get(ctx.engine, endpoint_id, None)
        assert found is not None
        return wire.endpoint(found)

    return await run_in_threadpool(disable)
