"""Where a write's ledger rows are: every write of ledger rows records, in its
transaction, the range of ids it wrote for each job (with the batch positions
its lines span) and for each document. They are read by read/ranges.py: a
unit of work costs a range a job and one a document, where an index of the
ledger by job or by document costs an entry a line
(docs/architecture.md#ledger-schema).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
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
    # Per group, not per row in Python: a unit's rows are one job's, and its
    # documents' rows are consecutive (groupby and min/max run in C).
    jobs: dict[str, list[int]] = {}
    for job_id, group in groupby(rows, _JOB):
        ids = [row[0] for row in group]
        _widen(jobs, job_id, min(ids), max(ids), len(ids))
    documents: dict[tuple[str, str], list[int]] = {}
    for document, group in groupby(rows, _DOCUMENT):
        ids = [row[0] for row in group]
        _widen(documents, document, min(ids), max(ids), len(ids))
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
            for (d, p), (first, last, _) in documents.items()
        ],
    )


_JOB = itemgetter(LedgerRow._fields.index("job_id"))
_DOCUMENT = itemgetter(
    LedgerRow._fields.index("document_id"), LedgerRow._fields.index("partition_key")
)


def _widen(spans: dict[Any, list[int]], name: Any, first: int, last: int, count: int) -> None:
    """Add a run of ``count`` ids from ``first`` to ``last`` to ``name``'s span."""
    span = spans.get(name)
    if span is None:
        spans[name] = [first, last, count]
    else:
        span[0], span[1], span[2] = min(span[0], first), max(span[1], last), span[2] + count
