"""A period close's hold on the booking lock, taken from outside the stack: how
a test stops settling workers at the delicate point of the settlement
transaction without any hook in the product.

A settle that writes ledger rows first shares the booking lock, inside its
transaction, with its claims leased in Redis and nothing written yet
(shared/adapters/db/periods/booking.py, ledger/writer.py). A close takes the
lock alone, and every such settle waits behind it until the close ends. So a
test holding the lock (``BookingLock.hold``) keeps every settle of its
database between its claims and its commit, where it can kill the worker
(``SIGKILL``), stop it gracefully (``SIGTERM``) or fail its attempt
transiently (``terminate``: PostgreSQL ends the waiting backend, the worker
sees its connection lost). ``Stalls`` holds the lock again and again, as a
run of closes would, so that a batch drains slowly and faults land mid-stream.

On SQLite the hold is the database's one write lock (``BEGIN IMMEDIATE``),
which a settle waits for in the same place; who waits cannot be seen there.

Which process a waiting backend belongs to: ``Stack`` starts each process with
``PGAPPNAME`` set to its name (libpq's own variable), so PostgreSQL knows its
backends by that name as ``application_name``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, text

from shared.adapters.db.engine import make_engine
from shared.adapters.db.periods import booking

log = logging.getLogger("tests.booking_lock")

# Backends waiting on this one (the holder), and the name their process gave libpq.
_WAITERS = text(
    "SELECT pid, application_name FROM pg_stat_activity"
    " WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
)


class BookingLock:
    """The booking lock of one database, held from a connection of the test's own."""

    def __init__(self, database_url: str) -> None:
        self.engine = make_engine(database_url, pool_size=1)
        self.conn: Connection | None = None

    def hold(self) -> None:
        """Take the lock alone (as a close does); returns once no settle holds it."""
        assert self.conn is None, "held already"
        conn = self.engine.connect()
        conn.begin()
        booking.cut(conn)
        self.conn = conn

    def release(self) -> None:
        """Let every waiting settle go on."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.rollback()
            conn.close()

    @contextmanager
    def held(self) -> Iterator[BookingLock]:
        self.hold()
        try:
            yield self
        finally:
            self.release()

    def waiting(self, name: str | None = None) -> list[int]:
        """The backends waiting for the lock (of the process ``name``, when given)."""
        assert self.conn is not None, "not held"
        # pg_stat_activity is read once a transaction, and this one is long.
        self.conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        rows = self.conn.execute(_WAITERS).all()
        return [pid for pid, app in rows if name is None or app == name]

    def wait_for(self, name: str | None = None, count: int = 1, timeout: float = 60) -> list[int]:
        """Until ``count`` settles (of ``name``) wait for the lock; their backends.
        AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while len(found := self.waiting(name)) < count:
            assert time.monotonic() < deadline, f"{len(found)} of {count} settles reached the lock"
            time.sleep(0.02)
        return found

    def terminate(self, pid: int) -> None:
        """End a waiting backend: its settle loses its connection mid-transaction
        (a transient failure of that attempt), and rolls back."""
        assert self.conn is not None, "not held"
        self.conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    def close(self) -> None:
        self.release()
        self.engine.dispose()

    def __enter__(self) -> BookingLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Stalls:
    """A thread that holds the booking lock ``held_s`` of every ``held_s + free_s``
    seconds, until stopped: settles spend most of their time waiting inside
    their transactions, claims leased. It outlives database restarts (a hold
    that fails is tried again after ``free_s``)."""

    def __init__(self, database_url: str, held_s: float, free_s: float) -> None:
        self.lock = BookingLock(database_url)
        self.held_s, self.free_s = held_s, free_s
        self.stop = threading.Event()
        self.holds = 0
        self.thread = threading.Thread(target=self._run, name="booking-stalls", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.lock.hold()
                self.holds += 1
                self.stop.wait(self.held_s)
            except Exception as exc:  # the database is mid-fault: try again
                log.info("booking lock not held: %s", type(exc).__name__)
            finally:
                try:
                    self.lock.release()
                except Exception:
                    self.lock.conn = None
            self.stop.wait(self.free_s)

    def __enter__(self) -> Stalls:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.lock.close()
