"""Dated periods' cut at ``ends_at`` (docs/architecture.md#dated-periods-the-cut-at-ends_at).

The cut is the close's cut (booking.py): the booking lock taken alone with
``cut_within``, so every transaction that booked into the period committed
before it, and none books into it after. It ends the open period (``ended``,
its ``last_id``, ``ended_at``) and opens the next by the calendar, starting at
the old ``ends_at``. The close of an ended period later only makes it final.

Every process that books or serves (the API, the relay) runs a ``Cutter``: a
thread asleep until the open period's ``ends_at``. At ``ends_at`` the one that
has the lease (a PostgreSQL session advisory lock; SQLite has one process)
cuts; the others wait for it. The lease only spares them the contention: the
cut's transaction is the guarantee, ending the period only while it is still
open, so two cutters never cut twice. A cut missed while nothing ran is made
by ``catch_up`` when a process starts, before it books: each missed period in
turn, those after the first empty, so the periods stay the calendar's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from shared.adapters.db.operators import audit
from shared.adapters.db.periods import booking
from shared.adapters.db.periods.tables import ENDED, OPEN, periods
from shared.adapters.db.tables import ledger_entries
from shared.adapters.db.types import utc
from shared.domain.period_dates import Calendar, like
from shared.wire.times import iso

log = logging.getLogger("settleq.periods")

# Who the audit log says made a cut: settleq itself, at the calendar's word.
ACTOR = "settleq"
# The lease's two keys: 'settleq' / 'cutter', apart from the booking lock's.
_LEASE = "1936028001, 1668641893"
# How often a cutter reads the open period again while its end is far.
POLL_S = 2.0


def _open(conn: Connection) -> Any:
    return conn.execute(select(periods).where(periods.c.status == OPEN)).first()


def due_at(engine: Engine) -> dt.datetime | None:
    """The open period's ``ends_at``: None for a manual period."""
    with engine.connect() as conn:
        ends = conn.execute(select(periods.c.ends_at).where(periods.c.status == OPEN)).scalar()
    return None if ends is None else utc(ends)


def cut_due(engine: Engine, calendar: Calendar | None, tz: str, wait_s: float) -> list[str]:
    """End the open period if its ``ends_at`` has passed, and every period due
    after it: the names ended (none when nothing was due, or another process
    cut first). ``calendar`` makes the next periods (None: the calendar the
    ended period was made by, in ``tz``). Raises ``booking.CutWaiting`` when
    transactions booking into the period stay open past ``wait_s``: nothing
    is cut, and the cut is to be asked again."""
    ended: list[str] = []
    with engine.begin() as conn:
        # Asked first in its transaction, as cut_within must be: its reads
        # then see whatever cut another process made before.
        booking.cut_within(conn, wait_s)
        row = _open(conn)
        now = dt.datetime.now(dt.UTC)
        if row is None or row.ends_at is None or utc(row.ends_at) > now:
            return ended
        # Every row booked in the period has committed (the lock), and none of
        # a later period has an id yet: the period's rows end here.
        last_id = conn.execute(select(func.max(ledger_entries.c.id))).scalar() or row.after_id
        while row.ends_at is not None and utc(row.ends_at) <= now:
            made_by = calendar or like(row.name, utc(row.starts_at), utc(row.ends_at), tz)
            following = made_by.after(utc(row.ends_at))
            name = _free_name(conn, following.name)
            changed = conn.execute(
                update(periods)
                .where(periods.c.name == row.name, periods.c.status == OPEN)
                .values(status=ENDED, ended_at=now, last_id=last_id, next=name)
            ).rowcount
            if changed != 1:
                break  # cut by another process meanwhile: its transaction stands
            conn.execute(
                insert(periods).values(
                    name=name,
                    seq=row.seq + 1,
                    status=OPEN,
                    opened_at=now,
                    after_id=last_id,
                    starts_at=following.starts_at,
                    ends_at=following.ends_at,
                )
            )
            audit.record(
                conn,
                ACTOR,
                "period.end",
                row.name,
                {"next": name, "ends_at": iso(utc(row.ends_at)), "last_id": last_id},
            )
            ended.append(row.name)
            row = _open(conn)
    for name in ended:
        log.info("period %s ended at its ends_at; booking goes on in the next", name)
    return ended


