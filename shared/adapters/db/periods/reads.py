"""Reading periods: the list, balances, the journal, its lines and a
partition's statement (docs/api.md#periods-and-the-close).

A closed period's balances are ``period_balances``' (summed at its close);
the open period's are the last closed period's closings plus the open
period's rows, summed when asked. A closed period's journal is made from its
balances with the accounts it was closed with, so it is the same bytes on
every export.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, and_, select

from shared.adapters.db.periods import close as closing
from shared.adapters.db.periods import lines, sums
from shared.adapters.db.periods.tables import CLOSED, ENDED, OPEN, period_balances, periods
from shared.adapters.db.tables import contracts, ledger_entries
from shared.adapters.db.types import utc
from shared.domain import periods as domain
from shared.domain.erp_journal import erp_csv as erp_journal_csv
from shared.domain.money import ZERO


class NoSuchPeriod(LookupError):
    """No period has that name (404 ``period_not_found``)."""


@dataclass(frozen=True)
class Summary:
    """A period as ``GET /v1/periods`` lists it."""

    name: str
    status: str
    opened_at: dt.datetime
    closed_at: dt.datetime | None
    closed_by: str | None
    note: str | None
    next: str | None
    rows: int
    totals: list[dict[str, Any]]
    carried: dict[str, Any] | None
    journal_sha256: str | None
    starts_at: dt.datetime | None = None
    ends_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None


def summaries(engine: Engine, how: domain.Journaling) -> list[Summary]:
    """Every period, newest first; a closed one not yet summed is summed now."""
    with engine.connect() as conn:
        rows = conn.execute(select(periods).order_by(periods.c.seq.desc())).all()
    return [_summed(engine, row, how) for row in rows]


def summary(engine: Engine, name: str, how: domain.Journaling) -> Summary:
    return _summed(engine, period_row(engine, name, how), how)


def _summed(engine: Engine, row: Any, how: domain.Journaling) -> Summary:
    """A period's summary from its row: the open one tallied now, a closed one
    from what its close stored (summed first if its close was cut short)."""
    if row.status == CLOSED and row.journal_sha256 is None:
        row = period_row(engine, row.name, how)
    if row.status in (OPEN, ENDED):
        with engine.connect() as conn:
            tally = sums.tally(conn, closing.in_period(row))
            active = [domain.Balance(*g, opening=ZERO, activity=a) for g, a in tally.groups.items()]
            sums.priced(conn, active, sums.Scope())
        count = sum(rows for rows, _ in tally.outcomes.values())
        return _summary(row, count, sums.totals(active))
    return _summary(row, row.rows or 0, list(row.totals or []))


def _summary(row: Any, count: int, totals: list[dict[str, Any]]) -> Summary:
    return Summary(
        name=row.name,
        status=row.status,
        opened_at=utc(row.opened_at),
        closed_at=utc(row.closed_at) if row.closed_at else None,
        closed_by=row.closed_by,
        note=row.note,
        next=row.next,
        rows=count,
        totals=totals,
        carried=row.carried,
        journal_sha256=row.journal_sha256,
        starts_at=_when(row.starts_at),
        ends_at=_when(row.ends_at),
        ended_at=_when(row.ended_at),
    )


def _when(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else utc(value)


def period_row(engine: Engine, name: str, how: domain.Journaling) -> Any:
    """The period's row; a closed one summed first if its close was cut short."""
    with engine.connect() as conn:
        row = conn.execute(select(periods).where(periods.c.name == name)).first()
    if row is None:
        raise NoSuchPeriod(name)
    if row.status == CLOSED and row.journal_sha256 is None:
        closing.finalise(engine, name, how)
        with engine.connect() as conn:
            row = conn.execute(select(periods).where(periods.c.name == name)).one()
    return row


def open_name(engine: Engine) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(select(periods.c.name).where(periods.c.status == OPEN)).scalar_one()
        )


def balances(
    engine: Engine, name: str | None, scope: sums.Scope, how: domain.Journaling
) -> tuple[Any, list[domain.Balance]]:
    """The balances of the period ``name`` (the open one when None) in
    ``scope``, by kind and partition_key; and the period's row."""
    row = period_row(engine, name or open_name(engine), how)
    with engine.connect() as conn:
        if row.status == CLOSED:
            query = select(period_balances).where(
                period_balances.c.period == row.name, *scope.on(period_balances)
            )
            found = [_stored(b) for b in conn.execute(query)]
            sums.priced(conn, found, scope)
            return row, sorted(found, key=lambda b: (b.kind, b.partition_key))
        return row, _open_balances(conn, row, scope)


