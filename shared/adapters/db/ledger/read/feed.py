"""The ledger feed (docs/api.md#the-ledger-feed): ledger rows in commit order,
gap-free, read through the outbox (docs/architecture.md#the-ledger-feed).

Every ledger row is listed by exactly one outbox row, its unit, written in the
same transaction. On PostgreSQL a unit carries that transaction's id
(``xid``). The feed reads units in ``(xid, id)`` order, and only those whose
``xid`` is below the oldest transaction still running (the snapshot's
``xmin``): every such transaction has ended, so no row can still commit
behind a position the feed has given. A transaction left open holds the feed
back there (``held_back_seconds``), and never makes it skip. SQLite runs one
writer at a time, so its units commit in id order and that order is enough.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    func,
    select,
    text,
    tuple_,
)

from shared.adapters.db.dialect import id_in
from shared.adapters.db.tables import ledger_entries, outbox
from shared.domain.feed import COLUMNS, Position, end_of

_SELECTED = tuple(ledger_entries.c[name] for name in COLUMNS)

# Ledger rows a filtered page may look at: a page of a rare partition can be
# empty before the end, and its cursor still advances.
FILTERED_SCAN = 10_000


@dataclass(frozen=True)
class Page:
    rows: list[Any]  # ledger rows, COLUMNS in order
    next: Position
    # The scan stopped on its budget, maybe inside a unit, not at the feed's
    # end: a long poll reads on rather than waits for a unit yet to come.
    cut: bool = False


_HORIZON = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_HORIZON_NOW = text(f"({_HORIZON})")

# Units per read while a page fills, doubling: a unit holds one to thousands
# of rows, so a page of a large unit reads one, and of one-row units few reads.
_FIRST_READ, _MOST_READ = 2, 256


def horizon(conn: Connection) -> int:
    """PostgreSQL: the oldest transaction id still running (every one below has ended)."""
    value: int = conn.execute(text(f"SELECT {_HORIZON}")).scalar_one()
    return value


def page(
    conn: Connection,
    after: Position,
    *,
    partitions: Sequence[str] | None,
    kind: str | None,
    limit: int,
    line_ref: str | None = None,
) -> Page:
    """The rows after ``after`` (of ``partitions`` when given, of ``kind``, of
    ``line_ref``), at most ``limit``, and the position to go on from."""
    filtered = partitions is not None or kind is not None or line_ref is not None
    budget = max(limit, FILTERED_SCAN) if filtered else limit
    scanned = _scan(conn, after, budget)
    if not scanned:
        return Page([], after)
    found = _rows(conn, [p.entry for p in scanned], partitions, kind, line_ref)
    rows: list[Any] = []
    for position in scanned:
        row = found.get(position.entry)
        if row is None:
            continue
        rows.append(row)
        if len(rows) == limit:
            return Page(rows, position)
    return Page(rows, scanned[-1], cut=len(scanned) == budget)


def now(conn: Connection) -> Position:
    """The feed's current end: every row before it has committed, every row
    after it is yet to come (``after=now``)."""
    if conn.dialect.name == "postgresql":
        return end_of(horizon(conn) - 1)
    # Units only: a webhook event may be written after the last unit.
    last = conn.execute(
        select(func.max(outbox.c.id)).where(outbox.c.ledger_entry_ids.is_not(None))
    ).scalar_one_or_none()
    return end_of(0, last or 0)


def frontier(conn: Connection) -> Position:
    """The last unit the feed can give now (``now`` when there is none): a
    waiting consumer behind it has rows to read."""
    if conn.dialect.name == "postgresql":
        row = conn.execute(
            text(
                f"SELECT o.xid, o.id FROM outbox o WHERE o.xid < {_HORIZON}"
                " AND o.ledger_entry_ids IS NOT NULL ORDER BY o.xid DESC, o.id DESC LIMIT 1"
            )
        ).first()
        return end_of(-2, 0) if row is None else end_of(row[0], row[1])
    return now(conn)


def units_after(
    conn: Connection, after: tuple[int, int], limit: int
) -> list[tuple[int, int, list[int]]]:
    """The units the feed can give now past (xid, unit) ``after``, in feed
    order, at most ``limit``: (xid, id, ledger row ids). Every unit before the
    last of them has ended, so a later call from it misses none."""
    pg = conn.dialect.name == "postgresql"
    return _units(conn, after[0], after[1], pg, limit, inclusive=False)


def line_keys(conn: Connection, ids: Sequence[int]) -> set[tuple[str, str, str]]:
    """The (partition_key, kind, line_ref) of the ledger rows ``ids``, each once:
    what a feed filter matches on."""
    e = ledger_entries.c
    query = (
        select(e.partition_key, e.kind, e.line_ref)
        .where(id_in(e.id, ids, conn.dialect.name))
        .distinct()
    )
    return {(r.partition_key, r.kind, r.line_ref) for r in conn.execute(query)}


def held_back_seconds(conn: Connection) -> float:
    """How long the feed has held back a committed unit behind a transaction
    still open (0 when it holds back none), from the held unit's own time."""
    if conn.dialect.name != "postgresql":
        return 0.0
    oldest: dt.timedelta | None = conn.execute(
        text(
            "SELECT now() - min(o.created_at) FROM outbox o"
            f" WHERE o.xid >= {_HORIZON} AND o.ledger_entry_ids IS NOT NULL"
        )
    ).scalar_one()
    return 0.0 if oldest is None else max(0.0, oldest.total_seconds())


