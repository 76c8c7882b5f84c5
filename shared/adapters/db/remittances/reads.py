"""Reading remittances and deductions (docs/api.md#remittances-and-deductions):
pages of remittances (newest first) and of deductions (oldest first), one of
each with what it holds, and the aging of what is still open.

Where a deduction stands is derived from how its match left it and a person's
decision (``shared.domain.remittances.status``): its figures are the current
ones, a decision's included (``matched`` grows by a match's, ``written_off``
by an accept's, ``disputed`` is what is still open: the disputed part while it
waits or after a denial, zero once accepted or matched). Its matches are the
ledger rows booked for it: ``job_id`` and ``correlation_id`` the remittance's,
``line_ref`` ``D<deduction id>`` (``store.booked_rows``).

Sums are made in SQL on both backends. SQLite keeps money as text at four
places (``DecimalText``): there a sum adds the amount's ten-thousandths as
integers (the text without its point), exactly, never through floating point.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Final

from sqlalchemy import (
    Date,
    Engine,
    Integer,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy.sql import ColumnElement

from shared.adapters.db.ledger.read import ranges
from shared.adapters.db.remittances.tables import deductions as dd
from shared.adapters.db.remittances.tables import remittances as rm
from shared.adapters.db.tables import ledger_entries as le
from shared.domain.money import ZERO
from shared.domain.remittances.status import Filter, Status, standing, statuses_of

STREAM_BATCH: Final = 2000
BUCKETS: Final = ("0-30", "31-60", "61-90", "90+")
TENTH: Final = Decimal("0.1")  # days outstanding: to a tenth of a day
_BOOKED: Final = ("deducted", "written_off")
_SQLITE_SCALE: Final = 4  # DecimalText's places


# -- what is read -----------------------------------------------------------


@dataclass(frozen=True)
class Booked:
    """A ledger row booked for a deduction: a match (``deducted``) or a write-off."""

    document_id: str
    outcome: str
    amount: Decimal


@dataclass
class Deduction:
    id: int
    remittance_id: str
    seq: int
    partition_key: str
    amount: Decimal
    reason_code: str
    reason_class: str
    reference: str | None
    line_reference: str | None
    deducted_on: dt.date
    due_on: dt.date
    status: Status
    matched: Decimal
    written_off: Decimal
    disputed: Decimal
    dispute_reason: str | None
    dispute_document_id: str | None
    decision: str | None
    decision_note: str | None
    decided_at: dt.datetime | None
    matches: list[Booked] = field(default_factory=list)

    def days_outstanding(self, today: dt.date) -> int:
        return (today - self.deducted_on).days

    def past_window(self, today: dt.date) -> bool:
        return self.status in ("disputed", "denied") and today > self.due_on


@dataclass
class Remittance:
    id: str
    trace: str
    payer: str
    partition_key: str
    source_format: str
    currency: str
    paid_total: Decimal
    computed_total: Decimal
    paid_at: dt.date | None
    received_at: dt.datetime
    deductions: int
    matched: Decimal = ZERO
    written_off: Decimal = ZERO
    disputed: Decimal = ZERO


@dataclass
class RemittanceDetail:
    remittance: Remittance
    body: str  # the remittance as read, JSON (``shared.domain.remittances.model``)
    acknowledgement: str | None
    deductions: list[Deduction]


@dataclass(frozen=True)
class DeductionFilter:
    status: Filter = "all"
    partition_key: str | None = None
    reason_class: str | None = None
    aged_over: int | None = None  # days since deducted_on above this


@dataclass
class Aged:
    """Open deductions' figures: of a partition, or all of them."""

    open_count: int = 0
    open_amount: Decimal = ZERO
    buckets: dict[str, Decimal] = field(default_factory=lambda: dict.fromkeys(BUCKETS, ZERO))
    past_window: Decimal = ZERO
    weighted_days: Decimal = ZERO  # the sum of amount x age

    def days_outstanding(self) -> Decimal | None:
        """The amount-weighted average age of the open amount (None: nothing open)."""
        if self.open_amount <= 0:
            return None
        return (self.weighted_days / self.open_amount).quantize(TENTH, ROUND_HALF_UP)

    def add(self, other: Aged) -> None:
        self.open_count += other.open_count
        self.open_amount += other.open_amount
        for name in BUCKETS:
            self.buckets[name] += other.buckets[name]
        self.past_window += other.past_window
        self.weighted_days += other.weighted_days


