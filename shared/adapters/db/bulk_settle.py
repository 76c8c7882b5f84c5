"""The PostgreSQL path of the settlement: a promo or freight chunk's settled
lines (ledger rows, their outbox row, their outcome rows) in one statement
(``bulk.settle_lines``)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection

from shared.adapters.db import bulk
from shared.domain.kinds import KINDS
from shared.domain.settlement import LEDGER_LIMIT, PlannedLine
from shared.domain.units import ChunkRef


def settle_in_bulk(
    conn: Connection,
    chunk: ChunkRef,
    settled: list[PlannedLine],
    stage: str,
    now: dt.datetime,
    repriced: set[str],
) -> tuple[list[PlannedLine], list[bool], list[PlannedLine]]:
    """PostgreSQL: ledger rows, outbox events and outcome rows in one statement.
    Returns the lines it settled, whether each was new, and the lines whose delta
    did not fit the ledger."""
    duplicates, too_large = bulk.settle_lines(
        conn,
        stage,
        kind=chunk.kind,
        job_id=chunk.job_id,
        chunk_id=chunk.chunk_id,
        now=now,
        limit=LEDGER_LIMIT,
        repriced=repriced,
    )
    if not too_large:
        return settled, [seq not in duplicates for seq in range(len(settled))], []
    kept = [p for seq, p in enumerate(settled) if seq not in too_large]
    flags = [seq not in duplicates for seq in range(len(settled)) if seq not in too_large]
    return kept, flags, [settled[seq] for seq in sorted(too_large)]


def stage_for_bulk(conn: Connection, kind: str, settled: list[PlannedLine]) -> str | None:
    """The COPY text of a chunk the one PostgreSQL statement can settle, else None:
    the portable path (SQLite, line-history kinds, a key under two versions)."""
    if not settled or conn.dialect.name != "postgresql":
        return None
    if KINDS[kind].delta_basis != "key_versions":
        return None
    text, two_versions = bulk.staged(settled)
    return None if two_versions else text
