"""What waits in the queues: one reading for backpressure, the dashboard and /metrics.

Depth is RabbitMQ's count of ready messages, read with passive declares on a
short-lived connection at most every ``refresh_s``. Backpressure (docs/api.md#submitting-a-batch,
docs/operations.md#intake-and-chunking) compares the ``fast_path`` and ``compute_heavy`` queues
(every lane of a quorum tier) together with ``SETTLEQ_MAX_QUEUE_DEPTH``: a 429
costs a producer a retry, never a lost or half-accepted batch. The delay queues
(``.DQ``: retries waiting for their backoff) are shown too but do not count
towards it.

Oldest-message age: AMQP does not expose it. The proxy is the age of the
oldest accepted chunk that has no processed marker yet (stored when its
message was published, marked when it settled), looking back at most
``AGE_LOOKBACK`` (so the age is capped there). The database cannot tell which
tier such a chunk waits in, so each queue holding messages reports that age
(an upper bound for each), and an empty queue reports 0.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass

import pika
import pika.exceptions
from sqlalchemy import Engine

from shared.adapters.db.stats import oldest_unsettled_chunk
from shared.adapters.rabbitmq.broker import connection_parameters
from shared.adapters.rabbitmq.logs import attempts_reported_by_caller, probing_for_queues
from shared.config.settings import Settings
from shared.domain.pipeline.queues import DELAY_SUFFIX, FAMILIES

AGE_LOOKBACK = dt.timedelta(hours=1)


@dataclass(frozen=True)
class QueueReading:
    queue: str  # the full RabbitMQ name, e.g. ``settleq.fast_path.DQ``
    family: str  # fast_path or compute_heavy
    delayed: bool  # a delay queue (retries waiting for their backoff)
    depth: int  # ready messages
    oldest_age_s: float | None  # None when the database could not be read


class QueueStats:
    def __init__(self, settings: Settings, engine: Engine, refresh_s: float = 0.5) -> None:
        self._settings = settings
        self._engine = engine
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._depths: dict[str, int] = {}
        self._names = [
            (family, delayed, queue + (DELAY_SUFFIX if delayed else ""))
            for family in FAMILIES
            for queue in settings.queues_of(family)
            for delayed in (False, True)
        ]

    def depths(self) -> dict[str, int]:
        """Ready messages per queue name; raises the broker's error when it is down."""
        with self._lock:
            if time.monotonic() - self._read_at >= self._refresh_s:
                self._depths = self._read()
                self._read_at = time.monotonic()
            return dict(self._depths)

    def current(self) -> int:
        """Messages waiting in the main queues together (what backpressure limits)."""
        depths = self.depths()
        return sum(depths[name] for _, delayed, name in self._names if not delayed)

    def readings(self) -> list[QueueReading]:
        """Depth and oldest-message age per queue (see the module's note on the age)."""
        depths = self.depths()
        age: float | None = 0.0
        if any(depths.values()):
            try:
                age = self.oldest_age_s()
            except Exception:
                age = None  # the depths still stand; the age is unknown
        return [
            QueueReading(name, family, delayed, depths[name], age if depths[name] else 0.0)
            for family, delayed, name in self._names
        ]

    def oldest_age_s(self) -> float:
        now = dt.datetime.now(dt.UTC)
        with self._engine.connect() as conn:
            oldest = oldest_unsettled_chunk(conn, now - AGE_LOOKBACK)
        return 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())

    def _read(self) -> dict[str, int]:
        with attempts_reported_by_caller():  # by the dashboard, in one line
            connection = pika.BlockingConnection(
                connection_parameters(self._settings.broker_url, 2)
            )
        try:
            return self._depths_on(connection)
        finally:
            connection.close()

    def _depths_on(self, connection: pika.BlockingConnection) -> dict[str, int]:
        with probing_for_queues():
            depths = {}
            for _, _, name in self._names:
                channel = connection.channel()
                try:
                    frame = channel.queue_declare(name, passive=True)
                    depths[name] = int(frame.method.message_count)
                except pika.exceptions.ChannelClosedByBroker:
                    depths[name] = 0  # not declared yet: nothing waiting in it
                finally:
                    if channel.is_open:
                        channel.close()
            return depths
