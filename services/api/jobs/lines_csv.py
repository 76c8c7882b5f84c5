"""A job's lines as CSV, for the spreadsheet finance works in (docs/api.md#jobs).

One row per line, in the order of the job's lines page. The first eleven
columns are the page's fields and stay first (columns are only ever added at
the end); then the job, its kind and the line's partition, then the line's
business fields as its kind names them (``Kind.line_columns``: a promo line's
sku and store, a freight leg's miles and accessorials, a recipe's effective
time). Those come from the job's stored chunks, read alongside the outcome
rows by the line's batch position. How cells are written is the one CSV
writer's (``services.api.csv_export``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from itertools import islice
from typing import Any

from pydantic import TypeAdapter

from services.api import csv_export
from services.api.csv_export import amount
from shared.adapters.db.disputes import queue as disputes_db
from shared.adapters.db.jobs.lines import LineRow, stream_lines
from shared.adapters.db.stored_chunk import job_payloads
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Kind, LineCell
from shared.domain.pipeline.settlement import decode_chunk
from shared.domain.pipeline.units import chunk_start
from shared.errors import StructuralError
from shared.wire.cells import Cell

HEADER = (
    "document_id",
    "line_ref",
    "outcome",
    "reason",
    "amount",
    "claimed_amount",
    "delta",
    "reconciliation_key",
    "contract_version",
    "dispute_status",
    "correlation_id",
    "job_id",
    "kind",
    "partition_key",
)
_LOOKUP = 1000  # the dispute statuses of this many lines per query


# After the kind's own columns: columns are only ever added at the end.
LATER = ("ledger_claimed_amount",)


def header(kind: str) -> tuple[str, ...]:
    return HEADER + KINDS[kind].line_columns + LATER


def _fields(
    engine: Any, kind: Kind[Any, Any], job_id: str
) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """(position, partition_key and the kind's line cells) of every line of the
    job's stored chunks, in position order."""
    documents = TypeAdapter(list[kind.document_model])  # type: ignore[name-defined]
    for chunk in job_payloads(engine, job_id):
        try:
            decoded = decode_chunk(kind, documents, chunk.payload, chunk.lines)
        except StructuralError:
            continue  # its lines were dead-lettered whole: no fields to show
        if decoded.failures:
            continue  # a document that cannot be read hides where the next ones start
        position = chunk_start(chunk.seq)
        for document in decoded.documents:
            for cells in kind.line_cells(document):
                yield position, (document.partition_key, *cells)
                position += 1


def _rows(engine: Any, job_id: str, kind: str, lines: Iterable[LineRow]) -> Iterator[list[Cell]]:
    quantum = KINDS[kind].quantum
    known = _fields(engine, KINDS[kind], job_id)
    blank: tuple[LineCell, ...] = (None,) * (1 + len(KINDS[kind].line_columns))
    at, fields = next(known, (None, blank))
    source = iter(lines)
    while page := list(islice(source, _LOOKUP)):
        disputed = [r.id for r in page if r.source == "ledger" and r.outcome == "disputed"]
        status = disputes_db.statuses(engine, disputed) if disputed else {}
        for r in page:
            # Both come in position order: the fields catch up with the line.
            while at is not None and r.position is not None and at < r.position:
                at, fields = next(known, (None, blank))
            found = fields if at is not None and at == r.position else blank
            yield [
                r.document_id,
                r.line_ref,
                r.outcome,
                r.reason,
                amount(r.amount, quantum),
                amount(r.claimed_amount, quantum),
                amount(r.delta, quantum),
                r.reconciliation_key,
                r.contract_version,
                status.get(r.id) if r.source == "ledger" else None,
                r.correlation_id,
                job_id,
                kind,
                *found,
                amount(r.ledger_claimed_amount, quantum),
            ]


def chunks(engine: Any, job_id: str, kind: str, outcome: str | None) -> Generator[str, None, None]:
    """The CSV text of the job's lines (or of one outcome's), header row first."""
    lines = stream_lines(engine, job_id, outcome=outcome)
    return csv_export.chunks(header(kind), _rows(engine, job_id, kind, lines))