def _stored(b: Any) -> domain.Balance:
    balance = domain.Balance(
        b.kind,
        b.partition_key,
        b.opening,
        domain.Activity(
            posted=b.posted,
            disputed=b.disputed,
            repriced=b.repriced,
            resolved=b.resolved,
            deducted=b.deducted,
            written_off=b.written_off,
            rows=b.rows,
        ),
        b.in_dispute_count,
        b.in_dispute_variance,
    )
    matched = {"deducted": b.deducted_rows, "written_off": b.written_off_rows}
    balance.activity.restore_outcomes(b.outcomes, matched)
    return balance


def _open_balances(conn: Connection, row: Any, scope: sums.Scope) -> list[domain.Balance]:
    # Periods ended but not closed have no balances summed: each is summed
    # now in turn, from the last closed period's, its closings the next one's
    # opening.
    unsummed = [row]
    before = closing.previous(conn, row)
    while before is not None and before.status == ENDED:
        unsummed.append(before)
        before = closing.previous(conn, before)
    found: dict[sums.Group, domain.Balance] = {}
    if before is not None:
        query = select(period_balances).where(
            period_balances.c.period == before.name, *scope.on(period_balances)
        )
        for b in conn.execute(query):
            found[(b.kind, b.partition_key)] = closing.carried_forward(b)
    for ended in reversed(unsummed[1:]):
        found = _activity(conn, ended, scope, found)
        found = {group: closing.carried_forward(b) for group, b in found.items()}
    made = _activity(conn, row, scope, found).values()
    sums.priced(conn, made, scope)
    return sorted(made, key=lambda b: (b.kind, b.partition_key))


def _activity(
    conn: Connection, row: Any, scope: sums.Scope, found: dict[sums.Group, domain.Balance]
) -> dict[sums.Group, domain.Balance]:
    """``found`` (the period's openings) with the period's activity and the
    disputes it moved."""
    where = closing.in_period(row) + scope.on(ledger_entries)
    for group, activity in sums.tally(conn, where).groups.items():
        balance = found.get(group)
        if balance is None:
            balance = found[group] = domain.Balance(*group, opening=ZERO)
        balance.activity = activity
    closing.move_disputes(conn, row, scope, found)
    return found


def balances_as_of(engine: Engine, when: dt.datetime, scope: sums.Scope) -> list[domain.Balance]:
    """The sum of the deltas committed up to ``when``, by kind and partition_key:
    the closings of the last period closed by then, plus the rows after it
    stamped up to ``when`` (as ``opening`` and activity)."""
    with engine.connect() as conn:
        last = conn.execute(
            select(periods)
            .where(periods.c.status == CLOSED, periods.c.closed_at <= when)
            .order_by(periods.c.seq.desc())
            .limit(1)
        ).first()
        found: dict[sums.Group, domain.Balance] = {}
        after = 0
        if last is not None:
            after = last.last_id or 0
            query = select(
                period_balances.c.kind, period_balances.c.partition_key, period_balances.c.closing
            ).where(period_balances.c.period == last.name, *scope.on(period_balances))
            for kind, partition, closed in conn.execute(query):
                found[(kind, partition)] = domain.Balance(kind, partition, closed)
        where = [
            ledger_entries.c.id > after,
            ledger_entries.c.created_at <= when,
            *scope.on(ledger_entries),
        ]
        for group, activity in sums.tally(conn, where).groups.items():
            balance = found.get(group)
            if balance is None:
                balance = found[group] = domain.Balance(*group, opening=ZERO)
            balance.activity = activity
        sums.priced(conn, found.values(), scope)
    return sorted(found.values(), key=lambda b: (b.kind, b.partition_key))


@dataclass(frozen=True)
class Journal:
    period: str
    final: bool
    entries: list[domain.Entry]
    csv: bytes
    sha256: str | None


def _booked_on(row: Any, how: domain.Journaling) -> domain.Accounts:
    if row.status == CLOSED and row.accounts is not None:
        return {k: domain.stored_booking(v) for k, v in row.accounts.items()}
    return domain.accounts(how.accounts)


def booked_on(engine: Engine, name: str, how: domain.Journaling) -> domain.Accounts:
    """The accounts the period's journal is made with: a closed one's, those
    it was closed with; the open one's, today's."""
    return _booked_on(period_row(engine, name, how), how)


