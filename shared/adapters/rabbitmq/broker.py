"""RabbitMQ through Dramatiq's broker, with publisher confirms always on.

``RabbitmqBroker`` has ``confirm_delivery=False`` unless told otherwise: then ``enqueue`` can
return before RabbitMQ holds the message, and our 202 would be a lie.

``SETTLEQ_BROKER_URL`` may list a cluster's nodes, separated by ``;`` (as
Dramatiq reads it): every connection tries them in turn, so a client whose
node went away reconnects to one that is still up.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

import pika
import pika.exceptions
from dramatiq import Middleware
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.message import Message

from shared.adapters.rabbitmq.declare import SettleqBroker
from shared.adapters.rabbitmq.logs import expected_connection_loss, quiet_connection_loss
from shared.config.settings import Settings
from shared.domain.pipeline.messages import MAX_PRIORITY

log = logging.getLogger("settleq.broker")
DEFAULT_HEARTBEAT_S = 60  # what RabbitMQ proposes when the URL names none


def make_broker(
    settings: Settings, middleware: Sequence[Middleware] | None = None, confirm: bool = True
) -> RabbitmqBroker:
    """``confirm=False`` only where a lost message costs nothing: the webhooks
    component's, whose database hands a delivery out again (services/webhooks)."""
    quiet_connection_loss()  # also where no process-wide logging was configured
    broker = SettleqBroker(
        url=broker_urls(settings.broker_url),
        confirm_delivery=confirm,
        middleware=list(middleware) if middleware is not None else [],
        max_priority=MAX_PRIORITY,
        queue_type=settings.queue_type,
        delivery_limit=settings.delivery_limit(),
    )
    params = broker.parameters if isinstance(broker.parameters, list) else [broker.parameters]
    for p in params:
        # Fail fast when the broker is down: the front door answers 503, not a hang.
        p.connection_attempts = 1
        p.socket_timeout = 5
        p.blocked_connection_timeout = 30
    return broker


def broker_urls(url: str) -> list[str]:
    """The nodes ``SETTLEQ_BROKER_URL`` names, in the order they are tried."""
    return [part.strip() for part in url.split(";") if part.strip()]


def connection_parameters(url: str, timeout_s: float | None = None) -> list[pika.URLParameters]:
    """pika's parameters for each node (``pika.BlockingConnection`` takes the
    list and connects to the first that answers), each tried once."""
    found = []
    for node in broker_urls(url):
        params = pika.URLParameters(node)
        params.connection_attempts = 1
        if timeout_s is not None:
            params.socket_timeout = timeout_s
        found.append(params)
    return found


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


class PartlyEnqueued(Exception):
    """``enqueue_many`` failed: ``done`` of its messages were taken first (0 when
    the broker refused the transaction: then none of them was)."""

    def __init__(self, done: int, cause: BaseException) -> None:
        super().__init__(f"{done} enqueued before {type(cause).__name__}")
        self.done = done
        self.cause = cause


def enqueue_many(
    broker: RabbitmqBroker,
    queue_name: str,
    actor_name: str,
    bodies: Sequence[dict[str, Any]],
    priority: int = MAX_PRIORITY,
) -> int:
    """Publish many messages at once and return (how many) once RabbitMQ holds them all.

    Publisher confirms make ``enqueue`` wait a round trip per message; here the
    messages go out in one AMQP transaction (``tx.select`` ... ``tx.commit``) on
    a channel of this thread's connection: RabbitMQ answers ``commit-ok`` only
    when it is responsible for every message of it, durably (the guarantee a
    confirm gives, for one round trip). Raises ``PartlyEnqueued(0, cause)``
    when the commit was not answered: then none is counted as enqueued (one may
    still arrive; the consumer's own check drops it, docs/api.md#dead-letters-and-the-audit-log).
    """
    if not bodies:
        return 0
    try:
        broker.declare_queue(queue_name, ensure=True)
        channel = broker.connection.channel()
        try:
            channel.tx_select()
            properties = pika.BasicProperties(delivery_mode=2, priority=priority)
            for body in bodies:
                message: Message[Any] = Message(
                    queue_name=queue_name,
                    actor_name=actor_name,
                    args=(body,),
                    kwargs={},
                    options={"broker_priority": priority},
                )
                channel.basic_publish("", queue_name, message.encode(), properties)
            channel.tx_commit()
        finally:
            if channel.is_open:
                with suppress(pika.exceptions.AMQPError):
                    channel.close()
    except Exception as exc:
        drop_connection(broker)  # the next publish on this thread starts afresh
        raise PartlyEnqueued(0, exc) from exc
    return len(bodies)


def heartbeat_s(broker: RabbitmqBroker) -> float:
    """The heartbeat timeout the broker URL asks for (``?heartbeat=``), else RabbitMQ's."""
    params = broker.parameters if isinstance(broker.parameters, list) else [broker.parameters]
    value = getattr(params[0], "heartbeat", None)
    return float(value) if isinstance(value, int | float) and value > 0 else DEFAULT_HEARTBEAT_S


def keep_alive(broker: RabbitmqBroker) -> None:
    """Service this thread's connection: send and read heartbeats.

    A ``BlockingConnection`` does I/O only when its own thread calls into it;
    left idle past the heartbeat timeout, RabbitMQ drops it, and the next
    publish found a dead socket (and pika logged a traceback). Call this from
    the thread that owns the connection, more often than the timeout. A
    connection lost anyway (a broker restart) is dropped: the next publish
    opens a new one."""
    connection = getattr(broker.state, "connection", None)
    if connection is None:
        return
    try:
        connection.process_data_events(time_limit=0)
    except pika.exceptions.AMQPError as exc:
        log.info("broker connection lost (%s); the next publish reopens it", type(exc).__name__)
        drop_connection(broker)


def drop_connection(broker: RabbitmqBroker) -> None:
    """Forget this thread's connection, closing it if it still looks open.

    Closed here, quietly, rather than by Dramatiq's deleter, which logs a
    traceback when the close meets a connection RabbitMQ already dropped."""
    connection = getattr(broker.state, "connection", None)
    if connection is None:
        return
    with expected_connection_loss():
        if connection.is_open:
            with suppress(pika.exceptions.AMQPError):
                connection.close()
        del broker.connection


def close_broker(broker: RabbitmqBroker) -> None:
    """Close every connection at shutdown. One RabbitMQ dropped while it sat
    idle (a worker's consumer threads' publishing connections) is routine
    here, not an error to log with a traceback."""
    with expected_connection_loss():
        broker.close()
