"""The settlement transaction: one chunk, one database transaction.

See docs/architecture.md#the-settlement-transaction.

In order: the unit's processed marker (a redelivered chunk stops here), the
ledger rows (``ON CONFLICT DO NOTHING`` on ``(reconciliation_key,
contract_version)`` of the posted and disputed rows, the partial unique index
``uq_ledger_entries_identity``: the source of truth for exactly-once; or a
``COPY`` that index turns back to that insert, bulk_copy.py; none for a line
older than its lineage's newest row, a duplicate ``newer_version_settled``:
priors.py), dead letters, per-line outcomes, and the unit's counter
increments. A unit is a chunk, or a requeued dead letter whose lines move from
``dead_lettered`` to their new outcome.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Connection, delete, func, update

from shared.adapters.db import priors
from shared.adapters.db.bulk_settle import settle_in_bulk
from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.inserts import first_new, insert_ledger, insert_rows
from shared.adapters.db.rows import outbox_rows
from shared.adapters.db.tables import chunk_results, line_outcomes, outbox
from shared.adapters.db.unit_outcomes import insert_dead_letters, settled_outcomes
from shared.domain.money import ZERO
from shared.domain.settlement import ChunkPlan, PlannedLine
from shared.domain.units import ChunkOutcome, ChunkRef


def _claim_marker(conn: Connection, chunk: ChunkRef) -> dt.datetime | None:
    """Insert the processed marker; its time, which stamps every row of the unit,
    or None when another delivery already did.

    On PostgreSQL the time is the server's, the transaction's own ``now()``:
    the ledger's rows then carry one clock whichever host settled them, and a
    row ``COPY``'d into the ledger takes it as the column's default, with no
    timestamp text to parse a row (bulk_copy.py)."""
    server = conn.dialect.name == "postgresql"
    stamp: Any = func.now() if server else dt.datetime.now(dt.UTC)
    row = conn.execute(
        insert_ignoring_conflicts(conn, chunk_results)
        .values(
            chunk_id=chunk.result_id,
            job_id=chunk.job_id,
            source="chunk" if chunk.requeue is None else "requeue",
            posted=0,
            disputed=0,
            duplicate=0,
            dead_lettered=0,
            amount_posted=ZERO,
            amount_disputed=ZERO,
            created_at=stamp,
        )
        .returning(chunk_results.c.created_at)
    ).first()
    if row is None:
        return None
    # SQLite would give it back without its zone.
    when: dt.datetime = row[0] if server else stamp
    return when


def _store_counts(conn: Connection, chunk: ChunkRef, outcome: ChunkOutcome) -> None:
    conn.execute(
        update(chunk_results)
        .where(chunk_results.c.chunk_id == chunk.result_id)
        .values(
            posted=outcome.posted,
            disputed=outcome.disputed,
            duplicate=outcome.duplicate,
            dead_lettered=outcome.dead_lettered,
            amount_posted=outcome.amount_posted,
            amount_disputed=outcome.amount_disputed,
        )
    )


def commit_plan(
    conn: Connection, chunk: ChunkRef, plan: ChunkPlan, attempts: int
) -> ChunkOutcome | None:
    """Record a planned unit of work; None when it was already processed."""
    now = _claim_marker(conn, chunk)
    if now is None:
        return None
    settled = [p for p in plan.lines if p.settlement is not None]
    outcome = ChunkOutcome()
    out_of_range: list[PlannedLine] = []
    repriced = priors.unit_repriced_partitions(conn, chunk.kind, settled)
    if settled:
        # Before any prior is read: a concurrent chunk writing the same lineage
        # commits first, and its rows are then read (READ COMMITTED).
        priors.lock_lineages(conn, chunk.kind, priors.lock_groups(chunk.kind, settled, repriced))
    bulk = settle_in_bulk(conn, chunk, settled, now, repriced)
    if bulk is not None:
        settled, flags, out_of_range, deltas = bulk
        rows = settled_outcomes(chunk, settled, flags, outcome, deltas)
    else:
        late: set[tuple[str, int]] = set()
        new = insert_ledger(conn, chunk, settled, now, out_of_range, late)
        if out_of_range:
            dropped = {id(p) for p in out_of_range}
            settled = [p for p in settled if id(p) not in dropped]
        # An event id is its ledger row's identity, new exactly once: no conflicts.
        insert_rows(conn, outbox, outbox_rows(new.values(), now))
        deltas = {k: v["delta"] for k, v in new.items()}
        flags = first_new(settled, new)
        rows = settled_outcomes(chunk, settled, flags, outcome, deltas, late)
    if out_of_range:
        plan = _with_dead_lettered(plan, out_of_range)
    rows += insert_dead_letters(conn, chunk, plan, attempts, now, outcome)
    if chunk.requeue is not None:
        # The requeued lines leave dead_lettered for the outcome they have now.
        outcome.dead_lettered -= chunk.requeue.lines
        conn.execute(
            delete(line_outcomes).where(
                line_outcomes.c.dead_letter_id == chunk.requeue.dead_letter_id
            )
        )
    for row in rows:
        row.setdefault("dead_letter_id", None)
    insert_rows(conn, line_outcomes, rows)
    _store_counts(conn, chunk, outcome)
    return outcome


def _with_dead_lettered(plan: ChunkPlan, out_of_range: list[PlannedLine]) -> ChunkPlan:
    """The plan's dead letters plus the lines whose delta cannot fit the ledger."""
    message = "the change from the previous amount does not fit the ledger"
    return ChunkPlan(
        lines=[p for p in plan.lines if p.settlement is None]
        + [
            PlannedLine(
                p.document, p.line, None, "amount_out_of_range", message, p.index, p.position
            )
            for p in out_of_range
        ],
        failed_documents=plan.failed_documents,
    )
