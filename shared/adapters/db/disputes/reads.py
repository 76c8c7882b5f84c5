"""Reading the dispute queue (docs/architecture.md#exactly-once-resolution):
pages, the whole list as a stream, one dispute, totals. Statuses are derived
in SQL (disputes/sql.py)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal, localcontext
from typing import Any

from sqlalchemy import Engine, case, func

from shared.adapters.db.dialect import id_in
from shared.adapters.db.disputes.sql import (
    RESOLVED,
    STATUS_WHERE,
    SUPERSEDED,
    d,
    disputes_query,
    joined,
    res,
    status,
    to_dispute,
)
from shared.adapters.db.disputes.types import Dispute, Filter, PartitionVariance, Stats, Totals
from shared.adapters.db.types import EXACT_SUMS, utc
from shared.domain.disputes import Status
from shared.domain.money import ZERO

STREAM_BATCH = 2000
TOP_PARTITIONS = 10


def page(engine: Engine, where: Filter, *, after_id: int | None, limit: int) -> list[Dispute]:
    """Oldest first (ascending id); the cursor is the id of the last dispute seen."""
    query = disputes_query(where, engine.dialect.name)
    if after_id is not None:
        query = query.where(d.c.id > after_id)
    with engine.connect() as conn:
        return [to_dispute(r) for r in conn.execute(query.limit(limit))]


def stream(engine: Engine, where: Filter) -> Iterator[Dispute]:
    """Every matching dispute, oldest first, read in batches from one server-side
    cursor: never all in memory (the CSV export of 100,000 disputes).

    On SQLite, pages by id instead, each in its own short transaction: a
    transaction there holds the database's one write lock, which an export
    must not keep from settlement for its whole length."""
    if engine.dialect.name != "postgresql":
        after: int | None = None
        while True:
            batch = page(engine, where, after_id=after, limit=STREAM_BATCH)
            yield from batch
            if len(batch) < STREAM_BATCH:
                return
            after = batch[-1].id
    query = disputes_query(where, engine.dialect.name)
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=STREAM_BATCH).execute(query)
        for row in result:
            yield to_dispute(row)


def get(engine: Engine, dispute_id: int) -> Dispute | None:
    """None when no disputed ledger row has this id."""
    query = disputes_query(Filter(status="all"), engine.dialect.name).where(d.c.id == dispute_id)
    with engine.connect() as conn:
        row = conn.execute(query).first()
    return None if row is None else to_dispute(row)


def statuses(engine: Engine, ledger_entry_ids: list[int]) -> dict[int, Status]:
    """The dispute status of each of these disputed rows (a job's lines page);
    ids that are not disputed rows are left out."""
    if not ledger_entry_ids:
        return {}
    query = joined(*_STATUS_COLUMNS).where(id_in(d.c.id, ledger_entry_ids, engine.dialect.name))
    with engine.connect() as conn:
        return {r.id: status(r) for r in conn.execute(query)}


# What ``status`` reads of a dispute row.
_STATUS_COLUMNS = (d.c.id, res.c.id.label("resolution_id"), SUPERSEDED.label("superseded"))


# -- totals -------------------------------------------------------------------------


def _sums(rows: list[Any]) -> dict[tuple[Any, ...], list[Any]]:
    """Per group key: [count, claimed, model, variance, abs variance], summed exactly."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    with localcontext(EXACT_SUMS):
        for key, claimed, model in rows:
            g = groups.setdefault(key, [0, ZERO, ZERO, ZERO, ZERO])
            g[0] += 1
            g[1] += claimed
            g[2] += model
            g[3] += claimed - model
            g[4] += abs(claimed - model)
    return groups


def stats(engine: Engine) -> Stats:
    """Totals per (status, kind), the partitions with the largest open abs variance,
    and the oldest open dispute's opening time."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            return _stats_in_sql(conn)
        rows = conn.execute(
            joined(
                d.c.kind,
                d.c.partition_key,
                d.c.claimed_amount,
                d.c.amount,
                d.c.created_at,
                *_STATUS_COLUMNS,
            ).order_by(d.c.id)
        ).all()
    # SQLite keeps money as text: summed here, exactly.
    statuses_ = [status(r) for r in rows]
    by_status = _sums(
        [((s, r.kind), r.claimed_amount, r.amount) for s, r in zip(statuses_, rows, strict=True)]
    )
    opened = [r for s, r in zip(statuses_, rows, strict=True) if s == "open"]
    by_partition = _sums([((r.kind, r.partition_key), r.claimed_amount, r.amount) for r in opened])
    return _assemble(
        [(k[0], k[1], *v) for k, v in by_status.items()],
        [(k[0], k[1], v[0], v[3], v[4]) for k, v in by_partition.items()],
        utc(opened[0].created_at) if opened else None,
    )


def _stats_in_sql(conn: Any) -> Stats:
    status_expr = case((RESOLVED, "resolved"), (SUPERSEDED, "superseded"), else_="open").label(
        "status"
    )
    diff = d.c.claimed_amount - d.c.amount
    sums = (
        func.count(),
        func.sum(d.c.claimed_amount),
        func.sum(d.c.amount),
        func.sum(diff),
        func.sum(func.abs(diff)),
    )
    totals = conn.execute(
        joined(status_expr, d.c.kind, *sums).group_by(status_expr, d.c.kind)
    ).all()
    abs_sum = func.sum(func.abs(diff))
    top = conn.execute(
        joined(d.c.kind, d.c.partition_key, func.count(), func.sum(diff), abs_sum)
        .where(STATUS_WHERE["open"])
        .group_by(d.c.kind, d.c.partition_key)
        .order_by(abs_sum.desc(), d.c.kind, d.c.partition_key)
        .limit(TOP_PARTITIONS)
    ).all()
    oldest = conn.execute(
        joined(d.c.created_at).where(STATUS_WHERE["open"]).order_by(d.c.id).limit(1)
    ).scalar()
    return _assemble(
        [tuple(r) for r in totals],
        [tuple(r) for r in top],
        None if oldest is None else utc(oldest),
    )


def _assemble(totals: list[Any], partitions: list[Any], oldest: Any) -> Stats:
    ordered = sorted(partitions, key=lambda p: (-p[4], p[0], p[1]))[:TOP_PARTITIONS]
    return Stats(
        totals=[
            Totals(s, k, int(n), Decimal(c), Decimal(m), Decimal(v), Decimal(a))
            for s, k, n, c, m, v, a in sorted(totals, key=lambda t: (t[0], t[1]))
        ],
        top_partitions=[
            PartitionVariance(k, p, int(n), Decimal(v), Decimal(a)) for k, p, n, v, a in ordered
        ],
        oldest_open_at=oldest,
    )
