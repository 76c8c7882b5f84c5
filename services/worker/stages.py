"""The two pipeline stages a chunk goes through (SPEC §4.3, §4.4).

Each stage decodes its message, calls the pure domain, and records the result;
a structural or business failure is recorded as a dead letter here, and a
transient one propagates for the actor to retry.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from services.worker.context import WorkerContext
from shared.broker import enqueue
from shared.db.jobs import chunk_processed, load_chunk, receiving_since
from shared.db.ledger import ChunkOutcome, ChunkRef, commit_chunk_failure, commit_plan
from shared.dedup import LeaseKeeper
from shared.errors import StructuralError, TransientError
from shared.kinds import KINDS
from shared.kinds.base import Document
from shared.messages import COMPUTE_HEAVY, SETTLE_ACTOR, ChunkMessage, open_message
from shared.settlement import plan_chunk, plan_failure

log = logging.getLogger("settleq.worker")

_DOCUMENT_LISTS = {name: TypeAdapter(list[kind.document_model]) for name, kind in KINDS.items()}  # type: ignore[name-defined]


@dataclass(frozen=True)
class LoadedChunk:
    message: ChunkMessage
    ref: ChunkRef
    payload: bytes


def _load(ctx: WorkerContext, raw: Any) -> LoadedChunk | None:
    """Verify and fetch a chunk; None when there is nothing (left) to do."""
    try:
        message = open_message(ctx.internal_key, raw)
    except StructuralError as exc:
        _record_tampered(ctx, raw, exc)
        return None
    with ctx.engine.connect() as conn:
        row = load_chunk(conn, message.chunk_id)
        if row is None or row.job_id != message.job_id:
            # The submission was withdrawn before its 202 (broker failure): nothing accepted.
            log.warning(
                "chunk %s of job %s is not stored; dropped", message.chunk_id, message.job_id
            )
            return None
        since = receiving_since(conn, row.job_id)
        if since is not None:
            waited = (dt.datetime.now(dt.UTC) - since).total_seconds()
            if waited > ctx.settings.receiving_timeout_s:
                # The producer never got its 202; its retry republishes every chunk.
                log.warning("chunk %s of an unaccepted job; dropped", row.id)
                return None
            raise TransientError("job_not_ready", "job is still being enqueued")
        if chunk_processed(conn, row.id):
            return None
    ref = ChunkRef(chunk_id=row.id, job_id=row.job_id, kind=row.kind, lines=row.lines)
    return LoadedChunk(message, ref, bytes(row.payload))


def _record_tampered(ctx: WorkerContext, raw: Any, exc: StructuralError) -> None:
    """A message whose signature fails is untrusted: its chunk (if it names a real
    one) is dead-lettered whole, so an operator requeues it from the stored copy."""
    chunk_id = raw.get("chunk_id") if isinstance(raw, dict) else None
    with ctx.engine.begin() as conn:
        row = load_chunk(conn, chunk_id) if isinstance(chunk_id, str) else None
        if row is None:
            log.error("unsigned or tampered message naming no stored chunk; dropped")
            return
        ref = ChunkRef(chunk_id=row.id, job_id=row.job_id, kind=row.kind, lines=row.lines)
        commit_chunk_failure(
            conn,
            ref,
            reason=exc.reason,
            error_class="StructuralError",
            message=str(exc),
            attempts=1,
            payload=bytes(row.payload).decode("utf-8", "replace"),
        )


def _decode(ctx: WorkerContext, chunk: LoadedChunk, attempt: int) -> list[Document] | None:
    """Re-check the stored chunk; a mismatch or schema failure dead-letters it."""
    try:
        if hashlib.sha256(chunk.payload).hexdigest() != chunk.message.payload_sha256:
            raise StructuralError("signature_mismatch", "chunk payload does not match its digest")
        adapter = _DOCUMENT_LISTS.get(chunk.ref.kind)
        if adapter is None:
            raise StructuralError("schema_invalid", f"unknown kind {chunk.ref.kind!r}")
        try:
            documents: list[Document] = adapter.validate_json(chunk.payload)
        except ValidationError as exc:
            raise StructuralError("schema_invalid", str(exc)[:2000]) from None
    except StructuralError as exc:
        with ctx.engine.begin() as conn:
            commit_chunk_failure(
                conn,
                chunk.ref,
                reason=exc.reason,
                error_class="StructuralError",
                message=str(exc),
                attempts=attempt,
                payload=chunk.payload.decode("utf-8", "replace"),
            )
        return None
    return documents


def validate_chunk(ctx: WorkerContext, raw: Any, attempt: int) -> None:
    """fast_path: signature, schema, contract presence; then on to settlement."""
    chunk = _load(ctx, raw)
    if chunk is None:
        return
    documents = _decode(ctx, chunk, attempt)
    if documents is None:
        return
    kind = KINDS[chunk.ref.kind]
    wanted = {(d.partition_key, d.contract_version) for d in documents}
    missing = wanted - set(ctx.contracts.load(kind, wanted))
    if missing:
        # Settlement dead-letters these documents with unknown_contract_version,
        # in the same transaction as the rest of the chunk.
        log.info("chunk %s names %d unknown contract versions", chunk.ref.chunk_id, len(missing))
    enqueue(
        ctx.broker,
        ctx.settings.queue_name(COMPUTE_HEAVY),
        SETTLE_ACTOR,
        chunk.message.signed(ctx.internal_key),
    )


def settle_chunk(ctx: WorkerContext, raw: Any, attempt: int) -> ChunkOutcome | None:
    """compute_heavy: claim, settle, commit once, mark done (SPEC §4.4)."""
    chunk = _load(ctx, raw)
    if chunk is None:
        return None
    documents = _decode(ctx, chunk, attempt)
    if documents is None:
        return None
    kind = KINDS[chunk.ref.kind]
    contracts = ctx.contracts.load(kind, {(d.partition_key, d.contract_version) for d in documents})
    plan = plan_chunk(kind, documents, contracts)
    claim = ctx.claims.claim(
        [ctx.claims.key(kind.name, key, version) for key, version in plan.claim_keys()]
    )
    if claim.contended:
        ctx.claims.release(claim)
        raise TransientError(
            "claim_contended", f"{len(claim.contended)} keys are leased by another worker"
        )
    try:
        with LeaseKeeper(ctx.claims, claim, ctx.settings.claim_lease_ms):
            if ctx.settings.fault_settle_pause_s:
                time.sleep(ctx.settings.fault_settle_pause_s)
            with ctx.engine.begin() as conn:
                outcome = commit_plan(conn, chunk.ref, plan, attempt)
    except BaseException:
        _release_quietly(ctx, claim)
        raise
    try:
        ctx.claims.mark_done(claim)
    except Exception:  # the commit stands; done-marks only save later work
        log.warning("could not mark %d claims done", len(claim.keys), exc_info=True)
    return outcome


def _release_quietly(ctx: WorkerContext, claim: Any) -> None:
    try:
        ctx.claims.release(claim)
    except Exception:  # the lease expires by itself
        log.warning("could not release claims", exc_info=True)


def dead_letter_chunk(
    ctx: WorkerContext, raw: Any, *, reason: str, error_class: str, message: str, attempts: int
) -> None:
    """Dead-letter every line of a chunk that could not be processed at all."""
    chunk = _load(ctx, raw)
    if chunk is None:
        return
    kind = KINDS.get(chunk.ref.kind)
    adapter = _DOCUMENT_LISTS.get(chunk.ref.kind)
    with ctx.engine.begin() as conn:
        try:
            documents = adapter.validate_json(chunk.payload) if adapter else None
        except ValidationError:
            documents = None
        if kind is None or documents is None:
            commit_chunk_failure(
                conn,
                chunk.ref,
                reason=reason,
                error_class=error_class,
                message=message,
                attempts=attempts,
                payload=chunk.payload.decode("utf-8", "replace"),
            )
            return
        commit_plan(
            conn, chunk.ref, plan_failure(kind, documents, reason, error_class, message), attempts
        )
