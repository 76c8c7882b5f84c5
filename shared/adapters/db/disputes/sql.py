"""The dispute queue in SQL (docs/architecture.md#exactly-once-resolution): a
dispute is its disputed ledger row, its status derived when read, never stored.

``resolved``: a ``resolved`` row supersedes it (found through the partial
unique index ``uq_ledger_entries_resolution``). ``superseded``: a later
posted or disputed row of the same identity exists (same kind, partition and
key, a higher id; found through the prefix of ``uq_ledger_entries_identity``,
whose predicate the probe repeats). Else ``open``. The queue itself is listed
through ``ix_ledger_entries_disputes`` (disputed rows only, by id).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    and_,
    exists,
    func,
    literal,
    not_,
    select,
)

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.disputes.types import Dispute, Filter, Resolution
from shared.adapters.db.tables import IDENTITY_OUTCOMES, dispute_resolutions, ledger_entries
from shared.adapters.db.types import identity_key, utc
from shared.domain.disputes import Status, status_of, variance

d = ledger_entries.alias("d")  # the disputed row: the dispute
res = ledger_entries.alias("res")  # its resolution's ledger row, if any
_later = ledger_entries.alias("later")
dr = dispute_resolutions

# A dispute's resolution, if any: its ``resolved`` row and the decision behind it.
RESOLVED = res.c.id.is_not(None)
SUPERSEDED = (
    exists()
    .where(
        identity_key(_later.c.reconciliation_key) == identity_key(d.c.reconciliation_key),
        outcome_in(_later.c.outcome, *IDENTITY_OUTCOMES),
        _later.c.kind == d.c.kind,
        _later.c.partition_key == d.c.partition_key,
        _later.c.id > d.c.id,
    )
    .correlate(d)
)
STATUS_WHERE: dict[str, ColumnElement[bool]] = {
    "open": and_(not_(RESOLVED), not_(SUPERSEDED)),
    "resolved": RESOLVED,
    "superseded": and_(not_(RESOLVED), SUPERSEDED),
}

_DISPUTE_COLUMNS = (
    d.c.id,
    d.c.kind,
    d.c.partition_key,
    d.c.job_id,
    d.c.document_id,
    d.c.line_ref,
    d.c.reconciliation_key,
    d.c.contract_version,
    d.c.claimed_amount,
    d.c.amount,
    d.c.created_at,
    res.c.id.label("resolution_id"),
    res.c.amount.label("resolution_amount"),
    dr.c.decision,
    dr.c.note,
    dr.c.resolved_by,
    dr.c.resolved_at,
    SUPERSEDED.label("superseded"),
)


def joined(*columns: Any) -> Select[Any]:
    """``columns`` over disputed rows joined to their resolutions, if any."""
    resolution = and_(res.c.supersedes_id == d.c.id, outcome_in(res.c.outcome, "resolved"))
    return (
        select(*columns)
        .select_from(d.outerjoin(res, resolution).outerjoin(dr, dr.c.ledger_entry_id == res.c.id))
        .where(outcome_in(d.c.outcome, "disputed"))
    )


def disputes_query(where: Filter, dialect: str) -> Select[Any]:
    """Every dispute matching ``where`` with what ``to_dispute`` reads, oldest first."""
    return apply(joined(*_DISPUTE_COLUMNS), where, dialect).order_by(d.c.id)


def apply(query: Select[Any], where: Filter, dialect: str) -> Select[Any]:
    if where.status != "all":
        query = query.where(STATUS_WHERE[where.status])
    for name in ("kind", "partition_key", "job_id"):
        value = getattr(where, name)
        if value is not None:
            query = query.where(d.c[name] == value)
    if where.min_abs_variance is not None:
        query = query.where(abs_variance(dialect, operator.ge, where.min_abs_variance))
    if where.max_abs_variance is not None:
        query = query.where(abs_variance(dialect, operator.le, where.max_abs_variance))
    if where.opened_before is not None:
        query = query.where(d.c.created_at < utc(where.opened_before))
    return query


def abs_variance(
    dialect: str, op: Callable[[Any, Any], Any], bound: Decimal, of: Any = None
) -> ColumnElement[bool]:
    """``op(abs(claimed - amount), bound)`` for a dispute row, exact on both
    backends: SQLite keeps money as text and its arithmetic is floating point,
    so there ``settleq_cmp_abs_diff`` (types.py) compares the digits."""
    row = d if of is None else of
    if dialect == "postgresql":
        return op(func.abs(row.c.claimed_amount - row.c.amount), bound)  # type: ignore[no-any-return]
    cmp = func.settleq_cmp_abs_diff(
        row.c.claimed_amount, row.c.amount, literal(format(bound, "f"), String)
    )
    return op(cmp, 0)  # type: ignore[no-any-return]


def status(row: Any) -> Status:
    return status_of(resolved=row.resolution_id is not None, superseded=bool(row.superseded))


def to_dispute(row: Any) -> Dispute:
    resolution = None
    if row.resolution_id is not None:
        resolution = Resolution(
            decision=row.decision,
            amount=row.resolution_amount,
            note=row.note,
            resolved_at=utc(row.resolved_at),
            resolved_by=row.resolved_by,
            ledger_entry_id=row.resolution_id,
        )
    return Dispute(
        id=row.id,
        ledger_entry_id=row.id,
        kind=row.kind,
        partition_key=row.partition_key,
        job_id=row.job_id,
        document_id=row.document_id,
        line_ref=row.line_ref,
        reconciliation_key=row.reconciliation_key,
        contract_version=row.contract_version,
        claimed_amount=row.claimed_amount,
        model_amount=row.amount,
        variance=variance(row.claimed_amount, row.amount),
        status=status(row),
        opened_at=utc(row.created_at),
        resolution=resolution,
    )
