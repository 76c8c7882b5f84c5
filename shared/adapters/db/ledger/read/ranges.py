"""Where a job's and a document's ledger rows are: their id ranges
(``ledger_job_ranges``, ``ledger_document_ranges``, written with the rows by
ledger/ranges.py). A job's lines page, a document's lines and a remittance's
rows read their ranges first, then the ledger by its primary key inside them:
the ledger keeps no index by job or by document
(docs/architecture.md#ledger-schema).

Ids drawn by units committing at the same time interleave, so a range may
hold other rows, and two ranges of one job or document may overlap: every
read through them filters by its job or document too, and reads each id once
(``merged``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, false, or_, select

from shared.adapters.db.tables import ledger_document_ranges, ledger_job_ranges

Interval = tuple[int, int]  # first and last id, both included


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals' union as disjoint intervals, ascending."""
    out: list[Interval] = []
    for first, last in sorted(intervals):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def within(column: Any, intervals: Sequence[Interval]) -> ColumnElement[bool]:
    """``column`` in one of the (disjoint) intervals: each row once, each interval
    a range of the primary key."""
    if not intervals:
        return false()
    return or_(*(column.between(first, last) for first, last in intervals))


def of_documents(
    conn: Connection, document_ids: Sequence[str], partition_key: str | None = None
) -> list[Interval]:
    """Where the documents' rows are (of one partition, or any)."""
    r = ledger_document_ranges.c
    query = select(r.first_id, r.last_id).where(r.document_id.in_(list(document_ids)))
    if partition_key is not None:
        query = query.where(r.partition_key == partition_key)
    return merged((first, last) for first, last in conn.execute(query))


def of_jobs(conn: Connection, job_ids: Sequence[str]) -> list[Interval]:
    """Where the jobs' rows are."""
    r = ledger_job_ranges.c
    query = select(r.first_id, r.last_id).where(r.job_id.in_(list(job_ids)))
    return merged((first, last) for first, last in conn.execute(query))


def job_ranges(conn: Connection, job_id: str) -> list[Any]:
    """A job's ranges, each with its positions' span and unpositioned count."""
    r = ledger_job_ranges.c
    return list(
        conn.execute(
            select(r.first_id, r.last_id, r.first_position, r.last_position, r.unpositioned).where(
                r.job_id == job_id
            )
        )
    )
