"""A line's story and a document's lines, read from the ledger without knowing
their job (docs/api.md#ledger-history-and-search).

- ``identity(engine, key)``: every ledger row of one reconciliation key, oldest
  first: its posted and disputed rows at each contract version (the identity
  index) and the resolutions of its disputed rows (the resolution index).
- ``document_lines(engine, document_id, ...)``: the lines of a document across
  every job that carried it: the ledger's rows (in the document's id ranges,
  ranges.py)
  and the duplicates and dead-lettered lines (``ix_line_outcomes_document``),
  whose partition is their dead letter's or, for a duplicate, its identity's.

Both answer from an index on a ledger of any size: a key's rows are its
versions, and a document's lines are its lines in the jobs that carried it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from sqlalchemy import Engine, Select, func, literal, null, select, text, tuple_, union_all

from shared.adapters.db.ledger.read import ranges
from shared.adapters.db.tables import dead_letters, jobs, ledger_entries, line_outcomes
from shared.adapters.db.types import identity_key

le, lo, dl = ledger_entries, line_outcomes, dead_letters
# The partial indexes' own predicates, as literals: a predicate with bound
# parameters may not be proved to imply them, and the index would go unused.
_SETTLED = text("ledger_entries.outcome IN ('posted', 'disputed')")
_RESOLVED = text("ledger_entries.outcome = 'resolved'")
Source = Literal["ledger", "outcome"]


@dataclass(frozen=True)
class IdentityRow:
    id: int
    job_id: str
    kind: str
    partition_key: str
    document_id: str
    line_ref: str
    contract_version: int
    outcome: str
    amount: Decimal
    claimed_amount: Decimal | None
    delta: Decimal
    supersedes_id: int | None
    correlation_id: str | None
    created_at: datetime


def identity(engine: Engine, key: str) -> list[IdentityRow]:
    """The key's rows, oldest first (empty: no such identity)."""
    columns = (
        le.c.id,
        le.c.job_id,
        le.c.kind,
        le.c.partition_key,
        le.c.document_id,
        le.c.line_ref,
        le.c.contract_version,
        le.c.outcome,
        le.c.amount,
        le.c.claimed_amount,
        le.c.delta,
        le.c.supersedes_id,
        le.c.correlation_id,
        le.c.created_at,
    )
    mine = identity_key(le.c.reconciliation_key) == identity_key(literal(key))
    disputed = select(le.c.id).where(mine, _SETTLED, le.c.outcome == "disputed")
    query = union_all(
        select(*columns).where(mine, _SETTLED),
        select(*columns).where(_RESOLVED, le.c.supersedes_id.in_(disputed.scalar_subquery())),
    ).order_by("id")
    with engine.connect() as conn:
        return [IdentityRow(*row) for row in conn.execute(query)]


@dataclass(frozen=True)
class DocumentLine:
    source: Source  # the ledger's row, or a line the ledger did not take
    id: int
    job_id: str
    kind: str
    partition_key: str | None
    document_id: str
    line_ref: str
    outcome: str
    reason: str | None
    amount: Decimal | None
    claimed_amount: Decimal | None
    delta: Decimal | None
    reconciliation_key: str | None
    contract_version: int
    correlation_id: str | None
    ledger_claimed_amount: Decimal | None = None  # a duplicate claimed_amount_differs

    # Its place in line order (below): its line reference, its source (0 the
    # ledger's row, 1 another outcome) and its id.
    @property
    def cursor(self) -> DocumentAfter:
        return (self.line_ref, 0 if self.source == "ledger" else 1, self.id)


DocumentAfter = tuple[str, int, int]


def document_lines(
    engine: Engine,
    document_id: str,
    *,
    partition_key: str | None = None,
    outcome: str | None = None,
    after: DocumentAfter | None = None,
    limit: int,
) -> list[DocumentLine]:
    """The document's lines in line order: by line reference, a shorter one first
    (line "2" before line "10"), then the ledger's row before a duplicate or a
    dead-lettered line of the same line, then oldest first. ``after`` is the
    last one's ``cursor``. A document's rows are found through its indexes
    and sorted: a document is as many rows as its lines times its jobs."""
    with engine.connect() as conn:
        parts = []
        if outcome in (None, "posted", "disputed"):
            where = ranges.of_documents(conn, [document_id], partition_key)
            parts.append(_ledger(document_id, partition_key, outcome, where))
        if outcome in (None, "duplicate", "dead_lettered"):
            parts.append(_outcomes(document_id, partition_key, outcome))
        lines = (union_all(*parts) if len(parts) > 1 else parts[0]).subquery("lines")
        order = (func.length(lines.c.line_ref), lines.c.line_ref, lines.c.rank, lines.c.id)
        query = select(*(c for c in lines.c if c.name != "rank"))
        if after is not None:
            ref, rank, last_id = after
            query = query.where(tuple_(*order) > tuple_(len(ref), ref, rank, last_id))
        return [DocumentLine(*row) for row in conn.execute(query.order_by(*order).limit(limit))]


def _ledger(
    document_id: str,
    partition_key: str | None,
    outcome: str | None,
    where: list[ranges.Interval],
) -> Select[Any]:
    query = select(
        literal("ledger").label("source"),
        le.c.id,
        le.c.job_id,
        le.c.kind,
        le.c.partition_key,
        le.c.document_id,
        le.c.line_ref,
        le.c.outcome,
        null().label("reason"),
        le.c.amount,
        le.c.claimed_amount,
        le.c.delta,
        le.c.reconciliation_key,
        le.c.contract_version,
        le.c.correlation_id,
        null().label("ledger_claimed_amount"),
        literal(0).label("rank"),
    ).where(ranges.within(le.c.id, where), le.c.document_id == document_id, _SETTLED)
    if partition_key is not None:
        query = query.where(le.c.partition_key == partition_key)
    if outcome is not None:
        query = query.where(le.c.outcome == outcome)
    return query


def _outcomes(document_id: str, partition_key: str | None, outcome: str | None) -> Select[Any]:
    # A duplicate's partition is its identity's (a key names its partition): the
    # identity's first settled row, through the identity index.
    original = le.alias("original")
    identity_partition = (
        select(original.c.partition_key)
        .where(
            identity_key(original.c.reconciliation_key) == identity_key(lo.c.reconciliation_key),
            text("original.outcome IN ('posted', 'disputed')"),
        )
        .limit(1)
        .scalar_subquery()
    )
    partition = func.coalesce(dl.c.partition_key, identity_partition)
    query = (
        select(
            literal("outcome").label("source"),
            lo.c.id,
            lo.c.job_id,
            jobs.c.kind,
            partition.label("partition_key"),
            lo.c.document_id,
            lo.c.line_ref,
            lo.c.outcome,
            lo.c.reason,
            lo.c.amount,
            lo.c.claimed_amount,
            lo.c.delta,
            lo.c.reconciliation_key,
            lo.c.contract_version,
            lo.c.correlation_id,
            lo.c.ledger_claimed_amount,
            literal(1).label("rank"),
        )
        .select_from(
            lo.join(jobs, jobs.c.id == lo.c.job_id).outerjoin(dl, dl.c.id == lo.c.dead_letter_id)
        )
        .where(lo.c.document_id == document_id)
    )
    if partition_key is not None:
        query = query.where(partition == partition_key)
    if outcome is not None:
        query = query.where(lo.c.outcome == outcome)
    return query
