"""``settleq relay``: publish committed outcome events to the events exchange.

Events are read from the outbox in commit order, published with publisher
confirms to the topic exchange ``<prefix>.events`` (routing key
``settlement.<outcome>.<kind>``, AMQP ``message_id`` = event id), and marked
published in the same transaction that locked them. A relay killed mid-batch
leaves its events unmarked, so they are published again: at least once, and a
consumer deduplicates by event id.

A batch's events are published back to back and their confirms awaited
together (pika's asynchronous connection): waiting for each confirm before the
next publish, as a blocking channel does, costs a round trip and ~150 µs of CPU
per event, which held the relay to ~4,000 events/s, far behind settlement.

Publishing still costs ~50 µs of CPU per event here (pika and RabbitMQ), as much
as settling the line. On a host whose CPUs are contended, events therefore wait
(at most ``relay_defer_max_s`` after their commit) and settlement goes first:
``nice`` alone cannot do it, since each PostgreSQL backend leads a session of
its own and Linux ranks nice values only within a session.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
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

from services.relay.cpu_pressure import CpuPressure
from shared.adapters.db import outbox
from shared.adapters.db.engine import make_engine
from shared.logs import only, stage_event
from shared.settings import Settings

log = logging.getLogger("settleq.relay")

# Above this share of time with some task waiting for a CPU, the host counts as
# contended: an idle host reads ~0, one a 500,000-line batch saturates ~0.9-1.
CONTENDED = 0.5
# A broker that takes longer than this to confirm a batch is treated as lost:
# the batch is rolled back (its events stay unpublished) and the relay reconnects.
CONFIRM_TIMEOUT_S = 60.0
_DB_ERRORS = (sa_exc.OperationalError, sa_exc.InterfaceError)


def should_defer(
    pressure: float, oldest: dt.datetime | None, now: dt.datetime, max_defer_s: float
) -> bool:
    """Hold events back while the CPU is contended, but never past ``max_defer_s``
    after the oldest waiting one was committed (nor when none waits)."""
    if oldest is None or max_defer_s <= 0 or pressure < CONTENDED:
        return False
    return (now - oldest).total_seconds() < max_defer_s


def exchange_name(settings: Settings) -> str:
    return f"{settings.queue_prefix}.events"


class Confirms:
    """Which delivery tags of a channel in confirm mode the broker has acked.

    Tags count 1, 2, 3... per channel; an ack covers one tag, or every tag up to
    it (``multiple``). Acks usually come in order, but the broker does not
    promise it, so tags acked out of order wait above the contiguous floor."""

    def __init__(self) -> None:
        self.floor = 0  # every tag up to here is acked
        self._above: set[int] = set()

    def ack(self, tag: int, multiple: bool) -> None:
        if multiple:
            self.floor = max(self.floor, tag)
            self._above = {t for t in self._above if t > self.floor}
        elif tag > self.floor:
            self._above.add(tag)
        while self.floor + 1 in self._above:
            self.floor += 1
            self._above.discard(self.floor)


@dataclass
class _InFlight:
    """A batch published and awaiting its confirms, its outbox rows still locked."""

    conn: Connection
    batch: outbox.Batch
    last_tag: int
    started: float
    deadline: Any  # the ioloop timer that gives up on the confirms


class _Session:
    """One broker connection's life: batches published until stop or a failure."""

    def __init__(
        self, settings: Settings, engine: Engine, stop: threading.Event, pressure: CpuPressure
    ) -> None:
        self.settings = settings
        self.pressure = pressure
        self.engine = engine
        self.stop = stop
        self.exchange = exchange_name(settings)
        self.failure: str | None = None
        self.published = 0  # delivery tags handed out on this channel
        self.confirms = Confirms()
        self.inflight: _InFlight | None = None
        self.channel: Any = None
        self.closing = False
        params = pika.URLParameters(settings.broker_url)
        params.connection_attempts = 1
        params.socket_timeout = 5
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
            if self._defer(conn):
                conn.rollback()
                conn.close()
                self._later(self.settings.relay_poll_s, self._tick)
                return
            batch = outbox.next_batch(conn, self.settings.relay_batch)
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
            for event_id, routing_key, body in batch.events:
                publish(self.exchange, routing_key, body, _properties(event_id))
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

    def _defer(self, conn: Connection) -> bool:
        if not self.settings.relay_defer_max_s or not self.pressure.available:
            return False
        pressure = self.pressure.since_last()
        if pressure < CONTENDED:
            return False  # the common case: no query
        now = dt.datetime.now(dt.UTC)
        return should_defer(
            pressure, outbox.oldest_unpublished(conn), now, self.settings.relay_defer_max_s
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
        _log_published(flight.batch.units, flight.started)
        self._later(self.settings.fault_relay_batch_pause_s, self._tick)

    def _abandon(self) -> None:
        flight, self.inflight = self.inflight, None
        if flight is not None:
            self.connection.ioloop.remove_timeout(flight.deadline)
            try:
                flight.conn.rollback()
                flight.conn.close()
            except _DB_ERRORS:
                pass  # the connection is gone; so is its transaction


def _properties(event_id: str) -> pika.BasicProperties:
    return pika.BasicProperties(
        message_id=event_id, delivery_mode=2, content_type="application/json"
    )


class Relay:
    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine
        self.pressure = CpuPressure()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            failure = _Session(self.settings, self.engine, stop, self.pressure).run()
            if failure is not None and not stop.is_set():
                # Unmarked events stay in the outbox; try again after a pause.
                log.warning("relay paused: %s", failure)
                stop.wait(1.0)


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
