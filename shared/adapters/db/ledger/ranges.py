"""Where a write's ledger rows are: every write of ledger rows records, in its
transaction, the range of ids it wrote for each job (with the batch positions
its lines span) and for each document. They are read by read/ranges.py: a
unit of work costs a range a job and one a document, where an index of the
ledger by job or by document costs an entry a line
(docs/architecture.md#ledger-schema).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from shared.adapters.db.bulk import insert_rows
from shared.adapters.db.tables import ledger_document_ranges, ledger_job_ranges
from shared.domain.pipeline.units import LedgerRow


def record(
    conn: Connection,
    rows: Sequence[LedgerRow],
    positions: tuple[int, int] | None = None,
    unpositioned: int | None = None,
) -> None:
    """The ranges of ``rows``, just written, by job and by document. A unit's rows
    are one job's: ``positions`` is the span of its lines' batch positions and
    ``unpositioned`` how many of them have none; other rows (resolutions,
    matches) are no lines and have no position."""
    if not rows:
        return
    jobs: dict[str, list[Any]] = {}
    documents: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        i = row.id
        job = jobs.get(row.job_id)
        if job is None:
            jobs[row.job_id] = job = [i, i, 0]
        elif i < job[0]:
            job[0] = i
        elif i > job[1]:
            job[1] = i
        job[2] += 1
        document = (row.document_id, row.partition_key)
        span = documents.get(document)
        if span is None:
            documents[document] = [i, i]
        elif i < span[0]:
            span[0] = i
        elif i > span[1]:
            span[1] = i
    low, high = positions if positions is not None else (None, None)
    insert_rows(
        conn,
        ledger_job_ranges,
        [
            {
                "job_id": job_id,
                "first_id": first,
                "last_id": last,
                "first_position": low,
                "last_position": high,
                "unpositioned": count if positions is None else unpositioned or 0,
            }
            for job_id, (first, last, count) in jobs.items()
        ],
    )
    insert_rows(
        conn,
        ledger_document_ranges,
        [
            {"document_id": d, "partition_key": p, "first_id": first, "last_id": last}
            for (d, p), (first, last) in documents.items()
        ],
    )
