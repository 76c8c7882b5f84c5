"""The close of a period (docs/architecture.md#booking-periods-and-the-close).

Two transactions. The *cut* takes the booking lock alone (booking.py), so it
begins once every transaction booking into the period has committed, closes
the period, opens the next and records the ledger's last id; settlement waits
for it only that long. It never waits for a stuck transaction at the cost of
the others' bookings (``booking.cut_within``), and gives up, cutting nothing,
after ``SETTLEQ_CLOSE_WAIT_S``. Then ``finalise`` sums the closed period, which can no
longer change: its balances carried forward, its totals, what it carries over,
the accounts its journal is made with and the journal's SHA-256, and writes
the ``period.closed`` event to the outbox, all in one transaction. A process
that dies between the two leaves a closed period not yet summed: whoever reads
it next (the close repeated, ``GET /v1/periods``, its journal) sums it then.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, Engine, func, insert, select, update

from shared.adapters.db.bulk import insert_rows
from shared.adapters.db.operators import audit
from shared.adapters.db.periods import booking, counterparties, sums
from shared.adapters.db.periods.tables import CLOSED, ENDED, OPEN, period_balances, periods
from shared.adapters.db.tables import dead_letters, ledger_entries, outbox
from shared.adapters.db.types import utc
from shared.domain import periods as domain
from shared.domain.kinds import shown
from shared.domain.money import ZERO
from shared.domain.period_dates import Calendar
from shared.domain.pipeline.events import PERIOD_CLOSED
from shared.wire.times import iso


class PeriodNotOpen(Exception):
    """The period named is not the open one (409 ``period_not_open``)."""

    def __init__(self, named: str, open_now: str) -> None:
        super().__init__(f"{named} is not the open period: {open_now} is")
        self.open_now = open_now


class PeriodNameUsed(Exception):
    """The next period's name is taken (422 ``period_name_used``)."""


class PeriodNotEnded(Exception):
    """A dated period is closed once it has ended, not before (409 ``period_not_ended``)."""

    def __init__(self, period: str, ends_at: dt.datetime) -> None:
        super().__init__(
            f"{period} is a dated period: it ends by itself at {iso(ends_at)},"
            " and can be closed once it has ended"
        )
        self.ends_at = ends_at


class NextNotOpened(Exception):
    """An ended period's ``next`` named another period than its cut opened
    (409 ``period_next_mismatch``)."""


class EarlierNotClosed(Exception):
    """An ended period is closed after the periods before it (409 ``earlier_period_not_closed``)."""


class NextRequired(Exception):
    """Closing an open (manual) period opens ``next``: it must be named (422 ``next_required``)."""


@dataclass(frozen=True)
class Closed:
    """A close's answer: the period as it is now, and whether this request closed it."""

    name: str
    created: bool


def close(
    engine: Engine,
    period: str,
    next_name: str | None,
    note: str | None,
    actor: str,
    how: domain.Journaling,
    wait_s: float,
    calendar: Calendar | None = None,
) -> Closed:
    """Close ``period`` and open ``next_name``. The same close again answers
    as the first did (``created`` False); another period than the open one is
    ``PeriodNotOpen``, a name already used ``PeriodNameUsed``; transactions
    booking into the period still open after ``wait_s`` are
    ``booking.CutWaiting``, and nothing is cut. An ended (dated) period is
    only made final (``close_ended``); an open dated one is ``PeriodNotEnded``.
    With dated periods configured (``calendar``), a manual period closed into
    the name the calendar gives today opens that period dated."""
    ended = _ended(engine, period)
    if ended is not None:
        created = close_ended(engine, ended, next_name, note, actor)
        # Its balances are carried forward from the period before's: summed
        # first if that one's close was cut short.
        before = _previous_name(engine, ended)
        if before is not None:
            finalise(engine, before, how)
        finalise(engine, period, how)
        return Closed(period, created)
    with engine.begin() as conn:
        booking.cut_within(conn, wait_s)
        row = conn.execute(select(periods).where(periods.c.name == period)).first()
        if row is not None and row.status == OPEN and row.ends_at is not None:
            raise PeriodNotEnded(period, utc(row.ends_at))
        if row is not None and row.status == OPEN and next_name is None:
            raise NextRequired(f"closing {period} opens the next period: name it in next")
        if row is not None and row.status == CLOSED and row.next == next_name:
            created = False
        elif row is None or row.status != OPEN or next_name is None:
            raise PeriodNotOpen(period, booking.open_period(conn))
        else:
            taken = conn.execute(select(periods.c.name).where(periods.c.name == next_name)).first()
            if taken is not None:
                raise PeriodNameUsed(f"a period named {next_name} exists already")
            _cut(conn, row, next_name, note, actor)
            _dated_next(conn, next_name, calendar)
            created = True
    finalise(engine, period, how)
    return Closed(period, created)


def _ended(engine: Engine, period: str) -> Any:
    """The row of ``period`` if a cut ended it (closed since, too, if it was
    ended first and this is the same close again), else None."""
    with engine.connect() as conn:
        row = conn.execute(select(periods).where(periods.c.name == period)).first()
    if row is None or row.ended_at is None or row.status == OPEN:
        return None
    return row


