"""The settlement transaction (SPEC §4.4): one chunk, one database transaction.

In order: the chunk's processed marker (a redelivered chunk stops here), the
ledger rows (``ON CONFLICT DO NOTHING`` on ``(reconciliation_key,
contract_version)``: the source of truth for exactly-once), per-line outcomes,
dead letters, and the chunk's counter increments.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select, update

from shared.db import tables
from shared.db.dialect import insert_ignoring_conflicts
from shared.kinds.base import Document
from shared.money import ZERO
from shared.settlement import ChunkPlan, PlannedLine

L = tables.ledger_entries
R = tables.chunk_results


@dataclass(frozen=True)
class ChunkRef:
    chunk_id: str
    job_id: str
    kind: str
    lines: int


@dataclass
class ChunkOutcome:
    posted: int = 0
    disputed: int = 0
    duplicate: int = 0
    dead_lettered: int = 0
    amount_posted: Decimal = ZERO
    amount_disputed: Decimal = ZERO

    @property
    def lines(self) -> int:
        return self.posted + self.disputed + self.duplicate + self.dead_lettered


def _claim_marker(conn: Connection, chunk: ChunkRef, now: dt.datetime) -> bool:
    """Insert the processed marker; False when another delivery already did."""
    row = conn.execute(
        insert_ignoring_conflicts(conn, R)
        .values(
            chunk_id=chunk.chunk_id,
            job_id=chunk.job_id,
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
        .where(R.c.chunk_id == chunk.chunk_id)
        .values(
            posted=outcome.posted,
            disputed=outcome.disputed,
            duplicate=outcome.duplicate,
            dead_lettered=outcome.dead_lettered,
            amount_posted=outcome.amount_posted,
            amount_disputed=outcome.amount_disputed,
        )
    )


Prior = list[tuple[int, int, Decimal]]  # (contract_version, id, amount) of committed rows


def _previous_rows(conn: Connection, keys: Iterable[str]) -> dict[str, Prior]:
    """Committed rows of these keys: key -> [(contract_version, id, amount)]."""
    wanted = sorted(set(keys))
    found: dict[str, Prior] = {}
    for start in range(0, len(wanted), 5000):
        rows = conn.execute(
            select(L.c.reconciliation_key, L.c.contract_version, L.c.id, L.c.amount).where(
                L.c.reconciliation_key.in_(wanted[start : start + 5000])
            )
        ).all()
        for r in rows:
            found.setdefault(r.reconciliation_key, []).append((r.contract_version, r.id, r.amount))
    return found


def _ledger_row(
    p: PlannedLine, chunk: ChunkRef, previous: Prior, now: dt.datetime
) -> dict[str, Any]:
    assert p.settlement is not None
    version = p.document.contract_version
    earlier = [row for row in previous if row[0] < version]
    prior = max(earlier) if earlier else None
    amount = p.settlement.amount
    return {
        "reconciliation_key": p.line.reconciliation_key,
        "contract_version": version,
        "kind": chunk.kind,
        "partition_key": p.document.partition_key,
        "document_id": p.document.document_id,
        "line_ref": p.line.line_ref,
        "job_id": chunk.job_id,
        "outcome": p.settlement.outcome,
        "amount": amount,
        "claimed_amount": p.settlement.claimed_amount,
        "delta": amount - prior[2] if prior else amount,
        "supersedes_id": prior[1] if prior else None,
        "correlation_id": p.document.correlation_id,
        "created_at": now,
    }


def _insert_ledger(
    conn: Connection, chunk: ChunkRef, settled: Sequence[PlannedLine], now: dt.datetime
) -> dict[tuple[str, int], Decimal]:
    """Insert the first occurrence of every identity; return the new ones' deltas."""
    first: dict[tuple[str, int], PlannedLine] = {}
    for p in settled:
        first.setdefault((p.line.reconciliation_key, p.document.contract_version), p)
    if not first:
        return {}
    previous = _previous_rows(conn, (key for key, _ in first))
    # Sorted so that concurrent chunks sharing keys lock them in the same order.
    rows = [
        _ledger_row(first[ident], chunk, previous.get(ident[0], []), now) for ident in sorted(first)
    ]
    result = conn.execute(
        insert_ignoring_conflicts(conn, L).returning(
            L.c.reconciliation_key, L.c.contract_version, L.c.delta
        ),
        rows,
    )
    return {(r.reconciliation_key, r.contract_version): r.delta for r in result}