def closed_on(engine: Engine, name: str) -> bool:
    """Whether ``engine``'s database shows the period closed. A replica that
    does holds every row booked in it: they all committed before its close
    (periods/booking.py), and a standby replays commits in their WAL order."""
    with engine.connect() as conn:
        status = conn.execute(select(periods.c.status).where(periods.c.name == name)).scalar()
    return status == CLOSED


def journal(engine: Engine, name: str, how: domain.Journaling) -> Journal:
    """A period's journal: a closed one's as it was closed (``final``), the
    open one's a preview with today's accounts."""
    row, found = balances(engine, name, sums.Scope(), how)
    final = row.status == CLOSED
    made = domain.entries(row.name, found, _booked_on(row, how))
    if final and row.made_with is None:
        # Closed before its lines carried a heading: the bytes its close hashed.
        unheaded = domain.journal_csv(made, headed=False)
        return Journal(row.name, final, made, unheaded, row.journal_sha256)
    with engine.connect() as conn:
        made = domain.headed(made, closing.heading_of(conn, row, found, how))
    csv = domain.journal_csv(made)
    return Journal(row.name, final, made, csv, row.journal_sha256 if final else None)


def erp_journal(engine: Engine, name: str, how: domain.Journaling, fmt: str) -> bytes:
    """A period's journal as an ERP's import file (shared/domain/erp_journal.py):
    a closed period's from the entries its close fixed; one closed before they
    carried a heading gets the one its close would have made (the close's
    date, today's entity and counterparties). ``ValueError``: an entry that
    cannot go in that ERP's file as it is."""
    found = journal(engine, name, how)
    made = found.entries
    if made and made[0].accounting_date is None:
        with engine.connect() as conn:
            row = period_row(engine, name, how)
            made = domain.headed(made, closing.heading_of(conn, row, None, how))
    return erp_journal_csv(fmt, made)


# A journal line's ledger columns: its CSV's (lines.py), after period and external_id.
LINE_COLUMNS = lines.LEDGER


def heading(engine: Engine, name: str, how: domain.Journaling) -> domain.Heading:
    """What the lines of the period's journal carry: a closed period's as its
    close fixed them, else made now (a period closed before they were fixed
    gets today's, on its lines only: its journal's bytes are its close's)."""
    return lines_made(engine, name, how)[2]


def lines_made(
    engine: Engine, name: str, how: domain.Journaling
) -> tuple[Any, domain.Accounts, domain.Heading]:
    """What the period's journal lines are made with, read once: its row, the
    accounts its entries are on (``booked_on``) and their ``heading``."""
    row = period_row(engine, name, how)
    with engine.connect() as conn:
        return row, _booked_on(row, how), closing.heading_of(conn, row, None, how)


def journal_lines(
    engine: Engine, name: str, scope: sums.Scope, how: domain.Journaling
) -> Iterator[Any]:
    """Every ledger row booked in the period ``name`` (in ``scope``), in id
    order, streamed (a server-side cursor on PostgreSQL): ``LINE_COLUMNS``."""
    row = period_row(engine, name, how)
    columns = [ledger_entries.c[c] for c in LINE_COLUMNS]
    query = (
        select(*columns, contracts.c.currency)
        .select_from(ledger_entries.outerjoin(contracts, _its_contract()))
        .where(*closing.in_period(row), *scope.on(ledger_entries))
        .order_by(ledger_entries.c.id)
    )
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=2000).execute(query)
        yield from result


def _its_contract() -> Any:
    """A ledger row's contract version (its currency: sums.py::priced)."""
    return and_(
        contracts.c.kind == ledger_entries.c.kind,
        contracts.c.partition_key == ledger_entries.c.partition_key,
        contracts.c.version == ledger_entries.c.contract_version,
    )


def statement_lines(
    engine: Engine, name: str, partition_key: str, kind: str | None, how: domain.Journaling
) -> list[Any]:
    """A partition's ledger rows booked in the period, by document then id."""
    row = period_row(engine, name, how)
    scope = sums.Scope(kind, [partition_key])
    columns = [ledger_entries.c[c] for c in LINE_COLUMNS]
    query = (
        select(
            *columns,
            ledger_entries.c.amount,
            ledger_entries.c.claimed_amount,
            ledger_entries.c.contract_version,
        )
        .where(*closing.in_period(row), *scope.on(ledger_entries))
        .order_by(ledger_entries.c.kind, ledger_entries.c.document_id, ledger_entries.c.id)
    )
    with engine.connect() as conn:
        return list(conn.execute(query).all())
