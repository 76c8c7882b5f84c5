"""The two pipeline stages a unit of work goes through (docs/architecture.md#fast-path-validate,
docs/architecture.md#compute-heavy-settle).

A unit is a stored chunk, or a requeued dead letter of one (loading.py). Each
stage verifies its message, calls the pure domain, and records the result; a
structural or business failure is recorded as a dead letter here, and a
transient one propagates for the actor to retry.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from services.worker.context import WorkerContext
from services.worker.decoding import ENVELOPES, decode, decode_documents, digest_ok
from services.worker.loading import load_unit
from services.worker.recording import record
from services.worker.stage_log import note_documents
from shared.adapters.leases import Claim, LeaseKeeper
from shared.adapters.rabbitmq.broker import enqueue
from shared.domain.kinds import KINDS
from shared.domain.pipeline.leasing import leases_by_version
from shared.domain.pipeline.messages import COMPUTE_HEAVY, MAX_PRIORITY, SETTLE_ACTOR
from shared.domain.pipeline.settlement import plan_chunk, plan_failure, unreadable
from shared.domain.pipeline.units import ChunkOutcome
from shared.errors import ClaimContended, StructuralError

log = logging.getLogger("settleq.worker")


def validate_chunk(ctx: WorkerContext, raw: Any, attempt: int) -> None:
    """fast_path: signature, digest, document envelopes, contract presence; then on
    to settlement.

    The signed digest proves these are the bytes the front door validated in
    full, so the fast path reads only each document's envelope (C-speed); when
    even that fails, the full per-document check says which documents are bad.
    Settlement decodes every field again and dead-letters what it cannot read.
    """
    unit = load_unit(ctx, raw)
    if unit is None or not digest_ok(ctx, unit, attempt):
        return
    kind = KINDS.get(unit.ref.kind)
    try:
        envelopes = ENVELOPES.decode(unit.payload)
    except msgspec.MsgspecError:
        envelopes = None
    if kind is None or envelopes is None:
        decoded = decode(ctx, unit, attempt, digest_checked=True)
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
    priority = MAX_PRIORITY if unit.message.priority is None else unit.message.priority
    enqueue(
        ctx.broker,
        ctx.settings.queue_for(COMPUTE_HEAVY, priority),
        SETTLE_ACTOR,
        unit.message.signed(ctx.internal_key),
        priority,
    )


def settle_chunk(ctx: WorkerContext, raw: Any, attempt: int) -> ChunkOutcome | None:
    """compute_heavy: claim, settle, commit once, mark done
    (docs/architecture.md#compute-heavy-settle)."""
    unit = load_unit(ctx, raw)
    if unit is None:
        return None
    decoded = decode(ctx, unit, attempt)
    if decoded is None:
        return None
    kind = KINDS[unit.ref.kind]
    contracts = ctx.contracts.load(
        kind, {(d.partition_key, d.contract_version) for d in decoded.documents}
    )
    plan = plan_chunk(kind, decoded.documents, contracts, unit.start)
    plan.failed_documents += decoded.failures
    plan = unit.restrict(plan)
    leases = leases_by_version(plan, kind.keys_name_document)
    claim = ctx.claims.claim(ctx.claims.keys(kind.name, leases))
    if claim.contended:
        ctx.claims.release(claim)
        raise ClaimContended(len(claim.contended), claim.contended_for_ms)
    try:
        with LeaseKeeper(ctx.claims, claim, ctx.settings.claim_lease_ms):
            outcome = record(ctx, unit.ref, plan, attempt)
    except BaseException:
        _release_quietly(ctx, claim)
        raise
    try:
        ctx.claims.mark_done(claim)
    except Exception:  # the commit stands; done-marks only save later work
        log.warning("could not mark %d claims done", len(claim.keys), exc_info=True)
    return outcome


def _release_quietly(ctx: WorkerContext, claim: Claim) -> None:
    try:
        ctx.claims.release(claim)
    except Exception:  # the lease expires by itself
        log.warning("could not release claims", exc_info=True)


def dead_letter_chunk(
    ctx: WorkerContext, raw: Any, *, reason: str, error_class: str, message: str, attempts: int
) -> None:
    """Dead-letter every line of a unit that could not be processed at all."""
    unit = load_unit(ctx, raw)
    if unit is None:
        return
    try:
        kind, decoded = decode_documents(unit)
    except StructuralError:
        plan = unreadable(unit.payload, unit.ref.lines, reason, message, error_class, unit.start)
    else:
        plan = plan_failure(kind, decoded.documents, reason, error_class, message, unit.start)
        plan.failed_documents += decoded.failures
        plan = unit.restrict(plan)
    record(ctx, unit.ref, plan, attempts)
