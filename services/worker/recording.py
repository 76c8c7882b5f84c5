"""Recording a unit of work's result: one transaction, then the commit hook,
then its events, published at once (docs/architecture.md#events-at-commit-and-the-relay)."""

from __future__ import annotations

import logging
from typing import Any

from services.worker.context import WorkerContext
from shared.adapters.db.ledger import writer_for
from shared.adapters.db.stored_chunk import load_chunk
from shared.domain.pipeline.settlement import ChunkPlan, unreadable
from shared.domain.pipeline.units import ChunkOutcome, ChunkRef, Unit, chunk_start
from shared.errors import StructuralError

log = logging.getLogger("settleq.worker")


def record(ctx: WorkerContext, ref: ChunkRef, plan: ChunkPlan, attempt: int) -> ChunkOutcome | None:
    with ctx.engine.begin() as conn:
        result = writer_for(conn).commit(conn, Unit(ref, plan, attempt))
    if result is None:  # an earlier delivery already committed it
        return None
    ctx.on_commit(ref, plan, result.outcome)
    if ctx.events is not None:  # None: worker_publishes_events is off
        # Never fails the unit: what is not published waits for the relay.
        ctx.events.publish(result, ref.chunk_id)
    return result.outcome


def record_tampered(ctx: WorkerContext, raw: Any, exc: StructuralError) -> None:
    """A message whose signature fails is untrusted: its chunk (if it names a real
    one) is dead-lettered whole, so an operator requeues it from the stored copy."""
    chunk_id = raw.get("chunk_id") if isinstance(raw, dict) else None
    with ctx.engine.connect() as conn:
        row = load_chunk(conn, chunk_id) if isinstance(chunk_id, str) else None
    if row is None:
        log.error("unsigned or tampered message naming no stored chunk; dropped")
        return
    ref = ChunkRef(chunk_id=row.id, job_id=row.job_id, kind=row.kind, lines=row.lines)
    plan = unreadable(
        bytes(row.payload), row.lines, exc.reason, str(exc), start=chunk_start(row.seq)
    )
    record(ctx, ref, plan, 1)
