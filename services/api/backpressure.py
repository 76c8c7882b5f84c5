"""Backpressure (SPEC §3.2, §7): refuse new batches while the queues are full.

The depth is the number of messages waiting in the ``fast_path`` and
``compute_heavy`` queues together, read from RabbitMQ at most every
``refresh_s`` (a passive declare on a short-lived connection): a 429 costs a
producer a retry, never a lost or half-accepted batch.
"""

from __future__ import annotations

import threading
import time

import pika
import pika.exceptions

from shared.messages import COMPUTE_HEAVY, FAST_PATH
from shared.settings import Settings


class QueueDepth:
    def __init__(self, settings: Settings, refresh_s: float = 0.5) -> None:
        self._settings = settings
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        self._read_at = 0.0
        self._depth = 0

    def current(self) -> int:
        with self._lock:
            if time.monotonic() - self._read_at >= self._refresh_s:
                self._depth = self._read()
                self._read_at = time.monotonic()
            return self._depth

    def _read(self) -> int:
        params = pika.URLParameters(self._settings.broker_url)
        params.connection_attempts = 1
        params.socket_timeout = 2
        connection = pika.BlockingConnection(params)
        try:
            depth = 0
            for family in (FAST_PATH, COMPUTE_HEAVY):
                channel = connection.channel()
                try:
                    frame = channel.queue_declare(self._settings.queue_name(family), passive=True)
                    depth += int(frame.method.message_count)
                except pika.exceptions.ChannelClosedByBroker:
                    pass  # not declared yet: nothing waiting in it
                finally:
                    if channel.is_open:
                        channel.close()
            return depth
        finally:
            connection.close()
