"""``settleq relay``: publish committed outcome events to the events exchange.

Events are read from the outbox in commit order, published with publisher
confirms to the topic exchange ``<prefix>.events`` (routing key
``settlement.<outcome>.<kind>``, AMQP ``message_id`` = event id), and marked
published in the same transaction that locked them. A relay killed mid-batch
leaves its events unmarked, so they are published again: at least once, and a
consumer deduplicates by event id.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time

import pika
import pika.exceptions
from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc

from shared.db import outbox
from shared.db.engine import make_engine
from shared.logs import only, stage_event
from shared.settings import Settings

log = logging.getLogger("settleq.relay")


def exchange_name(settings: Settings) -> str:
    return f"{settings.queue_prefix}.events"


class Relay:
    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine
        self.exchange = exchange_name(settings)
        self._connection: pika.BlockingConnection | None = None
        self._channel: pika.adapters.blocking_connection.BlockingChannel | None = None

    def _open(self) -> pika.adapters.blocking_connection.BlockingChannel:
        if self._channel is None or not self._channel.is_open:
            params = pika.URLParameters(self.settings.broker_url)
            params.connection_attempts = 1
            params.socket_timeout = 5
            self._connection = pika.BlockingConnection(params)
            self._channel = self._connection.channel()
            self._channel.confirm_delivery()
            self._channel.exchange_declare(self.exchange, exchange_type="topic", durable=True)
        return self._channel

    def close(self) -> None:
        if self._connection is not None and self._connection.is_open:
            self._connection.close()
        self._connection = self._channel = None

    def publish_batch(self) -> int:
        """Publish one batch of events; the number published."""
        started = time.perf_counter()
        with self.engine.begin() as conn:
            batch = outbox.next_batch(conn, self.settings.relay_batch)
            if not batch.outbox_ids:
                return 0
            channel = self._open()
            for event_id, routing_key, body in batch.events:
                # With confirms on, this returns once RabbitMQ has the message.
                channel.basic_publish(
                    exchange=self.exchange,
                    routing_key=routing_key,
                    body=body,
                    properties=pika.BasicProperties(
                        message_id=event_id,
                        delivery_mode=2,
                        content_type="application/json",
                    ),
                )
            outbox.mark_published(conn, batch.outbox_ids)
        _log_published(batch.units, started)
        return len(batch.events)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self.publish_batch() == 0:
                    stop.wait(self.settings.relay_poll_s)
                elif self.settings.fault_relay_batch_pause_s:
                    stop.wait(self.settings.fault_relay_batch_pause_s)
            except (
                pika.exceptions.AMQPError,
                sa_exc.OperationalError,
                sa_exc.InterfaceError,
            ) as exc:
                # Unmarked events stay in the outbox; try again after a pause.
                log.warning("relay paused: %s", type(exc).__name__)
                self.close()
                stop.wait(1.0)
        self.close()


def _log_published(units: list[outbox.Unit], started: float) -> None:
    """One event per committed unit of work (outbox row), after its commit. The
    outbox knows no chunk, so ``chunk_id`` is null; ``lag_ms`` is the time from
    the settlement's commit to its publication."""
    now = dt.datetime.now(dt.UTC)
    for unit in units:
        created = unit.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=dt.UTC)
        stage_event(
            log,
            "relay_publish",
            started=started,
            job_id=only(unit.job_ids),
            chunk_id=None,
            partition_key=only(unit.partition_keys),
            correlation_id=only(unit.correlation_ids),
            status="ok",
            events=unit.events,
            lag_ms=round((now - created).total_seconds() * 1000, 1),
        )


def run_relay(settings: Settings) -> None:
    import signal

    if settings.relay_nice:
        # Events are asynchronous by contract; on a shared host settlement goes first.
        os.nice(settings.relay_nice)
    engine = make_engine(settings.database_url, pool_size=2)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("relay publishing to %s", exchange_name(settings))
    started = time.monotonic()
    Relay(settings, engine).run(stop)
    engine.dispose()
    log.info("relay stopped after %.0f s", time.monotonic() - started)
