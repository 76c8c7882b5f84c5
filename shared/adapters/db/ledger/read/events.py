"""The ledger rows that outbox events are built from, read for the relay
(docs/architecture.md#events-at-commit-and-the-relay).

- ``event_rows(conn, ids)``: each row's event fields (shared/domain/pipeline/events.py's
  ``LEDGER_FIELDS``, in the order ``event`` unpacks them), by id.
- ``resolved(rows)``: which of them are ``resolved`` rows, the ones whose event
  carries a decision.
- ``resolutions(conn, ids)``: the decision behind each of those rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Text, any_, bindparam, cast, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import NullType

from shared.adapters.db.tables import dispute_resolutions, ledger_entries
from shared.domain.pipeline.events import LEDGER_FIELDS

# What an event tells of its ledger row (shared/domain/pipeline/events.py), and nothing else,
# in the order the event unpacks it.
_EVENT_COLUMNS = tuple(ledger_entries.c[name] for name in LEDGER_FIELDS)
# On PostgreSQL the amounts come as NUMERIC(20,4)'s text: plain notation at the
# column's scale, an event's form itself (shared/domain/pipeline/events.py's
# ``_wire`` of the Decimal read back), without making a Decimal of each to
# format it again.
_AMOUNTS = ("amount", "claimed_amount", "delta")
_PG_EVENT_COLUMNS = tuple(
    cast(column, Text) if column.name in _AMOUNTS else column for column in _EVENT_COLUMNS
)
_ID, _OUTCOME = LEDGER_FIELDS.index("id"), LEDGER_FIELDS.index("outcome")


def event_rows(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    """The event fields of these ledger rows, by id (a missing id is absent)."""
    if conn.dialect.name == "postgresql":
        return _pg_event_rows(conn, ids)
    found: dict[int, Any] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        for row in conn.execute(select(*_EVENT_COLUMNS).where(ledger_entries.c.id.in_(part))).all():
            found[row[_ID]] = row
    return found


def resolved(rows: Mapping[int, Any]) -> list[int]:
    """The ids of ``event_rows``' ``resolved`` rows."""
    return [i for i, row in rows.items() if row[_OUTCOME] == "resolved"]


def resolutions(conn: Connection, ids: list[int]) -> dict[int, Any]:
    """The decision behind each of these ``resolved`` rows (usually none are)."""
    found: dict[int, Any] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        query = select(
            dispute_resolutions.c.ledger_entry_id,
            dispute_resolutions.c.decision,
            dispute_resolutions.c.note,
        ).where(dispute_resolutions.c.ledger_entry_id.in_(part))
        found.update((row.ledger_entry_id, row) for row in conn.execute(query))
    return found


# The relay's read of its events' ledger rows on PostgreSQL: executed by
# SQLAlchemy (its errors wrapped, a lost connection invalidated, as the relay's
# handlers expect), fetched as the driver's tuples, which are all ``event``
# reads: SQLAlchemy's result rows would add a Python object and its lookups
# per row that the relay never uses (bench.stages --profile relay). Amounts as
# NUMERIC text (see _PG_EVENT_COLUMNS).
_PG_EVENT_SELECT = str(
    select(*_PG_EVENT_COLUMNS)
    .where(ledger_entries.c.id == any_(bindparam("ids", type_=NullType())))
    .compile(dialect=postgresql.dialect(paramstyle="pyformat"))  # type: ignore[no-untyped-call]
)


def _pg_event_rows(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    # One array parameter: an IN list of thousands of binds costs more to
    # compile and send than the rows it fetches. It goes as its text, untyped
    # (psycopg sends a str as "unknown"), so PostgreSQL reads it as the bigint[]
    # that ``id = ANY(...)`` wants (the plan of a typed array), without the
    # driver adapting a list of ints element by element.
    result = conn.exec_driver_sql(_PG_EVENT_SELECT, {"ids": "{" + ",".join(map(str, ids)) + "}"})
    try:
        # psycopg has the whole result once executed: fetching only converts it.
        return {row[_ID]: row for row in result.cursor.fetchall()}
    finally:
        result.close()
