"""One broker connection of the relay: batches of outbox rows published with
publisher confirms, each marked published once the broker has confirmed it all.

A unit's events travel as a few messages (one per outcome and kind, at most
``event_batch_max`` events each; shared/domain/pipeline/events.py). A batch's messages
are published back to back and their confirms awaited together (pika's
asynchronous connection): waiting for each confirm before the next publish, as
a blocking channel does, costs a round trip per message.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions
import pika.frame
import pika.spec
from sqlalchemy import Connection, Engine
from sqlalchemy import exc as sa_exc

from services.relay.confirms import Confirms
from services.relay.publish_log import log_published
from shared.adapters.db import outbox
from shared.adapters.rabbitmq.broker import connection_parameters
from shared.adapters.rabbitmq.publisher import exchange_name, properties
from shared.config.settings import Settings

# A broker that takes longer than this to confirm a batch is treated as lost:
# the batch is rolled back (its events stay unpublished) and the relay reconnects.
CONFIRM_TIMEOUT_S = 60.0
_DB_ERRORS = (sa_exc.OperationalError, sa_exc.InterfaceError)


@dataclass
class _InFlight:
    """A batch published and awaiting its confirms, its outbox rows still locked."""

    conn: Connection
    batch: outbox.Batch
    last_tag: int
    started: float
    deadline: Any  # the ioloop timer that gives up on the confirms


class Session:
    """One broker connection's life: batches published until stop or a failure."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        stop: threading.Event,
        node: int = 0,
    ) -> None:
        """``node``: which node of the broker URL to connect to, counted round the list."""
        self.settings = settings
        self.engine = engine
        self.stop = stop
        self.exchange = exchange_name(settings.queue_prefix)
        self.failure: str | None = None
        self.published = 0  # delivery tags handed out on this channel
        self.confirms = Confirms()
        self.inflight: _InFlight | None = None
        self.channel: Any = None
        self.closing = False
        nodes = connection_parameters(settings.broker_url, timeout_s=5)
        params = nodes[node % len(nodes)]
        self.connection = pika.SelectConnection(
            params,
            on_open_callback=self._on_open,
            on_open_error_callback=self._on_open_error,
            on_close_callback=self._on_closed,
        )

    def run(self) -> str | None:
        """Publish until stopped or failed; the failure, if any."""
        try:
            self.connection.ioloop.start()
        finally:
            self._abandon()
            self.connection.ioloop.close()  # its wake-up socket pair, or every reconnect leaks two
        return self.failure

    # -- connection and channel ------------------------------------------------

    def _on_open(self, connection: pika.SelectConnection) -> None:
        connection.channel(on_open_callback=self._on_channel)

    def _on_open_error(self, connection: pika.SelectConnection, error: BaseException) -> None:
        self.failure = type(error).__name__
        connection.ioloop.stop()

    def _on_closed(self, connection: pika.SelectConnection, reason: BaseException) -> None:
        if not self.closing:
            self.failure = type(reason).__name__
        self._abandon()
        connection.ioloop.stop()

    def _on_channel(self, channel: Any) -> None:
        self.channel = channel
        channel.add_on_close_callback(self._on_channel_closed)
        channel.confirm_delivery(self._on_confirm, callback=self._on_confirm_mode)

    def _on_confirm_mode(self, _frame: pika.frame.Method) -> None:
        self.channel.exchange_declare(
            self.exchange,
            exchange_type="topic",
            durable=True,
            callback=lambda _: self._later(0, self._tick),
        )

    def _on_channel_closed(self, _channel: Any, reason: BaseException) -> None:
        self._fail(type(reason).__name__)

    def _later(self, delay: float, callback: Any) -> Any:
        return self.connection.ioloop.call_later(delay, callback)

    def _close(self) -> None:
        if not self.closing:
            self.closing = True
            if self.connection.is_open:
                self.connection.close()
            else:
                self.connection.ioloop.stop()

    def _fail(self, reason: str) -> None:
        """Give the batch in flight back (its events stay unpublished) and reconnect."""
        if self.failure is None:
            self.failure = reason
        self._abandon()
        self._close()

    # -- batches -----------------------------------------------------------------

    def _tick(self) -> None:
        if self.stop.is_set():
            self._close()
            return
        started = time.perf_counter()
        conn = None
        try:
            conn = self.engine.connect()
            conn.begin()
            batch = outbox.next_batch(
                conn,
                self.settings.relay_batch,
                self.settings.event_batch_max,
                self.settings.relay_grace_s,
            )
            if not batch.outbox_ids:
                conn.rollback()
                conn.close()
                self._later(self.settings.relay_poll_s, self._tick)
                return
        except _DB_ERRORS as exc:
            if conn is not None:
                conn.close()
            self._fail(type(exc).__name__)
            return
        try:
            publish = self.channel.basic_publish
            for message in batch.messages:
                publish(self.exchange, message.routing_key, message.body, properties(message))
                self.published += 1
        except pika.exceptions.AMQPError as exc:
            conn.rollback()
            conn.close()
            self._fail(type(exc).__name__)
            return
        self.inflight = _InFlight(
            conn,
            batch,
            last_tag=self.published,
            started=started,
            deadline=self._later(CONFIRM_TIMEOUT_S, lambda: self._fail("confirm_timeout")),
        )

    def _on_confirm(self, frame: pika.frame.Method) -> None:
        method = frame.method
        if isinstance(method, pika.spec.Basic.Nack):
            self._fail("nack")  # the broker could not take it: publish it again later
            return
        self.confirms.ack(method.delivery_tag, method.multiple)
        flight = self.inflight
        if flight is None or self.confirms.floor < flight.last_tag:
            return
        self.inflight = None
        self.connection.ioloop.remove_timeout(flight.deadline)
        try:
            outbox.mark_published(flight.conn, flight.batch.outbox_ids)
            flight.conn.commit()
        except _DB_ERRORS as exc:
            self._fail(type(exc).__name__)  # unmarked: published again, at least once
            return
        finally:
            flight.conn.close()
        log_published(flight.batch.units, flight.started)
        self._later(0, self._tick)

    def _abandon(self) -> None:
        flight, self.inflight = self.inflight, None
        if flight is not None:
            self.connection.ioloop.remove_timeout(flight.deadline)
            try:
                flight.conn.rollback()
                flight.conn.close()
            except _DB_ERRORS:
                pass  # the connection is gone; so is its transaction
