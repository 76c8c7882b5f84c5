"""RabbitMQ through Dramatiq's broker, with publisher confirms always on.

``RabbitmqBroker`` defaults to ``confirm_delivery=False``: then ``enqueue`` can
return before RabbitMQ holds the message, and our 202 would be a lie.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dramatiq import Middleware
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.message import Message

from shared.messages import MAX_PRIORITY
from shared.settings import Settings


def make_broker(
    settings: Settings, middleware: Sequence[Middleware] | None = None
) -> RabbitmqBroker:
    broker = RabbitmqBroker(
        url=settings.broker_url,
        confirm_delivery=True,
        middleware=list(middleware) if middleware is not None else [],
        max_priority=MAX_PRIORITY,
    )
    params = broker.parameters if isinstance(broker.parameters, list) else [broker.parameters]
    for p in params:
        # Fail fast when the broker is down: the front door answers 503, not a hang.
        p.connection_attempts = 1
        p.socket_timeout = 5
        p.blocked_connection_timeout = 30
    return broker


def enqueue(
    broker: RabbitmqBroker,
    queue_name: str,
    actor_name: str,
    body: dict[str, Any],
    priority: int = MAX_PRIORITY,
) -> None:
    """Publish one message and return once RabbitMQ confirmed it.

    Raises ``dramatiq.errors.BrokerConnectionError`` when the broker is unreachable.
    """
    broker.declare_queue(queue_name)
    broker.enqueue(
        Message(
            queue_name=queue_name,
            actor_name=actor_name,
            args=(body,),
            kwargs={},
            options={"broker_priority": priority},
        )
    )
