"""The dispute queue as CSV, for the spreadsheet finance works in (docs/api.md#disputes).

The header row is stable (columns are only ever added at the end); one row per
dispute; amounts are plain decimals (never an exponent, never a float), times
ISO-8601 in UTC, the resolution columns empty while a dispute has none; quoting
is RFC 4180 (the csv module, CRLF line ends). The rows come from one database
cursor in batches of ``ROWS_PER_CHUNK``, each turned into one text chunk in a
worker thread: the export never holds more than a chunk.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Generator, Iterable, Iterator

from starlette.concurrency import run_in_threadpool

from services.api.dispute_schemas import plain
from services.api.timefmt import iso
from shared.adapters.db.disputes import Dispute

HEADER = (
    "id",
    "kind",
    "partition_key",
    "job_id",
    "document_id",
    "line_ref",
    "reconciliation_key",
    "contract_version",
    "claimed_amount",
    "model_amount",
    "variance",
    "status",
    "opened_at",
    "decision",
    "decided_amount",
    "note",
    "resolved_at",
    "resolved_by",
    "resolution_ledger_entry_id",
)
ROWS_PER_CHUNK = 1000


def row(d: Dispute) -> list[str]:
    r = d.resolution
    resolution = (
        ["", "", "", "", "", ""]
        if r is None
        else [
            r.decision,
            plain(r.amount),
            r.note,
            iso(r.resolved_at) or "",
            r.resolved_by,
            str(r.ledger_entry_id),
        ]
    )
    return [
        str(d.id),
        d.kind,
        d.partition_key,
        d.job_id,
        d.document_id,
        d.line_ref,
        d.reconciliation_key,
        str(d.contract_version),
        plain(d.claimed_amount),
        plain(d.model_amount),
        plain(d.variance),
        d.status,
        iso(d.opened_at) or "",
        *resolution,
    ]


def chunks(
    disputes: Iterable[Dispute], rows_per_chunk: int = ROWS_PER_CHUNK
) -> Generator[str, None, None]:
    """The CSV text: the header row first, then ``rows_per_chunk`` disputes per chunk."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # excel dialect: RFC 4180 quoting, CRLF
    writer.writerow(HEADER)
    count = 0
    for d in disputes:
        writer.writerow(row(d))
        count += 1
        if count == rows_per_chunk:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
            count = 0
    yield buffer.getvalue()


async def in_threads(source: Iterator[str]) -> AsyncIterator[str]:
    """Each chunk made in a worker thread (the database reads block); the
    source is closed (its cursor released) however the response ends."""
    try:
        while True:
            chunk = await run_in_threadpool(next, source, None)
            if chunk is None:
                return
            yield chunk
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            await run_in_threadpool(close)