@dataclass(frozen=True)
class ByReason:
    reason_class: str
    open_count: int
    open_amount: Decimal


@dataclass
class Aging:
    as_of: dt.date
    partitions: dict[str, Aged]
    by_reason: list[ByReason]
    totals: Aged


# -- SQL pieces ---------------------------------------------------------------


def _units(column: Any, dialect: str) -> Any:
    """What a sum of money adds: the amount itself, or on SQLite its text's
    ten-thousandths as an integer (``12.5000`` is 125000)."""
    if dialect == "sqlite":
        return cast(func.replace(column, ".", ""), Integer)
    return column


def _money(value: Any, dialect: str) -> Decimal:
    """A sum of ``_units`` as money."""
    if value is None:
        return ZERO
    if dialect == "sqlite":
        return Decimal(int(value)).scaleb(-_SQLITE_SCALE)
    return Decimal(value)


def _sum(expr: Any) -> Any:
    return func.coalesce(func.sum(expr), 0)


_UNDECIDED: Final = dd.c.decision.is_(None)
_WAITING: Final = and_(_UNDECIDED, dd.c.disputed > ZERO)
_WHERE: Final[dict[Status, ColumnElement[bool]]] = {
    "disputed": _WAITING,
    "denied": dd.c.decision == "deny",
    "written_off": dd.c.decision == "accept",
    "matched": or_(and_(_UNDECIDED, dd.c.disputed == ZERO), dd.c.decision == "match"),
}


def _status_where(wanted: Filter) -> ColumnElement[bool] | None:
    if wanted == "all":
        return None
    chosen = [_WHERE[s] for s in statuses_of(wanted)]
    return chosen[0] if len(chosen) == 1 else or_(*chosen)


def _current_sums(dialect: str) -> tuple[Any, Any, Any]:
    """The sums of the deductions' current figures (see the module's doc)."""
    disputed = _units(dd.c.disputed, dialect)
    zero = literal(0)
    return (
        _sum(_units(dd.c.matched, dialect))
        + _sum(case((dd.c.decision == "match", disputed), else_=zero)),
        _sum(_units(dd.c.written_off, dialect))
        + _sum(case((dd.c.decision == "accept", disputed), else_=zero)),
        _sum(case((or_(_UNDECIDED, dd.c.decision == "deny"), disputed), else_=zero)),
    )


def _age(today: dt.date, dialect: str) -> Any:
    """Days since ``deducted_on``, in SQL."""
    if dialect == "sqlite":
        return cast(
            func.julianday(bindparam("as_of", today.isoformat()))
            - func.julianday(dd.c.deducted_on),
            Integer,
        )
    return bindparam("as_of", today, type_=Date) - dd.c.deducted_on


# -- remittances --------------------------------------------------------------


def _remittance(row: Any) -> Remittance:
    return Remittance(
        id=row.id,
        trace=row.trace,
        payer=row.payer,
        partition_key=row.partition_key,
        source_format=row.source_format,
        currency=row.currency,
        paid_total=Decimal(row.paid_total),
        computed_total=Decimal(row.computed_total),
        paid_at=row.paid_at,
        received_at=row.received_at,
        deductions=row.deductions,
    )


_SUMMARY_COLUMNS: Final = (
    rm.c.id,
    rm.c.trace,
    rm.c.payer,
    rm.c.partition_key,
    rm.c.source_format,
    rm.c.currency,
    rm.c.paid_total,
    rm.c.computed_total,
    rm.c.paid_at,
    rm.c.received_at,
    rm.c.deductions,
)


