"""One watch of the feed's end per API process, however many consumers wait.

A long poll (``wait``) must not hold a database connection or a thread while
it waits: 200 consumers would take the pool and the threadpool. Waiting
consumers await this watch instead; while any wait, it reads where the feed
ends (one small indexed query) every ``interval`` seconds, and wakes those
behind it, which then read their page.

What makes 200 waiters hear a commit within a second (docs/api.md#the-ledger-feed)
is how few pages they read once woken, each read taking a thread and a
connection in turn:

- the watch reads which partitions, kinds and line references the new units
  hold, and wakes a filter's waiters only when one holds its rows;
- identical waiters (same cursor, filter, scope and limit) woken by the same
  advance share one page read (:meth:`FeedWatch.read`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass
from typing import Any

from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine

from shared.adapters.db.ledger.read import feed
from shared.domain.feed import Position

log = logging.getLogger("settleq.api")

# What one advance may sort by filter: past it the watch wakes every waiter
# rather than read that many rows' keys (a bulk job's units).
_UNITS, _ROWS = 500, 10_000

End = tuple[int, int]  # (xid, unit) of a unit, in feed order
LineKey = tuple[str, str, str]  # (partition_key, kind, line_ref)


@dataclass(frozen=True)
class Filter:
    """A waiter's filter: its partitions (its own, for a producer key), kind
    and line reference; None is any."""

    partitions: frozenset[str] | None = None
    kind: str | None = None
    line_ref: str | None = None

    def matches(self, keys: Collection[LineKey]) -> bool:
        return any(
            (self.partitions is None or p in self.partitions)
            and (self.kind is None or k == self.kind)
            and (self.line_ref is None or ref == self.line_ref)
            for p, k, ref in keys
        )

    @property
    def everything(self) -> bool:
        return self.partitions is None and self.kind is None and self.line_ref is None


EVERYTHING = Filter()


@dataclass
class _Group:
    """The waiters of one filter."""

    since: End | None  # the end when it began: units up to it were not sorted for it
    last: End | None = None  # the newest advance that held its rows
    waiting: int = 0


@dataclass(frozen=True)
class _Advance:
    end: End
    keys: frozenset[LineKey] | None  # what its new units hold; None: not read


class FeedWatch:
    def __init__(self, engine: Engine, interval: float = 0.2) -> None:
        self._engine = engine
        self._interval = interval
        self._end: End | None = None  # the last unit it can give
        self._groups: dict[Filter, _Group] = {}
        self._reads: dict[Hashable, tuple[End, asyncio.Future[Any]]] = {}
        self._waiting = 0
        self._changed: asyncio.Condition | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Consumers waiting now."""
        return self._waiting

    async def wait_past(
        self, position: Position, timeout: float, where: Filter = EVERYTHING
    ) -> End | None:
        """Wait until the feed can give a unit after ``position`` (a consumer's
        cursor after a page with nothing) that may hold rows of ``where``: the
        end it woke at; None after ``timeout`` seconds."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        changed = self._changed
        group = self._groups.get(where)
        if group is None:
            group = self._groups[where] = _Group(since=self._end)
        group.waiting += 1
        self._waiting += 1
        if self._task is None:
            self._task = asyncio.create_task(self._watch())
        try:
            async with asyncio.timeout(timeout), changed:
                await changed.wait_for(lambda: self._beyond(position, group))
            assert self._end is not None
            return self._end
        except TimeoutError:
            return None
        finally:
            self._waiting -= 1
            group.waiting -= 1
            if group.waiting == 0 and self._groups.get(where) is group:
                del self._groups[where]

    async def read(self, key: Hashable, woken: End, page: Callable[[], Any]) -> Any:
        """``page()`` in a thread, or the result of an identical read (same
        ``key``) begun once the watch had seen ``woken``: it has every unit
        the waiter woke for."""
        shared = self._reads.get(key)
        if shared is None or shared[0] < woken:
            started = max(woken, self._end or woken)
            shared = (started, asyncio.ensure_future(run_in_threadpool(page)))
            self._reads[key] = shared
        # One waiter going away (a client that hung up) stops no one else's read.
        return await asyncio.shield(shared[1])

    def _beyond(self, position: Position, group: _Group) -> bool:
        # By unit: a consumer only waits once its page reached the feed's end,
        # its last unit read whole (feed/routes.py reads on from a page cut inside one).
        at = (position.xid, position.unit)
        if self._end is None:
            return False
        if group.since is None or at < group.since:  # units never sorted for it: wake
            return self._end > at
        return group.last is not None and group.last > at

    async def _watch(self) -> None:
        assert self._changed is not None
        try:
            while self._waiting > 0:
                sort = any(not where.everything for where in self._groups)
                try:
                    advance = await run_in_threadpool(self._read, self._end, sort)
                except Exception as exc:  # the database away: consumers time out empty
                    log.warning("ledger feed: its end unreadable (%s)", type(exc).__name__)
                    advance = None
                if advance is not None and advance.end != self._end:
                    self._advance(advance)
                    async with self._changed:
                        self._changed.notify_all()
                await asyncio.sleep(self._interval)
        finally:
            self._task = None
            self._reads.clear()

    def _advance(self, advance: _Advance) -> None:
        for where, group in self._groups.items():
            if group.since is None:
                group.since = advance.end
            elif advance.keys is None or where.matches(advance.keys):
                group.last = advance.end
        self._end = advance.end
        # Reads begun before this advance serve no waiter it wakes.
        self._reads = {k: v for k, v in self._reads.items() if not v[1].done()}

    def _read(self, since: End | None, sort: bool) -> _Advance:
        with self._engine.connect() as conn:
            if since is not None and sort:
                units = feed.units_after(conn, since, _UNITS)
                if not units:
                    return _Advance(since, frozenset())
                ids = [i for _, _, unit_ids in units for i in unit_ids]
                if len(units) < _UNITS and len(ids) <= _ROWS:
                    keys = frozenset(feed.line_keys(conn, ids))
                    return _Advance((units[-1][0], units[-1][1]), keys)
            end = feed.frontier(conn)
        return _Advance((end.xid, end.unit), None)