def _outcome_row(chunk: ChunkRef, p: PlannedLine, outcome: str, delta: Any) -> dict[str, Any]:
    s = p.settlement
    return {
        "job_id": chunk.job_id,
        "chunk_id": chunk.chunk_id,
        "document_id": p.document.document_id,
        "line_ref": p.line.line_ref,
        "outcome": outcome,
        "reason": p.reason,
        "amount": s.amount if s else None,
        "claimed_amount": s.claimed_amount if s else p.line.claimed_amount,
        "delta": delta,
        "reconciliation_key": p.line.reconciliation_key,
        "contract_version": p.document.contract_version,
    }


def _dead_letter_row(
    chunk: ChunkRef,
    document: Document | None,
    *,
    line_ref: str | None,
    reason: str,
    error_class: str,
    message: str,
    lines: int,
    attempts: int,
    payload: str,
    now: dt.datetime,
    partition_key: str = "",
) -> dict[str, Any]:
    return {
        "job_id": chunk.job_id,
        "chunk_id": chunk.chunk_id,
        "kind": chunk.kind,
        "partition_key": document.partition_key if document else partition_key,
        "document_id": document.document_id if document else None,
        "line_ref": line_ref,
        "reason": reason,
        "error_class": error_class,
        "message": message[:2000],
        "attempts": attempts,
        "status": "dead",
        "lines": lines,
        "contract_version": document.contract_version if document else None,
        "payload": payload,
        "first_failed_at": now,
        "last_failed_at": now,
    }


def commit_plan(
    conn: Connection, chunk: ChunkRef, plan: ChunkPlan, attempts: int
) -> ChunkOutcome | None:
    """Record a planned chunk; None when the chunk was already processed."""
    now = dt.datetime.now(dt.UTC)
    if not _claim_marker(conn, chunk, now):
        return None
    settled = [p for p in plan.lines if p.settlement is not None]
    new = _insert_ledger(conn, chunk, settled, now)
    outcome = ChunkOutcome()
    outcome_rows: list[dict[str, Any]] = []
    dead_rows: list[dict[str, Any]] = []
    for p in plan.lines:
        ident = (p.line.reconciliation_key, p.document.contract_version)
        if p.settlement is None:
            outcome.dead_lettered += 1
            outcome_rows.append(_outcome_row(chunk, p, "dead_lettered", None))
            dead_rows.append(
                _dead_letter_row(
                    chunk,
                    p.document,
                    line_ref=p.line.line_ref,
                    reason=p.reason or "",
                    error_class="BusinessError",
                    message=p.message,
                    lines=1,
                    attempts=attempts,
                    payload=p.document.model_dump_json(),
                    now=now,
                )
            )
        elif ident in new:
            # pop: a repeat of this identity later in the chunk is a duplicate
            delta = new.pop(ident)
            s = p.settlement
            if s.outcome == "posted":
                outcome.posted += 1
                outcome.amount_posted += s.amount
            else:
                outcome.disputed += 1
                outcome.amount_disputed += s.claimed_amount or ZERO
            outcome_rows.append(_outcome_row(chunk, p, s.outcome, delta))
        else:
            outcome.duplicate += 1
            outcome_rows.append(_outcome_row(chunk, p, "duplicate", None))
    for failure in plan.failed_documents:
        outcome.dead_lettered += len(failure.lines)
        for line in failure.lines:
            outcome_rows.append(
                _outcome_row(
                    chunk,
                    PlannedLine(failure.document, line, None, failure.reason),
                    "dead_lettered",
                    None,
                )
            )
        dead_rows.append(
            _dead_letter_row(
                chunk,
                failure.document,
                line_ref=None,
                reason=failure.reason,
                error_class=failure.error_class,
                message=failure.message,
                lines=len(failure.lines),
                attempts=attempts,
                payload=failure.document.model_dump_json(),
                now=now,
            )
        )
    if outcome_rows:
        conn.execute(tables.line_outcomes.insert(), outcome_rows)
    if dead_rows:
        conn.execute(tables.dead_letters.insert(), dead_rows)
    _store_counts(conn, chunk, outcome)
    return outcome


def commit_chunk_failure(
    conn: Connection,
    chunk: ChunkRef,
    *,
    reason: str,
    error_class: str,
    message: str,
    attempts: int,
    payload: str,
    partition_key: str = "",
) -> ChunkOutcome | None:
    """Dead-letter a whole chunk that cannot be read (signature, schema, retries)."""
    now = dt.datetime.now(dt.UTC)
    if not _claim_marker(conn, chunk, now):
        return None
    conn.execute(
        tables.dead_letters.insert(),
        [
            _dead_letter_row(
                chunk,
                None,
                line_ref=None,
                reason=reason,
                error_class=error_class,
                message=message,
                lines=chunk.lines,
                attempts=attempts,
                payload=payload,
                now=now,
                partition_key=partition_key,
            )
        ],
    )
    outcome = ChunkOutcome(dead_lettered=chunk.lines)
    _store_counts(conn, chunk, outcome)
    return outcome


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