def _with_sums(conn: Any, found: list[Remittance]) -> list[Remittance]:
    if not found:
        return found
    dialect = conn.dialect.name
    sums = conn.execute(
        select(dd.c.remittance_id, *_current_sums(dialect))
        .where(dd.c.remittance_id.in_([r.id for r in found]))
        .group_by(dd.c.remittance_id)
    ).all()
    by_id = {s[0]: s for s in sums}
    for r in found:
        s = by_id.get(r.id)
        if s is not None:
            r.matched, r.written_off, r.disputed = (_money(v, dialect) for v in s[1:])
    return found


def remittances_page(
    engine: Engine,
    *,
    partition_key: str | None,
    after: tuple[dt.datetime, str] | None,
    limit: int,
) -> list[Remittance]:
    """Newest first (received_at, then id, descending); ``after`` is the last
    one a page showed."""
    query = select(*_SUMMARY_COLUMNS)
    if partition_key is not None:
        query = query.where(rm.c.partition_key == partition_key)
    if after is not None:
        at, rid = after
        query = query.where(or_(rm.c.received_at < at, and_(rm.c.received_at == at, rm.c.id < rid)))
    query = query.order_by(rm.c.received_at.desc(), rm.c.id.desc()).limit(limit)
    with engine.connect() as conn:
        return _with_sums(conn, [_remittance(r) for r in conn.execute(query)])


def remittance(engine: Engine, remittance_id: str) -> RemittanceDetail | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(*_SUMMARY_COLUMNS, rm.c.body, rm.c.acknowledgement).where(
                rm.c.id == remittance_id
            )
        ).first()
        if row is None:
            return None
        (summary,) = _with_sums(conn, [_remittance(row)])
        found = _deductions(conn, select(dd).where(dd.c.remittance_id == remittance_id), "seq")
    return RemittanceDetail(summary, row.body, row.acknowledgement, found)


# -- deductions ---------------------------------------------------------------


def _deduction(row: Any) -> Deduction:
    now = standing(
        Decimal(row.matched), Decimal(row.written_off), Decimal(row.disputed), row.decision
    )
    return Deduction(
        id=row.id,
        remittance_id=row.remittance_id,
        seq=row.seq,
        partition_key=row.partition_key,
        amount=Decimal(row.amount),
        reason_code=row.reason_code,
        reason_class=row.reason_class,
        reference=row.reference,
        line_reference=row.line_reference,
        deducted_on=row.deducted_on,
        due_on=row.due_on,
        status=now.status,
        matched=now.matched,
        written_off=now.written_off,
        disputed=now.disputed,
        dispute_reason=row.dispute_reason,
        dispute_document_id=row.dispute_document_id,
        decision=row.decision,
        decision_note=row.decision_note,
        decided_at=row.decided_at,
    )


def _deductions(conn: Any, query: Any, order: str) -> list[Deduction]:
    found = [_deduction(r) for r in conn.execute(query.order_by(dd.c[order]))]
    _with_matches(conn, found)
    return found


def _with_matches(conn: Any, found: Sequence[Deduction]) -> None:
    """Each deduction's ledger rows, in one read for a page (in the id ranges
    of their job: the remittance's id, ledger/ranges.py)."""
    if not found:
        return
    by_ref = {f"D{d.id}": d for d in found}
    remittances = sorted({d.remittance_id for d in found})
    rows = conn.execute(
        select(le.c.line_ref, le.c.document_id, le.c.outcome, le.c.amount)
        .where(
            ranges.within(le.c.id, ranges.of_jobs(conn, remittances)),
            le.c.job_id.in_(remittances),
            le.c.outcome.in_(_BOOKED),
            le.c.line_ref.in_(sorted(by_ref)),
        )
        .order_by(le.c.id)
    )
    for r in rows:
        by_ref[r.line_ref].matches.append(Booked(r.document_id, r.outcome, Decimal(r.amount)))


