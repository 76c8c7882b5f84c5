"""One delivery attempt, as the ``<prefix>.webhooks`` queue's actor makes it
(docs/architecture.md#webhooks): claim the delivery, sign and POST its event,
record what came back and decide what is next: delivered, retried on the
schedule of ``shared.domain.webhooks``, or failed after three days; a
failure may disable an endpoint failing for five.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from dataclasses import dataclass, field

from sqlalchemy import Engine

from services.webhooks.metrics import WebhookMetrics
from shared.adapters.db.webhooks import deliveries
from shared.adapters.webhook_delivery import Attempt, deliver
from shared.config.settings import Settings
from shared.domain import webhooks

log = logging.getLogger("settleq.webhooks")

# How long a delivery handed to the queue stays away from the next hand-out:
# the queue's wait and its attempt. A delivery whose message was lost is
# handed out again after it.
LEASE = dt.timedelta(seconds=60)
# How long a claimed delivery stays away: its 10 s attempt and the recording.
# A delivery whose process died mid-attempt is handed out again after it.
ATTEMPT_LEASE = dt.timedelta(seconds=20)


def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Started:
    """A claimed delivery, signed and ready to send."""

    claimed: deliveries.Claimed
    body: bytes
    headers: dict[str, str] = field(repr=False)


def start(settings: Settings, engine: Engine, delivery_id: str, attempts: int) -> Started | None:
    """Claim a delivery still pending with ``attempts`` made, and sign it; None
    for a stale message, or a disabled endpoint's delivery (failed here,
    without an attempt)."""
    now = dt.datetime.now(dt.UTC)
    claimed = deliveries.claim(engine, delivery_id, attempts, now, ATTEMPT_LEASE)
    if claimed is None:
        return None  # delivered, failed, or attempted since this message was sent
    if claimed.endpoint_status != "enabled":
        deliveries.record(engine, claimed, None, "failed", None, _disable_after(settings))
        return None
    body = webhooks.envelope(
        claimed.event_type, claimed.event_id, _iso(claimed.event_created_at), claimed.data or "null"
    )
    headers = webhooks.headers(
        claimed.signing_secrets(now), claimed.event_id, int(now.timestamp()), body
    )
    return Started(claimed, body, headers)


def attempt(
    settings: Settings, engine: Engine, metrics: WebhookMetrics, delivery_id: str, attempts: int
) -> None:
    """One attempt of a delivery, if it is still pending with ``attempts``
    made, on this thread (the webhooks process sends on its event loop:
    runner.py)."""
    started = start(settings, engine, delivery_id, attempts)
    if started is None:
        return
    result = deliver(
        started.claimed.url,
        started.body,
        started.headers,
        allow_private=settings.webhook_allow_private,
    )
    finish(settings, engine, metrics, started.claimed, result)


def _disable_after(settings: Settings) -> dt.timedelta:
    return dt.timedelta(seconds=webhooks.DISABLE_AFTER_S * settings.webhook_schedule_scale)


def finish(
    settings: Settings,
    engine: Engine,
    metrics: WebhookMetrics,
    claimed: deliveries.Claimed,
    result: Attempt,
) -> None:
    """Record an attempt's result and decide what is next."""
    metrics.attempted(result)
    ended = dt.datetime.now(dt.UTC)
    disable_after = _disable_after(settings)
    status, next_at = _next(claimed, result, ended, settings.webhook_schedule_scale)
    tried = _tried(result, ended)
    recorded = deliveries.record(engine, claimed, tried, status, next_at, disable_after)
    if status == "delivered" and recorded.counted:
        metrics.latency.observe((ended - claimed.event_created_at).total_seconds())
    if recorded.endpoint_disabled:
        metrics.disabled.inc()
        log.warning(
            "webhook endpoint disabled after failing for %s",
            disable_after,
            extra={"endpoint_id": claimed.endpoint_id},
        )
    if status == "failed":
        log.warning(
            "webhook delivery failed for good after %d attempts",
            claimed.attempts + 1,
            extra={"delivery_id": claimed.delivery_id, "endpoint_id": claimed.endpoint_id},
        )


def _next(
    claimed: deliveries.Claimed, result: Attempt, ended: dt.datetime, scale: float
) -> tuple[str, dt.datetime | None]:
    """The delivery's status after this attempt, and when a pending one is next sent."""
    if result.delivered:
        return "delivered", None
    first = claimed.first_attempt_at or ended
    if webhooks.gives_up(first.timestamp(), ended.timestamp(), scale):
        return "failed", None
    wait = webhooks.next_wait_s(claimed.attempts + 1, random.random()) * scale
    return "pending", ended + dt.timedelta(seconds=wait)


def _tried(result: Attempt, ended: dt.datetime) -> deliveries.Tried:
    return deliveries.Tried(
        at=ended,
        status_code=result.status,
        error=result.error,
        detail=result.detail,
        latency_ms=result.latency_ms,
        answer=result.answer.decode("utf-8", "replace"),
    )
