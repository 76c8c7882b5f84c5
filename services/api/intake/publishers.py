"""The API's publishing threads: each owns a broker connection and keeps it alive.

A pika ``BlockingConnection`` belongs to the thread that made it and does I/O
only when that thread calls into it. In a ``ThreadPoolExecutor`` an idle
thread waits on its queue forever, so its connection missed its heartbeats,
RabbitMQ dropped it after the heartbeat timeout (60 s), and the next batch
met a dead socket. Here an idle thread wakes well within the timeout and
services its own connection (``shared.adapters.rabbitmq.broker.keep_alive``).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, TypeVar

from dramatiq.brokers.rabbitmq import RabbitmqBroker

from shared.adapters.rabbitmq.broker import drop_connection, heartbeat_s, keep_alive
from shared.adapters.rabbitmq.logs import attempts_reported_by_caller

log = logging.getLogger("settleq.api")
T = TypeVar("T")
R = TypeVar("R")
_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


class Publishers:
    def __init__(self, broker: RabbitmqBroker, threads: int, name: str = "publish") -> None:
        self._broker = broker
        # Four wake-ups per timeout: a heartbeat is sent at least every half of it.
        self._idle_s = max(0.1, heartbeat_s(broker) / 4)
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        future: Future[R] = Future()
        self._work.put((future, fn, args))
        return future

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``fn`` over ``items`` on the publishing threads, in order; raises the first error."""
        futures = [self.submit(fn, item) for item in items]
        return [f.result() for f in futures]

    def shutdown(self) -> None:
        """Finish queued work, then each thread closes its own connection."""
        for _ in self._threads:
            self._work.put(None)
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        # A failed connection attempt is reported by the request it fails (a
        # 503's one line) or by _keep_alive: not by pika's records and traceback.
        with attempts_reported_by_caller():
            self._serve()

    def _serve(self) -> None:
        while True:
            try:
                work = self._work.get(timeout=self._idle_s)
            except queue.Empty:
                self._keep_alive()
                continue
            if work is None:
                drop_connection(self._broker)
                return
            future, fn, args = work
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the caller, who decides
                    future.set_exception(exc)

    def _keep_alive(self) -> None:
        # A publishing thread must never die: the futures queued for it would never finish.
        try:
            keep_alive(self._broker)
        except Exception as exc:
            log.warning("could not service a broker connection: %s", type(exc).__name__)
            drop_connection(self._broker)
