"""The settlement transaction (SPEC §4.4): one chunk, one database transaction.

In order: the unit's processed marker (a redelivered chunk stops here), the
ledger rows (``ON CONFLICT DO NOTHING`` on ``(reconciliation_key,
contract_version)``: the source of truth for exactly-once), dead letters,
per-line outcomes, and the unit's counter increments. A unit is a chunk, or a
requeued dead letter whose lines move from ``dead_lettered`` to their new outcome.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from decimal import Decimal, localcontext
from typing import Any

from sqlalchemy import Connection, delete, update

from shared.adapters.db import bulk, priors, tables
from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.types import EXACT_SUMS
from shared.domain.kinds import KINDS
from shared.domain.money import ZERO
from shared.domain.settlement import (
    LEDGER_LIMIT,
    ChunkPlan,
    DocumentFailure,
    PlannedLine,
    document_json,
)
from shared.domain.units import ChunkOutcome, ChunkRef

L = tables.ledger_entries
R = tables.chunk_results


def _claim_marker(conn: Connection, chunk: ChunkRef, now: dt.datetime) -> bool:
    """Insert the processed marker; False when another delivery already did."""
    row = conn.execute(
        insert_ignoring_conflicts(conn, R)
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
            created_at=now,
        )
        .returning(R.c.chunk_id)
    ).first()
    return row is not None


def _store_counts(conn: Connection, chunk: ChunkRef, outcome: ChunkOutcome) -> None:
    conn.execute(
        update(R)
        .where(R.c.chunk_id == chunk.result_id)
        .values(
            posted=outcome.posted,
            disputed=outcome.disputed,
            duplicate=outcome.duplicate,
            dead_lettered=outcome.dead_lettered,
            amount_posted=outcome.amount_posted,
            amount_disputed=outcome.amount_disputed,
        )
    )


def _ledger_row(
    p: PlannedLine, chunk: ChunkRef, prior: priors.Prior, now: dt.datetime
) -> dict[str, Any]:
    assert p.settlement is not None
    amount = p.settlement.amount
    return {
        "reconciliation_key": p.line.reconciliation_key,
        "contract_version": p.document.contract_version,
        "kind": chunk.kind,
        "partition_key": p.document.partition_key,
        "document_id": p.document.document_id,
        "line_ref": p.line.line_ref,
        "job_id": chunk.job_id,
        "outcome": p.settlement.outcome,
        "amount": amount,
        "claimed_amount": p.settlement.claimed_amount,
        "delta": amount - prior[1] if prior else amount,
        "supersedes_id": prior[0] if prior else None,
        "correlation_id": p.document.correlation_id,
        "created_at": now,
    }


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
) -> dict[tuple[str, int], dict[str, Any]]:
    """Insert one round of new rows (at most one per lineage), each measured from
    its lineage's latest row, including one an earlier round just wrote."""
    basis = KINDS[chunk.kind].delta_basis
    latest = priors.latest_rows(conn, chunk.kind, basis, lines)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for p in lines:
        row = _ledger_row(p, chunk, latest.get(priors.lineage(basis, p)), now)
        if abs(row["delta"]) >= LEDGER_LIMIT:
            out_of_range.append(p)  # its amount fits; its change from the last one does not
        else:
            rows[(row["reconciliation_key"], row["contract_version"])] = row
    if not rows:
        return {}
    # Sorted so that concurrent chunks sharing keys lock them in the same order.
    ordered = [rows[ident] for ident in sorted(rows)]
    result = conn.execute(
        insert_ignoring_conflicts(conn, L).returning(
            L.c.id, L.c.reconciliation_key, L.c.contract_version
        ),
        ordered,
    )
    new = {}
    for r in result:
        ident = (r.reconciliation_key, r.contract_version)
        new[ident] = {**rows[ident], "id": r.id}
    return new


