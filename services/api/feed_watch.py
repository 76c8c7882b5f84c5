"""One watch of the feed's end per API process, however many consumers wait.

A long poll (``wait``) must not hold a database connection or a thread while
it waits: 200 consumers would take the pool and the threadpool. Waiting
consumers await this watch instead; while any wait, it reads where the feed
ends (one small indexed query) every ``interval`` seconds, and wakes those
behind it, which then read their page.
"""

from __future__ import annotations

import asyncio
import logging

from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine

from shared.adapters.db.ledger.read import feed
from shared.domain.feed import Position

log = logging.getLogger("settleq.api")


class FeedWatch:
    def __init__(self, engine: Engine, interval: float = 0.2) -> None:
        self._engine = engine
        self._interval = interval
        self._end: tuple[int, int] | None = None  # (xid, unit) of the last unit it can give
        self._waiting = 0
        self._changed: asyncio.Condition | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Consumers waiting now."""
        return self._waiting

    async def wait_past(self, position: Position, timeout: float) -> bool:
        """Wait until the feed can give a unit after ``position`` (a consumer's
        cursor after a page with nothing); False after ``timeout`` seconds."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        changed = self._changed
        self._waiting += 1
        if self._task is None:
            self._task = asyncio.create_task(self._watch())
        try:
            async with asyncio.timeout(timeout), changed:
                await changed.wait_for(lambda: self._beyond(position))
            return True
        except TimeoutError:
            return False
        finally:
            self._waiting -= 1

    def _beyond(self, position: Position) -> bool:
        # By unit: a consumer only waits once its page reached the feed's end,
        # its last unit read whole (feed/routes.py reads on from a page cut inside one).
        return self._end is not None and self._end > (position.xid, position.unit)

    async def _watch(self) -> None:
        assert self._changed is not None
        try:
            while self._waiting > 0:
                try:
                    end = await run_in_threadpool(self._read)
                except Exception as exc:  # the database away: consumers time out empty
                    log.warning("ledger feed: its end unreadable (%s)", type(exc).__name__)
                    end = None
                if end is not None and end != self._end:
                    self._end = end
                    async with self._changed:
                        self._changed.notify_all()
                await asyncio.sleep(self._interval)
        finally:
            self._task = None

    def _read(self) -> tuple[int, int]:
        with self._engine.connect() as conn:
            end = feed.frontier(conn)
        return end.xid, end.unit
