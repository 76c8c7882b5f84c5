"""Reads for the dashboard and ``/metrics``: bounded, indexed, one row per chunk.

Every query here is a range scan over the last minutes (or hour) of a
``created_at`` index on a per-chunk table, never a scan of the per-line
tables: a dashboard refreshing every few seconds costs the ledger nothing it
would notice at full throughput: what it reads grows with the window, not with
the lines settled.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, localcontext

from sqlalchemy import ColumnElement, Connection, Integer, cast, exists, func, select

from shared.adapters.db.tables import chunk_results, chunks, jobs, outbox
from shared.adapters.db.types import EXACT_SUMS, utc

OUTCOMES = ("posted", "disputed", "duplicate", "dead_lettered")


@dataclass(frozen=True)
class Throughput:
    """Lines that reached an outcome, per ``bucket_s`` since ``since`` (oldest first)."""

    since: dt.datetime
    bucket_s: int
    lines: list[int]  # one count per bucket, zeros included
    outcomes: dict[str, int]  # totals over the whole window


def _epoch(conn: Connection, column: ColumnElement[dt.datetime]) -> ColumnElement[int]:
    if conn.dialect.name == "postgresql":
        return cast(func.floor(func.extract("epoch", column)), Integer)
    return cast(func.strftime("%s", column), Integer)  # SQLite stores UTC text


def throughput(conn: Connection, now: dt.datetime, window_s: int, bucket_s: int) -> Throughput:
    """Lines settled per bucket over the last ``window_s`` seconds, from ``chunk_results``.

    A requeue's row moves lines from ``dead_lettered`` to their new outcome, so
    it adds nothing to the total: each line counts once, when first settled.
    """
    buckets = max(1, window_s // bucket_s)
    start = int(now.timestamp()) // bucket_s * bucket_s - (buckets - 1) * bucket_s
    since = dt.datetime.fromtimestamp(start, dt.UTC)
    bucket = (_epoch(conn, chunk_results.c.created_at) // bucket_s).label("bucket")
    lines = sum((chunk_results.c[name] for name in OUTCOMES[1:]), chunk_results.c[OUTCOMES[0]])
    rows = conn.execute(
        select(
            bucket,
            func.sum(lines).label("lines"),
            *(func.sum(chunk_results.c[name]).label(name) for name in OUTCOMES),
        )
        .where(chunk_results.c.created_at >= since)
        .group_by(bucket)
    ).all()
    counts = [0] * buckets
    totals = dict.fromkeys(OUTCOMES, 0)
    for row in rows:
        index = int(row.bucket) - start // bucket_s
        if 0 <= index < buckets:
            counts[index] += int(row.lines or 0)
        for name in OUTCOMES:
            totals[name] += int(getattr(row, name) or 0)
    return Throughput(since=since, bucket_s=bucket_s, lines=counts, outcomes=totals)


def money(conn: Connection, since: dt.datetime) -> dict[str, tuple[Decimal, Decimal]]:
    """Per kind, the amounts posted and disputed (claimed) by the chunks settled
    since ``since``. PostgreSQL sums its NUMERICs exactly, per kind; SQLite's SUM
    would make a float of its text, so there the chunks' amounts are added here."""
    posted, disputed = chunk_results.c.amount_posted, chunk_results.c.amount_disputed
    in_window = chunk_results.c.created_at >= since
    joined = chunk_results.join(jobs, jobs.c.id == chunk_results.c.job_id)
    if conn.dialect.name == "postgresql":
        summed = conn.execute(
            select(jobs.c.kind, func.sum(posted), func.sum(disputed))
            .select_from(joined)
            .where(in_window)
            .group_by(jobs.c.kind)
        )
        return {kind: (Decimal(p), Decimal(d)) for kind, p, d in summed}
    rows = conn.execute(select(jobs.c.kind, posted, disputed).select_from(joined).where(in_window))
    totals: dict[str, tuple[Decimal, Decimal]] = {}
    with localcontext(EXACT_SUMS):
        for kind, posted, disputed in rows:
            before = totals.get(kind, (Decimal(0), Decimal(0)))
            totals[kind] = (before[0] + Decimal(posted), before[1] + Decimal(disputed))
    return totals


def oldest_unsettled_chunk(conn: Connection, since: dt.datetime) -> dt.datetime | None:
    """When the oldest accepted chunk still without its processed marker was
    stored, looking back to ``since`` only (the bound keeps the scan short).

    RabbitMQ does not tell a message's age; a chunk is stored when its message
    is published and marked when it is settled, so this is the age of the
    oldest work still waiting in (or being worked from) the queues.
    """
    settled = exists().where(chunk_results.c.chunk_id == chunks.c.id)
    created = conn.execute(
        select(chunks.c.created_at)
        .join(jobs, jobs.c.id == chunks.c.job_id)
        .where(chunks.c.created_at >= since, jobs.c.state == "accepted", ~settled)
        .order_by(chunks.c.created_at)
        .limit(1)
    ).scalar()
    return None if created is None else utc(created)


@dataclass(frozen=True)
class RelayState:
    backlog: int  # outbox rows (committed units of work) not yet published
    oldest_unpublished_at: dt.datetime | None


def relay_state(conn: Connection) -> RelayState:
    """The outbox backlog, read through its partial index of unpublished rows:
    outcome units and webhook events alike, both the relay's to handle."""
    row = conn.execute(
        select(func.count(), func.min(outbox.c.created_at)).where(outbox.c.published_at.is_(None))
    ).one()
    oldest = None if row[1] is None else utc(row[1])
    return RelayState(int(row[0]), oldest)