def _insert_ledger(
    conn: Connection,
    chunk: ChunkRef,
    settled: Sequence[PlannedLine],
    now: dt.datetime,
    out_of_range: list[PlannedLine],
) -> dict[tuple[str, int], dict[str, Any]]:
    """Insert the first occurrence of every identity, round by round (see
    ``shared.adapters.db.priors``); return the rows that were new (with their ids). The
    portable path: SQLite, line-history kinds, and chunks holding two versions
    of one key."""
    first = _first_occurrences(settled)
    new: dict[tuple[str, int], dict[str, Any]] = {}
    for lines in priors.rounds(KINDS[chunk.kind].delta_basis, list(first.values())):
        new.update(_insert_round(conn, chunk, lines, now, out_of_range))
    return new


def _insert(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    """Many rows into a table without conflicts: COPY on PostgreSQL."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        bulk.copy_rows(conn, table.name, list(rows[0]), rows)
    else:
        conn.execute(table.insert(), rows)


def _events(new_rows: Iterable[dict[str, Any]], now: dt.datetime) -> list[dict[str, Any]]:
    """The outbox row of a unit's new ledger rows: each is one event (SPEC §9),
    its content read from the ledger when the relay publishes it."""
    ids = sorted(row["id"] for row in new_rows)
    if not ids:
        return []
    return [
        {
            "event_id": None,
            "routing_key": None,
            "partition_key": None,
            "ledger_entry_id": None,
            "ledger_entry_ids": ",".join(map(str, ids)),
            "body": None,
            "created_at": now,
            "published_at": None,
        }
    ]


def _outcome_row(
    chunk: ChunkRef, p: PlannedLine, outcome: str, delta: Any, note: str | None = None
) -> dict[str, Any]:
    s = p.settlement
    return {
        "job_id": chunk.job_id,
        "chunk_id": chunk.chunk_id,
        "document_id": p.document.document_id,
        "line_ref": p.line.line_ref,
        "outcome": outcome,
        "reason": p.reason or note,
        "amount": s.amount if s else None,
        "claimed_amount": s.claimed_amount if s else p.line.claimed_amount,
        "delta": delta,
        "reconciliation_key": p.line.reconciliation_key,
        "contract_version": p.document.contract_version,
    }


def _dead_letter_row(
    chunk: ChunkRef,
    *,
    document_id: str | None,
    partition_key: str,
    contract_version: int | None,
    line_ref: str | None,
    line_index: int | None,
    reason: str,
    error_class: str,
    message: str,
    lines: int,
    attempts: int,
    payload: str,
    now: dt.datetime,
) -> dict[str, Any]:
    return {
        "job_id": chunk.job_id,
        "chunk_id": chunk.chunk_id,
        "kind": chunk.kind,
        "partition_key": partition_key,
        "document_id": document_id,
        "line_ref": line_ref,
        "line_index": line_index,
        "reason": reason,
        "error_class": error_class,
        "message": message[:2000],
        "attempts": attempts,
        "status": "dead",
        "lines": lines,
        "contract_version": contract_version,
        "payload": payload,
        "first_failed_at": now,
        "last_failed_at": now,
    }


def _line_dead_letter(chunk: ChunkRef, p: PlannedLine, attempts: int, now: dt.datetime) -> Any:
    return _dead_letter_row(
        chunk,
        document_id=p.document.document_id,
        partition_key=p.document.partition_key,
        contract_version=p.document.contract_version,
        line_ref=p.line.line_ref,
        line_index=p.index if p.index >= 0 else None,
        reason=p.reason or "",
        error_class="BusinessError",
        message=p.message,
        lines=1,
        attempts=attempts,
        payload=document_json(p.document),
        now=now,
    )


def _document_dead_letter(
    chunk: ChunkRef, f: DocumentFailure, attempts: int, now: dt.datetime
) -> Any:
    d = f.document
    return _dead_letter_row(
        chunk,
        document_id=d.document_id if d else f.document_id,
        partition_key=d.partition_key if d else f.partition_key,
        contract_version=d.contract_version if d else None,
        line_ref=f.line_ref,
        line_index=f.line_index,
        reason=f.reason,
        error_class=f.error_class,
        message=f.message,
        lines=f.covered,
        attempts=attempts,
        payload=f.dead_letter_payload(),
        now=now,
    )


def _first_new(settled: Sequence[PlannedLine], new: Iterable[tuple[str, int]]) -> list[bool]:
    """For each settled line: is it the first occurrence of an identity the ledger
    took? (A repeat later in the chunk, or an identity already there, is not.)"""
    fresh = set(new)
    flags = []
    for p in settled:
        ident = (p.line.reconciliation_key, p.document.contract_version)
        flags.append(ident in fresh)
        fresh.discard(ident)
    return flags


def _settled_outcomes(
    chunk: ChunkRef,
    settled: Sequence[PlannedLine],
    new_flags: Iterable[bool],
    outcome: ChunkOutcome,
    deltas: dict[tuple[str, int], Decimal] | None,
) -> list[dict[str, Any]]:
    """Count the settled lines' outcomes (posted or disputed when new, else a
    duplicate). With ``deltas``, also build the outcome rows the ledger does not
    describe: duplicates and noted lines (a posted or disputed line's outcome is
    its ledger row); without, the database already wrote them."""
    rows = []
    # The chunk's sums, exact: the default 28 digits could round a large total.
    with localcontext(EXACT_SUMS):
        for p, new in zip(settled, new_flags, strict=True):
            s = p.settlement
            assert s is not None
            if new:
                if s.outcome == "posted":
                    outcome.posted += 1
                    outcome.amount_posted += s.amount
                else:
                    outcome.disputed += 1
                    outcome.amount_disputed += s.claimed_amount or ZERO
                if deltas is not None and s.note is not None:
                    ident = (p.line.reconciliation_key, p.document.contract_version)
                    rows.append(_outcome_row(chunk, p, s.outcome, deltas[ident], s.note))
            else:
                outcome.duplicate += 1
                if deltas is not None:
                    rows.append(_outcome_row(chunk, p, "duplicate", None))
    return rows


def _dead_letters(
    conn: Connection,
    chunk: ChunkRef,
    plan: ChunkPlan,
    attempts: int,
    now: dt.datetime,
    outcome: ChunkOutcome,
) -> list[dict[str, Any]]:
    """Insert the plan's dead letters; return their lines' outcome rows, linked to them."""
    letters: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for p in plan.lines:
        if p.settlement is None:
            letters.append(
                (
                    _line_dead_letter(chunk, p, attempts, now),
                    [_outcome_row(chunk, p, "dead_lettered", None)],
                )
            )
    for f in plan.failed_documents:
        if f.document is None:
            lines = []
        else:
            doc = f.document
            lines = [
                _outcome_row(chunk, PlannedLine(doc, line, None, f.reason), "dead_lettered", None)
                for line in f.lines
            ]
        letters.append((_document_dead_letter(chunk, f, attempts, now), lines))
    if not letters:
        return []
    outcome.dead_lettered += sum(letter["lines"] for letter, _ in letters)
    ids: Iterable[Any] = conn.execute(
        tables.dead_letters.insert().returning(
            tables.dead_letters.c.id, sort_by_parameter_order=True
        ),
        [letter for letter, _ in letters],
    ).scalars()
    rows = []
    for letter_id, (_, line_rows) in zip(ids, letters, strict=True):
        for row in line_rows:
            row["dead_letter_id"] = letter_id
            rows.append(row)
    return rows


def _repriced(conn: Connection, kind: str, settled: Sequence[PlannedLine]) -> set[str]:
    """The unit's partitions with a contract above version 1 (promo, freight),
    read once: they decide both the lineage locks and which lines the settle
    statement probes for an earlier row."""
    if not settled or KINDS[kind].delta_basis != "key_versions":
        return set()
    return priors.repriced_partitions(conn, kind, {p.document.partition_key for p in settled})


def _lock_groups(kind: str, settled: Sequence[PlannedLine], repriced: set[str]) -> set[str]:
    """The lineages this unit must lock before reading priors. A promo or freight
    document at version 1 in a partition never re-priced has no lineage to
    share with a concurrent chunk, so the common case locks nothing: two
    workers settling first versions never wait on each other."""
    basis = KINDS[kind].delta_basis
    if basis == "line_history":
        return {priors.lock_group(basis, p) for p in settled}
    groups: set[str] = set()
    doc = None
    for p in settled:
        if p.document is not doc:  # a document's lines are consecutive
            doc = p.document
            if doc.contract_version > 1 or doc.partition_key in repriced:
                groups.add(priors.lock_group(basis, p))
    return groups


def _settle_in_bulk(
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


def _stage_for_bulk(conn: Connection, kind: str, settled: list[PlannedLine]) -> str | None:
    """The COPY text of a chunk the one PostgreSQL statement can settle, else None:
    the portable path (SQLite, line-history kinds, a key under two versions)."""
    if not settled or conn.dialect.name != "postgresql":
        return None
    if KINDS[kind].delta_basis != "key_versions":
        return None
    text, two_versions = bulk.staged(settled)
    return None if two_versions else text


def commit_plan(
    conn: Connection, chunk: ChunkRef, plan: ChunkPlan, attempts: int
) -> ChunkOutcome | None:
    """Record a planned unit of work; None when it was already processed."""
    now = dt.datetime.now(dt.UTC)
    if not _claim_marker(conn, chunk, now):
        return None
    settled = [p for p in plan.lines if p.settlement is not None]
    outcome = ChunkOutcome()
    out_of_range: list[PlannedLine] = []
    repriced = _repriced(conn, chunk.kind, settled)
    if settled:
        # Before any prior is read: a concurrent chunk writing the same lineage
        # commits first, and its rows are then read (READ COMMITTED).
        priors.lock_lineages(conn, chunk.kind, _lock_groups(chunk.kind, settled, repriced))
    stage = _stage_for_bulk(conn, chunk.kind, settled)
    if stage is not None:
        settled, flags, out_of_range = _settle_in_bulk(conn, chunk, settled, stage, now, repriced)
        rows = _settled_outcomes(chunk, settled, flags, outcome, None)
    else:
        new = _insert_ledger(conn, chunk, settled, now, out_of_range)
        if out_of_range:
            dropped = {id(p) for p in out_of_range}
            settled = [p for p in settled if id(p) not in dropped]
        # An event id is its ledger row's identity, new exactly once: no conflicts.
        _insert(conn, tables.outbox, _events(new.values(), now))
        deltas = {k: v["delta"] for k, v in new.items()}
        rows = _settled_outcomes(chunk, settled, _first_new(settled, new), outcome, deltas)
    if out_of_range:
        plan = _with_dead_lettered(plan, out_of_range)
    rows += _dead_letters(conn, chunk, plan, attempts, now, outcome)
    if chunk.requeue is not None:
        # The requeued lines leave dead_lettered for the outcome they have now.
        outcome.dead_lettered -= chunk.requeue.lines
        conn.execute(
            delete(tables.line_outcomes).where(
                tables.line_outcomes.c.dead_letter_id == chunk.requeue.dead_letter_id
            )
        )
    for row in rows:
        row.setdefault("dead_letter_id", None)
    _insert(conn, tables.line_outcomes, rows)
    _store_counts(conn, chunk, outcome)
    return outcome


def _with_dead_lettered(plan: ChunkPlan, out_of_range: list[PlannedLine]) -> ChunkPlan:
    """The plan's dead letters plus the lines whose delta cannot fit the ledger."""
    message = "the change from the previous amount does not fit the ledger"
    return ChunkPlan(
        lines=[p for p in plan.lines if p.settlement is None]
        + [
            PlannedLine(p.document, p.line, None, "amount_out_of_range", message, p.index)
            for p in out_of_range
        ],
        failed_documents=plan.failed_documents,
    )