def _free_name(conn: Connection, name: str) -> str:
    """``name``, or, if an operator used it already, ``name.2``, ``name.3``...:
    a cut must not fail for want of a name."""
    taken = set(
        conn.execute(select(periods.c.name).where(periods.c.name.like(f"{name}%"))).scalars()
    )
    found, n = name, 1
    while found in taken:
        n += 1
        found = f"{name}.{n}"
    return found


@contextlib.contextmanager
def lease(engine: Engine) -> Iterator[bool]:
    """Whether this process is the one to cut now (held while the block runs):
    a PostgreSQL session advisory lock, let go when the block ends or with
    the connection when the process dies. SQLite's one process always is."""
    if engine.dialect.name != "postgresql":
        yield True
        return
    with engine.connect() as conn:
        got = bool(conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({_LEASE})").scalar())
        conn.commit()
        try:
            yield got
        finally:
            if got:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_LEASE})")
                conn.commit()


def catch_up(
    engine: Engine,
    calendar: Calendar | None,
    tz: str,
    wait_s: float,
    stop: threading.Event | None = None,
    attempts: int | None = None,
) -> list[str]:
    """Make every cut that is due (missed while nothing ran), before this
    process books anything: the periods ended. Retries a cut that gave up
    (``CutWaiting``) until it is made, ``stop`` is set or ``attempts`` gave
    up; database errors are raised."""
    ended: list[str] = []
    while (stop is None or not stop.is_set()) and attempts != 0:
        ends = due_at(engine)
        if ends is None or ends > dt.datetime.now(dt.UTC):
            return ended
        with lease(engine) as mine:
            if not mine:
                # Another process is cutting: its cut is this one's.
                (stop or threading.Event()).wait(0.05)
                continue
            try:
                ended += cut_due(engine, calendar, tz, wait_s)
            except booking.CutWaiting as exc:
                log.warning("the cut at the period's end waits: %s; asking again", exc)
                attempts = None if attempts is None else attempts - 1
    return ended


def start(engine: Engine, calendar: Calendar | None, tz: str, wait_s: float) -> Cutter:
    """A serving process's start: the cuts missed while it was down, made
    before it serves (one try: a database down or a cut waiting on a stuck
    transaction is the cutter's to finish), then its ``Cutter``."""
    try:
        catch_up(engine, calendar, tz, wait_s, attempts=1)
    except SQLAlchemyError as exc:
        why = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        log.warning("missed period cuts not made at start (%s): the cutter makes them", why)
    return Cutter(engine, calendar, tz, wait_s).start()


class Cutter:
    """A daemon thread that makes the open period's cut at its ``ends_at``."""

    def __init__(self, engine: Engine, calendar: Calendar | None, tz: str, wait_s: float) -> None:
        self.engine = engine
        self.calendar = calendar
        self.tz = tz
        self.wait_s = wait_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="period-cutter", daemon=True)

    def start(self) -> Cutter:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

    def run(self) -> None:
        said: str | None = None
        while not self.stop.is_set():
            try:
                ends = due_at(self.engine)
                now = dt.datetime.now(dt.UTC)
                if ends is None or ends > now:
                    # Woken at ends_at itself when it is near; read again
                    # meanwhile, as a close may open another period.
                    left = POLL_S if ends is None else (ends - now).total_seconds()
                    self.stop.wait(min(left, POLL_S))
                    continue
                catch_up(self.engine, self.calendar, self.tz, self.wait_s, self.stop)
                said = None
            except SQLAlchemyError as exc:
                why = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
                if why != said:
                    log.warning("the period cutter cannot read the database (%s)", why)
                    said = why
                self.stop.wait(1.0)
