"""A dispute's decision in the ledger: its ``resolved`` row
(docs/architecture.md#exactly-once-resolution), booked by
``LedgerWriter.resolve_one`` and ``resolve_selected`` (writer.py), which add
the outbox rows of its events, as a settlement's rows are booked by
``LedgerWriter.commit``. What is decided, and what else a resolution records,
is the dispute queue's (disputes/resolve.py).

A ``resolved`` row repeats its disputed row's identity and supersedes it; its
delta is measured from it. The partial unique index
``uq_ledger_entries_resolution`` takes one ``resolved`` row per disputed row,
and the insert names it (``ON CONFLICT DO NOTHING``): a row the insert does
not return was another transaction's to write. A resolution first takes its
dispute's lineage lock, the one a settlement of a newer version of the same
identity takes (priors.py): the two serialise, so neither measures its delta
from a row the other has just superseded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Select, String, func, literal, select

from shared.adapters.db.dialect import insert_ignoring_conflicts, outcome_in
from shared.adapters.db.ledger import priors
from shared.adapters.db.ledger.rounds import as_ledger_row
from shared.adapters.db.schema import TS
from shared.adapters.db.tables import ledger_entries
from shared.domain.kinds import KINDS
from shared.domain.pipeline.units import LedgerRow

EVENTS_PER_OUTBOX_ROW = 1000  # a bulk resolution's events, in outbox rows of this many


@dataclass(frozen=True)
class Outboxed:
    """An outbox row of resolutions, with the ``resolved`` rows whose events it holds."""

    outbox_id: int
    rows: list[LedgerRow]


@dataclass(frozen=True)
class Booked:
    """What booking resolutions wrote: the new ``resolved`` rows as the insert
    returned them (none of the disputes another transaction resolved first),
    and their outbox rows, by id: the events are made from these, with no read
    back."""

    rows: list[LedgerRow]
    outbox: list[Outboxed]


def lock(conn: Connection, disputes: Sequence[Any]) -> None:
    """The lineage locks of these disputed rows, all in one statement (sorted)."""
    ids: set[int] = set()
    for row in disputes:
        group = priors.row_lock_group(
            KINDS[row.kind].delta_basis, row.partition_key, row.document_id, row.line_ref
        )
        ids.update(priors.lock_ids(row.kind, {group}))
    priors.lock_lineage_ids(conn, sorted(ids))


def insert_one(
    conn: Connection, dispute_id: int, amount: Decimal, now: dt.datetime, period: str
) -> list[LedgerRow]:
    """The ``resolved`` row of one dispute at ``amount``, booked in ``period``;
    none when another transaction resolved it first (the insert waited for it
    to commit)."""
    row = _resolved_row(conn, dispute_id, amount, now)
    row["period"] = period
    new_id = conn.execute(_insert(conn).values(row).returning(ledger_entries.c.id)).scalar()
    return [] if new_id is None else [as_ledger_row(row, new_id)]


def insert_selected(
    conn: Connection,
    which: Select[Any],
    disputed: Any,
    decided: Any,
    now: dt.datetime,
    period: str,
) -> list[LedgerRow]:
    """The ``resolved`` rows of the disputed rows ``which`` selects, in one
    ``INSERT ... SELECT``: ``which`` gives the FROM and WHERE (its columns are
    replaced), ``disputed`` is the disputed rows' alias in it and ``decided``
    the column of the amount decided."""
    source = which.with_only_columns(
        *(disputed.c[name] for name in _COPIED[:7]),
        literal("resolved", String),
        decided,
        disputed.c.claimed_amount,
        _minus(conn.dialect.name, decided, disputed.c.amount),
        disputed.c.id,
        disputed.c.correlation_id,
        literal(now, TS),
        literal(period, String),
    )
    names = [*_COPIED[:7], "outcome", "amount", "claimed_amount", "delta", "supersedes_id"]
    statement = (
        _insert(conn)
        .from_select([*names, "correlation_id", "created_at", "period"], source)
        .returning(*(ledger_entries.c[name] for name in LedgerRow._fields))
    )
    return [LedgerRow(*r) for r in conn.execute(statement)]


def _insert(conn: Connection) -> Any:
    return insert_ignoring_conflicts(
        conn,
        ledger_entries,
        [ledger_entries.c.supersedes_id],
        outcome_in(ledger_entries.c.outcome, "resolved"),
    )


_COPIED = (
    "reconciliation_key",
    "contract_version",
    "kind",
    "partition_key",
    "document_id",
    "line_ref",
    "job_id",
    "claimed_amount",
    "correlation_id",
)


def _resolved_row(
    conn: Connection, dispute_id: int, amount: Decimal, now: dt.datetime
) -> dict[str, Any]:
    disputed = conn.execute(select(ledger_entries).where(ledger_entries.c.id == dispute_id)).one()
    return {
        **{name: getattr(disputed, name) for name in _COPIED},
        "outcome": "resolved",
        "amount": amount,
        "delta": amount - disputed.amount,
        "supersedes_id": dispute_id,
        "created_at": now,
    }


def _minus(dialect: str, a: Any, b: Any) -> Any:
    """``a - b`` of two money columns, exact: SQLite's arithmetic on text is
    floating point, so there ``settleq_sub`` (types.py) subtracts the digits."""
    if dialect == "postgresql":
        return a - b
    return func.settleq_sub(a, b)