def _scan(conn: Connection, after: Position, budget: int) -> list[Position]:
    """The positions of the next ``budget`` rows after ``after``, read unit by
    unit: the index on ``(xid, id)`` gives the units in order, a few at a
    time and more while the page is not full (a unit holds one to thousands
    of rows), and only the rows the page takes become positions."""
    pg = conn.dialect.name == "postgresql"
    found: list[Position] = []
    xid, unit, first, per_read = after.xid, after.unit, True, _FIRST_READ
    while len(found) < budget:
        units = _units(conn, xid, unit, pg, per_read, inclusive=first)
        for unit_xid, unit_id, ids in units:
            entries = sorted(ids)
            if (unit_xid, unit_id) == (after.xid, after.unit):
                entries = entries[bisect_right(entries, after.entry) :]
            room = budget - len(found)
            found.extend(Position(unit_xid, unit_id, e) for e in entries[:room])
            xid, unit = unit_xid, unit_id
            if len(found) == budget:
                break
        if len(units) < per_read:
            break
        first, per_read = False, min(per_read * 2, _MOST_READ)
    return found


def _units(
    conn: Connection, xid: int, unit: int, pg: bool, limit: int, *, inclusive: bool
) -> list[tuple[int, int, list[int]]]:
    """The next units from (``xid``, ``unit``) on, in feed order: (xid, id, ids).
    On PostgreSQL only those below the horizon of the statement's own
    snapshot: every one of them has ended, so the statement sees each that
    committed. (Each read of a page may have a later horizon than the one
    before: what it adds lies after what that one gave, and has ended too.)"""
    o = outbox.c
    if not pg:  # SQLite: one writer, units in id order
        start = o.id >= unit if inclusive else o.id > unit
        units = o.ledger_entry_ids.is_not(None)  # not a webhook event
        query = select(o.id, o.ledger_entry_ids).where(start, units).order_by(o.id)
        rows = conn.execute(query.limit(limit)).all()
        return [(0, r.id, list(r.ledger_entry_ids or ())) for r in rows]
    at = tuple_(o.xid, o.id)
    start = at >= tuple_(xid, unit) if inclusive else at > tuple_(xid, unit)
    query = (
        select(o.xid, o.id, o.ledger_entry_ids)
        .where(start, o.xid < _HORIZON_NOW, o.ledger_entry_ids.is_not(None))
        .order_by(o.xid, o.id)
        .limit(limit)
    )
    return [(r.xid, r.id, list(r.ledger_entry_ids)) for r in conn.execute(query)]


def _rows(
    conn: Connection,
    ids: list[int],
    partitions: Sequence[str] | None,
    kind: str | None,
    line_ref: str | None,
) -> dict[int, Any]:
    """The ledger rows of ``ids`` (at most ``FILTERED_SCAN``) that pass the filters.

    The filters are checked on rows already read by primary key, so none needs
    an index of its own: an index on a filter's column would cost every posted
    line its upkeep, which §3.10's cost rule does not allow."""
    query = select(*_SELECTED).where(id_in(ledger_entries.c.id, ids, conn.dialect.name))
    if partitions is not None:
        query = query.where(ledger_entries.c.partition_key.in_(list(partitions)))
    if kind is not None:
        query = query.where(ledger_entries.c.kind == kind)
    if line_ref is not None:
        query = query.where(ledger_entries.c.line_ref == line_ref)
    return {row.id: row for row in conn.execute(query)}