def _previous_name(engine: Engine, row: Any) -> str | None:
    with engine.connect() as conn:
        before = previous(conn, row)
    return None if before is None else str(before.name)


def close_ended(
    engine: Engine, row: Any, next_name: str | None, note: str | None, actor: str
) -> bool:
    """Make an ended period final: whether this call closed it (False: the
    same close again). It cuts nothing: its cut at ``ends_at`` did."""
    if next_name is not None and next_name != row.next:
        raise NextNotOpened(
            f"{row.name} ended at its ends_at into {row.next}: next may only name that"
        )
    if row.status == CLOSED:
        return False
    with engine.begin() as conn:
        earlier = conn.execute(
            select(periods.c.name)
            .where(periods.c.seq < row.seq, periods.c.status != CLOSED)
            .order_by(periods.c.seq)
            .limit(1)
        ).scalar()
        if earlier is not None:
            raise EarlierNotClosed(f"{earlier} ended before {row.name}: close it first")
        changed = conn.execute(
            update(periods)
            .where(periods.c.name == row.name, periods.c.status == ENDED)
            .values(status=CLOSED, closed_at=dt.datetime.now(dt.UTC), closed_by=actor, note=note)
        ).rowcount
        if changed != 1:
            return False  # another request closed it first
        audit.record(conn, actor, "period.close", row.name, {"next": row.next, "note": note})
    return True


def _dated_next(conn: Connection, next_name: str, calendar: Calendar | None) -> None:
    """Dates the period a manual close opened, when dated periods are
    configured and it is named as the calendar names today's period: the
    operator's way from manual periods to dated ones."""
    if calendar is None:
        return
    today = calendar.containing(dt.datetime.now(dt.UTC))
    if today.name == next_name:
        conn.execute(
            update(periods)
            .where(periods.c.name == next_name)
            .values(starts_at=today.starts_at, ends_at=today.ends_at)
        )


def _cut(conn: Connection, row: Any, next_name: str, note: str | None, actor: str) -> None:
    now = dt.datetime.now(dt.UTC)
    # Every row booked in the period has committed (the lock), and none of a
    # later period has an id yet: the period's rows end here.
    last_id = conn.execute(select(func.max(ledger_entries.c.id))).scalar() or row.after_id
    conn.execute(
        update(periods)
        .where(periods.c.name == row.name)
        .values(
            status=CLOSED,
            closed_at=now,
            closed_by=actor,
            note=note,
            next=next_name,
            last_id=last_id,
        )
    )
    conn.execute(
        insert(periods).values(
            name=next_name, seq=row.seq + 1, status=OPEN, opened_at=now, after_id=last_id
        )
    )
    audit.record(conn, actor, "period.close", row.name, {"next": next_name, "note": note})


def finalise(engine: Engine, period: str, how: domain.Journaling) -> None:
    """Sum a closed period once (see the module's docstring); nothing when it is summed."""
    with engine.begin() as conn:
        query = select(periods).where(periods.c.name == period)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()  # one finaliser at a time
        row = conn.execute(query).first()
        if row is None or row.status != CLOSED or row.journal_sha256 is not None:
            return
        booked_on = domain.accounts(how.accounts)
        tally = sums.tally(conn, in_period(row))
        balances = _carried_forward(conn, row, tally)
        totals = sums.totals(balances)
        carried = _carried(conn, row, balances)
        heading = heading_of(conn, row, balances, how)
        made = domain.headed(domain.entries(period, balances, booked_on), heading)
        csv = domain.journal_csv(made)
        digest = domain.sha256(csv)
        rows = sum(rows for rows, _ in tally.outcomes.values())
        conn.execute(
            update(periods)
            .where(periods.c.name == period)
            .values(
                rows=rows,
                totals=totals,
                carried=carried,
                accounts={k: v.stored() if v else None for k, v in booked_on.items()},
                made_with=heading.stored(),
                journal_sha256=digest,
            )
        )
        event = {
            "type": PERIOD_CLOSED,
            "period": period,
            "next": row.next,
            "closed_at": iso(row.closed_at),
            "rows": rows,
            "totals": [{k: t[k] for k in ("kind", "outcome", "currency", "delta")} for t in totals],
            "journal_sha256": digest,
        }
        conn.execute(
            insert(outbox).values(
                type=PERIOD_CLOSED,
                event_id=f"{PERIOD_CLOSED}:{period}",
                routing_key=PERIOD_CLOSED,
                body=json.dumps(event, separators=(",", ":")),
                created_at=dt.datetime.now(dt.UTC),
            )
        )


