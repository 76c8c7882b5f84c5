"""A test consumer of the events exchange, as the README's consumer does it: each
message carries a batch of events (``{"events": [...]}``, ``x-event-count``), and
events are deduplicated by ``event_id`` (docs/architecture.md#outcome-events)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pika


@dataclass(frozen=True)
class Delivery:
    """One message as the consumer received it."""

    message_id: str
    routing_key: str
    content_type: str | None
    headers: dict[str, Any]
    events: list[dict[str, Any]]
    body: dict[str, Any] = field(default_factory=dict)  # the whole JSON body


def drain(channel: Any, queue: str) -> list[Delivery]:
    """Every message waiting in ``queue`` (acknowledged), in the order it came."""
    found = []
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            return found
        found.append(delivery(method, properties, body))


def delivery(method: Any, properties: pika.BasicProperties, body: bytes) -> Delivery:
    decoded = json.loads(body)
    return Delivery(
        properties.message_id,
        method.routing_key,
        properties.content_type,
        dict(properties.headers or {}),
        decoded.get("events", []),  # a period.closed message is one object
        decoded,
    )


def distinct(deliveries: list[Delivery]) -> dict[str, dict[str, Any]]:
    """Each event once, by ``event_id``: the first delivery of it."""
    seen: dict[str, dict[str, Any]] = {}
    for message in deliveries:
        for event in message.events:
            seen.setdefault(event["event_id"], event)
    return seen
