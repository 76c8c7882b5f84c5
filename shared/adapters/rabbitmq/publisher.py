"""Outcome events published by the process that commits them
(docs/architecture.md#outcome-events, docs/architecture.md#events-at-commit-and-the-relay).

Right after a unit's transaction commits, its process publishes the unit's
messages, made from the rows its writer wrote (no read back), with publisher
confirms, on the thread's own broker channel, and then marks the unit's
outbox row published. Anything that goes wrong (the broker down or refusing,
the database gone before the mark) leaves the row unmarked and the unit
committed: the relay publishes it once its grace has passed. A unit's events
are so published at least once, with the same ``message_id``s and
``event_id``s whoever publishes them.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from typing import Any

import dramatiq.errors
import pika
import pika.exceptions
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc

from shared.adapters.db import outbox
from shared.adapters.rabbitmq.broker import drop_connection
from shared.adapters.rabbitmq.logs import expected_connection_loss, failure_reported_by_caller
from shared.domain.pipeline.events import COUNT_HEADER, Message, unit_events, unit_messages
from shared.domain.pipeline.units import UnitResult
from shared.logs import only, stage_event

log = logging.getLogger("settleq.events")

# A channel or connection lost mid-publish is opened again once: what a
# restarted broker or an idle connection RabbitMQ dropped needs. Beyond that
# the relay's sweep is the retry.
_ATTEMPTS = 2
_BROKER_ERRORS = (pika.exceptions.AMQPError, dramatiq.errors.BrokerConnectionError, OSError)


def exchange_name(queue_prefix: str) -> str:
    """``<prefix>.events``: the topic exchange every outcome event goes to."""
    return f"{queue_prefix}.events"


def properties(message: Message) -> pika.BasicProperties:
    """A message's AMQP properties, the same whoever publishes it."""
    return pika.BasicProperties(
        message_id=message.message_id,
        delivery_mode=2,
        content_type="application/json",
        headers={COUNT_HEADER: message.count},
    )


class EventPublisher:
    """Publishes committed units' events on the calling thread's channel of
    ``broker`` (Dramatiq's: one connection per thread, publisher confirms on)."""

    def __init__(
        self, broker: RabbitmqBroker, engine: Engine, queue_prefix: str, event_batch_max: int
    ) -> None:
        self.broker = broker
        self.engine = engine
        self.exchange = exchange_name(queue_prefix)
        self.event_batch_max = event_batch_max

    def publish(self, result: UnitResult, chunk_id: str | None = None) -> bool:
        """A committed unit's events; whether they were published and marked
        (False: they wait for the relay). Logged as one ``publish`` event, as
        the relay logs ``relay_publish``."""
        if result.outbox_id is None:
            return True
        started = time.perf_counter()
        messages = unit_messages(unit_events(result), self.event_batch_max)
        done = self.publish_messages([result.outbox_id], messages)
        rows = result.rows
        stage_event(
            log,
            "publish",
            started=started,
            job_id=only(r.job_id for r in rows),
            chunk_id=chunk_id,
            partition_key=only(r.partition_key for r in rows),
            correlation_id=only(r.correlation_id for r in rows if r.correlation_id),
            status="ok" if done else "left_to_relay",
            events=len(rows),
            messages=len(messages),
            lag_ms=round((dt.datetime.now(dt.UTC) - result.committed_at).total_seconds() * 1000, 1),
        )
        return done

    def publish_messages(self, outbox_ids: Sequence[int], messages: Sequence[Message]) -> bool:
        """Publish the messages of these committed outbox rows, then mark them
        published; whether both happened."""
        try:
            self._send(messages)
        except _BROKER_ERRORS as exc:
            log.warning(
                "events of %d committed units left to the relay: the broker did not take them (%s)",
                len(outbox_ids),
                type(exc).__name__,
            )
            return False
        try:
            with self.engine.begin() as conn:
                outbox.mark_published(conn, outbox_ids, skip_locked=True)
        except sa_exc.SQLAlchemyError as exc:
            # Published but unmarked: the relay publishes them again, at least once.
            log.warning(
                "events of %d units published but not marked (%s); the relay will repeat them",
                len(outbox_ids),
                type(exc).__name__,
            )
            return False
        return True

    def _send(self, messages: Sequence[Message]) -> None:
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with expected_connection_loss(), failure_reported_by_caller():
                    channel: Any = self.broker.channel
                    state = self.broker.state  # this thread's (Dramatiq's threading.local)
                    if getattr(state, "events_declared_on", None) is not channel:
                        channel.exchange_declare(self.exchange, exchange_type="topic", durable=True)
                        state.events_declared_on = channel
                    for message in messages:
                        # Confirmed before it returns (the channel is in confirm mode).
                        channel.basic_publish(
                            self.exchange, message.routing_key, message.body, properties(message)
                        )
                return
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError):
                drop_connection(self.broker)
                if attempt == _ATTEMPTS:
                    raise
