"""The dispute queue as CSV, for the spreadsheet finance works in (docs/api.md#disputes).

The header row is stable (columns are only ever added at the end); one row per
dispute; the resolution columns empty while a dispute has none. How cells are
written (amounts as numbers, text neutralised) is the one CSV writer's,
``services.api.csv_export``. The rows come from one database cursor.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

from services.api import csv_export
from services.api.csv_export import amount
from shared.adapters.db.disputes.queue import Dispute
from shared.domain.kinds import KINDS
from shared.wire.cells import Cell
from shared.wire.times import iso

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


def row(d: Dispute) -> list[Cell]:
    quantum = KINDS[d.kind].quantum
    r = d.resolution
    resolution: list[Cell] = (
        [None] * 6
        if r is None
        else [
            r.decision,
            amount(r.amount, quantum),
            r.note,
            iso(r.resolved_at),
            r.resolved_by,
            r.ledger_entry_id,
        ]
    )
    return [
        d.id,
        d.kind,
        d.partition_key,
        d.job_id,
        d.document_id,
        d.line_ref,
        d.reconciliation_key,
        d.contract_version,
        amount(d.claimed_amount, quantum),
        amount(d.model_amount, quantum),
        amount(d.variance, quantum),
        d.status,
        iso(d.opened_at),
        *resolution,
    ]


def chunks(
    disputes: Iterable[Dispute], rows_per_chunk: int | None = None
) -> Generator[str, None, None]:
    """The CSV text: the header row first, then ``rows_per_chunk`` disputes per chunk."""
    return csv_export.chunks(HEADER, map(row, disputes), rows_per_chunk)
