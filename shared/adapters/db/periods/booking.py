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
"""

from __future__ import annotations

from sqlalchemy import Connection

# The booking lock's two keys ('settleq' / 'period' is no number anyone else picks).
_KEYS = "1936028001, 1885696617"
_SHARE = f"SELECT pg_advisory_xact_lock_shared({_KEYS})"
_CUT = f"SELECT pg_advisory_xact_lock({_KEYS})"
_OPEN = "SELECT name FROM periods WHERE status = 'open'"


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
    """Take the booking lock alone: returns once no transaction books rows, and
    holds every other one back until this one ends (the close)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(_CUT)
