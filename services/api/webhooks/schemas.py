"""Shapes of webhook endpoints and deliveries on the wire (docs/api.md#webhooks).
A secret appears in two answers only: an endpoint's creation and a rotation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.adapters.db.webhooks import deliveries as db_deliveries
from shared.adapters.db.webhooks.endpoints import Endpoint as DbEndpoint
from shared.domain.webhooks import EVENT_TYPES
from shared.wire.times import iso

EventName = Literal[EVENT_TYPES]  # type: ignore[valid-type]


class EndpointIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, description="https:// and public")
    events: list[EventName] = Field(min_length=1, max_length=len(EVENT_TYPES))
    description: str | None = Field(None, max_length=500, pattern=r"^[^\x00]*$")


class WebhookEndpoint(BaseModel):
    id: str
    url: str
    events: list[str]
    description: str | None
    status: Literal["enabled", "disabled"]
    disabled_reason: str | None  # operator, or failing (five days of failed deliveries)
    failing_since: str | None
    created_at: str
    key_id: str


class CreatedEndpoint(WebhookEndpoint):
    secret: str = Field(description="whsec_...: shown this once")


class EndpointList(BaseModel):
    items: list[WebhookEndpoint]


class RotatedSecret(BaseModel):
    id: str
    secret: str = Field(description="whsec_...: shown this once")
    previous_secret_expires_at: str


class TestSent(BaseModel):
    event_id: str


class DeliveryAttempt(BaseModel):
    at: str
    status_code: int | None
    error: str | None  # timeout, address_refused, url_refused, dns_failed, connect_failed
    detail: str
    latency_ms: int
    answer: str  # the first KiB of the endpoint's answer


class Delivery(BaseModel):
    id: str
    event_id: str  # the webhook-id header, the same at every attempt
    event_type: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    created_at: str
    next_attempt_at: str | None
    attempt_log: list[DeliveryAttempt]


class DeliveryPage(BaseModel):
    items: list[Delivery]
    next_cursor: str | None


def endpoint(e: DbEndpoint) -> WebhookEndpoint:
    return WebhookEndpoint(**_fields(e))


def created(e: DbEndpoint, secret: str) -> CreatedEndpoint:
    return CreatedEndpoint(**_fields(e), secret=secret)


def _fields(e: DbEndpoint) -> dict[str, object]:
    return {
        "id": e.id,
        "url": e.url,
        "events": list(e.events),
        "description": e.description,
        "status": e.status,
        "disabled_reason": e.disabled_reason,
        "failing_since": iso(e.failing_since),
        "created_at": iso(e.created_at) or "",
        "key_id": e.key_id,
    }


def delivery(d: db_deliveries.Delivery) -> Delivery:
    return Delivery(
        id=d.id,
        event_id=d.event_id,
        event_type=d.event_type,
        status=d.status,
        attempts=d.attempts,
        created_at=iso(d.created_at) or "",
        next_attempt_at=iso(d.next_attempt_at) if d.status == "pending" else None,
        attempt_log=[
            DeliveryAttempt(
                at=iso(t.at) or "",
                status_code=t.status_code,
                error=t.error,
                detail=t.detail,
                latency_ms=t.latency_ms,
                answer=t.answer,
            )
            for t in d.tries
        ],
    )