def heading_of(
    conn: Connection, row: Any, balances: list[domain.Balance] | None, how: domain.Journaling
) -> domain.Heading:
    """What the period's journal lines carry: as its close fixed them, else
    (being closed, or a preview) made now from ``how`` and the counterparties
    of the partitions in ``balances`` (None: of every partition)."""
    if row.made_with is not None:
        return domain.Heading.from_stored(row.made_with)
    date = domain.accounting_date(
        utc(row.ends_at) if row.ends_at is not None else None,
        utc(row.closed_at) if row.closed_at else None,
        dt.datetime.now(dt.UTC),
        ZoneInfo(how.tz),
    )
    named = counterparties.named(
        conn, None if balances is None else {b.partition_key for b in balances}
    )
    return how.heading(date, named)


def in_period(row: Any, table: Any = ledger_entries) -> list[Any]:
    """The filter of a period's ledger rows (of ``table``, the ledger or an
    alias of it): its id range (the primary key's index finds it), and its name."""
    where = [table.c.id > row.after_id, table.c.period == row.name]
    if row.last_id is not None:
        where.append(table.c.id <= row.last_id)
    return where


def previous(conn: Connection, row: Any) -> Any:
    """The period before ``row``, or None for the first."""
    return conn.execute(select(periods).where(periods.c.seq == row.seq - 1)).first()


def _carried_forward(conn: Connection, row: Any, tally: sums.Tally) -> list[domain.Balance]:
    """The closed period's balances, written to ``period_balances``: every
    (kind, partition_key) of the period before, and every one with activity."""
    found: dict[sums.Group, domain.Balance] = {}
    before = previous(conn, row)
    if before is not None:
        for b in conn.execute(
            select(period_balances).where(period_balances.c.period == before.name)
        ):
            found[(b.kind, b.partition_key)] = carried_forward(b)
    for group, activity in tally.groups.items():
        balance = found.get(group)
        if balance is None:
            balance = found[group] = domain.Balance(*group, opening=ZERO)
        balance.activity = activity
    move_disputes(conn, row, sums.Scope(), found)
    sums.priced(conn, found.values(), sums.Scope())
    insert_rows(
        conn,
        period_balances,
        [
            {
                "period": row.name,
                "kind": b.kind,
                "partition_key": b.partition_key,
                "rows": b.activity.rows,
                "opening": b.opening,
                "posted": b.activity.posted,
                "disputed": b.activity.disputed,
                "repriced": b.activity.repriced,
                "resolved": b.activity.resolved,
                "deducted": b.activity.deducted,
                "written_off": b.activity.written_off,
                "deducted_rows": b.activity.deducted_rows,
                "written_off_rows": b.activity.written_off_rows,
                "closing": b.closing,
                "in_dispute_count": b.in_dispute_count,
                "in_dispute_variance": b.in_dispute_variance,
                "outcomes": b.activity.stored_outcomes(),
            }
            for b in sorted(found.values(), key=lambda b: (b.kind, b.partition_key))
        ],
    )
    return list(found.values())


def carried_forward(b: Any) -> domain.Balance:
    """A ``period_balances`` row as the next period's opening: its closing, and
    the disputes open at its close."""
    return domain.Balance(
        b.kind,
        b.partition_key,
        b.closing,
        in_dispute_count=b.in_dispute_count,
        in_dispute_variance=b.in_dispute_variance,
    )


def move_disputes(
    conn: Connection, row: Any, scope: sums.Scope, found: dict[sums.Group, domain.Balance]
) -> None:
    """The disputes open at the end of the period ``row`` (at its close, or
    now for the open one): those carried into ``found``, less those its rows
    settled, plus those it opened and did not."""
    settled, opened = sums.disputes_moved(
        conn, lambda table: in_period(row, table), row.after_id, scope
    )
    for group, (count, variance) in settled.items():
        balance = found.get(group)
        if balance is not None:
            balance.in_dispute_count -= count
            balance.in_dispute_variance -= variance
    for group, (count, variance) in opened.items():
        balance = found.get(group)
        if balance is None:
            balance = found[group] = domain.Balance(*group, opening=ZERO)
        balance.in_dispute_count += count
        balance.in_dispute_variance += variance


def _carried(conn: Connection, row: Any, balances: list[domain.Balance]) -> dict[str, Any]:
    """What a closed period carries over: the disputes open at its close, per
    kind and currency, and the dead letters waiting, per kind."""
    disputes: dict[tuple[str, str], tuple[int, Decimal]] = {}
    for b in balances:
        if b.in_dispute_count:
            count, variance = disputes.get((b.kind, b.currency), (0, ZERO))
            disputes[(b.kind, b.currency)] = (
                count + b.in_dispute_count,
                variance + b.in_dispute_variance,
            )
    waiting = conn.execute(
        select(dead_letters.c.kind, func.count(), func.sum(dead_letters.c.lines))
        .where(dead_letters.c.status == "dead")
        .group_by(dead_letters.c.kind)
        .order_by(dead_letters.c.kind)
    ).all()
    return {
        "disputes": [
            {"kind": kind, "currency": currency, "count": count, "variance": shown(kind, variance)}
            for (kind, currency), (count, variance) in sorted(disputes.items())
        ],
        "dead_letters": [
            {"kind": kind, "count": count, "lines": int(lines or 0)}
            for kind, count, lines in waiting
        ],
    }
