"""Sums of ledger rows by (kind, partition_key): a period's activity and the
disputes open, on both backends.

PostgreSQL sums ``NUMERIC`` exactly, so it groups. SQLite keeps money as text
and its ``sum`` is floating point, so there the rows are read and summed as
``Decimal``s here (a single-machine ledger is small).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, exists, func, not_, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.tables import IDENTITY_OUTCOMES, ledger_entries
from shared.domain.money import ZERO
from shared.domain.periods import Activity, activity_of

Group = tuple[str, str]  # (kind, partition_key)

_l = ledger_entries


@dataclass
class Tally:
    """Ledger rows summed two ways: each (kind, partition_key)'s activity, and
    each (kind, outcome)'s delta and rows."""

    groups: dict[Group, Activity] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], tuple[int, Decimal]] = field(default_factory=dict)

    def add(
        self, kind: str, partition: str, outcome: str, repriced: bool, count: int, total: Decimal
    ) -> None:
        sums = self.groups.get((kind, partition))
        if sums is None:
            sums = self.groups[(kind, partition)] = Activity()
        name = activity_of(outcome, repriced)
        setattr(sums, name, getattr(sums, name) + total)
        sums.rows += count
        rows, delta = self.outcomes.get((kind, outcome), (0, ZERO))
        self.outcomes[(kind, outcome)] = (rows + count, delta + total)


def tally(conn: Connection, where: Sequence[ColumnElement[bool]]) -> Tally:
    """The ledger rows ``where`` selects, summed."""
    found = Tally()
    repriced = (_l.c.supersedes_id.is_not(None) & not_(outcome_in(_l.c.outcome, "resolved"))).label(
        "repriced"
    )
    if conn.dialect.name == "postgresql":
        query = (
            select(
                _l.c.kind,
                _l.c.partition_key,
                _l.c.outcome,
                repriced,
                func.count(),
                func.sum(_l.c.delta),
            )
            .where(*where)
            .group_by(_l.c.kind, _l.c.partition_key, _l.c.outcome, repriced)
        )
        for kind, partition, outcome, again, count, total in conn.execute(query):
            found.add(kind, partition, outcome, bool(again), count, Decimal(total))
    else:
        query = select(_l.c.kind, _l.c.partition_key, _l.c.outcome, repriced, _l.c.delta).where(
            *where
        )
        for kind, partition, outcome, again, delta in conn.execute(query):
            found.add(kind, partition, outcome, bool(again), 1, delta)
    return found


@dataclass(frozen=True)
class Scope:
    """Which (kind, partition_key)s a sum covers: None is every one."""

    kind: str | None = None
    partitions: Sequence[str] | None = None

    def on(self, table: Any) -> list[ColumnElement[bool]]:
        where = []
        if self.kind is not None:
            where.append(table.c.kind == self.kind)
        if self.partitions is not None:
            where.append(table.c.partition_key.in_(list(self.partitions)))
        return where


def open_disputes(
    conn: Connection, scope: Scope, upto_id: int | None = None
) -> dict[Group, tuple[int, Decimal]]:
    """The disputes open, by (kind, partition_key): their count and the sum of
    their variances (claimed − model). ``upto_id``: as they stood when the
    ledger's last row was that one (a close), the rows after it unseen."""
    d = _l.alias("d")
    res = _l.alias("res")
    later = _l.alias("later")
    # The dispute queue's status rules (disputes/sql.py): resolved, a resolved
    # row supersedes it; superseded, a later posted or disputed row of its
    # identity exists. Each probe is one index's (the resolution's, the identity's).
    resolved = (
        exists()
        .where(res.c.supersedes_id == d.c.id, outcome_in(res.c.outcome, "resolved"))
        .correlate(d)
    )
    superseded = (
        exists()
        .where(
            later.c.reconciliation_key == d.c.reconciliation_key,
            outcome_in(later.c.outcome, *IDENTITY_OUTCOMES),
            later.c.kind == d.c.kind,
            later.c.partition_key == d.c.partition_key,
            later.c.id > d.c.id,
        )
        .correlate(d)
    )
    if upto_id is not None:
        resolved = resolved.where(res.c.id <= upto_id)
        superseded = superseded.where(later.c.id <= upto_id)
    filters = [outcome_in(d.c.outcome, "disputed"), not_(resolved), not_(superseded)]
    if upto_id is not None:
        filters.append(d.c.id <= upto_id)
    filters += scope.on(d)
    found: dict[Group, tuple[int, Decimal]] = {}
    if conn.dialect.name == "postgresql":
        query = (
            select(
                d.c.kind,
                d.c.partition_key,
                func.count(),
                func.sum(d.c.claimed_amount - d.c.amount),
            )
            .where(and_(*filters))
            .group_by(d.c.kind, d.c.partition_key)
        )
        for kind, partition, count, variance in conn.execute(query):
            found[(kind, partition)] = (count, Decimal(variance))
        return found
    query = select(d.c.kind, d.c.partition_key, d.c.claimed_amount, d.c.amount).where(
        and_(*filters)
    )
    for kind, partition, claimed, amount in conn.execute(query):
        count, variance = found.get((kind, partition), (0, ZERO))
        found[(kind, partition)] = (count + 1, variance + (claimed or ZERO) - amount)
    return found
