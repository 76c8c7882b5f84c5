"""Booking: which period a transaction's ledger rows go in, and the close's cut
(docs/architecture.md#booking-periods-and-the-close).

A transaction that writes ledger rows first *shares* the booking lock, then
reads the open period, and books every row it writes in it. The close takes
the lock *exclusively*: it waits until every transaction sharing it has
committed (or rolled back), and a transaction asking for it meanwhile waits
behind the close (PostgreSQL queues a lock's requests in order). So every row
booked in a period committed before its close, none is booked in it after,
and the ids of a period's rows all come before the next period's.

On PostgreSQL the lock is an advisory transaction lock of the two-key form,
which never meets the lineage locks' one-key form (ledger/priors.py); taken
before them, as they may wait on each other in no other order. The period is
read by the statement after the lock is granted, whose snapshot then sees the
close that went before. On SQLite a writing transaction holds the database's
one write lock from its first statement (``BEGIN IMMEDIATE``): the close is
one such transaction, and the cut holds with nothing more.

A close must never stop the rest of settlement (``cut_within``). PostgreSQL
queues a lock's requests in order, so while a close *waits* for the lock alone,
every later booking waits behind it: one stuck transaction holding the lock
shared (a worker stopped mid-settle) would stop every partition. So the close
asks for the lock only for a moment at a time (``ATTEMPT_S`` at first), and
after an attempt that timed out it asks again only once the transactions it
found holding the lock have ended, watching them from outside meanwhile
without asking for anything. A stuck transaction never ends: it holds bookings
back for one attempt at most, and the close gives up at its deadline, having
cut nothing, naming what it waited on. Slow transactions do end: each attempt
they outlasted doubles the next one's length, so on a loaded machine, where a
unit's transaction can take longer than an attempt, the close still gets its
moment (a stream of bookings cannot starve it) instead of timing out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import Connection, exc

# The booking lock's two keys ('settleq' / 'period' is no number anyone else picks).
_KEYS = "1936028001, 1885696617"
_SHARE = f"SELECT pg_advisory_xact_lock_shared({_KEYS})"
_CUT = f"SELECT pg_advisory_xact_lock({_KEYS})"
_OPEN = "SELECT name FROM periods WHERE status = 'open'"
# The transactions holding the lock, other than this one, oldest first. pg_locks
# is live; pg_stat_activity is read once a transaction unless cleared.
_HOLDERS = f"""
SELECT l.virtualtransaction, l.pid, a.application_name,
       coalesce(a.client_hostname, host(a.client_addr), 'local socket'),
       extract(epoch FROM now() - coalesce(a.xact_start, now()))::float8
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.pid <> pg_backend_pid()
  AND (l.classid, l.objid, l.objsubid) = ({_KEYS}, 2)
ORDER BY a.xact_start NULLS LAST
"""
# How long the first attempt at the lock holds later bookings back, at most.
ATTEMPT_S = 0.5
# How often the holders are looked at between attempts.
POLL_S = 0.05
_LOCK_NOT_AVAILABLE = "55P03"


def share(conn: Connection) -> None:
    """Share the booking lock, before this transaction writes or locks anything
    else: a close waits for the transaction to end."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(_SHARE)


def open_period(conn: Connection) -> str:
    """The open period's name (read after ``share`` or ``cut``)."""
    name = conn.exec_driver_sql(_OPEN).scalar()
    if name is None:
        raise RuntimeError("no booking period is open: run `settleq migrate`")
    return str(name)


def book(conn: Connection) -> str:
    """``share``, then ``open_period``: the period this transaction's rows go in."""
    share(conn)
    return open_period(conn)


def cut(conn: Connection) -> None:
    """Take the booking lock alone, waiting as long as it takes: returns once no
    transaction books rows, and holds every other one back until this one ends
    (and, while it waits, every booking asked for after it). A test's way to
    hold settlement still; a close uses ``cut_within``."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(_CUT)


@dataclass(frozen=True)
class Holder:
    """A transaction holding the booking lock: its backend, the process that
    named the connection (``application_name``), its host, and how long the
    transaction has run."""

    pid: int
    process: str
    host: str
    seconds: float

    def __str__(self) -> str:
        process = self.process or "a process that gave no application_name"
        return (
            f"{process} (PostgreSQL backend {self.pid}) on {self.host},"
            f" in its transaction for {self.seconds:.1f} s"
        )


class CutWaiting(Exception):
    """The booking lock was not had in time: transactions booking into the
    period are still open (409 ``close_waiting``). Nothing was cut."""

    def __init__(self, waited_s: float, holders: list[Holder]) -> None:
        self.waited_s = waited_s
        self.holders = holders
        named = "; ".join(str(h) for h in holders[:3])
        more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
        super().__init__(
            f"gave up after {waited_s:.1f} s waiting for transactions that booked into"
            f" the period to end: {named or 'none left'}{more}; nothing was cut"
        )


def cut_within(conn: Connection, wait_s: float) -> None:
    """``cut``, but never stopping the rest of settlement for longer than one
    attempt (see the module's docstring), and giving up with ``CutWaiting``
    after ``wait_s``. Call it first in its transaction: an attempt that timed
    out is rolled back to a savepoint."""
    if conn.dialect.name != "postgresql":
        return  # SQLite: BEGIN IMMEDIATE took the one write lock already
    started = time.monotonic()
    deadline = started + wait_s
    waited_on: set[str] = set()
    attempt_s = ATTEMPT_S
    while True:
        holding = _holders(conn)
        if not waited_on.intersection(h[0] for h in holding):
            if _attempt(conn, min(attempt_s, max(deadline - time.monotonic(), 0.01))):
                return
            # Outlasted by what held the lock: asked again once that has ended
            # (never, if it is stuck), for longer, as it was slow.
            attempt_s *= 2
            holding = _holders(conn)
            waited_on = {h[0] for h in holding}
        if time.monotonic() >= deadline:
            holders = [Holder(h[1], h[2] or "", h[3], h[4]) for h in holding]
            raise CutWaiting(time.monotonic() - started, holders)
        time.sleep(POLL_S)


def _holders(conn: Connection) -> list[tuple[str, int, str | None, str, float]]:
    conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
    return [tuple(r) for r in conn.exec_driver_sql(_HOLDERS)]


def _attempt(conn: Connection, within_s: float) -> bool:
    """Ask for the lock alone for at most ``within_s``: whether it was had."""
    savepoint = conn.begin_nested()
    try:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(within_s * 1000)}ms'")
        conn.exec_driver_sql(_CUT)
    except exc.OperationalError as error:
        if getattr(error.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
            raise
        savepoint.rollback()  # the SET LOCAL goes with it
        return False
    # What the close does next waits as long as it must (its rows, no bookings).
    conn.exec_driver_sql("SET LOCAL lock_timeout = DEFAULT")
    savepoint.commit()
    return True
