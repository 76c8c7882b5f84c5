"""The two pipeline stages a unit of work goes through (SPEC §4.3, §4.4).

A unit is a stored chunk, or a requeued dead letter of one. Each stage
verifies its message, calls the pure domain, and records the result; a
structural or business failure is recorded as a dead letter here, and a
transient one propagates for the actor to retry.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import msgspec
from pydantic import TypeAdapter

from services.worker.context import WorkerContext
from services.worker.stage_log import note_documents
from shared.adapters.broker import enqueue
from shared.adapters.db import dead_letters
from shared.adapters.db.ledger import commit_plan
from shared.adapters.db.stored_chunk import chunk_processed, load_chunk, stored_state
from shared.adapters.leases import Claim, LeaseKeeper
from shared.domain.keys import correlation_id_for
from shared.domain.kinds import KINDS
from shared.domain.messages import (
    COMPUTE_HEAVY,
    MAX_PRIORITY,
    SETTLE_ACTOR,
    ChunkMessage,
    open_message,
)
from shared.domain.requeued_lines import restrict_to_line
from shared.domain.settlement import (
    ChunkPlan,
    Decoded,
    decode_chunk,
    plan_chunk,
    plan_failure,
    unreadable,
    with_correlation_id,
)
from shared.domain.units import ChunkOutcome, ChunkRef, Requeue
from shared.errors import StructuralError, TransientError

log = logging.getLogger("settleq.worker")

_DOCUMENT_LISTS: dict[str, TypeAdapter[Any]] = {
    name: TypeAdapter(list[kind.document_model])  # type: ignore[name-defined]
    for name, kind in KINDS.items()
}


@dataclass(frozen=True)
class Unit:
    message: ChunkMessage
    ref: ChunkRef
    chunk_payload: bytes
    payload: bytes  # what to decode: the chunk, or the requeued dead letter's document
    # A requeued line-level dead letter settles this one line only: its position,
    # or (stored before positions were) its line_ref and reconciliation key.
    line_ref: str | None = None
    line_index: int | None = None
    line_key: str | None = None

    def restrict(self, plan: ChunkPlan) -> ChunkPlan:
        if self.line_ref is None:
            return plan
        return restrict_to_line(plan, self.line_ref, self.line_index, self.line_key)


def _check_accepted(ctx: WorkerContext, conn: Any, job_id: str) -> bool:
    """False for a submission that never got its 202; retry while it may still.

    The front door marks a job accepted as soon as the broker has confirmed all
    its chunks, so a worker that sees a chunk first usually waits milliseconds:
    it waits here (up to ``accept_wait_s``) rather than take a retry, which
    costs at least a second of the job's latency.
    """
    deadline = time.monotonic() + ctx.settings.accept_wait_s
    while True:
        stored = stored_state(conn, job_id)
        if stored is None:
            # Withdrawn: its chunks could not all be enqueued and the producer got a 503.
            log.warning("message of withdrawn job %s dropped", job_id)
            return False
        state, created = stored
        if state != "receiving":
            return True
        if (dt.datetime.now(dt.UTC) - created).total_seconds() > ctx.settings.receiving_timeout_s:
            # The producer never got its 202; its retry republishes every chunk.
            log.warning("message of unaccepted job %s dropped", job_id)
            return False
        if time.monotonic() >= deadline:
            raise TransientError("job_not_ready", "job is still being enqueued")
        conn.rollback()  # the next look needs a fresh snapshot (SQLite keeps one per transaction)
        time.sleep(0.02)


def _requeue_unit(conn: Any, message: ChunkMessage, row: Any) -> Unit | None:
    letter = dead_letters.load(conn, message.dead_letter_id or 0)
    if (
        letter is None
        or letter.chunk_id != row.id
        or letter.status != "requeued"
        or letter.requeues != message.requeue
    ):
        log.warning("stale requeue of dead letter %s dropped", message.dead_letter_id)
        return None
    ref = ChunkRef(
        chunk_id=row.id,
        job_id=row.job_id,
        kind=row.kind,
        lines=letter.lines,
        requeue=Requeue(letter.id, letter.requeues, letter.lines),
    )
    if chunk_processed(conn, ref.result_id):
        return None
    chunk_payload = bytes(row.payload)
    if letter.document_id is None and letter.line_ref is None:
        payload = chunk_payload  # a chunk-level dead letter re-runs the whole stored chunk
    else:
        payload = b"[" + letter.payload.encode() + b"]"
    key = None
    if letter.line_ref is not None and letter.line_index is None:
        key = dead_letters.line_key(conn, letter.id)
    return Unit(message, ref, chunk_payload, payload, letter.line_ref, letter.line_index, key)


def _load(ctx: WorkerContext, raw: Any) -> Unit | None:
    """Verify and fetch a unit of work; None when there is nothing (left) to do."""
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
        if not _check_accepted(ctx, conn, row.job_id):
            return None
        if message.dead_letter_id is not None:
            return _requeue_unit(conn, message, row)
        if chunk_processed(conn, row.id):
            return None
    ref = ChunkRef(chunk_id=row.id, job_id=row.job_id, kind=row.kind, lines=row.lines)
    payload = bytes(row.payload)
    return Unit(message, ref, payload, payload)


def _record(
    ctx: WorkerContext, ref: ChunkRef, plan: ChunkPlan, attempt: int
) -> ChunkOutcome | None:
    with ctx.engine.begin() as conn:
        outcome = commit_plan(conn, ref, plan, attempt)
    if outcome is not None:  # committed now; None: an earlier delivery already did
        ctx.on_commit(ref, plan, outcome)
    return outcome


def _record_tampered(ctx: WorkerContext, raw: Any, exc: StructuralError) -> None:
    """A message whose signature fails is untrusted: its chunk (if it names a real
    one) is dead-lettered whole, so an operator requeues it from the stored copy."""
    chunk_id = raw.get("chunk_id") if isinstance(raw, dict) else None
    with ctx.engine.connect() as conn:
        row = load_chunk(conn, chunk_id) if isinstance(chunk_id, str) else None
    if row is None:
        log.error("unsigned or tampered message naming no stored chunk; dropped")
        return
    ref = ChunkRef(chunk_id=row.id, job_id=row.job_id, kind=row.kind, lines=row.lines)
    _record(ctx, ref, unreadable(bytes(row.payload), row.lines, exc.reason, str(exc)), 1)


def _digest_ok(ctx: WorkerContext, unit: Unit, attempt: int) -> bool:
    """The stored bytes are the ones the front door validated and signed the digest
    of; a unit whose bytes differ is dead-lettered whole."""
    if hashlib.sha256(unit.chunk_payload).hexdigest() == unit.message.payload_sha256:
        return True
    reason, message = "signature_mismatch", "chunk payload does not match its digest"
    _dead_letter_whole(ctx, unit, reason, message, attempt)
    return False


def _dead_letter_whole(
    ctx: WorkerContext, unit: Unit, reason: str, message: str, attempt: int
) -> None:
    """Record every line of a unit that cannot be read (or trusted) as one dead letter."""
    _record(ctx, unit.ref, unreadable(unit.payload, unit.ref.lines, reason, message), attempt)


class _Envelope(msgspec.Struct):
    """What the fast path reads of a document: enough to route and check contracts."""

    document_id: str
    partition_key: str
    contract_version: int
    correlation_id: str | None = None


_ENVELOPES = msgspec.json.Decoder(list[_Envelope])


def _decode(
    ctx: WorkerContext, unit: Unit, attempt: int, *, digest_checked: bool = False
) -> Decoded | None:
    """Re-check the stored bytes; an unreadable unit is dead-lettered whole."""
    if not digest_checked and not _digest_ok(ctx, unit, attempt):
        return None
    kind = KINDS.get(unit.ref.kind)
    adapter = _DOCUMENT_LISTS.get(unit.ref.kind)
    try:
        if kind is None or adapter is None:
            raise StructuralError("schema_invalid", f"unknown kind {unit.ref.kind!r}")
        decoded = decode_chunk(kind, adapter, unit.payload, unit.ref.lines)
    except StructuralError as exc:
        _dead_letter_whole(ctx, unit, exc.reason, str(exc), attempt)
        return None
    # A document that came without a correlation id gets one derived from the job
    # and document, the same on every retry, requeue and event.
    decoded.documents = [
        d
        if d.correlation_id
        else with_correlation_id(d, correlation_id_for(unit.ref.job_id, d.document_id))
        for d in decoded.documents
    ]
    note_documents(decoded.documents)  # for the stage's log event (stage_log.py)
    return decoded


def validate_chunk(ctx: WorkerContext, raw: Any, attempt: int) -> None:
    """fast_path: signature, digest, document envelopes, contract presence; then on
    to settlement.

    The signed digest proves these are the bytes the front door validated in
    full, so the fast path reads only each document's envelope (C-speed); when
    even that fails, the full per-document check says which documents are bad.
    Settlement decodes every field again and dead-letters what it cannot read.
    """
    unit = _load(ctx, raw)
    if unit is None or not _digest_ok(ctx, unit, attempt):
        return
    kind = KINDS.get(unit.ref.kind)
    try:
        envelopes = _ENVELOPES.decode(unit.payload)
    except msgspec.MsgspecError:
        envelopes = None
    if kind is None or envelopes is None:
        decoded = _decode(ctx, unit, attempt, digest_checked=True)
        if decoded is None:
            return
        unreadable_documents = len(decoded.failures)
        wanted = {(d.partition_key, d.contract_version) for d in decoded.documents}
        kind = KINDS[unit.ref.kind]
    else:
        unreadable_documents = 0
        note_documents(envelopes)
        wanted = {(e.partition_key, e.contract_version) for e in envelopes}
    missing = wanted - set(ctx.contracts.load(kind, wanted))
    if missing or unreadable_documents:
        # Settlement dead-letters these documents alone, in the same transaction
        # as the rest of the chunk.
        log.info(
            "chunk %s: %d unknown contract versions, %d unreadable documents",
            unit.ref.chunk_id,
            len(missing),
            unreadable_documents,
        )
    priority = unit.message.priority
    enqueue(
        ctx.broker,
        ctx.settings.queue_name(COMPUTE_HEAVY),
        SETTLE_ACTOR,
        unit.message.signed(ctx.internal_key),
        MAX_PRIORITY if priority is None else priority,
    )


def settle_chunk(ctx: WorkerContext, raw: Any, attempt: int) -> ChunkOutcome | None:
    """compute_heavy: claim, settle, commit once, mark done (SPEC §4.4)."""
    unit = _load(ctx, raw)
    if unit is None:
        return None
    decoded = _decode(ctx, unit, attempt)
    if decoded is None:
        return None
    kind = KINDS[unit.ref.kind]
    contracts = ctx.contracts.load(
        kind, {(d.partition_key, d.contract_version) for d in decoded.documents}
    )
    plan = plan_chunk(kind, decoded.documents, contracts)
    plan.failed_documents += decoded.failures
    plan = unit.restrict(plan)
    claim = ctx.claims.claim(ctx.claims.keys(kind.name, plan.claim_keys_by_version()))
    if claim.contended:
        ctx.claims.release(claim)
        raise TransientError(
            "claim_contended", f"{len(claim.contended)} keys are leased by another worker"
        )
    try:
        with LeaseKeeper(ctx.claims, claim, ctx.settings.claim_lease_ms):
            _injected_faults(ctx, attempt)
            outcome = _record(ctx, unit.ref, plan, attempt)
    except BaseException:
        _release_quietly(ctx, claim)
        raise
    try:
        ctx.claims.mark_done(claim)
    except Exception:  # the commit stands; done-marks only save later work
        log.warning("could not mark %d claims done", len(claim.keys), exc_info=True)
    return outcome


def _injected_faults(ctx: WorkerContext, attempt: int) -> None:
    """Fault injection for the failure tests (all off by default): between the
    claims and the commit, the most delicate point of the protocol."""
    settings = ctx.settings
    if settings.fault_settle_pause_s:
        time.sleep(settings.fault_settle_pause_s)
    if attempt <= settings.fault_transient_attempts:
        log.warning("injected transient fault on attempt %d", attempt)
        raise TransientError("injected_fault", f"injected transient fault, attempt {attempt}")


def _release_quietly(ctx: WorkerContext, claim: Claim) -> None:
    try:
        ctx.claims.release(claim)
    except Exception:  # the lease expires by itself
        log.warning("could not release claims", exc_info=True)


def dead_letter_chunk(
    ctx: WorkerContext, raw: Any, *, reason: str, error_class: str, message: str, attempts: int
) -> None:
    """Dead-letter every line of a unit that could not be processed at all."""
    unit = _load(ctx, raw)
    if unit is None:
        return
    kind = KINDS.get(unit.ref.kind)
    adapter = _DOCUMENT_LISTS.get(unit.ref.kind)
    try:
        if kind is None or adapter is None:
            raise StructuralError("schema_invalid", "unknown kind")
        decoded = decode_chunk(kind, adapter, unit.payload, unit.ref.lines)
    except StructuralError:
        plan = unreadable(unit.payload, unit.ref.lines, reason, message, error_class)
    else:
        plan = plan_failure(kind, decoded.documents, reason, error_class, message)
        plan.failed_documents += decoded.failures
        plan = unit.restrict(plan)
    _record(ctx, unit.ref, plan, attempts)
