"""The rows a unit of work writes, built from its plan: ledger, per-line
outcome and dead-letter rows (plain dicts; nothing here touches the
database)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from shared.adapters.db.ledger.priors import Prior
from shared.domain.pipeline.lineage import Standing
from shared.domain.pipeline.settlement import DocumentFailure, PlannedLine, document_json
from shared.domain.pipeline.units import ChunkRef


def ledger_row(
    p: PlannedLine, chunk: ChunkRef, prior: Prior, now: dt.datetime, period: str
) -> dict[str, Any]:
    assert p.settlement is not None
    amount = p.settlement.amount
    standing = Standing.of(p.document)
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
        "delta": amount - prior.amount if prior else amount,
        "supersedes_id": prior.id if prior else None,
        "correlation_id": p.document.correlation_id,
        "created_at": now,
        "position": p.position,
        "effective_at": standing.effective_at,
        "period": period,
    }


def outcome_row(
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
        "position": p.position,
        "correlation_id": p.document.correlation_id,
        "ledger_claimed_amount": None,  # a duplicate's whose claim differs (outcomes.py)
    }


def _dead_letter_row(
    chunk: ChunkRef,
    *,
    document_id: str | None,
    partition_key: str,
    contract_version: int | None,
    line_ref: str | None,
    line_index: int | None,
    position: int | None,
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
        "position": position,
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


def line_dead_letter(chunk: ChunkRef, p: PlannedLine, attempts: int, now: dt.datetime) -> Any:
    return _dead_letter_row(
        chunk,
        document_id=p.document.document_id,
        partition_key=p.document.partition_key,
        contract_version=p.document.contract_version,
        line_ref=p.line.line_ref,
        line_index=p.index if p.index >= 0 else None,
        position=p.position,
        reason=p.reason or "",
        error_class="BusinessError",
        message=p.message,
        lines=1,
        attempts=attempts,
        payload=document_json(p.document),
        now=now,
    )


def document_dead_letter(
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
        position=f.position,
        reason=f.reason,
        error_class=f.error_class,
        message=f.message,
        lines=f.covered,
        attempts=attempts,
        payload=f.dead_letter_payload(),
        now=now,
    )
