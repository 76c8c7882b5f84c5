"""Sums of ledger rows by (kind, partition_key): a period's activity and the
disputes open, on both backends.

PostgreSQL sums ``NUMERIC`` exactly, so it groups. SQLite keeps money as text
and its ``sum`` is floating point, so there the rows are read and summed as
``Decimal``s here (a single-machine ledger is small).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, func, not_, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.tables import contracts, ledger_entries
from shared.domain.kinds import shown
from shared.domain.money import ZERO
from shared.domain.periods import Activity, Balance

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
        sums.add(outcome, repriced, total, count)
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


def priced(conn: Connection, balances: Iterable[Balance], scope: Scope) -> None:
    """Give each balance its currency: its partition's contract's (every
    version names the same one, docs/api.md#contracts)."""
    query = (
        select(contracts.c.kind, contracts.c.partition_key, contracts.c.currency)
        .where(*scope.on(contracts))
        .distinct()  # one a partition, however many versions it has
    )
    found = {(kind, partition): currency for kind, partition, currency in conn.execute(query)}
    for b in balances:
        b.currency = found.get((b.kind, b.partition_key), "")


def totals(balances: Iterable[Balance]) -> list[dict[str, Any]]:
    """The rows and sum of delta of each (kind, outcome, currency) in
    ``balances``' activity: a period's totals, never added across currencies."""
    found: dict[tuple[str, str, str], tuple[int, Decimal]] = {}
    for b in balances:
        for outcome, (rows, delta) in b.activity.outcomes.items():
            key = (b.kind, outcome, b.currency)
            count, total = found.get(key, (0, ZERO))
            found[key] = (count + rows, total + delta)
    return [
        {
            "kind": kind,
            "outcome": outcome,
            "currency": currency,
            "rows": rows,
            "delta": shown(kind, delta),
        }
        for (kind, outcome, currency), (rows, delta) in sorted(found.items())
    ]


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


def disputes_moved(
    conn: Connection,
    in_period: Callable[[Any], list[ColumnElement[bool]]],
    after_id: int,
    scope: Scope,
) -> tuple[dict[Group, tuple[int, Decimal]], dict[Group, tuple[int, Decimal]]]:
    """How a period's rows (``in_period(alias)``: the filter of its rows on an
    alias of the ledger, close.py::in_period) moved the disputes open, by (kind, partition_key): the
    disputes opened before it (ids up to ``after_id``) that one of its rows
    resolved or superseded, and the disputes it opened that none of its rows
    did; each as a count and the sum of variances (claimed − model).

    A row that resolves or supersedes a dispute names it in ``supersedes_id``
    (a resolution always; a newer version supersedes the newest row of its
    identity, which is the dispute while the dispute is open): so the disputes
    open at a period's end are those open at its start, less the first, plus
    the second, and reading them costs the period's rows, not the ledger's."""
    r = _l.alias("r")
    d = _l.alias("d")
    named = (
        select(r.c.supersedes_id)
        .where(*in_period(r), r.c.supersedes_id.is_not(None))
        .scalar_subquery()
    )
    settled = [outcome_in(d.c.outcome, "disputed"), d.c.id <= after_id, d.c.id.in_(named)]
    opened = [
        *in_period(d),
        outcome_in(d.c.outcome, "disputed"),
        d.c.id.not_in(named),
    ]
    return (
        _variances(conn, d, [*settled, *scope.on(d)]),
        _variances(conn, d, [*opened, *scope.on(d)]),
    )


def _variances(conn: Connection, d: Any, where: list[Any]) -> dict[Group, tuple[int, Decimal]]:
    found: dict[Group, tuple[int, Decimal]] = {}
    if conn.dialect.name == "postgresql":
        query = (
            select(
                d.c.kind, d.c.partition_key, func.count(), func.sum(d.c.claimed_amount - d.c.amount)
            )
            .where(and_(*where))
            .group_by(d.c.kind, d.c.partition_key)
        )
        for kind, partition, count, variance in conn.execute(query):
            found[(kind, partition)] = (count, Decimal(variance))
        return found
    query = select(d.c.kind, d.c.partition_key, d.c.claimed_amount, d.c.amount).where(and_(*where))
    for kind, partition, claimed, amount in conn.execute(query):
        count, variance = found.get((kind, partition), (0, ZERO))
        found[(kind, partition)] = (count + 1, variance + (claimed or ZERO) - amount)
    return found
