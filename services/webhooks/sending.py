"""Where the webhooks process's attempts wait on their endpoints: one event
loop (docs/architecture.md#webhooks). The queue's actor claims a delivery and
signs it on a Dramatiq thread, then hands the POST here and returns, so an
endpoint that hangs for its 10 s holds no thread: hundreds of attempts wait at
once, and a ping to another endpoint is sent as soon as it is handed out.
How many of one endpoint's run at once is the scheduler's to limit (two).
Each result is recorded on a small pool of threads (the database calls are
blocking). An attempt whose process dies is handed out again when its claim's
lease runs out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from services.webhooks.delivery import Started, finish
from services.webhooks.metrics import WebhookMetrics
from shared.adapters.webhook_delivery import deliver_async
from shared.config.settings import Settings

log = logging.getLogger("settleq.webhooks")

# Threads that ask DNS for the loop (getaddrinfo blocks): a name that takes
# long to resolve holds one of them, never the loop.
DNS_THREADS = 16


class Sender:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        metrics: WebhookMetrics,
        recorded: Callable[[], None] = lambda: None,
    ) -> None:
        """``recorded`` is called after each attempt is recorded."""
        self.settings, self.engine, self.metrics = settings, engine, metrics
        self.recorded = recorded
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(
            ThreadPoolExecutor(DNS_THREADS, thread_name_prefix="webhook-dns")
        )
        self.recorder = ThreadPoolExecutor(
            settings.webhook_threads, thread_name_prefix="webhook-record"
        )
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="webhook-sender", daemon=True
        )
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[None]] = set()

    def start(self) -> None:
        self.thread.start()

    def submit(self, started: Started) -> None:
        """Send a claimed delivery and record what came back, without waiting."""
        future = asyncio.run_coroutine_threadsafe(self._send(started), self.loop)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    async def _send(self, started: Started) -> None:
        result = await deliver_async(
            started.claimed.url,
            started.body,
            started.headers,
            allow_private=self.settings.webhook_allow_private,
        )
        await self.loop.run_in_executor(
            self.recorder,
            finish,
            self.settings,
            self.engine,
            self.metrics,
            started.claimed,
            result,
        )
        self.recorded()

    def _done(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)
        if future.cancelled():
            return
        exc = future.exception()
        if isinstance(exc, SQLAlchemyError):
            # The delivery stays pending: handed out again once its lease runs out.
            log.warning("webhook attempt not recorded (%s); retried later", type(exc).__name__)
        elif exc is not None:
            log.error("webhook attempt failed", exc_info=exc)

    def stop(self, timeout_s: float) -> None:
        """Let the attempts under way finish (at most ``timeout_s``), then stop;
        those cut short are sent again once their lease runs out."""
        with self._lock:
            pending = list(self._pending)
        concurrent.futures.wait(pending, timeout=timeout_s)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.recorder.shutdown(wait=False, cancel_futures=True)
