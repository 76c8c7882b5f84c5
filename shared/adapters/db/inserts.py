"""The generic insert path: a unit's ledger rows on any backend, round by
round (see ``shared.adapters.db.priors``), and many rows into a table without
conflicts (COPY on PostgreSQL). PostgreSQL chunks of promo or freight lines
take ``bulk_settle`` instead."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection

from shared.adapters.db import bulk, priors
from shared.adapters.db.dialect import insert_ignoring_conflicts, outcome_in
from shared.adapters.db.rows import ledger_row
from shared.adapters.db.tables import IDENTITY_OUTCOMES, ledger_entries
from shared.domain.kinds import KINDS
from shared.domain.settlement import LEDGER_LIMIT, PlannedLine
from shared.domain.units import ChunkRef


def _first_occurrences(settled: Sequence[PlannedLine]) -> dict[tuple[str, int], PlannedLine]:
    first: dict[tuple[str, int], PlannedLine] = {}
    for p in settled:
        first.setdefault((p.line.reconciliation_key, p.document.contract_version), p)
    return first


def _insert_round(
    conn: Connection,
    chunk: ChunkRef,
    lines: Sequence[PlannedLine],
    now: dt.datetime,
    out_of_range: list[PlannedLine],
    late: set[tuple[str, int]],
) -> dict[tuple[str, int], dict[str, Any]]:
    """Insert one round of new rows (at most one per lineage), each measured from
    its lineage's latest row, including one an earlier round just wrote; a line
    older than that row is late, and written nowhere."""
    basis = KINDS[chunk.kind].delta_basis
    latest = priors.latest_rows(conn, chunk.kind, basis, lines)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for p in lines:
        newest = latest.get(priors.lineage(basis, p))
        if priors.older_than_newest(basis, p, newest):
            late.add((p.line.reconciliation_key, p.document.contract_version))
            continue
        row = ledger_row(p, chunk, newest, now)
        if abs(row["delta"]) >= LEDGER_LIMIT:
            out_of_range.append(p)  # its amount fits; its change from the last one does not
        else:
            rows[(row["reconciliation_key"], row["contract_version"])] = row
    if not rows:
        return {}
    # Sorted so that concurrent chunks sharing keys lock them in the same order.
    ordered = [rows[ident] for ident in sorted(rows)]
    # The identity's partial unique index judges what is new (never a resolution's index).
    identity = insert_ignoring_conflicts(
        conn,
        ledger_entries,
        [ledger_entries.c.reconciliation_key, ledger_entries.c.contract_version],
        outcome_in(ledger_entries.c.outcome, *IDENTITY_OUTCOMES),
    )
    result = conn.execute(
        identity.returning(
            ledger_entries.c.id,
            ledger_entries.c.reconciliation_key,
            ledger_entries.c.contract_version,
        ),
        ordered,
    )
    new = {}
    for r in result:
        ident = (r.reconciliation_key, r.contract_version)
        new[ident] = {**rows[ident], "id": r.id}
    return new


def insert_ledger(
    conn: Connection,
    chunk: ChunkRef,
    settled: Sequence[PlannedLine],
    now: dt.datetime,
    out_of_range: list[PlannedLine],
    late: set[tuple[str, int]],
) -> dict[tuple[str, int], dict[str, Any]]:
    """Insert the first occurrence of every identity, round by round (see
    ``shared.adapters.db.priors``); return the rows that were new (with their
    ids). The identities older than their lineage's newest row are added to
    ``late``. The portable path: SQLite, line-history kinds, and chunks holding
    two versions of one key."""
    first = _first_occurrences(settled)
    new: dict[tuple[str, int], dict[str, Any]] = {}
    for lines in priors.rounds(KINDS[chunk.kind].delta_basis, list(first.values())):
        new.update(_insert_round(conn, chunk, lines, now, out_of_range, late))
    return new


def insert_rows(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    """Many rows into a table without conflicts: COPY on PostgreSQL."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        bulk.copy_rows(conn, table.name, list(rows[0]), rows)
    else:
        conn.execute(table.insert(), rows)


def first_new(settled: Sequence[PlannedLine], new: Iterable[tuple[str, int]]) -> list[bool]:
    """For each settled line: is it the first occurrence of an identity the ledger
    took? (A repeat later in the chunk, or an identity already there, is not.)"""
    fresh = set(new)
    flags = []
    for p in settled:
        ident = (p.line.reconciliation_key, p.document.contract_version)
        flags.append(ident in fresh)
        fresh.discard(ident)
    return flags