def _filtered(where: DeductionFilter, today: dt.date) -> Any:
    query = select(dd)
    status = _status_where(where.status)
    if status is not None:
        query = query.where(status)
    if where.partition_key is not None:
        query = query.where(dd.c.partition_key == where.partition_key)
    if where.reason_class is not None:
        query = query.where(dd.c.reason_class == where.reason_class)
    if where.aged_over is not None:
        query = query.where(dd.c.deducted_on < today - dt.timedelta(days=where.aged_over))
    return query


def deductions_page(
    engine: Engine,
    where: DeductionFilter,
    today: dt.date,
    *,
    after_id: int | None,
    limit: int,
) -> list[Deduction]:
    """Oldest first (ascending id); the cursor is the last id a page showed."""
    query = _filtered(where, today)
    if after_id is not None:
        query = query.where(dd.c.id > after_id)
    with engine.connect() as conn:
        return _deductions(conn, query.limit(limit), "id")


def deductions_stream(
    engine: Engine, where: DeductionFilter, today: dt.date
) -> Iterator[Deduction]:
    """Every deduction the filter selects, oldest first, a page at a time, each
    in a short transaction of its own (never all in memory)."""
    after: int | None = None
    while True:
        batch = deductions_page(engine, where, today, after_id=after, limit=STREAM_BATCH)
        yield from batch
        if len(batch) < STREAM_BATCH:
            return
        after = batch[-1].id


def deduction(engine: Engine, deduction_id: int) -> Deduction | None:
    with engine.connect() as conn:
        found = _deductions(conn, select(dd).where(dd.c.id == deduction_id), "id")
    return found[0] if found else None


# -- aging --------------------------------------------------------------------


def aging(engine: Engine, today: dt.date, partition_key: str | None = None) -> Aging:
    """What is still open (disputed and undecided, or denied), per partition
    and per reason class, summed in SQL: counts, amounts, age buckets (days
    since deducted_on: 0-30, 31-60, 61-90, 90+), the amount past its window
    (today after due_on) and the amount-weighted age."""
    dialect = engine.dialect.name
    amount = _units(dd.c.disputed, dialect)
    age = _age(today, dialect)
    zero = literal(0)
    bucket_sums = [
        _sum(case((age <= 30, amount), else_=zero)),
        _sum(case((and_(age > 30, age <= 60), amount), else_=zero)),
        _sum(case((and_(age > 60, age <= 90), amount), else_=zero)),
        _sum(case((age > 90, amount), else_=zero)),
    ]
    open_where = _status_where("open")
    assert open_where is not None
    where = [open_where]
    if partition_key is not None:
        where.append(dd.c.partition_key == partition_key)
    per_partition = (
        select(
            dd.c.partition_key,
            func.count(),
            _sum(amount),
            *bucket_sums,
            _sum(case((dd.c.due_on < bindparam("today", today, type_=Date), amount), else_=zero)),
            _sum(amount * age),
        )
        .where(*where)
        .group_by(dd.c.partition_key)
        .order_by(dd.c.partition_key)
    )
    per_reason = (
        select(dd.c.reason_class, func.count(), _sum(amount))
        .where(*where)
        .group_by(dd.c.reason_class)
        .order_by(dd.c.reason_class)
    )
    with engine.connect() as conn:
        partitions: dict[str, Aged] = {}
        totals = Aged()
        for row in conn.execute(per_partition):
            key, count, total, *buckets, past, weighted = row
            aged = Aged(
                open_count=int(count),
                open_amount=_money(total, dialect),
                buckets={
                    name: _money(value, dialect)
                    for name, value in zip(BUCKETS, buckets, strict=True)
                },
                past_window=_money(past, dialect),
                weighted_days=_money(weighted, dialect),
            )
            partitions[key] = aged
            totals.add(aged)
        reasons = [
            ByReason(r[0], int(r[1]), _money(r[2], dialect)) for r in conn.execute(per_reason)
        ]
    return Aging(today, partitions, reasons, totals)
